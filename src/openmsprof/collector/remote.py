"""Remote collection: upload the program, run it on the board over SSH, copy the jobs back.

On the board the program runs under ``python -m openmsprof collect`` (openmsprof is uploaded for
the run when the board lacks it: :mod:`openmsprof.collector.bundle`), in a fresh run folder ``{workdir}/openmsprof_{stamp}_{token}/`` holding ``app/`` (the
upload), ``profile_config.json`` (the exact settings) and ``profiling/`` (the jobs).  Every path
and argument on the remote command line is quoted with :func:`shlex.quote`; no secret is on it.
The program's stdout/stderr are streamed as they come; a Ctrl-C here is sent to the program
there (``kill -INT``), which stops and saves its job; the exit status passes through.
"""

from __future__ import annotations

import io
import logging
import posixpath
import secrets
import select
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from openmsprof.collector import board as board_mod
from openmsprof.collector import bundle, local
from openmsprof.collector.collect_switches import dump_config
from openmsprof.collector.sftpcopy import (
    CopyReport,
    OnFile,
    fetch_jobs,
    makedirs,
    upload_file,
    upload_tree,
)
from openmsprof.collector.ssh import SSHError, connect
from openmsprof.config.errors import PathError, ProfilingError
from openmsprof.config.model import ProfileConfig

log = logging.getLogger("openmsprof")
PID_TAG = b"__OPENMSPROF_PID__ "


@dataclass
class RemoteResult:
    returncode: int
    jobs: list[Path] = field(default_factory=list)
    report: CopyReport = field(default_factory=CopyReport)
    rundir: str = ""


@dataclass(frozen=True)
class Upload:
    """What to upload (``local``: a file or a folder) and how to run it once there."""

    local: Path
    is_tree: bool
    program: str  # path of the program relative to the uploaded folder / file name


def plan_upload(program: str, project: str | None) -> Upload:
    """Check the program (and project folder) exist here; one-line PathError otherwise."""
    if project is None:
        path = Path(program)
        if not path.is_file():
            raise PathError(f"program {program!r} not found (remote runs upload a local file; "
                            "use --project DIR for a folder)")
        return Upload(path.resolve(), False, path.name)
    root = Path(project).resolve()
    if not root.is_dir():
        raise PathError(f"--project {project!r} is not a directory")
    candidates = [Path(program).resolve(), (root / program).resolve()]
    for cand in candidates:
        if cand.is_file() and cand.is_relative_to(root):
            return Upload(root, True, cand.relative_to(root).as_posix())
    raise PathError(f"program {program!r} not found inside --project {project!r}")


def upload_runtimes(upload: Upload) -> list[str]:
    """The runtimes the uploaded Python files' facades need on the board (bundle.facade_needs)."""
    if not upload.is_tree:
        return bundle.facade_needs([upload.local])
    return bundle.facade_needs(sorted(p for p in upload.local.rglob("*.py") if p.is_file() and not p.is_symlink()))


def _with_path(site: str | None) -> str:
    """``PYTHONPATH=SITE[:old]`` (shell words) when a bundle was unpacked in ``site``."""
    if not site:
        return ""
    return f'PYTHONPATH={shlex.quote(site)}"${{PYTHONPATH:+:$PYTHONPATH}}" '


def remote_command(python: str, cwd: str, out: str, cfg_path: str, program: str, args: list[str],
                   site: str | None = None) -> str:
    """The shell line run on the board (everything quoted)."""
    q = shlex.quote
    words = [python, "-m", "openmsprof", "collect", "--output", out, "--profile-config", cfg_path,
             "--quiet-jobs", "-m", program, "--", *args]
    return (f"echo {PID_TAG.decode()}$$ >&2; cd {q(cwd)} && "
            f"{_with_path(site)}PYTHONUNBUFFERED=1 exec {' '.join(q(w) for w in words)}")


def _exec_capture(client: Any, command: str, timeout: float = 120.0) -> tuple[int, str, str]:
    _i, o, e = client.exec_command(command, timeout=timeout)
    out, err = o.read().decode(errors="replace"), e.read().decode(errors="replace")
    return int(o.channel.recv_exit_status()), out, err


def ensure_openmsprof(client: Any, sftp: Any, board: board_mod.Board, rundir: str,
                      runtimes: list[str] | None = None) -> str | None:
    """Probe the board's Python; upload and unpack this openmsprof (and the distributions it
    and ``runtimes`` need that the board lacks) into ``rundir/site`` when needed.  Returns
    that folder or None."""
    q = shlex.quote
    py = q(board.python)
    names = bundle.needed(runtimes)
    rc, out, err = _exec_capture(client, f"{py} -c {q(bundle.PROBE)} {' '.join(q(n) for n in names)}")
    if rc != 0:
        last = (err.strip().splitlines() or ["no output"])[-1]
        raise ProfilingError(f"the board's Python {board.python!r} on {board.where} cannot run: {last}")
    found = bundle.parse_probe(out, board.where)
    ship = bundle.plan(found, board.where, runtimes)
    if not ship:
        return None
    data = bundle.bundle_bytes(ship)
    have = found.have.get("openmsprof")
    print(f"openmsprof: the board has {'openmsprof ' + have if have else 'no openmsprof'}; uploading "
          f"{', '.join(ship)} ({len(data) / 1e6:.1f} MB) for this run", file=sys.stderr)
    archive, site = posixpath.join(rundir, "openmsprof_bundle.tar.gz"), posixpath.join(rundir, "site")
    sftp.putfo(io.BytesIO(data), archive)
    # tar (C) when the board has it, else Python's own tarfile; then a first import (compiles)
    unpack = (f"mkdir -p {q(site)} && {{ tar -xzf {q(archive)} -C {q(site)} 2>/dev/null || "
              f"{py} -m tarfile -e {q(archive)} {q(site)}; }}")
    rc, _out, err = _exec_capture(client, f"{unpack} && rm -f -- {q(archive)} && "
                                          f"{_with_path(site)}{py} -c 'import openmsprof.collector.command'")
    if rc != 0:
        last = (err.strip().splitlines() or ["no output"])[-1]
        raise ProfilingError(f"openmsprof uploaded to {board.where} does not start there: {last}")
    return site


def _remote_base(workdir: str, home: str) -> str:
    if workdir in ("", "~"):
        return home
    if workdir.startswith("~/"):
        return posixpath.join(home, workdir[2:])
    return workdir if workdir.startswith("/") else posixpath.join(home, workdir)


class _Streamer:
    """Copies the remote stdout/stderr to ours, picking the program's pid off stderr."""

    def __init__(self, out: BinaryIO, err: BinaryIO) -> None:
        self.out, self.err = out, err
        self.pid: int | None = None
        self._head = b""

    def stderr(self, data: bytes) -> None:
        if self.pid is None and self._head is not None:
            self._head += data
            if b"\n" not in self._head:
                return
            line, _, data = self._head.partition(b"\n")
            self._head = b""
            if line.startswith(PID_TAG) and line[len(PID_TAG):].strip().isdigit():
                self.pid = int(line[len(PID_TAG):])
            else:
                data = line + b"\n" + data
        self._write(self.err, data)

    @staticmethod
    def _write(stream: BinaryIO, data: bytes) -> None:
        if data:
            stream.write(data)
            stream.flush()


def _exec_quiet(client: Any, command: str, timeout: float = 30.0) -> int:
    _i, o, _e = client.exec_command(command, timeout=timeout)
    return int(o.channel.recv_exit_status())


def stream_command(client: Any, command: str, out: BinaryIO, err: BinaryIO) -> int:
    """Run ``command`` on the board, stream its output; returns its exit status."""
    chan = client.get_transport().open_session()
    chan.exec_command(command)
    s = _Streamer(out, err)
    interrupted = False
    while True:
        try:
            busy = False
            if chan.recv_ready():
                s._write(out, chan.recv(65536))
                busy = True
            if chan.recv_stderr_ready():
                s.stderr(chan.recv_stderr(65536))
                busy = True
            if busy:
                continue
            if chan.exit_status_ready():
                break
            if chan.closed or not client.get_transport().is_active():
                raise EOFError("the SSH channel closed before the program finished")
            select.select([chan], [], [], 0.1)
        except KeyboardInterrupt:
            if interrupted or s.pid is None:
                raise
            interrupted = True
            print("openmsprof: interrupting the program on the board (Ctrl-C again to abandon it)",
                  file=sys.stderr)
            _exec_quiet(client, f"kill -INT {s.pid}")
    status = int(chan.recv_exit_status())
    if status < 0 and not client.get_transport().is_active():  # paramiko's "closed, no status"
        raise EOFError("the SSH connection closed before the program finished")
    return 255 if status < 0 else status


def _remove_quietly(client: Any, rundir: str) -> None:
    try:
        _exec_quiet(client, f"rm -rf -- {shlex.quote(rundir)}")
    except Exception:  # best effort on a failing run; the error above is what counts
        log.info("could not remove %s on the board", rundir)


def run(board: board_mod.Board, program: str, args: list[str], config: ProfileConfig, output: Path, *,
        project: str | None = None, accept_new: bool = False, keep_remote: bool = False,
        on_file: OnFile | None = None, out: BinaryIO | None = None, err: BinaryIO | None = None) -> RemoteResult:
    """The whole remote run; raises :class:`SSHError` (one line) when the board cannot be used.
    A connection lost mid-way keeps whatever was already copied into ``output``."""
    upload = plan_upload(program, project)
    out = out or sys.stdout.buffer
    err = err or sys.stderr.buffer
    client = connect(board, accept_new=accept_new)
    result = RemoteResult(returncode=0)
    phase = "opening SFTP"
    try:
        client.get_transport().set_keepalive(15)
        sftp = client.open_sftp()
        base = _remote_base(board.workdir, sftp.normalize("."))
        rundir = result.rundir = posixpath.join(base, f"openmsprof_{time.strftime('%Y%m%d%H%M%S')}_{secrets.token_hex(4)}")
        phase = f"uploading {str(upload.local)!r}"
        app = posixpath.join(rundir, "app")
        makedirs(sftp, app)
        if upload.is_tree:
            cwd = posixpath.join(app, upload.local.name)
            upload_tree(sftp, upload.local, cwd)
        else:
            cwd = app
            upload_file(sftp, upload.local, posixpath.join(app, upload.program))
        cfg_path, remote_out = posixpath.join(rundir, "profile_config.json"), posixpath.join(rundir, "profiling")
        sftp.putfo(io.BytesIO(dump_config(config.replace(output=None))), cfg_path)
        makedirs(sftp, remote_out)
        phase = "checking openmsprof on the board"
        site = ensure_openmsprof(client, sftp, board, rundir, upload_runtimes(upload))
        print(f"openmsprof: running {upload.program} on {board.where} in {rundir}", file=sys.stderr)
        phase = "running the program"
        command = remote_command(board.python, cwd, remote_out, cfg_path, upload.program, args, site)
        log.info("remote command: %s", command)
        result.returncode = stream_command(client, command, out, err)
        phase = "copying the jobs back"
        fetch_jobs(sftp, remote_out, output, on_file=on_file, report=result.report)
        result.jobs = list(result.report.jobs)
        print(f"openmsprof: copied {result.report.files} files ({result.report.bytes} bytes) "
              f"of {len(result.jobs) + len(result.report.partial)} job(s) into {output}", file=sys.stderr)
        if not keep_remote and not result.report.problems:
            phase = "removing the run folder on the board"
            _exec_quiet(client, f"rm -rf -- {shlex.quote(rundir)}")
    except ProfilingError:
        if result.rundir and not keep_remote:
            _remove_quietly(client, result.rundir)
        raise
    except Exception as exc:
        if not isinstance(exc, (OSError, EOFError)) and not type(exc).__module__.startswith("paramiko"):
            raise
        transport = client.get_transport()
        text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        kept = f"{result.report.files} files already copied are kept in {str(output)!r}"
        if transport is None or not transport.is_active() or isinstance(exc, EOFError):
            raise SSHError(f"connection to {board.where} dropped while {phase}: {text}; {kept}") from None
        raise SSHError(f"{phase} on {board.where} failed: {text}; {kept}") from None
    finally:
        client.close()
    return result


def run_from_cli(ini: str, program: str, args: list[str], config: ProfileConfig, output: str | None, *,
                 project: str | None, accept_new: bool, keep_remote: bool) -> RemoteResult:
    """``collect --config board.ini``: load the ini, prepare ``--output``, run."""
    board = board_mod.load(ini)
    out_dir = local.prepare_output(output)
    return run(board, program, args, config, out_dir, project=project, accept_new=accept_new,
               keep_remote=keep_remote)
