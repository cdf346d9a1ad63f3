"""The process-wide profiling session (docs/internals.md, "Session").

One active session per process; ``start``/``stop`` are thread-safe; any thread's records are
captured once started.  Sources hook in with :func:`add_listener` (their ``on_start`` /
``on_stop`` flip their own fast "on" flag), so this layer never imports them.

A process forked while a session runs follows it (:mod:`~openmsprof.recorder.forking`): it
records into the same job as its own process, with its own raw stream, and its exit ends only
its stream; the job ends when the session's own process stops.  ``OPENMSPROF_FOLLOW_FORK=0``
stops recording in children instead.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openmsprof.config import capabilities
from openmsprof.config.errors import (
    ACL_ERROR_PROF_ALREADY_RUN,
    ACL_ERROR_PROF_NOT_RUN,
    SessionError,
    StorageError,
)
from openmsprof.config.model import ProfileConfig
from openmsprof.config.paths import resolve_output
from openmsprof.fileio import disk_space, fs
from openmsprof.recorder import buffers, core, forking, held_signals, jobdir
from openmsprof.recorder.clock import ClockPair, read_pair
from openmsprof.recorder.datadir import DataDir
from openmsprof.recorder.jobwriter import JobWriter
from openmsprof.recorder.ledger import Ledger
from openmsprof.recorder.stream import Stream

log = logging.getLogger("openmsprof")

Listener = tuple[Callable[["Session"], None], Callable[["Session"], None]]
_listeners: list[Listener] = []
_control = threading.RLock()
_active: Session | None = None


def add_listener(on_start: Callable[[Session], None], on_stop: Callable[[Session], None]) -> None:
    """Register source hooks called (under the control lock) when a session starts/stops."""
    _listeners.append((on_start, on_stop))


def current() -> Session | None:
    """The active session, or None."""
    return _active


class Session:
    """A running collection.  Create with :func:`start`."""

    def __init__(self, config: ProfileConfig, output: Path, *, job_root: Path | None = None,
                 exclusive_output: bool = True, rank_id: int = -1,
                 flush_interval: float = 0.2) -> None:
        self.config = config
        self.rank_id = rank_id
        self.output = output
        self.start_pair: ClockPair = read_pair()
        self.end_pair: ClockPair | None = None
        self.lock: jobdir.OutputLock | None = None
        self.collecting = True
        self.stop_reason = ""
        self.extra_info: dict[str, Any] = {}
        self.backend = core.BACKEND
        self.overhead: dict[str, Any] = {}
        #: the process that records this session's stream; ``parent_pid`` is set in a process
        #: forked during the session (its stream, not the job, ends with it)
        self.pid = os.getpid()
        self.parent_pid: int | None = None
        fs.make_dir(output)
        fs.check_writable(output)
        if disk_space.free_bytes(output) < disk_space.FREE_SPACE_FLOOR:
            raise StorageError(f"less than 20 MB free under {str(output)!r}; nothing will be written")
        if exclusive_output:
            self.lock = jobdir.OutputLock(output)
        try:
            if job_root is None:
                self.job = jobdir.create(output, self.start_pair.wall_ns)
            else:
                fs.make_dir(job_root)
                self.job = jobdir.JobDir(root=job_root, host=fs.make_dir(job_root / "host"))
                fs.make_dir(self.job.host_data)
            self._job_lock = jobdir.OutputLock(self.job.root, ".job.lock")
            self.files = JobWriter(self.job, config, rank_id, self.start_pair)
            self.ledger = Ledger(config, self.job.root)
            for reason in config.unsupported:
                self.note(f"not supported here: {reason}", warn=True)
            for line in getattr(config, "notes", ()):  # loader notes, e.g. decision 10's cwd
                self.note(f"config: {line}")
            self.stream = Stream(self, self.job, self.files, config, self.backend, None, flush_interval, self.ledger)
            self._reserve = fs.Reserve(self.job.host / ".openmsprof.reserve")
        except BaseException:
            if self.lock is not None:
                self.lock.release()
            raise

    # -- files -----------------------------------------------------------------------------
    @property
    def root(self) -> Path:
        return self.job.root

    def device_dir(self, dev: int) -> DataDir:
        """The writer of ``device_{dev}/data``, created with its config files on first use."""
        return self.stream.device_dir(dev)

    def write_host_file(self, name: str, data: bytes) -> None:
        """Write ``host/{name}`` of the job through the host dir fd opened at start (a source's
        file, e.g. the GC events; refused when ``host/`` was replaced)."""
        self.files.write_host_file(name, data)

    def note(self, message: str, warn: bool = False) -> None:
        """Append a line to the job's collection.log (and the logger)."""
        (log.warning if warn else log.info)("openmsprof: %s", message)
        self.files.log(message)

    def halt(self, reason: str) -> None:
        """Stop collecting (not the session): sources go quiet, what was written stays."""
        if not self.collecting:
            return
        self.collecting = False
        self.stop_reason = reason
        self.note(reason, warn=True)
        if self.parent_pid is not None:  # a forked child: the sources are its parent's
            forking.quiet()
            return
        for _on, off in list(_listeners):
            try:
                off(self)
            except Exception as exc:  # pragma: no cover - defensive
                log.warning("openmsprof: listener failed at halt: %s", exc)

    # -- lifecycle -------------------------------------------------------------------------
    def _begin(self) -> None:
        buffers.clear_all()
        self.stream.start()
        for on, _off in list(_listeners):
            try:
                on(self)
            except Exception as exc:
                self.note(f"a source failed to start: {exc}", warn=True)

    def _end(self) -> None:
        if self.parent_pid is not None:
            self._end_child()
            return
        if self.collecting:
            for _on, off in list(_listeners):
                try:
                    off(self)
                except Exception as exc:
                    self.note(f"a source failed to stop: {exc}", warn=True)
        native = self.stream.end()
        if self.stream.flusher.error is not None and not self.stop_reason:
            self.stop_reason = str(self.stream.flusher.error)
            self.note(f"collection stopped early: {self.stream.flusher.error}", warn=True)
        self.end_pair = read_pair()
        try:
            self.stream.close()
        except Exception as exc:
            self.note(f"closing raw files failed: {exc}", warn=True)
        self._reserve.release()  # the space kept for the end records
        self.overhead = self.ledger.overhead(self.stream.flusher, native, self.backend, self.pid)
        dropped = self.overhead["records_dropped"]
        extra = {"openmsprofDropped": str(dropped)}
        try:
            self.files.write_end(self.end_pair, self.overhead, extra, self.extra_info)
        except Exception as exc:
            self.note(f"could not write end_info: {exc}", warn=True)
        finally:
            self.files.write_peaks(self.note)  # through the host dir fd, like the end records
            self.files.close_dirs()
        if dropped:
            self.note(f"{dropped} records dropped ({forking.why_text(self.overhead['drop_reasons'])}): "
                      f"{self.overhead['drops_by_thread_kind']}", warn=True)
        self.note(f"session stopped: {self.overhead['records_written']} records, "
                  f"{self.overhead['bytes_written']} bytes")
        self.files.close_log()
        self._job_lock.release()
        if self.lock is not None:
            self.lock.release()

    # -- a process forked during the session ------------------------------------------------
    def _follow_child(self) -> None:
        """In a child forked during the session: record into the same job as this process, with
        this process's own stream (the parent's files and buffers are left to the parent)."""
        self.parent_pid, self.pid = self.pid, os.getpid()
        # self.lock and self._job_lock are the parent's: this process never releases them
        self.stream.abandon()
        self.job.devices = dict(self.job.devices)
        self.ledger.bytes_written = 0
        self.overhead = {}
        self.stream = Stream(self, self.job, self.files, self.config, self.backend, self.pid,
                             self.stream.flusher.interval, self.ledger)
        self.stream.start()
        self.stream.set_markers(self.collecting and bool(self.config.msproftx))
        self.note(f"forked process {self.pid} (parent {self.parent_pid}) follows the session")

    def _end_child(self) -> None:
        """A forked child's stream ends: write what it buffered and its counts
        (``host/openmsprof_overhead.pid{pid}.json``); the job stays its parent's."""
        native = self.stream.end()
        try:
            self.stream.close()
        except Exception as exc:
            self.note(f"closing raw files failed: {exc}", warn=True)
        self.overhead = self.ledger.overhead(self.stream.flusher, native, self.backend, self.pid)
        try:
            self.files.write_counts(self.pid, self.overhead)
        except Exception as exc:
            self.note(f"could not write the counts of process {self.pid}: {exc}", warn=True)
        dropped = self.overhead["records_dropped"]
        if dropped:
            self.note(f"process {self.pid}: {dropped} records dropped "
                      f"({forking.why_text(self.overhead['drop_reasons'])})", warn=True)
        self.note(f"forked process {self.pid} stopped: {self.overhead['records_written']} records")
        self.files.close_quietly()


def start(config: ProfileConfig | None = None, output: str | os.PathLike[str] | None = None, **kwargs: Any) -> Session:
    """Start the process-wide session.  Raises :class:`SessionError` if one is running."""
    global _active
    config = capabilities.check(config or ProfileConfig())
    out = output if output is not None else (config.output or os.getcwd())
    path = resolve_output(out)
    with _control, held_signals.held():  # (a raising signal handler waits until the session is whole)
        if _active is not None:
            raise SessionError(
                f"profiling is already running in this process (job {str(_active.root)!r})",
                code=ACL_ERROR_PROF_ALREADY_RUN,
            )
        s = Session(config, path, **kwargs)
        _active = s
        s._begin()
        return s


def stop() -> Session:
    """Stop the active session, flush everything, write end_info.  Returns it."""
    global _active
    with _control, held_signals.held():  # (a Ctrl-C meanwhile is raised once every record is written)
        s = _active
        if s is None:
            raise SessionError("profiling is not running (stop without start)", code=ACL_ERROR_PROF_NOT_RUN)
        _active = None
        s._end()
        return s


def _stop_at_exit() -> None:
    """Interpreter exit (atexit), or a forked child's ``os._exit``/``exec``: stop the session if
    this process records it (a child that did not follow the fork has none)."""
    s = _active
    if s is None or s.pid != os.getpid():
        return
    if not _control.acquire(timeout=forking.EXIT_WAIT_S):  # another thread is stopping it
        return
    try:
        if _active is s:
            stop()
    except Exception as exc:  # pragma: no cover
        log.warning("openmsprof: stop at exit failed: %s: %s", type(exc).__name__, exc)
    finally:
        _control.release()


def _after_fork_in_child() -> None:
    """``os.register_at_fork(after_in_child=...)``: the child follows the session with its own
    stream, or (``OPENMSPROF_FOLLOW_FORK=0``) records nothing.  Never raises."""
    global _active, _control
    _control = threading.RLock()  # another thread may have held it at the fork
    forking.reset_child()
    s = _active
    if s is None:
        return
    if not forking.follow():
        _active = None
        forking.quiet()
        return
    try:
        s._follow_child()
        forking.hook_exits(_stop_at_exit)
    except Exception as exc:  # never break the child: it runs unprofiled
        _active = None
        forking.quiet()
        log.warning("openmsprof: forked process %d does not record: %s", os.getpid(), exc)


atexit.register(_stop_at_exit)
os.register_at_fork(after_in_child=_after_fork_in_child)
