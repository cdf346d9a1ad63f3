"""``make sanitize``: the nine C extensions (recorder/_ring.c, export/msprof/_task_lines.c,
parse/_bulk_insert.c, sources/_ort_scan.c, sources/_kineto_scan.c, export/ascend_pt/_row_text.c,
export/ascend_pt/_nest_sweep.c, export/ascend_pt/_perfetto_fit.c, export/ascend_pt/_summary_cols.c) built with AddressSanitizer and
UndefinedBehaviorSanitizer into a copy of the package under build/sanitize (the venv's in-place
build is untouched), then the recorder tests, the C extensions' tests and a slice of the fuzz corpus (tests/hostile) run against them.
Any sanitizer report aborts the process that made it, which fails its test (or this run).

    python -m tests.sanitize [--fuzz-jobs N] [--fuzz-configs N] [pytest args...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "build" / "sanitize"
FLAGS = "-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
#: the tests that reach the C code: the recorder core, the task loop, the import writer
TESTS = ["tests/recorder", "tests/parse/test_bulk_insert.py", "tests/parse/test_bulk_insert_threads.py",
         "tests/export/test_task_lines_native.py", "tests/export/test_task_lines_safety.py",
         "tests/export/test_summary_task_pass.py", "tests/hostile/test_regressions.py",
         "tests/acl/test_ort_scan.py", "tests/acl/test_ort_profile.py", "tests/sources/test_kineto_scan.py",
         "tests/export/test_row_text.py", "tests/export/test_nest_sweep.py",
         "tests/export/test_perfetto_fit_native.py", "tests/export/test_perfetto_fit_clusters.py",
         "tests/export/test_summary_cols.py", "tests/export/test_overlap_windows.py"]
#: not run here: the pure-Python backend's runs (no C code; left out by the suite's conftest when
#: OPENMSPROF_TESTS_NO_PURE_PYTHON is set, by their parametrization id), and the bounds of memory (ASan's shadow
#: and quarantine) and time (a 2-5x slow-down) that hold for the normal build, not the instrumented one;
#: the real torch window with stacks (torch's with_stack tracer aborts under the ASan runtime, in
#: torch.profiler's stop, before any of our C code runs: the scan's synthetic blocks run here)
DESELECT = ("not memory_stays_under_the_ceiling and not lose_at_most_one_second"
            " and not still_gets_a_host_sample and not blocks_of_a_real_trace")
EXTENSIONS = ("recorder/_ring", "export/msprof/_task_lines", "parse/_bulk_insert", "sources/_ort_scan",
              "sources/_kineto_scan", "export/ascend_pt/_row_text", "export/ascend_pt/_nest_sweep",
              "export/ascend_pt/_perfetto_fit", "export/ascend_pt/_summary_cols")


def _runtime(lib: str) -> str:
    path = subprocess.run(["gcc", f"-print-file-name={lib}"], capture_output=True, text=True,
                          check=True).stdout.strip()
    if not os.path.isabs(path):
        raise SystemExit(f"sanitize: gcc has no {lib} (install libasan/libubsan)")
    return path


def build() -> None:
    """Copy the package (without its built extensions) and build the sanitized ones into it."""
    if DEST.exists():
        shutil.rmtree(DEST)
    shutil.copytree(ROOT / "src" / "openmsprof", DEST / "openmsprof",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    env = {**os.environ, "CFLAGS": FLAGS, "LDFLAGS": FLAGS, "OPENMSPROF_NO_NATIVE": ""}
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(DEST),
                        "--build-temp", str(DEST / "tmp")], cwd=ROOT, env=env, capture_output=True, text=True)
    missing = [e for e in EXTENSIONS if not list((DEST / "openmsprof").glob(f"{e}*.so"))]
    if r.returncode != 0 or missing:
        raise SystemExit(f"sanitize: build failed ({', '.join(missing) or r.returncode}): {r.stderr[-3000:]}")


def environment() -> dict[str, str]:
    """The sanitizer runtime first in every process (Python itself is not instrumented), Python's
    allocations through malloc (so ASan sees the objects the extensions touch), no leak report
    (the interpreter keeps its objects at exit), the first report fatal."""
    return {**os.environ, "PYTHONPATH": str(DEST), "PYTHONMALLOC": "malloc", "OPENMSPROF_TESTS_NO_PURE_PYTHON": "1",
            "LD_PRELOAD": _runtime("libasan.so"),
            "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:abort_on_error=1:allocator_may_return_null=1",
            "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--fuzz-jobs", type=int, default=40)
    ap.add_argument("--fuzz-configs", type=int, default=40)
    args, pytest_args = ap.parse_known_args(argv)
    build()
    env = environment()
    where = subprocess.run([sys.executable, "-c", "import openmsprof.recorder._ring as r; print(r.__file__)"],
                           env=env, capture_output=True, text=True, cwd=ROOT)
    if not where.stdout.startswith(str(DEST)):
        raise SystemExit(f"sanitize: the sanitized build is not the one imported: {where.stdout}{where.stderr[-2000:]}")
    rc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", DESELECT,
                         *TESTS, *pytest_args],
                        env=env, cwd=ROOT).returncode
    fuzz = subprocess.run([sys.executable, "-m", "tests.hostile.fuzzlib", "--jobs", str(args.fuzz_jobs),
                           "--configs", str(args.fuzz_configs), "--seed", "12", "--case-timeout", "60",
                           "--memory-mb", "0"], env=env, cwd=ROOT, capture_output=True, text=True)
    res = json.loads(fuzz.stdout.splitlines()[-1]) if fuzz.returncode == 0 and fuzz.stdout else None
    if res is None or res["tracebacks"] or res["hangs"]:
        print(f"sanitize: fuzz corpus failed (exit {fuzz.returncode}): "
              f"{json.dumps(res['failures'])[:3000] if res else fuzz.stderr[-3000:]}", file=sys.stderr)
        return 1
    print(f"sanitize: fuzz corpus clean under ASan+UBSan ({args.fuzz_jobs} jobs, {args.fuzz_configs} configs, "
          f"{res['seconds']:.0f} s)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
