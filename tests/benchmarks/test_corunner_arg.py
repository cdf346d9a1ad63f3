"""Every benchmark measures with and without the co-runner (issue 26): each
``benchmarks/bench_*.py`` takes ``--corunner {off,on,both}``, and the shared harness runs
sides and conditions interleaved and counts a side's children in its CPU."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHES = sorted((ROOT / "benchmarks").glob("bench_*.py"))


def _takes_corunner(tree: ast.AST) -> bool:
    """An ``add_argument("--corunner", choices=("off", "on", "both"), ...)`` call, or the
    harness's ``add_corunner_arg(parser)``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name == "add_corunner_arg":
            return True
        if name == "add_argument" and node.args and isinstance(node.args[0], ast.Constant) \
                and node.args[0].value == "--corunner":
            for kw in node.keywords:
                if kw.arg == "choices" and isinstance(kw.value, (ast.Tuple, ast.List)) \
                        and {getattr(e, "value", None) for e in kw.value.elts} == {"off", "on", "both"}:
                    return True
    return False


def test_the_benchmarks_are_found() -> None:
    assert len(BENCHES) >= 15, [p.name for p in BENCHES]


@pytest.mark.parametrize("bench", BENCHES, ids=[p.stem for p in BENCHES])
def test_every_benchmark_takes_corunner(bench: Path) -> None:
    assert _takes_corunner(ast.parse(bench.read_text(), str(bench))), \
        f"{bench.name} does not take --corunner {{off,on,both}}"


def test_the_static_check_refuses_a_benchmark_without_it() -> None:
    assert not _takes_corunner(ast.parse('ap.add_argument("--rounds", type=int)'))
    assert not _takes_corunner(ast.parse('ap.add_argument("--corunner", choices=("off", "on"))'))
    assert _takes_corunner(ast.parse("add_corunner_arg(ap)"))


def test_the_option_reaches_argparse() -> None:
    """The harness's option, through a real benchmark's parser: its help lists the choices and
    a wrong value is refused by name."""
    bench = ROOT / "benchmarks" / "bench_config.py"
    env_path = f"{ROOT / 'src'}"
    ok = subprocess.run([sys.executable, str(bench), "--help"], capture_output=True, text=True, timeout=300,
                        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "--corunner {off,on,both}" in ok.stdout
    bad = subprocess.run([sys.executable, str(bench), "--corunner", "sometimes"], capture_output=True, text=True,
                         timeout=300, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert bad.returncode == 2 and "--corunner" in bad.stderr


def test_interleaved_counts_both_conditions_and_a_sides_children() -> None:
    """Each side runs once per round and condition; a side whose work is in a child process
    (waited for) is charged its CPU; the load is recorded."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.corunner import busy, interleaved

    seen: list[tuple[str, bool]] = []
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    res = interleaved({"child": lambda: (seen.append(("child", busy())),
                                         subprocess.run([sys.executable, "-S", "-c", spin], check=True)),
                       "none": lambda: seen.append(("none", busy()))}, 2, [False, True])
    assert sorted(seen) == sorted([("child", False), ("child", True), ("none", False), ("none", True)] * 2)
    for cond in (False, True):
        assert [len(res[cond][s]) for s in ("child", "none")] == [2, 2]
        assert all(m["cpu_s"] >= 0.25 for m in res[cond]["child"]), res[cond]["child"]
        assert all(m["cpu_s"] < 0.25 for m in res[cond]["none"]), res[cond]["none"]
        assert all(m["load"] >= 0 for m in res[cond]["none"])
