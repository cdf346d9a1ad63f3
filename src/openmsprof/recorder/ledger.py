"""The books of one process's stream: bytes written against the storage limit and the disk floor, and the counts of ``host/openmsprof_overhead.json``.

Every write is counted: over ``storage_limit_mb``, or with less than the disk floor free (checked
every second and every 4 MB, so a burst cannot cross it unseen), :meth:`Ledger.account` returns
the reason to halt collection; :meth:`Ledger.native_halt` words a halt of the native core.
:meth:`Ledger.overhead` is the recorder's own cost and losses: records and bytes written by
both backends, drops by thread and kind and by reason, the flusher's CPU.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from openmsprof.config.model import ProfileConfig
from openmsprof.fileio import disk_space
from openmsprof.recorder import buffers, core
from openmsprof.recorder.flusher import Flusher

__all__ = ["Ledger"]


class Ledger:
    """Bytes the stream wrote under ``root`` (a job directory) and the checks they trigger."""

    def __init__(self, config: ProfileConfig, root: Path) -> None:
        self.config, self.root = config, root
        self.bytes_written = 0
        self._last_space_check = 0.0
        self._space_checked_at = 0

    def account(self, nbytes: int) -> str:
        """Count ``nbytes`` written; the reason to halt collection, or ""."""
        self.bytes_written += nbytes
        limit = self.config.storage_limit_mb
        if limit is not None and self.bytes_written > limit * 1024 * 1024:
            return f"storage_limit {limit}MB reached; collection stopped, the application goes on"
        now = time.monotonic()
        # every second, and every 4 MB: the floor is checked before a burst can cross it
        if now - self._last_space_check >= 1.0 or self.bytes_written - self._space_checked_at >= disk_space.SPACE_CHECK_BYTES:
            self._last_space_check = now
            self._space_checked_at = self.bytes_written
            if disk_space.free_bytes(self.root) < disk_space.FREE_SPACE_FLOOR + disk_space.SPACE_MARGIN:
                return "less than 20 MB free on disk; collection stopped, the application goes on"
        return ""

    def native_halt(self, st: dict[str, Any], stop_reason: str) -> str:
        """The reason of a halt of the native core in its stats ``st`` (disk floor, storage
        limit, a failed write), or "" (none, or collection stopped already for ``stop_reason``)."""
        code = st["halt"] if stop_reason == "" else 0
        if code == 1:
            return "less than 20 MB free on disk; collection stopped, the application goes on"
        if code == 2:
            return f"storage_limit {self.config.storage_limit_mb}MB reached; collection stopped"
        if code == 3:
            return f"writing markers failed: {os.strerror(st['halt_errno'])}; collection stopped"
        return ""

    def overhead(self, flusher: Flusher, native: dict[str, Any] | None, backend: str, pid: int) -> dict[str, Any]:
        """The recorder's own cost and losses (``host/openmsprof_overhead.json``); ``native``:
        the native rings' final counts (None on the Python backend)."""
        rows = buffers.drop_rows() + (list(native["drops"]) if native else [])
        reasons = dict(native.get("drop_reasons") or {}) if native else {}
        py_dropped = sum(n for _t, _k, n in buffers.drop_rows())
        if py_dropped:  # the pure-Python lists: full (flusher behind) or over the memory budget
            reasons["python_buffers_full"] = py_dropped
        return {
            "records_written": flusher.records + (native["records_written"] if native else 0),
            "bytes_written": self.bytes_written + (native["bytes_written"] if native else 0),
            "records_dropped": sum(n for _t, _k, n in rows),
            "drops_by_thread_kind": core.drops_by_thread_kind(rows),
            "drop_reasons": reasons,
            "flusher_cpu_ns": flusher.cpu_ns + (native["flusher_cpu_ns"] if native else 0),
            "backend": backend,
            "pid": pid,
        }
