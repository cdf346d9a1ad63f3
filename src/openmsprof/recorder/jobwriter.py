"""A session's files in its job directory: config files, collection.log, host files, end records and machine peaks.

The directories are opened once at the start; every later file is written relative to those
fds, and only while the paths still name them (a job dir or ``host/`` swapped for a symbolic
link is refused, in one line).  The layout and the info files' contents are
:mod:`~openmsprof.recorder.jobdir`'s (docs/formats.md §2).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from openmsprof.config.errors import PathError
from openmsprof.config.model import ProfileConfig
from openmsprof.fileio import fs
from openmsprof.machine import peaks, peaks_child
from openmsprof.recorder import jobdir
from openmsprof.recorder.clock import ClockPair, read_pair

__all__ = ["EXTRA_INFO", "JobWriter"]

#: ``JOB/host/`` file holding :attr:`Session.extra_info` (written at the end when not empty).
EXTRA_INFO = "extra_info.json"


class JobWriter:
    """The files one session writes into its job ``job`` (host config files at once)."""

    def __init__(self, job: jobdir.JobDir, config: ProfileConfig, rank_id: int, start_pair: ClockPair) -> None:
        self.job, self.config, self.rank_id, self.start_pair = job, config, rank_id, start_pair
        # the job's end records are written relative to these fds, and only if the paths
        # still name these directories (a job dir swapped for a symlink is refused)
        self.root_fd = fs.open_dir_fd(job.root)
        self.host_fd = fs.open_dir_fd(job.host)
        self.log_path = job.host / "collection.log"
        self.log_fd = fs.open_new(self.log_path)
        self._write_config(job.host, "", config.devices, "host_start.log")

    def _write_config(self, directory: Path, suffix: str, devices: list[int], log_name: str) -> None:
        cfg = self.config.to_dict()
        info = jobdir.info_json(cfg, devices, self.rank_id)
        sample = {"llc_profiling": "read", "ai_core_profiling_mode": "task-based", "openmsprof": cfg}
        jobdir.write_config_files(directory, suffix, info, sample, self.start_pair, log_name)

    def device_data(self, dev: int, config_files: bool = True) -> Path:
        """Create ``device_{dev}/data``, with the device's config files unless ``config_files``
        is False (a forked child's stream); returns the data directory."""
        path = fs.make_dir(self.job.device(dev))
        fs.make_dir(path / "data")
        if config_files:
            self._write_config(path, f".{dev}", [dev], f"dev_start.log.{dev}")
        return path / "data"

    def write_host_file(self, name: str, data: bytes) -> None:
        """Write ``host/{name}`` through the host dir fd (refused when ``host/`` was replaced)."""
        if not fs.same_dir(self.job.host, self.host_fd):
            raise PathError(f"'{fs.escape(self.job.host)}' was replaced after the start (symbolic link?)")
        fs.write_file_at(self.host_fd, name, data)

    def log(self, message: str) -> None:
        """Append a stamped line to collection.log (a failed write is let go; after ``close_log``
        the line goes to the logger alone, never to whatever file has reused the fd's number)."""
        if self.log_fd < 0:
            return
        try:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            os.write(self.log_fd, f"[{stamp}] {message}\n".encode())
        except OSError:
            pass

    def write_end(self, end_pair: ClockPair | None, overhead: dict[str, Any], extra: dict[str, str],
                  extra_info: dict[str, Any]) -> None:
        """end_info (+ ``extra``), the overhead file, :data:`EXTRA_INFO` and the devices'
        end_info, through the directory fds; refused when a path no longer names its directory."""
        if not (fs.same_dir(self.job.root, self.root_fd) and fs.same_dir(self.job.host, self.host_fd)):
            raise PathError(f"job directory '{fs.escape(self.job.root)}' was replaced after the "
                            "start (symbolic link?); end records refused")
        info = jobdir.end_info(end_pair or read_pair())
        end = jobdir.dump(info)
        fs.write_file_at(self.host_fd, "end_info", jobdir.dump({**info, **extra}))
        fs.write_file_at(self.host_fd, "openmsprof_overhead.json", jobdir.dump(overhead))
        if extra_info:  # e.g. the acl models' files (seed 002 names exports after them)
            fs.write_file_at(self.host_fd, EXTRA_INFO, jobdir.dump(extra_info))
        for dev, path in self.job.devices.items():
            fd = os.open(path.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=self.root_fd)
            try:
                fs.write_file_at(fd, f"end_info.{dev}", end)
            finally:
                os.close(fd)

    def write_peaks(self, note: Callable[..., None]) -> None:
        """``host/peaks.json``: this machine's peaks, cached once per machine.  When there are
        none yet, a detached nice-19 process measures them after the session (never in the
        application's path) and writes the cache and this job's file.
        ``OPENMSPROF_PEAKS=off`` skips it, a file path there is copied instead."""
        choice = os.environ.get("OPENMSPROF_PEAKS", "")
        if choice.lower() in ("off", "0", "no"):
            return
        try:
            if not fs.same_dir(self.job.host, self.host_fd):
                raise PathError(f"'{fs.escape(self.job.host)}' was replaced after the start (symbolic link?)")
            doc = peaks.load_peaks(choice) if choice else peaks.cached(measure_missing=False)
            if doc:
                fs.write_file_at(self.host_fd, peaks.PEAKS_FILE, orjson.dumps(doc))
                if choice or peaks.covers(doc):
                    return  # else: the child adds the runtime's ceilings to both copies
            child = peaks_child.spawn(self.job.host, self.host_fd)
            note(f"machine peaks: measuring in background process {child.pid} (nice 19); "
                 f"it writes host/{peaks.PEAKS_FILE} and the machine's cache")
        except Exception as exc:
            note(f"machine peaks not stored: {exc}", warn=True)

    def write_counts(self, pid: int, overhead: dict[str, Any]) -> None:
        """A forked child's counts, ``host/openmsprof_overhead.pid{pid}.json``."""
        fs.write_file_at(self.host_fd, f"openmsprof_overhead.pid{pid}.json", jobdir.dump(overhead))

    def close_dirs(self) -> None:
        """Close the dir fds (marked closed: a later write through them is refused, never sent to
        a file that reused the number)."""
        host, root, self.host_fd, self.root_fd = self.host_fd, self.root_fd, -1, -1
        os.close(host)
        os.close(root)

    def close_log(self) -> None:
        fd, self.log_fd = self.log_fd, -1
        os.close(fd)

    def close_quietly(self) -> None:
        """A forked child's copies of the fds (already closed ones are let go)."""
        fds, self.host_fd, self.root_fd, self.log_fd = (self.host_fd, self.root_fd, self.log_fd), -1, -1, -1
        for fd in fds:
            if fd < 0:
                continue
            try:
                os.close(fd)
            except OSError:
                pass
