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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from openmsprof.config import capabilities
from openmsprof.config.errors import (
    ACL_ERROR_PROF_ALREADY_RUN,
    ACL_ERROR_PROF_NOT_RUN,
    PathError,
    SessionError,
    StorageError,
)
from openmsprof.config.model import ProfileConfig
from openmsprof.config.paths import resolve_output
from openmsprof.fileio import fs
from openmsprof.machine import peaks, peaks_child
from openmsprof.recorder import buffers, core, forking, jobdir, pymarkers, rawfile
from openmsprof.recorder.clock import ClockPair, read_pair
from openmsprof.recorder.datadir import DataDir
from openmsprof.recorder.flusher import Flusher

log = logging.getLogger("openmsprof")

Listener = tuple[Callable[["Session"], None], Callable[["Session"], None]]
_listeners: list[Listener] = []
_control = threading.RLock()
_active: Session | None = None


#: ``JOB/host/`` file holding :attr:`Session.extra_info` (written at the end when not empty).
EXTRA_INFO = "extra_info.json"


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
        self.bytes_written = 0
        self.extra_info: dict[str, Any] = {}
        self._device_dirs: dict[int, DataDir] = {}
        self._last_space_check = 0.0
        self._space_checked_at = 0
        self.backend = core.BACKEND
        self.overhead: dict[str, Any] = {}
        self._native = False
        #: the process that records this session's stream; ``parent_pid`` is set in a process
        #: forked during the session (its stream, not the job, ends with it)
        self.pid = os.getpid()
        self.parent_pid: int | None = None
        fs.make_dir(output)
        fs.check_writable(output)
        if fs.free_bytes(output) < fs.FREE_SPACE_FLOOR:
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
            # the job's end records are written relative to these fds, and only if the paths
            # still name these directories (a job dir swapped for a symlink is refused)
            self._root_fd = fs.open_dir_fd(self.job.root)
            self._host_fd = fs.open_dir_fd(self.job.host)
            self.log_path = self.job.host / "collection.log"
            self._log_fd = fs.open_new(self.log_path)
            self._write_host_files()
            for reason in config.unsupported:
                self.note(f"not supported here: {reason}", warn=True)
            for line in getattr(config, "notes", ()):  # loader notes, e.g. decision 10's cwd
                self.note(f"config: {line}")
            self.host_dir = DataDir(self.job.host_data, "host")
            self.flusher = Flusher(self.host_dir, self.device_dir, flush_interval, self._account,
                                   on_cycle=self._poll_native)
            self._reserve = fs.Reserve(self.job.host / ".openmsprof.reserve")
        except BaseException:
            if self.lock is not None:
                self.lock.release()
            raise

    # -- files -----------------------------------------------------------------------------
    @property
    def root(self) -> Path:
        return self.job.root

    def _write_host_files(self) -> None:
        cfg = self.config.to_dict()
        info = jobdir.info_json(cfg, self.config.devices, self.rank_id)
        sample = {"llc_profiling": "read", "ai_core_profiling_mode": "task-based", "openmsprof": cfg}
        jobdir.write_config_files(self.job.host, "", info, sample, self.start_pair, "host_start.log")

    def device_dir(self, dev: int) -> DataDir:
        """The writer of ``device_{dev}/data``, created with its config files on first use."""
        d = self._device_dirs.get(dev)
        if d is None and self.parent_pid is not None:  # a forked child: its own stream
            path = fs.make_dir(self.job.device(dev))
            fs.make_dir(path / "data")
            d = self._device_dirs[dev] = DataDir(path / "data", rawfile.stream_name(str(dev), self.pid))
            return d
        if d is None:
            path = fs.make_dir(self.job.device(dev))
            fs.make_dir(path / "data")
            cfg = self.config.to_dict()
            info = jobdir.info_json(cfg, [dev], self.rank_id)
            sample = {"llc_profiling": "read", "ai_core_profiling_mode": "task-based", "openmsprof": cfg}
            jobdir.write_config_files(path, f".{dev}", info, sample, self.start_pair, f"dev_start.log.{dev}")
            d = self._device_dirs[dev] = DataDir(path / "data", str(dev))
            self.job.devices[dev] = path
        return d

    def write_host_file(self, name: str, data: bytes) -> None:
        """Write ``host/{name}`` of the job through the host dir fd opened at start (a source's
        file, e.g. the GC events; refused when ``host/`` was replaced)."""
        if not fs.same_dir(self.job.host, self._host_fd):
            raise PathError(f"'{fs.escape(self.job.host)}' was replaced after the start (symbolic link?)")
        fs.write_file_at(self._host_fd, name, data)

    def note(self, message: str, warn: bool = False) -> None:
        """Append a line to the job's collection.log (and the logger)."""
        (log.warning if warn else log.info)("openmsprof: %s", message)
        try:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            os.write(self._log_fd, f"[{stamp}] {message}\n".encode())
        except OSError:
            pass

    # -- storage guard ---------------------------------------------------------------------
    def _account(self, nbytes: int) -> None:
        self.bytes_written += nbytes
        limit = self.config.storage_limit_mb
        if limit is not None and self.bytes_written > limit * 1024 * 1024:
            self.halt(f"storage_limit {limit}MB reached; collection stopped, the application goes on")
            return
        now = time.monotonic()
        # every second, and every 4 MB: the floor is checked before a burst can cross it
        if now - self._last_space_check >= 1.0 or self.bytes_written - self._space_checked_at >= fs.SPACE_CHECK_BYTES:
            self._last_space_check = now
            self._space_checked_at = self.bytes_written
            if fs.free_bytes(self.job.root) < fs.FREE_SPACE_FLOOR + fs.SPACE_MARGIN:
                self.halt("less than 20 MB free on disk; collection stopped, the application goes on")

    def _poll_native(self) -> None:
        """Each flusher cycle: surface a halt of the native core (disk floor, storage limit)."""
        if not self._native or core.ring is None or not self.collecting:
            return
        self._poll_native_stats(core.ring.stats())

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
    def _domain_filter(self) -> tuple[int, list[str]]:
        """(mode, names) of the marker domain filter: 1 include, 2 exclude, 0 none."""
        include, exclude = self.config.mstx_domain_include, self.config.mstx_domain_exclude
        return (1, list(include)) if include else (2, list(exclude)) if exclude else (0, [])

    def _start_recorder(self) -> None:
        """Start this process's stream: the pure-Python flusher and, on the native backend, the
        native core (a forked child's files carry its pid)."""
        mode, names = self._domain_filter()
        pymarkers.set_domains(mode, names)
        pymarkers.begin(self.host_dir.strings.ids)
        buffers.HELPER = self.flusher.try_drain
        if self.backend == "native" and core.ring is not None:
            core.ring.set_domains(mode, names)
            limit = self.config.storage_limit_mb
            fd = fs.open_dir_fd(self.job.host_data)
            try:
                core.ring.start(fd, rawfile.stream_name("host", None if self.parent_pid is None else self.pid),
                                int(self.flusher.interval * 1e9), fs.FREE_SPACE_FLOOR + fs.SPACE_MARGIN,
                                0 if limit is None else limit * 1024 * 1024)
            finally:
                os.close(fd)
            self._native = True
            self.flusher.mstx_source = "MstxPy"
        self.flusher.start()

    def _begin(self) -> None:
        buffers.clear_all()
        self._start_recorder()
        for on, _off in list(_listeners):
            try:
                on(self)
            except Exception as exc:
                self.note(f"a source failed to start: {exc}", warn=True)

    def _write_peaks(self) -> None:
        """``host/peaks.json``: this machine's peaks, cached once per machine.  When there are
        none yet, a detached nice-19 process measures them after the session (never in the
        application's path) and writes the cache and this job's file.
        ``OPENMSPROF_PEAKS=off`` skips it, a file path there is copied instead."""
        choice = os.environ.get("OPENMSPROF_PEAKS", "")
        if choice.lower() in ("off", "0", "no"):
            return
        try:
            if not fs.same_dir(self.job.host, self._host_fd):
                raise PathError(f"'{fs.escape(self.job.host)}' was replaced after the start (symbolic link?)")
            doc = peaks.load_peaks(choice) if choice else peaks.cached(measure_missing=False)
            if doc:
                fs.write_file_at(self._host_fd, peaks.PEAKS_FILE, orjson.dumps(doc))
                if choice or peaks.covers(doc):
                    return  # else: the child adds the runtime's ceilings to both copies
            child = peaks_child.spawn(self.job.host, self._host_fd)
            self.note(f"machine peaks: measuring in background process {child.pid} (nice 19); "
                      f"it writes host/{peaks.PEAKS_FILE} and the machine's cache")
        except Exception as exc:
            self.note(f"machine peaks not stored: {exc}", warn=True)

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
        native = self._end_streams()
        if self.flusher.error is not None and not self.stop_reason:
            self.stop_reason = str(self.flusher.error)
            self.note(f"collection stopped early: {self.flusher.error}", warn=True)
        self.end_pair = read_pair()
        try:
            for d in [self.host_dir, *self._device_dirs.values()]:
                d.close()
        except Exception as exc:
            self.note(f"closing raw files failed: {exc}", warn=True)
        self._reserve.release()  # the space kept for the end records
        self.overhead = self._overhead(native)
        dropped = self.overhead["records_dropped"]
        extra = {"openmsprofDropped": str(dropped)}
        try:
            self._write_end_records(extra)
        except Exception as exc:
            self.note(f"could not write end_info: {exc}", warn=True)
        finally:
            self._write_peaks()  # through the host dir fd, like the end records
            os.close(self._host_fd)
            os.close(self._root_fd)
        if dropped:
            self.note(f"{dropped} records dropped ({forking.why_text(self.overhead['drop_reasons'])}): "
                      f"{self.overhead['drops_by_thread_kind']}", warn=True)
        self.note(f"session stopped: {self.overhead['records_written']} records, "
                  f"{self.overhead['bytes_written']} bytes")
        os.close(self._log_fd)
        self._job_lock.release()
        if self.lock is not None:
            self.lock.release()

    # -- a process forked during the session ------------------------------------------------
    def _follow_child(self) -> None:
        """In a child forked during the session: record into the same job as this process, with
        this process's own stream (the parent's files and buffers are left to the parent)."""
        self.parent_pid, self.pid = self.pid, os.getpid()
        # self.lock and self._job_lock are the parent's: this process never releases them
        for d in [self.host_dir, *self._device_dirs.values()]:
            d.abandon()
        self._device_dirs = {}
        self.job.devices = dict(self.job.devices)
        self.bytes_written = 0
        self.overhead = {}
        self._native = False
        self.host_dir = DataDir(self.job.host_data, rawfile.stream_name("host", self.pid))
        self.flusher = Flusher(self.host_dir, self.device_dir, self.flusher.interval, self._account,
                               on_cycle=self._poll_native)
        self._start_recorder()
        on = self.collecting and bool(self.config.msproftx)
        pymarkers.set_enabled(on and self.backend != "native")
        if self._native and core.ring is not None:
            core.ring.set_enabled(on)
        self.note(f"forked process {self.pid} (parent {self.parent_pid}) follows the session")

    def _end_streams(self) -> dict[str, Any] | None:
        """Stop producing and write out what the buffers hold: the markers, the flusher, the
        native rings; returns the rings' final counts (None on the Python backend)."""
        pymarkers.end()
        buffers.HELPER = None
        self.flusher.stop()
        native = core.ring.stop() if self._native and core.ring is not None else None
        if native is not None:
            self._poll_native_stats(native)
        return native

    def _end_child(self) -> None:
        """A forked child's stream ends: write what it buffered and its counts
        (``host/openmsprof_overhead.pid{pid}.json``); the job stays its parent's."""
        native = self._end_streams()
        try:
            for d in [self.host_dir, *self._device_dirs.values()]:
                d.close()
        except Exception as exc:
            self.note(f"closing raw files failed: {exc}", warn=True)
        self.overhead = self._overhead(native)
        try:
            fs.write_file_at(self._host_fd, f"openmsprof_overhead.pid{self.pid}.json", jobdir.dump(self.overhead))
        except Exception as exc:
            self.note(f"could not write the counts of process {self.pid}: {exc}", warn=True)
        dropped = self.overhead["records_dropped"]
        if dropped:
            self.note(f"process {self.pid}: {dropped} records dropped "
                      f"({forking.why_text(self.overhead['drop_reasons'])})", warn=True)
        self.note(f"forked process {self.pid} stopped: {self.overhead['records_written']} records")
        for fd in (self._host_fd, self._root_fd, self._log_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    def _write_end_records(self, extra: dict[str, str]) -> None:
        """end_info (+ drop count), the overhead file and the devices' end_info, through the
        directory fds opened at start; refused when a path no longer names its directory."""
        if not (fs.same_dir(self.job.root, self._root_fd) and fs.same_dir(self.job.host, self._host_fd)):
            raise PathError(f"job directory '{fs.escape(self.job.root)}' was replaced after the "
                            "start (symbolic link?); end records refused")
        info = jobdir.end_info(self.end_pair or read_pair())
        end = jobdir.dump(info)
        fs.write_file_at(self._host_fd, "end_info", jobdir.dump({**info, **extra}))
        fs.write_file_at(self._host_fd, "openmsprof_overhead.json", jobdir.dump(self.overhead))
        if self.extra_info:  # e.g. the acl models' files (seed 002 names exports after them)
            fs.write_file_at(self._host_fd, EXTRA_INFO, jobdir.dump(self.extra_info))
        for dev, path in self.job.devices.items():
            fd = os.open(path.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=self._root_fd)
            try:
                fs.write_file_at(fd, f"end_info.{dev}", end)
            finally:
                os.close(fd)

    def _poll_native_stats(self, st: dict[str, Any]) -> None:
        code = st["halt"] if self.stop_reason == "" else 0
        if code == 1:
            self.halt("less than 20 MB free on disk; collection stopped, the application goes on")
        elif code == 2:
            self.halt(f"storage_limit {self.config.storage_limit_mb}MB reached; collection stopped")
        elif code == 3:
            self.halt(f"writing markers failed: {os.strerror(st['halt_errno'])}; collection stopped")

    def _overhead(self, native: dict[str, Any] | None) -> dict[str, Any]:
        """The recorder's own cost and losses (``host/openmsprof_overhead.json``)."""
        rows = buffers.drop_rows() + (list(native["drops"]) if native else [])
        reasons = dict(native.get("drop_reasons") or {}) if native else {}
        py_dropped = sum(n for _t, _k, n in buffers.drop_rows())
        if py_dropped:  # the pure-Python lists: full (flusher behind) or over the memory budget
            reasons["python_buffers_full"] = py_dropped
        return {
            "records_written": self.flusher.records + (native["records_written"] if native else 0),
            "bytes_written": self.bytes_written + (native["bytes_written"] if native else 0),
            "records_dropped": sum(n for _t, _k, n in rows),
            "drops_by_thread_kind": core.drops_by_thread_kind(rows),
            "drop_reasons": reasons,
            "flusher_cpu_ns": self.flusher.cpu_ns + (native["flusher_cpu_ns"] if native else 0),
            "backend": self.backend,
            "pid": self.pid,
        }


def start(config: ProfileConfig | None = None, output: str | os.PathLike[str] | None = None, **kwargs: Any) -> Session:
    """Start the process-wide session.  Raises :class:`SessionError` if one is running."""
    global _active
    config = capabilities.check(config or ProfileConfig())
    out = output if output is not None else (config.output or os.getcwd())
    path = resolve_output(out)
    with _control:
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
    with _control:
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
        log.warning("openmsprof: stop at exit failed: %s", exc)
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
