"""One process's raw stream of a session: its data directories' writers, the flusher and the native core.

The session's own process writes ``host/data/*.host.slice_*`` and ``device_{id}/data/*.{id}.slice_*``;
a process forked during the session (:mod:`~openmsprof.recorder.forking`) gets a stream of its
own beside them, its files named with its pid (``*.host.pid{pid}.slice_*``) and no device
config files of its own.  Starting a stream starts the pure-Python markers (a new code epoch,
the domain filter, the producers' drain helper) and, on the native backend, the native core;
ending it stops producing and writes out what the buffers hold.  The flusher's byte counts go to
the session's :class:`~openmsprof.recorder.ledger.Ledger`, and a reason to halt (storage limit,
disk floor, a halt of the native core) to the session's ``halt``.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from openmsprof.config.model import ProfileConfig
from openmsprof.fileio import disk_space, fs
from openmsprof.recorder import buffers, core, jobdir, pymarkers, rawfile
from openmsprof.recorder.datadir import DataDir
from openmsprof.recorder.flusher import Flusher
from openmsprof.recorder.jobwriter import JobWriter
from openmsprof.recorder.ledger import Ledger

__all__ = ["Owner", "Stream"]


class Owner(Protocol):
    """What a stream sees of its session: whether it still collects, and its halt."""

    collecting: bool
    stop_reason: str

    def halt(self, reason: str) -> None: ...


class Stream:
    """The stream of process ``pid`` (None: the session's own process) into ``job``, for the
    session ``owner``; its flusher writes every ``interval`` seconds."""

    def __init__(self, owner: Owner, job: jobdir.JobDir, files: JobWriter, config: ProfileConfig,
                 backend: str, pid: int | None, interval: float, ledger: Ledger) -> None:
        self.owner, self.ledger = owner, ledger
        self.job, self.files, self.config, self.backend, self.pid = job, files, config, backend, pid
        self._device_dirs: dict[int, DataDir] = {}
        #: whether the native core records this stream's markers
        self.native = False
        self.host_dir = DataDir(job.host_data, rawfile.stream_name("host", pid))
        self.flusher = Flusher(self.host_dir, self.device_dir, interval, self._account, on_cycle=self._poll_native)

    def device_dir(self, dev: int) -> DataDir:
        """The writer of ``device_{dev}/data``, created (with the device's config files in the
        session's own process) on first use."""
        d = self._device_dirs.get(dev)
        if d is None:
            own = self.pid is None
            data = self.files.device_data(dev, config_files=own)
            d = self._device_dirs[dev] = DataDir(data, rawfile.stream_name(str(dev), self.pid))
            if own:
                self.job.devices[dev] = data.parent
        return d

    def _domain_filter(self) -> tuple[int, list[str]]:
        """(mode, names) of the marker domain filter: 1 include, 2 exclude, 0 none."""
        include, exclude = self.config.mstx_domain_include, self.config.mstx_domain_exclude
        return (1, list(include)) if include else (2, list(exclude)) if exclude else (0, [])

    def start(self) -> None:
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
                core.ring.start(fd, rawfile.stream_name("host", self.pid),
                                int(self.flusher.interval * 1e9), disk_space.FREE_SPACE_FLOOR + disk_space.SPACE_MARGIN,
                                0 if limit is None else limit * 1024 * 1024)
            finally:
                os.close(fd)
            self.native = True
            self.flusher.mstx_source = "MstxPy"
        self.flusher.start()

    def set_markers(self, on: bool) -> None:
        """Markers on or off in this process (a forked child's follow the session's switch)."""
        pymarkers.set_enabled(on and self.backend != "native")
        if self.native and core.ring is not None:
            core.ring.set_enabled(on)

    def end(self) -> dict[str, Any] | None:
        """Stop producing and write out what the buffers hold: the markers, the flusher, the
        native rings; returns the rings' final counts (None on the Python backend)."""
        pymarkers.end()
        buffers.HELPER = None
        self.flusher.stop()
        native = core.ring.stop() if self.native and core.ring is not None else None
        if native is not None:
            self._native_halt(native)
        return native

    def _account(self, nbytes: int) -> None:
        reason = self.ledger.account(nbytes)
        if reason:
            self.owner.halt(reason)

    def _poll_native(self) -> None:
        """Each flusher cycle: surface a halt of the native core (disk floor, storage limit)."""
        if not self.native or core.ring is None or not self.owner.collecting:
            return
        self._native_halt(core.ring.stats())

    def _native_halt(self, st: dict[str, Any]) -> None:
        reason = self.ledger.native_halt(st, self.owner.stop_reason)
        if reason:
            self.owner.halt(reason)

    def close(self) -> None:
        """Close the data directories' files (each slice gets its ``.done``)."""
        for d in [self.host_dir, *self._device_dirs.values()]:
            d.close()

    def abandon(self) -> None:
        """In a forked child: close this process's copies of the parent's files, writing
        nothing (the parent writes what they hold)."""
        for d in [self.host_dir, *self._device_dirs.values()]:
            d.abandon()
