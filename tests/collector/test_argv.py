"""collect's command line as seed 002 and the README spell it: -m anywhere, options in any order,
program arguments after -- or inside one quoted -m, unknown options refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openmsprof.cli.main import build_parser
from openmsprof.collector.argv import REST, program_words
from tests.collector import programs as P
from tests.collector.conftest import run_cli


def _words(*argv: str) -> tuple[object, list[str]]:
    ns = build_parser().parse_args(["collect", *argv])
    return ns, program_words(ns.program, getattr(ns, REST))


@pytest.mark.parametrize("argv", [
    ("-m", "app.py", "--config", "board.ini", "--all"),          # seed 002, one-step line
    ("--config", "board.ini", "-m", "app.py", "--all"),
    ("--all", "--config", "board.ini", "--main", "app.py"),
    ("--main=app.py", "--all", "--config=board.ini"),
])
def test_seed_order_free_options(argv: tuple[str, ...]) -> None:
    ns, words = _words(*argv)
    assert words == ["app.py"]
    assert ns.board == "board.ini" and ns.all is True  # type: ignore[attr-defined]


def test_options_after_main_with_values() -> None:
    ns, words = _words("-m", "app.py", "--output", "out", "--interval", "2", "--all")
    assert words == ["app.py"]
    assert (ns.prof_output, ns.prof_interval, ns.all) == ("out", "2", True)  # type: ignore[attr-defined]


@pytest.mark.parametrize("argv, expected", [
    (("-m", "app.py", "--output", "out", "--", "--epochs", "3"), ["app.py", "--epochs", "3"]),
    (("-m", "app.py --epochs 3", "--output", "out"), ["app.py", "--epochs", "3"]),
    (("-m", "'my app.py' --name 'a b'"), ["my app.py", "--name", "a b"]),
    (("-m", "app.py --epochs 3", "--", "--all"), ["app.py", "--epochs", "3", "--all"]),  # after --: the program's
    (("-m", "python", "app.py", "--output", "out"), ["python", "app.py"]),  # plain words stay the program's
])
def test_program_arguments(argv: tuple[str, ...], expected: list[str]) -> None:
    ns, words = _words(*argv)
    assert words == expected
    assert ns.all is False or "--all" not in expected  # type: ignore[attr-defined]


@pytest.mark.parametrize("argv, named", [
    (("-m", "app.py", "--epochs", "3"), "'--epochs'"),
    (("--confg", "board.ini", "-m", "app.py"), "'--confg'"),
    (("-m", "app.py", "--bogus=1", "--all"), "'--bogus'"),
])
def test_unknown_option_is_one_line_error(tmp_path: Path, argv: tuple[str, ...], named: str) -> None:
    r = run_cli(["collect", *argv], cwd=tmp_path, timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("openmsprof collect: error: unknown option " + named), r.stderr
    assert "after --" in lines[0]
    assert not list(tmp_path.glob("PROF_*"))  # nothing ran


@pytest.mark.parametrize("argv, named", [
    (("-m", "app.py", "--config"), "--config"),
    (("-m", "app.py", "--output"), "--output"),
    (("--all", "-m"), "-m/--main"),
])
def test_missing_value_names_option(tmp_path: Path, argv: tuple[str, ...], named: str) -> None:
    r = run_cli(["collect", *argv], cwd=tmp_path, timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "expected one argument" in lines[0], r.stderr


def test_wrong_value_names_option_and_value(tmp_path: Path) -> None:
    prog = P.write(tmp_path, "basic.py", P.BASIC)
    r = run_cli(["collect", "-m", str(prog), "--output", str(tmp_path / "o"), "--interval", "two"], cwd=tmp_path, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip().count("\n") == 0 and "--interval" in r.stderr and "'two'" in r.stderr


def test_readme_and_seed_lines_run_locally(tmp_path: Path) -> None:
    """The seed's ``--interval 2 --all`` line and ``--`` arguments, for real."""
    prog = P.write(tmp_path, "basic.py", P.BASIC)
    out = tmp_path / "out"
    r = run_cli(["collect", "-m", str(prog), "--output", str(out), "--interval", "2", "--all", "--", "--epochs", "3"],
                cwd=tmp_path, timeout=180)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "out: " + json.dumps(["--epochs", "3"])
    job = P.only_job(out)
    assert (job / "sqlite" / "msprof.db").is_file() and P.job_config(job)["interval"] == 2


def test_help_shows_seed_spelling(tmp_path: Path) -> None:
    r = run_cli(["collect", "--help"], cwd=tmp_path, timeout=60)
    assert r.returncode == 0
    assert "collect -m app.py --config board.ini --all" in r.stdout
    assert "-- --epochs 3" in r.stdout
