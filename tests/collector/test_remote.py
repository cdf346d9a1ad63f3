"""``openmsprof collect --config board.ini`` against a real OpenSSH server on loopback."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from openmsprof.collector import board, remote
from openmsprof.collector.collect_switches import build_config
from openmsprof.collector.ssh import SSHError
from tests.collector import programs as P
from tests.collector.conftest import PYTHON, PasswordUser, Sshd, free_port, run_cli, write_ini

pytestmark = pytest.mark.ssh


def _ini(tmp_path: Path, sshd: Sshd, **over: object) -> Path:
    ssh: dict[str, object] = {"ip": "127.0.0.1", "port": sshd.port, "username": sshd.user,
                              "key_file": sshd.key, "known_hosts": sshd.known_hosts(tmp_path)}
    ssh.update(over)
    ssh = {k: v for k, v in ssh.items() if v is not None}
    return write_ini(tmp_path / "board.ini", ssh, {"python": PYTHON, "workdir": tmp_path / "board"})


def _collect(tmp_path: Path, ini: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_cli(["collect", "--config", str(ini), "--output", str(tmp_path / "out"), *args],
                   cwd=tmp_path, timeout=timeout)


def test_remote_run_end_to_end(sshd: Sshd, key_ini: Path, tmp_path: Path) -> None:
    prog = P.write(tmp_path / "src", "basic.py", P.BASIC)
    pwned = tmp_path / "pwned"
    args = ["7", "two words", f"$(touch {pwned})", "it's", "a;b|c"]
    r = _collect(tmp_path, key_ini, "-m", str(prog), "--", *args)
    assert r.returncode == 7, r.stderr
    assert r.stdout.splitlines()[0] == 'out: ["7", "two words", "$(touch ' + str(pwned) + ')", "it\'s", "a;b|c"]'
    assert "err: to stderr" in r.stderr and "__OPENMSPROF_PID__" not in r.stderr
    assert not pwned.exists()  # arguments are quoted, never run by the remote shell
    job = P.only_job(tmp_path / "out")
    assert (job / "host" / "end_info").is_file() and P.marks(job) == ["basic-mark"]
    assert f"openmsprof: job {job}" in r.stderr
    assert list((tmp_path / "board").iterdir()) == []  # the run folder was removed from the board
    assert oct((job / "host" / "info.json").stat().st_mode & 0o777) == oct(0o640)


def test_remote_project_folder(sshd: Sshd, key_ini: Path, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    P.write(proj / "pkg", "__init__.py", "")
    P.write(proj / "pkg", "helper.py", "def hello():\n    return 'from helper'\n")
    P.write(proj / "bin", "main.py", "import sys, os\nsys.path.insert(0, os.getcwd())\n"
            "from pkg.helper import hello\nprint(hello(), os.path.basename(os.getcwd()))\n")
    P.write(proj / "__pycache__", "junk.pyc", "x")
    r = _collect(tmp_path, key_ini, "--project", str(proj), "--keep-remote", "-m", "bin/main.py")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "from helper proj\n"
    (run,) = list((tmp_path / "board").iterdir())  # kept on request
    assert (run / "app" / "proj" / "pkg" / "helper.py").is_file()
    assert not (run / "app" / "proj" / "__pycache__").exists()
    P.only_job(tmp_path / "out")


def test_remote_all_parses_locally(sshd: Sshd, key_ini: Path, tmp_path: Path) -> None:
    pytest.importorskip("openmsprof.parse.importer", reason="the importer is not in this tree yet")
    prog = P.write(tmp_path / "src", "basic.py", P.BASIC)
    r = _collect(tmp_path, key_ini, "--all", "-m", str(prog), timeout=180)
    assert r.returncode == 0, r.stderr
    assert (P.only_job(tmp_path / "out") / "sqlite" / "msprof.db").is_file()


def test_unknown_host_key_refused_then_accepted(sshd: Sshd, tmp_path: Path) -> None:
    kh = tmp_path / "kh"
    kh.write_text("")
    ini = _ini(tmp_path, sshd, known_hosts=kh)
    prog = P.write(tmp_path / "src", "basic.py", P.BASIC)
    r = _collect(tmp_path, ini, "-m", str(prog))
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith(f"openmsprof: error: host key of [127.0.0.1]:{sshd.port} (")
    assert "--accept-new-host-key" in r.stderr and r.stderr.count("\n") == 1
    r = _collect(tmp_path, ini, "--accept-new-host-key", "-m", str(prog))
    assert r.returncode == 0, r.stderr
    assert kh.read_text() == sshd.known_hosts_line  # recorded like ssh's accept-new
    r = _collect(tmp_path, ini, "-m", str(prog))  # now known: no flag needed
    assert r.returncode == 0, r.stderr


def test_changed_host_key_always_refused(sshd: Sshd, tmp_path: Path) -> None:
    kh = tmp_path / "kh"
    other = (sshd.root / "other_key.pub").read_text().split()
    kh.write_text(f"[127.0.0.1]:{sshd.port} {other[0]} {other[1]}\n")
    ini = _ini(tmp_path, sshd, known_hosts=kh)
    prog = P.write(tmp_path / "src", "basic.py", P.BASIC)
    r = _collect(tmp_path, ini, "--accept-new-host-key", "-m", str(prog))
    assert r.returncode == 1
    assert "does not match" in r.stderr and "man-in-the-middle" in r.stderr


def test_wrong_key(sshd: Sshd, tmp_path: Path) -> None:
    ini = _ini(tmp_path, sshd, key_file=sshd.other_key)
    prog = P.write(tmp_path / "src", "basic.py", P.BASIC)
    r = _collect(tmp_path, ini, "-m", str(prog))
    assert r.returncode == 1
    assert r.stderr == (f"openmsprof: error: authentication to {sshd.user}@127.0.0.1:{sshd.port} failed "
                        f"with the key_file of {str(ini)!r}\n")


def test_wrong_password(sshd: Sshd, tmp_path: Path) -> None:
    secret = "Wrong-Pw-4242"
    ini = _ini(tmp_path, sshd, key_file=None, pwd=secret)
    prog = P.write(tmp_path / "src", "basic.py", P.BASIC)
    r = run_cli(["-v", "collect", "--config", str(ini), "--output", str(tmp_path / "out"), "-m", str(prog)],
                cwd=tmp_path)
    assert r.returncode == 1
    assert "failed with the pwd of" in r.stderr
    assert secret not in r.stderr + r.stdout


def test_seed_ini_password_login_bare_board(sshd: Sshd, password_user: PasswordUser, tmp_path: Path) -> None:
    """Seed 002 as printed: an ini with only ``ip, username, pwd, port`` (host key already in
    ~/.ssh/known_hosts), ``collect -m <main> --config <config> --all``; the board is the system
    Python of a fresh account, with no openmsprof and none of its packages, so openmsprof is
    uploaded for the run and removed afterwards.  No process (here or there) shows the password
    in its command line or environment."""
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("needs /usr/bin/python3 for the unprivileged board user")
    probe = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(sys.implementation.cache_tag)"],
                           capture_output=True, text=True)
    if probe.stdout.strip() != sys.implementation.cache_tag:
        pytest.skip("the system python3 is another version: this venv's packages cannot be shipped to it")
    pw = password_user.password
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    sshd.known_hosts(home / ".ssh")
    ini = write_ini(tmp_path / "board.ini", {"ip": "127.0.0.1", "username": password_user.name, "pwd": pw,
                                             "port": sshd.port})
    spy = P.write(tmp_path / "src", "spy.py", f"""\
import os
from openmsprof import mstx
mstx.mark("on-board")
secret = {pw!r}.encode()
seen, scanned = [], 0
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for name in ("cmdline", "environ"):
            try:
                data = open(f"/proc/{{pid}}/{{name}}", "rb").read()
            except OSError:
                continue
            scanned += 1
            if secret in data:
                seen.append(name)
print("user:", os.getuid() != 0, "scanned:", scanned > 10, "leaks:", sorted(set(seen)))
""")
    env = dict(os.environ, HOME=str(home))
    r = run_cli(["-v", "collect", "-m", str(spy), "--config", str(ini), "--all", "--output", str(tmp_path / "out")],
                cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "user: True scanned: True leaks: []\n"
    assert "the board has no openmsprof; uploading openmsprof, " in r.stderr and "numpy" in r.stderr
    assert "Authentication (password) successful" in r.stderr  # -v shows paramiko's log, not the secret
    assert pw not in r.stderr
    job = P.only_job(tmp_path / "out")
    assert P.marks(job) == ["on-board"] and (job / "sqlite" / "msprof.db").is_file()
    assert [p.name for p in password_user.home.iterdir() if p.name.startswith("openmsprof_")] == []  # removed
    bad = write_ini(tmp_path / "bad.ini", {"ip": "127.0.0.1", "username": password_user.name, "pwd": pw + "x",
                                           "port": sshd.port})
    r = run_cli(["collect", "-m", str(spy), "--config", str(bad)], cwd=tmp_path, env=env)
    assert r.returncode == 1 and "failed with the pwd" in r.stderr and pw not in r.stderr


def test_board_without_openmsprof_keep_remote(sshd: Sshd, tmp_path: Path) -> None:
    """A board Python that lacks openmsprof and its packages (a bare venv of this interpreter):
    the bundle is uploaded, the program runs, and --keep-remote leaves it on the board."""
    bare = tmp_path / "bare"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(bare)],
                   check=True)
    bare_py = bare / "bin" / "python"
    assert subprocess.run([str(bare_py), "-c", "import openmsprof"], capture_output=True).returncode != 0
    ini = write_ini(tmp_path / "board.ini",
                    {"ip": "127.0.0.1", "port": sshd.port, "username": sshd.user, "key_file": sshd.key,
                     "known_hosts": sshd.known_hosts(tmp_path)}, {"python": bare_py, "workdir": tmp_path / "board"})
    prog = P.write(tmp_path / "src", "basic.py", P.BASIC)
    r = _collect(tmp_path, ini, "--keep-remote", "-m", str(prog), "--", "5")
    assert r.returncode == 5, r.stderr
    assert "the board has no openmsprof; uploading openmsprof, " in r.stderr
    assert P.marks(P.only_job(tmp_path / "out")) == ["basic-mark"]
    (run,) = list((tmp_path / "board").iterdir())
    assert (run / "site" / "openmsprof" / "__init__.py").is_file() and (run / "site" / "orjson").is_dir()
    assert not (run / "openmsprof_bundle.tar.gz").exists()


def test_unreachable_host(tmp_path: Path, sshd: Sshd) -> None:
    port = free_port()  # nothing listens there
    ini = _ini(tmp_path, sshd, port=port)
    prog = P.write(tmp_path / "src", "basic.py", P.BASIC)
    t0 = time.monotonic()
    r = _collect(tmp_path, ini, "-m", str(prog))
    assert r.returncode == 1 and time.monotonic() - t0 < 30
    assert r.stderr == f"openmsprof: error: cannot connect to {sshd.user}@127.0.0.1:{port}: Connection refused\n"


def test_remote_missing_program(tmp_path: Path, sshd: Sshd, key_ini: Path) -> None:
    r = _collect(tmp_path, key_ini, "-m", str(tmp_path / "nope.py"))
    assert r.returncode == 1 and "program" in r.stderr and "not found" in r.stderr
    r = _collect(tmp_path, key_ini, "--project", str(tmp_path), "-m", "nope.py")
    assert r.returncode == 1 and "not found inside --project" in r.stderr


def test_remote_crash_job_still_copied(tmp_path: Path, sshd: Sshd, key_ini: Path) -> None:
    prog = P.write(tmp_path / "src", "crash.py", P.CRASH)
    r = _collect(tmp_path, key_ini, "-m", str(prog))
    assert r.returncode == 128 + signal.SIGKILL
    job = P.only_job(tmp_path / "out")
    assert len(P.marks(job)) == 20 and not (job / "host" / "end_info").exists()


def test_remote_ctrl_c_stops_program_and_saves_job(tmp_path: Path, sshd: Sshd, key_ini: Path) -> None:
    prog = P.write(tmp_path / "src", "loop.py", P.LOOP)
    proc = subprocess.Popen([PYTHON, "-m", "openmsprof", "collect", "--config", str(key_ini), "--output",
                             str(tmp_path / "out"), "-m", str(prog)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=P.sigint_as_at_a_terminal)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"  # streamed, not buffered
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "loop ended" not in stdout
    assert "interrupting the program on the board" in stderr
    job = P.only_job(tmp_path / "out")
    assert (job / "host" / "end_info").is_file() and P.marks(job)[0] == "tick 0"


def _run_inproc(tmp_path: Path, ini: Path, prog: Path, **kw: object) -> remote.RemoteResult:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return remote.run(board.load(ini), str(prog), [], build_config(), out, out=io.BytesIO(),
                      err=io.BytesIO(), **kw)  # type: ignore[arg-type]


def test_job_dir_vanishing_mid_copy(tmp_path: Path, sshd: Sshd, key_ini: Path) -> None:
    prog = P.write(tmp_path / "src", "basic.py", P.BASIC)
    copied: list[str] = []

    def vanish(rpath: str, lpath: Path) -> None:
        copied.append(rpath)
        if len(copied) == 2:  # the board loses the job directory after two files
            job = rpath[: rpath.index("/", rpath.index("/PROF_") + 1)]
            shutil.rmtree(job)

    res = _run_inproc(tmp_path, key_ini, prog, on_file=vanish)
    assert res.returncode == 0 and res.jobs == [] and len(res.report.partial) == 1
    (problem,) = res.report.problems
    assert "vanished during copy; kept the 2 files already copied" in problem
    local = res.report.partial[0]
    assert sum(1 for p in local.rglob("*") if p.is_file()) == 2
    assert Path(res.rundir).is_dir()  # nothing removed on the board after a failed copy


def test_connection_dropped_while_copying_keeps_files(tmp_path: Path, sshd: Sshd, key_ini: Path) -> None:
    prog = P.write(tmp_path / "src", "basic.py", P.BASIC)
    before = set(sshd.session_pids())
    seen: list[Path] = []

    def drop(rpath: str, lpath: Path) -> None:
        seen.append(lpath)
        if len(seen) == 1:
            for pid in set(sshd.session_pids()) - before:
                os.kill(pid, signal.SIGKILL)  # the per-connection sshd processes of this run
            time.sleep(0.3)

    with pytest.raises(SSHError) as e:
        _run_inproc(tmp_path, key_ini, prog, on_file=drop)
    msg = str(e.value)
    assert f"connection to {sshd.user}@127.0.0.1:{sshd.port} dropped while copying the jobs back" in msg
    assert "1 files already copied are kept" in msg and "\n" not in msg
    assert seen[0].is_file()


def test_connection_dropped_while_running(tmp_path: Path, sshd: Sshd, key_ini: Path) -> None:
    prog = P.write(tmp_path / "src", "slow.py", "import time\nprint('started', flush=True)\ntime.sleep(4)\n")
    before = set(sshd.session_pids())

    def killer() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            new = set(sshd.session_pids()) - before
            if new and list((tmp_path / "board").glob("*/profiling/PROF_*")):
                for pid in new:
                    os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    try:
        with pytest.raises(SSHError, match="dropped while running the program"):
            _run_inproc(tmp_path, key_ini, prog)
    finally:
        t.join()
