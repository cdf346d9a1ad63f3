"""Seed 002 (SVP msprof.pyc): every command line typed as printed (``msprof.pyc`` → ``openmsprof``),
the acl.json and ini as printed, and the file names and columns of its tables (``--layout svp``),
all read from seed_facts/seed_002.json (tests/conformance/facts.py).

Placeholders (``<main>``, ``<config>``, ``XXXX``, ``/home/HwHiAaUser/JOBXXX``) are filled in;
what the seed says that openmsprof deliberately does otherwise is in docs/conformance.md.
"""

from __future__ import annotations

import csv
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.collector.conftest import PasswordUser, Sshd, password_user, sshd, write_ini  # noqa: F401
from tests.conformance.facts import facts, name_regex, texts
from tests.conformance.helpers import ACL_JSON_APP

PYTHON = sys.executable

#: The seed's acl.json, byte for byte (its "output" directory does not exist on this machine).
ACL_JSON: str = facts("002")["acl_json"]["text"]
#: The seed's board ini, on one line as printed: ``[ssh_config] ip = XXXX username = XXXX ...``
INI: str = facts("002")["ini"]["text"]
#: The seed's summary tables: file-name pattern and columns.
TABLES: dict[str, dict[str, object]] = facts("002")["tables"]

#: The application: pyACL inference with profiling from acl.json (no profiling code at all).
MAIN = ACL_JSON_APP

CLI = [PYTHON, "-m", "openmsprof"]


def msprof(line: str, cwd: Path, env: dict[str, str] | None = None, **subst: str) -> subprocess.CompletedProcess[str]:
    """Run a seed command line: ``python3.7.5 msprof.pyc ARGS`` → ``openmsprof ARGS``."""
    for key, value in subst.items():
        line = line.replace(key, value)
    words = shlex.split(line)
    assert words[:2] == ["python3.7.5", "msprof.pyc"], line
    return subprocess.run([*CLI, *words[2:]], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "80", **(env or {})})


def seed_lines() -> list[str]:
    """The command lines the seed prints (with their placeholders)."""
    return texts("002", "commands")


#: Each command the seed prints (by subcommand and first option) → the test below that runs it.
COVERED = {
    "collect -m": "test_one_step_remote_line_with_the_seed_ini",  # --config <config> --all
    "import [-h]": "test_import_forms", "import -dir": "test_import_forms",
    "export timeline": "test_export_and_show_as_printed", "export summary": "test_export_and_show_as_printed",
    "show [-h]": "test_export_and_show_as_printed",
}


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open() as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("seed002")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import models as example_models

    model = example_models.save_all(root / "models")["resnet_mish"]
    (root / "main.py").write_text(MAIN)
    return {"root": root, "main": root / "main.py", "model": model}


@pytest.fixture(scope="module")
def job(app: dict[str, Path]) -> Path:
    """``collect -m <main> --output <out> --interval 0 --acl_api on --aacpu on --switch on
    --aac_metrics ArithmeticUtilization --all`` (the collect table's every option), locally."""
    out = app["root"] / "out"
    line = ("python3.7.5 msprof.pyc collect -m MAIN --output OUT --interval 0 --acl_api on --aacpu on "
            "--switch on --aac_metrics ArithmeticUtilization --all")
    r = msprof(line, app["root"], env={"SEED_MODEL": str(app["model"])}, MAIN=str(app["main"]), OUT=str(out))
    assert r.returncode == 0, r.stderr
    (j,) = sorted(out.glob("PROF_*"))
    return j


def test_every_printed_command_is_covered() -> None:
    """Every command line the seed prints has a test here that runs it (placeholders filled)."""
    lines = seed_lines()
    assert len(lines) >= 10 and all(ln.startswith("python3.7.5 msprof.pyc ") for ln in lines)
    module = sys.modules[__name__]
    for line in lines:
        key = " ".join(line.split()[2:4])
        assert key in COVERED, f"no test runs the seed's {line!r}"
        test = getattr(module, COVERED[key])
        words = key.replace("[-h]", "").split()
        assert all(w in inspect.getsource(test) for w in words), (line, COVERED[key])


def test_acl_json_as_printed(app: dict[str, Path], tmp_path: Path) -> None:
    """The seed's acl.json: S2 spellings (aacpu, aac_metrics) accepted, what a CPU cannot do said
    in the job log, and the output directory that does not exist → the executable's directory."""
    if Path("/root/AscendProjects/MyAppTest/profiling").exists():
        pytest.skip("the seed's output directory exists on this machine")
    exe = tmp_path / "bin"
    exe.mkdir()
    (exe / "main.py").write_text(MAIN)
    (exe / "acl.json").write_text(ACL_JSON)
    r = subprocess.run([PYTHON, str(exe / "main.py"), str(exe / "acl.json")], cwd=tmp_path, capture_output=True,
                       text=True, timeout=240, env={**os.environ, "SEED_MODEL": str(app["model"])})
    assert r.returncode == 0, r.stderr
    (j,) = sorted(exe.glob("PROF_*"))
    log = (j / "host" / "collection.log").read_text()
    assert "executable's directory" in log and "ArithmeticUtilization" in log


def test_collect_options_table(job: Path) -> None:
    cfg = orjson.loads((job / "host" / "sample.json").read_bytes())["openmsprof"]
    assert (cfg["interval"], cfg["acl_api"], cfg["aicpu"], cfg["switch"]) == (0, True, True, True)
    log = (job / "host" / "collection.log").read_text()
    assert "ArithmeticUtilization" in log and "not supported here" in log  # said, never faked
    assert (job / "sqlite" / "msprof.db").is_file()  # --all: imported ...
    assert (job / "timeline").is_dir() and (job / "summary").is_dir()  # ... and exported


def test_import_forms(job: Path, tmp_path: Path) -> None:
    r = msprof("python3.7.5 msprof.pyc import [-h] -dir <dir>".replace("[-h] ", "-h "), tmp_path, **{"<dir>": str(job)})
    assert r.returncode == 0 and "-dir" in r.stdout and "--collection-dir" in r.stdout
    for line in ("python3.7.5 msprof.pyc import -dir JOB", "python3.7.5 msprof.pyc import --collection-dir JOB"):
        r = msprof(line, tmp_path, JOB=str(job))
        assert r.returncode == 0, r.stderr
    assert (job / "sqlite" / "msprof.db").is_file()


def test_export_and_show_as_printed(job: Path, tmp_path: Path) -> None:
    for line in ("python3.7.5 msprof.pyc export timeline -dir JOB",
                 "python3.7.5 msprof.pyc export summary -dir JOB --format csv",
                 "python3.7.5 msprof.pyc export summary -dir JOB --format json",
                 "python3.7.5 msprof.pyc show -dir JOB"):
        r = msprof(line, tmp_path, JOB=str(job))
        assert r.returncode == 0, (line, r.stderr)
    assert list((job / "timeline").glob("*.json")) and list((job / "summary").glob("*.csv"))
    assert list((job / "summary").glob("*.json"))
    for line in ("python3.7.5 msprof.pyc export timeline -h", "python3.7.5 msprof.pyc export summary -h",
                 "python3.7.5 msprof.pyc show -h"):
        r = msprof(line, tmp_path)
        assert r.returncode == 0 and "--collection-dir" in r.stdout and "--layout" in r.stdout


def _seed_file(prefix: str) -> str:
    """The seed's file-name pattern that starts with ``prefix`` and has dots between fields."""
    return next(f for f in texts("002", "files") if f.startswith(prefix) and "}.{" in f)


#: the job's values of the seed's file-name fields (device 0, the resnet_mish model, 4 executes)
FIELDS = {"device_id": "0", "deviceid": "0", "model_file_name": "resnet_mish", "model_id": r"\d+",
          "batch_num": "4", "input_pic_num": "4", "current_pic_count": "4", "icache_miss_rate": "NA",
          "frequency": r"\w+", "iter_id": "0"}


def test_svp_timeline_files_and_args(job: Path, tmp_path: Path) -> None:
    r = msprof("python3.7.5 msprof.pyc export timeline -dir JOB --layout svp", tmp_path, JOB=str(job))
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in (job / "timeline").iterdir())
    task = [n for n in names if re.fullmatch(name_regex(_seed_file("task_time_{"), **FIELDS), n)]
    acl_f = [n for n in names if re.fullmatch(name_regex(_seed_file("acl_{"), **FIELDS), n)]
    assert len(task) == 1 and len(acl_f) == 1, names
    events = orjson.loads((job / "timeline" / task[0]).read_bytes())
    x = [e for e in events if e["ph"] == "X"]
    assert x and all(set(e) >= {"name", "pid", "tid", "ts", "dur", "ph"} for e in x)
    assert all(list(e["args"]) == ["Task Type", "Stream Id", "Task Id"] for e in x)
    assert any("Softplus" in e["name"] for e in x)  # layer names (the Mish model's)
    apis = [e for e in orjson.loads((job / "timeline" / acl_f[0]).read_bytes()) if e["ph"] == "X"]
    assert all(list(e["args"]) == ["Mode", "Process_Id", "Thread_Id"] for e in apis)
    assert [e["name"] for e in apis].count("aclmdlExecute") == 4


def test_svp_summary_files_and_columns(job: Path, tmp_path: Path) -> None:
    r = msprof("python3.7.5 msprof.pyc export summary -dir JOB --format csv --layout svp", tmp_path, JOB=str(job))
    assert r.returncode == 0, r.stderr
    d = job / "summary"
    found = {name: [p for p in d.iterdir() if re.fullmatch(name_regex(str(t["file"]), **FIELDS), p.name)]
             for name, t in TABLES.items()}
    assert {k: len(v) for k, v in found.items()} == dict.fromkeys(TABLES, 1), sorted(p.name for p in d.iterdir())
    ops, stat, acl_s = found["op_summary"][0], found["op_statistic"][0], found["acl_statistic"][0]
    header, rows = _rows(ops)
    assert header == TABLES["op_summary"]["columns"]  # the seed's 表 1 字段说明, in its order
    assert header[:6] == ["Layer Id", "Ori Layer Name", "Layer Name", "Layer Type", "Time(us)", "Time Ratio"]
    assert header[14] == "Memory Bound" and len(header) == 18
    assert rows[-1][0] == "-" and float(rows[-1][5]) == 100.0  # "-" is the total row
    assert all(v == "N/A" for row in rows for v in row[6:14] + row[15:])  # PMU ratios, DDR: unmeasured
    # Memory Bound is the cost model's ratio: Mul is a memory pass, Softplus costs transcendentals
    bound = {r[3]: r[14] for r in rows[:-1]}
    assert float(bound["Mul"]) > 1 and float(bound["Softplus"]) < float(bound["Mul"])  # exp+log1p vs a pass
    assert rows[-1][14] == "N/A"
    assert abs(sum(float(r[4]) for r in rows[:-1]) - float(rows[-1][4])) < 0.01 * len(rows)
    header, rows = _rows(stat)
    assert header == TABLES["op_statistic"]["columns"]
    assert header[2] == "OP Name" and header[6] == "Count"
    assert all(int(r[6]) == 4 for r in rows)  # every operator ran in each of the 4 executes
    header, rows = _rows(acl_s)
    assert header == TABLES["acl_statistic"]["columns"]
    assert header[2:4] == ["Type", "Name"] and header[6] == "Count"
    assert ["model", "aclmdlExecute", "4"] in [[r[2], r[3], r[6]] for r in rows]


def test_show_svp_four_tables_at_80_columns(job: Path, tmp_path: Path) -> None:
    r = msprof("python3.7.5 msprof.pyc show -dir JOB --layout svp", tmp_path, JOB=str(job))
    assert r.returncode == 0, r.stderr
    for title in ("AI Core metrics", "Op statistic", "Acl statistic", "Frequency"):
        assert title in r.stdout, title
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    heads = [ln for ln in r.stdout.splitlines() if "Count" in ln or "Layer Id" in ln or "Frequency(MHz)" in ln]
    assert len(heads) == 4 and not any("…" in h for h in heads)


@pytest.mark.ssh
def test_one_step_remote_line_with_the_seed_ini(sshd: Sshd, password_user: PasswordUser,  # noqa: F811
                                                tmp_path: Path) -> None:
    """``collect -m <main> --config <config> --all`` with the ini as printed (ip, username, pwd,
    port only); the board is a fresh account's system Python, without openmsprof."""
    if subprocess.run(["/usr/bin/python3", "-c", "import sys; print(sys.implementation.cache_tag)"],
                      capture_output=True, text=True).stdout.strip() != sys.implementation.cache_tag:
        pytest.skip("the system python3 is another version: this venv's packages cannot be shipped to it")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    sshd.known_hosts(home / ".ssh")
    ini = tmp_path / "board.ini"
    ini.write_text(INI.replace("[ssh_config] ", "[ssh_config]\n")
                   .replace(" username", "\nusername").replace(" pwd", "\npwd").replace(" port", "\nport")
                   .replace("ip = XXXX", "ip = 127.0.0.1").replace("username = XXXX", f"username = {password_user.name}")
                   .replace("pwd = XXX", f"pwd = {password_user.password}").replace("port = XX", f"port = {sshd.port}")
                   + "\n")
    ini.chmod(0o600)
    main = tmp_path / "main.py"
    main.write_text("from openmsprof import mstx\nmstx.mark('on the board')\nprint('ran')\n")
    r = subprocess.run([*CLI, "collect", "-m", str(main), "--config", str(ini), "--all"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300, env={**os.environ, "HOME": str(home)})
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ran\n"
    (j,) = sorted(tmp_path.glob("PROF_*"))
    assert (j / "sqlite" / "msprof.db").is_file()
    assert json.loads((j / "host" / "info.json").read_text())["pid_name"] == "main.py"


@pytest.mark.parametrize("line, named", [
    ("python3.7.5 msprof.pyc import -dir", "-dir/--collection-dir"),
    ("python3.7.5 msprof.pyc import --collection-dir", "-dir/--collection-dir"),
    ("python3.7.5 msprof.pyc export timeline -dir", "-dir/--collection-dir"),
    ("python3.7.5 msprof.pyc export summary -dir JOB --format xls", "--format"),
    ("python3.7.5 msprof.pyc export summary -dir JOB --format", "--format"),
    ("python3.7.5 msprof.pyc export summary -dir JOB --layout s2", "--layout"),
    ("python3.7.5 msprof.pyc show -dir", "-dir/--collection-dir"),
    ("python3.7.5 msprof.pyc collect -m", "-m/--main"),
    ("python3.7.5 msprof.pyc collect -m main.py --config", "--config"),
    ("python3.7.5 msprof.pyc collect -m main.py --interval", "--interval"),
    ("python3.7.5 msprof.pyc collect -m main.py --aac_metrics", "--aac_metrics"),
    ("python3.7.5 msprof.pyc collect -m main.py --output", "--output"),
    ("python3.7.5 msprof.pyc collect -m main.py --aacpu on --epochs 3", "'--epochs'"),
])
def test_missing_or_wrong_value_is_one_line(line: str, named: str, tmp_path: Path) -> None:
    """Bad input on a seed-spelled command: one line naming the option (and the value)."""
    r = msprof(line, tmp_path, JOB=str(tmp_path))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "error" in lines[0], r.stderr
    for value in ("xls", "s2"):
        if f" {value}" in line:
            assert f"'{value}'" in lines[0]
