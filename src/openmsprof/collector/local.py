"""Run a program here with profiling enabled, forwarding signals, and find the jobs it wrote.

The program's stdin/stdout/stderr are this process's own (nothing is captured).  A Ctrl-C
typed at the terminal reaches the program directly (same process group); a SIGINT, SIGTERM or
SIGHUP sent to ``openmsprof collect`` itself (``kill``) is forwarded to the program, which then
stops and saves its job.  The exit status passes through (killed by signal N → 128 + N).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from openmsprof.collector import collect_switches as options
from openmsprof.config.errors import PathError
from openmsprof.config.model import ProfileConfig
from openmsprof.config.paths import resolve_output
from openmsprof.fileio import fs, temp_dirs
from openmsprof.flight import options as flight_options
from openmsprof.flight.env_arm import with_output

FORWARDED = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))
_SI_KERNEL = 0x80  # si_code of a signal raised by the kernel (e.g. the terminal's Ctrl-C)


@dataclass
class LocalResult:
    returncode: int
    jobs: list[Path] = field(default_factory=list)


def prepare_output(output: str | os.PathLike[str] | None) -> Path:
    """Check and create the output directory (0750) and make sure it is writable."""
    path = resolve_output(output if output is not None else os.getcwd(), "--output")
    fs.make_dir(path)
    fs.check_writable(path)
    return path


def list_jobs(output: Path) -> set[Path]:
    """The ``PROF_*`` job directories directly under ``output`` (symlinks ignored)."""
    try:
        return {p for p in output.iterdir() if p.name.startswith("PROF_") and p.is_dir() and not p.is_symlink()}
    except OSError:
        return set()


def exit_code(returncode: int) -> int:
    """Shell convention: a child killed by signal N gives 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def run(argv: list[str], config: ProfileConfig, output: Path, *, cwd: str | None = None,
        flight: str | None = None) -> LocalResult:
    """Run ``argv`` profiled into ``output``; returns the exit code and the new job dirs.
    With ``flight`` (a flight recorder spec) no continuous session starts: each Python process
    arms a flight recorder writing into ``output`` when a trigger fires."""
    before = list_jobs(output)
    config = config.replace(output=str(output))
    tmp = Path(temp_dirs.make("openmsprof_collect_"))  # (a killed collector's is swept by the next)
    try:
        acl_path = tmp / "acl.json"
        fs.write_file_atomic(acl_path, orjson.dumps(options.acl_json(config), option=orjson.OPT_INDENT_2))
        env = options.child_env(dict(os.environ), config, acl_path)
        if flight is not None:
            env.pop(options.AUTOSTART_ENV, None)
            if flight:  # "" = the spec was refused: the program runs unprofiled
                env[flight_options.ENV] = with_output(flight, str(output))
        rc = run_forwarding(argv, env, cwd=cwd)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    jobs = sorted(list_jobs(output) - before)
    return LocalResult(exit_code(rc), jobs)


def _start(argv: list[str], env: dict[str, str], cwd: str | None) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(argv, env=env, cwd=cwd)
    except OSError as exc:
        raise PathError(f"program {argv[0]!r} cannot be started: {exc.strerror}") from None


def run_forwarding(argv: list[str], env: dict[str, str], *, cwd: str | None = None) -> int:
    """Run ``argv`` to completion, forwarding signals sent to this process; the raw returncode."""
    proc = _start(argv, env, cwd)
    if not hasattr(signal, "sigtimedwait") or threading.current_thread() is not threading.main_thread():
        return _wait_with_handlers(proc)
    waited = (*FORWARDED, signal.SIGCHLD)  # SIGCHLD wakes us the moment the program exits
    old = signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    try:
        while True:
            try:
                info = signal.sigtimedwait(waited, 0.25)
            except InterruptedError:  # pragma: no cover - PEP 475 retries
                info = None
            if info is not None and info.si_signo != signal.SIGCHLD and info.si_code != _SI_KERNEL:
                _send(proc, info.si_signo)
            rc = proc.poll()
            if rc is not None:
                return rc
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _send(proc: subprocess.Popen[bytes], signum: int) -> None:
    try:
        proc.send_signal(signum)
    except OSError:
        pass


def _wait_with_handlers(proc: subprocess.Popen[bytes]) -> int:
    """Fallback without sigtimedwait: plain handlers that forward (a terminal Ctrl-C may then
    reach the program twice)."""
    previous = {}
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        for sig in FORWARDED:
            previous[sig] = signal.signal(sig, lambda signum, _f: _send(proc, signum))
    try:
        return proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
