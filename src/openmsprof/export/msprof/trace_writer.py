"""Streaming Chrome-trace writer: chunks of pre-encoded events, size-based slicing, atomic files.

Each slice is a complete JSON document (object container in Perfetto-safe mode, bare array in
Ascend mode) that repeats the metadata events, so every slice opens on its own.  Files are
written to temp names and renamed only when the whole export succeeded.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import orjson

from openmsprof.config.errors import PathError, StorageError
from openmsprof.export.msprof.naming import remove_stale, timeline_file
from openmsprof.export.outfile import OutFile

_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _copy_range(src: int, part: OutFile, size: int) -> bool:
    """Append ``size`` bytes of ``src`` to ``part`` with ``copy_file_range`` (no user-space
    copy).  False when the system cannot do it and nothing was copied."""
    left = size
    while left > 0:
        try:
            n = os.copy_file_range(src, part.fd, left)  # type: ignore[arg-type]
        except (AttributeError, OSError) as exc:
            err = getattr(exc, "errno", None)
            if err in _FULL:
                part.abort()
                raise StorageError(f"disk full while writing {str(part.path)!r}: "
                                   f"{os.strerror(err or 0)}; partial file removed") from None
            if left == size:
                return False
            part.abort()
            raise PathError(f"cannot write {str(part.path)!r}: {exc}") from None
        if n == 0:
            if left == size:
                return False
            part.abort()
            raise PathError(f"cannot write {str(part.path)!r}: source file shrank")
        left -= n
        part.size += n
    return True


class TraceWriter:
    """Write ``timeline/msprof_{dev}[_slice_{k}].json`` from event text chunks."""

    def __init__(self, out_dir: Path, dev: int | str, *, safe: bool, base_ns: int,
                 max_bytes: int | None = None) -> None:
        self.out_dir = out_dir
        self.dev = dev
        self.safe = safe
        self.max_bytes = max_bytes
        self.meta: list[bytes] = []
        self.events = 0
        self._suffix = (b'],"otherData":{"openmsprof_base_ns":%d}}\n' % base_ns) if safe \
            else b"]\n"
        self._parts: list[OutFile] = []
        self._cur: OutFile | None = None
        self._empty = True
        self._next_tid = 1 << 30

    def new_tid(self) -> int:
        """A fresh thread id for an overflow lane (unique within this file)."""
        self._next_tid += 1
        return self._next_tid

    # -- slices ---------------------------------------------------------------------------
    def _open(self) -> OutFile:
        k = len(self._parts)
        part = OutFile(self.out_dir / timeline_file(self.dev, k or None))
        self._parts.append(part)
        part.write(b'{"traceEvents":[' if self.safe else b"[")
        self._empty = True
        if self.meta:
            part.write(b",".join(self.meta))
            self._empty = False
        self._cur = part
        return part

    def _close_current(self) -> None:
        if self._cur is not None:
            self._cur.write(self._suffix)
            self._cur = None

    def _target(self) -> OutFile:
        cur = self._cur
        if cur is None:
            return self._open()
        if self.max_bytes is not None and cur.size >= self.max_bytes:
            self._close_current()
            return self._open()
        return cur

    # -- writing --------------------------------------------------------------------------
    def add_meta(self, event: dict[str, object]) -> None:
        """A metadata (``ph:"M"``) event: written now and repeated at the top of later slices."""
        self.add_raw_meta(orjson.dumps(event))

    def add_raw_meta(self, data: bytes) -> None:
        """:meth:`add_meta` for an already encoded event."""
        self.meta.append(data)
        if self._cur is None:
            self._open()
            return
        self._cur.write(data if self._empty else b"," + data)
        self._empty = False

    def write_events(self, chunk: list[str], count: int | None = None) -> None:
        """Append encoded events (JSON object texts, no separators)."""
        if not chunk:
            return
        part = self._target()
        n = len(chunk) if count is None else count
        if not self._empty:
            chunk.insert(0, "")  # the separator, without copying the joined text again
        part.write(",".join(chunk).encode())
        self._empty = False
        self.events += n

    def append_body(self, body: Path, count: int) -> None:
        """Append a file of encoded, comma-separated events (another process's output) to the
        current slice.  Not for size-sliced files (the body is copied whole)."""
        size = body.stat().st_size
        if not size:
            return
        part = self._target()
        if not self._empty:
            part.write(b",")
        with body.open("rb") as src:
            if not _copy_range(src.fileno(), part, size):  # no in-kernel copy here: by hand
                while data := src.read(1 << 24):
                    part.write(data)
        self._empty = False
        self.events += count

    def finish(self) -> list[Path]:
        """Close the last slice and rename all slices into place; returns the written paths."""
        try:
            if self._cur is None and not self._parts:
                self._open()
            self._close_current()
            parts = self._parts
            if len(parts) == 1:
                paths = [parts[0].commit(self.out_dir / timeline_file(self.dev))]
            else:
                paths = [p.commit(self.out_dir / timeline_file(self.dev, k))
                         for k, p in enumerate(parts)]
        except BaseException:
            self.abort()
            raise
        remove_stale(paths, self.out_dir / timeline_file(self.dev))
        return paths

    def abort(self) -> None:
        """Drop every partial slice."""
        for p in self._parts:
            p.abort()
        self._cur = None
