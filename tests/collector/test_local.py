"""``openmsprof collect`` on this machine: real child processes, real signals, real job dirs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from openmsprof.cli.main import main
from openmsprof.collector import collect_switches as options
from tests.collector import programs as P
from tests.collector.conftest import PYTHON, run_cli


def test_exit_code_output_and_job(tmp_path: Path) -> None:
    prog = P.write(tmp_path, "basic.py", P.BASIC)
    out = tmp_path / "out"
    r = run_cli(["collect", "--output", str(out), "-m", str(prog), "--", "3", "a b", "--flag"], cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    assert r.stdout == 'out: ["3", "a b", "--flag"]\n'  # stdout is the program's alone
    assert "err: to stderr" in r.stderr
    job = P.only_job(out)
    assert f"openmsprof: job {job}" in r.stderr
    assert (job / "host" / "end_info").is_file()
    assert P.marks(job) == ["basic-mark"]
    assert any(n.startswith("HostSampler.records") for n in P.host_files(job))
    assert oct(job.stat().st_mode & 0o777) == oct(0o750)


def test_acl_json_flags_and_clean_environment(tmp_path: Path) -> None:
    prog = P.write(tmp_path, "env.py", P.PLAIN_ENV)
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH="/nonexistent/user/path")
    r = run_cli(["collect", "--output", str(out), "--aicpu", "off", "--aic-metrics", "PipeUtilization",
                 "--interval", "2", "--acl_api", "off", "-m", str(prog)], cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout)
    prof = seen["acl"]["profiler"]
    assert (prof["switch"], prof["aicpu"], prof["aic_metrics"], prof["interval"]) == ("on", "off", "PipeUtilization", "2")
    assert prof["output"] == str(out)
    # the program sees its own PYTHONPATH, no bootstrap entry and no autostart variable
    assert seen["pythonpath"] == "/nonexistent/user/path"
    assert seen["bootstrap_on_path"] is False and seen["autostart"] is None
    cfg = P.job_config(P.only_job(out))
    assert (cfg["aicpu"], cfg["acl_api"], cfg["interval"], cfg["source"]) == (False, False, 2, "collect")


def test_switch_off_runs_unprofiled(tmp_path: Path) -> None:
    prog = P.write(tmp_path, "env.py", P.PLAIN_ENV)
    out = tmp_path / "out"
    r = run_cli(["collect", "--output", str(out), "--switch", "off", "-m", str(prog)], cwd=tmp_path)
    assert r.returncode == 0
    assert json.loads(r.stdout)["acl"]["profiler"]["switch"] == "off"
    assert not [p for p in out.iterdir() if p.name.startswith("PROF_")]


def test_shell_script_program_profiles_first_python(tmp_path: Path) -> None:
    P.write(tmp_path, "basic.py", P.BASIC)
    script = P.write(tmp_path, "run.sh", f"#!/bin/sh\nexec {PYTHON} basic.py 0\n")
    script.chmod(0o755)
    out = tmp_path / "out"
    r = run_cli(["collect", "--output", str(out), "-m", str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert P.marks(P.only_job(out)) == ["basic-mark"]


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_forwarded_and_job_saved(tmp_path: Path, sig: int, code: int) -> None:
    prog = P.write(tmp_path, "loop.py", P.LOOP)
    out = tmp_path / "out"
    proc = subprocess.Popen([PYTHON, "-m", "openmsprof", "collect", "--output", str(out), "-m", str(prog)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=P.sigint_as_at_a_terminal)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(sig)  # sent to collect only: it must reach the program
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, stderr
    assert "loop ended" not in stdout
    job = P.only_job(out)
    assert (job / "host" / "end_info").is_file()  # stopped cleanly, not just killed
    assert P.marks(job)[0] == "tick 0"


def test_program_crash_keeps_job(tmp_path: Path) -> None:
    prog = P.write(tmp_path, "crash.py", P.CRASH)
    out = tmp_path / "out"
    r = run_cli(["collect", "--output", str(out), "-m", str(prog)], cwd=tmp_path)
    assert r.returncode == 128 + signal.SIGKILL
    job = P.only_job(out)
    assert not (job / "host" / "end_info").exists()
    assert P.marks(job) == [f"before crash {i}" for i in range(20)]


def test_missing_program(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["collect", "--output", str(tmp_path), "-m", str(tmp_path / "nope.py")]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"openmsprof: error: program {str(tmp_path / 'nope.py')!r} not found"
    assert main(["collect", "--output", str(tmp_path), "-m", "no-such-command-xyz"]) == 1
    assert "not on PATH" in capsys.readouterr().err
    assert main(["collect", "--output", str(tmp_path)]) == 1
    assert "no program given" in capsys.readouterr().err


def test_not_executable_program(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = P.write(tmp_path, "tool", "#!/bin/sh\necho hi\n")
    prog.chmod(0o644)
    assert main(["collect", "--output", str(tmp_path), "-m", str(prog)]) == 1
    assert "is not executable" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "value", "text"), [
    ("--aic_metrics", "Bogus", "--aic_metrics='Bogus' is invalid; allowed: ArithmeticUtilization"),
    ("--switch", "maybe", "--switch='maybe' is invalid"),
    ("--interval", "-1", "--interval="),
    ("--host_sys_usage", "gpu", "--host_sys_usage='gpu' is invalid"),
])
def test_bad_flag_values(tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, text: str) -> None:
    prog = P.write(tmp_path, "basic.py", P.BASIC)
    assert main(["collect", "--output", str(tmp_path), flag, value, "-m", str(prog)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and text in err


def test_output_not_writable(capsys: pytest.CaptureFixture[str]) -> None:
    base = Path(tempfile.mkdtemp(prefix="omsp_ro_"))
    try:
        os.chmod(base, 0o755)
        ro = base / "ro"
        ro.mkdir(mode=0o555)
        os.chmod(ro, 0o555)
        prog = P.write(base, "basic.py", P.BASIC)
        cmd = [PYTHON, "-m", "openmsprof", "collect", "--output", str(ro), "-m", str(prog)]
        if os.geteuid() == 0:  # root writes anywhere: run as an unprivileged user instead
            if shutil.which("setpriv") is None:
                pytest.skip("needs setpriv to drop root")
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
        r = subprocess.run(cmd, cwd=base, capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, HOME=str(base)))
        assert r.returncode == 1
        assert r.stderr == f"openmsprof: error: output directory {str(ro)!r} is not writable\n"
        assert r.stdout == ""  # the program did not run
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("hide", ["dir", "file"])
def test_program_this_user_cannot_reach_or_read_is_one_line(hide: str) -> None:
    """A program in a directory the user cannot search, or a file it cannot read: one line, exit 1
    (a PermissionError traceback before)."""
    base = Path(tempfile.mkdtemp(prefix="omsp_hidden_"))
    try:
        os.chmod(base, 0o755)
        (base / "out").mkdir(mode=0o777)
        os.chmod(base / "out", 0o777)
        hidden = base / "hidden"
        hidden.mkdir()
        prog = P.write(hidden, "basic.py", P.BASIC)
        os.chmod(hidden, 0o700 if hide == "dir" else 0o711)
        os.chmod(prog, 0o644 if hide == "dir" else 0o600)
        cmd = [PYTHON, "-m", "openmsprof", "collect", "--output", str(base / "out" / "o"), "-m", str(prog)]
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.skip("needs setpriv to drop root")
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
        else:
            pytest.skip("needs root to make a file another user cannot read")
        r = subprocess.run(cmd, cwd=base / "out", capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, HOME=str(base)))
        want = "cannot be reached: Permission denied" if hide == "dir" else "is not readable"
        assert (r.returncode, r.stderr) == (1, f"openmsprof: error: program {str(prog)!r} {want}\n")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _bootstrap_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(options.bootstrap_dir())
    env.update(extra)
    return env


@pytest.mark.parametrize("spec", ["{not json", '{"switch": true, "output": "bad;path"}', "/no/such/config.json"])
def test_bootstrap_never_breaks_the_program(tmp_path: Path, spec: str) -> None:
    prog = P.write(tmp_path, "basic.py", P.BASIC)
    r = subprocess.run([PYTHON, str(prog), "5"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env=_bootstrap_env(OPENMSPROF_AUTOSTART=spec))
    assert r.returncode == 5
    assert r.stdout == 'out: ["5"]\n'
    assert r.stderr.startswith("openmsprof: profiling not started: ")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("PROF_")]


def test_bootstrap_chains_shadowed_sitecustomize(tmp_path: Path) -> None:
    user = tmp_path / "user_site"
    P.write(user, "sitecustomize.py", "import os\nos.environ['USER_SC'] = 'ran'\n")
    prog = P.write(tmp_path, "env.py", P.PLAIN_ENV)
    env = _bootstrap_env()
    env["PYTHONPATH"] += os.pathsep + str(user)
    r = subprocess.run([PYTHON, str(prog)], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout)
    assert seen["user_sc"] == "ran" and seen["pythonpath"] == str(user)


def test_all_imports_and_exports(tmp_path: Path) -> None:
    pytest.importorskip("openmsprof.parse.importer", reason="the importer is not in this tree yet")
    prog = P.write(tmp_path, "basic.py", P.BASIC)
    out = tmp_path / "out"
    r = run_cli(["collect", "--output", str(out), "--all", "-m", str(prog), "0"], cwd=tmp_path, timeout=180)
    assert r.returncode == 0, r.stderr
    job = P.only_job(out)
    assert (job / "sqlite" / "msprof.db").is_file()
    assert f"database  {job / 'sqlite' / 'msprof.db'}" in r.stderr
    assert "timeline" in r.stderr and "summary" in r.stderr


def test_python_program_uses_current_interpreter(tmp_path: Path) -> None:
    from openmsprof.collector.program import resolve

    prog = P.write(tmp_path, "x.py", "")
    assert resolve(str(prog), ["a"]) == [sys.executable, str(prog), "a"]


def test_acl_sample_collected_with_api_and_task_data(tmp_path: Path) -> None:
    """Issue 6 "done when": the seed's acl sample, unchanged, collected with --all."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("openmsprof.parse.importer", reason="the importer is not in this tree yet")
    import sqlite3

    sample = Path(__file__).resolve().parents[2] / "examples" / "acl_sample_profiling.py"
    out = tmp_path / "out"
    r = run_cli(["collect", "--output", str(out), "--all", "-m", str(sample), str(tmp_path / "own")],
                cwd=tmp_path, timeout=240)
    assert r.returncode == 0, r.stderr
    job = P.only_job(out)
    with sqlite3.connect(job / "sqlite" / "msprof.db") as db:
        apis = db.execute("SELECT COUNT(*) FROM CANN_API").fetchone()[0]
        tasks = db.execute("SELECT COUNT(*) FROM TASK").fetchone()[0]
    assert apis > 0 and tasks > 0
    assert (job / "timeline").is_dir() and (job / "summary").is_dir()
    assert list((job / "mindstudio_profiler_output").glob("op_summary_*.csv"))  # tool-facing layout (issue 11)
    assert len(list(job.glob("msprof_[0-9]*.db"))) == 1
