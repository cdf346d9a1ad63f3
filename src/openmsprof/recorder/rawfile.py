"""Append-only raw files: the slice and string-table writers used by the flusher (rawread.py reads them back).

Layout of a data directory (``host/data`` or ``device_{id}/data``)::

    {Source}.records.{dev}.slice_{n}   header + fixed 32-byte records (records.py), or, from the
                                       native core, header version 2 + packed blocks (packed_read.py)
    Strings.table.{dev}.slice_{n}      header + (u32 id, u32 len, utf-8) entries
    X.done                             written when slice X is closed cleanly

A process forked during the session writes its own stream beside its parent's, with its own
string ids: the same names with ``.pid{pid}`` after the device (``Mstx.records.host.pid4242.slice_0``).

The flusher writes string entries before any record that refers to them, so a reader that
stops at a torn tail never sees a dangling string id.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np

from openmsprof.fileio import fs
from openmsprof.recorder.records import (
    FORMAT_VERSION,
    HEADER,
    RECORD_SIZE,
    STRING_ENTRY,
    STRINGS_MAGIC,
)

#: numpy views of the 32-byte record (see records.py).
GENERIC_DTYPE = np.dtype(
    [("kind", "u1"), ("flags", "u1"), ("aux", "<u2"), ("tid", "<u4"),
     ("t0", "<i8"), ("t1", "<i8"), ("a", "<u4"), ("b", "<u4")]
)
COUNTER_DTYPE = np.dtype(
    [("kind", "u1"), ("flags", "u1"), ("aux", "<u2"), ("tid", "<u4"),
     ("ts", "<i8"), ("value", "<f8"), ("a", "<u4"), ("b", "<u4")]
)
TASKINFO_DTYPE = np.dtype(
    [("kind", "u1"), ("flags", "u1"), ("aux", "<u2"), ("task_id", "<u4"),
     ("op_type", "<u4"), ("in_shapes", "<u4"), ("in_dtypes", "<u4"),
     ("out_shapes", "<u4"), ("out_dtypes", "<u4"), ("connection_id", "<u4")]
)
assert GENERIC_DTYPE.itemsize == COUNTER_DTYPE.itemsize == TASKINFO_DTYPE.itemsize == RECORD_SIZE

SLICE_BYTES = 64 * 1024 * 1024
#: Strings a data directory's interning dict holds before it starts afresh (memory bound).
ID_CACHE = 1 << 17


def slice_name(source: str, kind: str, dev: str, n: int) -> str:
    return f"{source}.{kind}.{dev}.slice_{n}"


def stream_name(dev: str, pid: int | None) -> str:
    """The ``dev`` part of a stream's file names: ``dev`` for the session's own process,
    ``dev.pid{pid}`` for a process forked during the session."""
    return dev if pid is None else f"{dev}.pid{pid}"


class SliceWriter:
    """One append-only series of slices; rotates at ``slice_bytes``.  Not thread-safe:
    only the flusher thread (or the sampler process) writes."""

    def __init__(self, data_dir: Path, source: str, kind: str, dev: str, magic: bytes,
                 slice_bytes: int = SLICE_BYTES, dir_fd: int | None = None) -> None:
        self.data_dir, self.source, self.kind, self.dev = data_dir, source, kind, dev
        self.dir_fd = dir_fd
        self.magic, self.slice_bytes = magic, slice_bytes
        self.index = -1
        self.fd = -1
        self.size = 0
        self.total = 0

    def _open_next(self) -> None:
        self.close()
        self.index += 1
        self.path = self.data_dir / slice_name(self.source, self.kind, self.dev, self.index)
        self.fd = fs.open_new(self.path, dir_fd=self.dir_fd)
        header = HEADER.pack(self.magic, FORMAT_VERSION, RECORD_SIZE, 0)
        fs.write_all(self.fd, header)
        self.size = len(header)
        self.total += len(header)

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if not data:
            return 0
        if self.fd < 0 or (self.size + len(data) > self.slice_bytes and self.size > HEADER.size):
            self._open_next()
        fs.write_all(self.fd, data)
        self.size += len(data)
        self.total += len(data)
        return len(data)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            done = self.path.with_name(self.path.name + ".done")
            try:
                os.close(fs.open_new(done, dir_fd=self.dir_fd))
            except Exception:
                pass


class _Ids(dict):  # type: ignore[type-arg]
    """object -> string id; a miss assigns the next id and queues the entry for writing.
    ``ids[x]`` is a C-level lookup on a hit, so ``map(ids.__getitem__, column)`` is fast."""

    def __init__(self, table: StringTable) -> None:
        super().__init__()
        self[None] = 0
        self.table = table

    def __missing__(self, key: object) -> int:
        # producers intern marker strings on their own threads: one lock with flush()
        with self.table.lock:
            return self._add(key)

    def _add(self, key: object) -> int:
        sid = dict.get(self, key)
        if sid is not None:  # another thread interned it meanwhile
            return sid
        if len(self) > ID_CACHE:  # bounded: old ids stay valid, a string seen again is re-added
            dict.clear(self)
            dict.__setitem__(self, None, 0)
        text = key if isinstance(key, str) else str(key)
        sid = self.get(text) if text is not key else None
        if sid is None:
            sid = self.table.next_id
            self.table.next_id += 1
            raw = text.encode("utf-8", "replace")
            self.table.pending += STRING_ENTRY.pack(sid, len(raw))
            self.table.pending += raw
            if text is not key:
                dict.__setitem__(self, text, sid)
        try:
            dict.__setitem__(self, key, sid)
        except TypeError:  # unhashable keys cannot reach here; defensive
            pass
        return sid


class StringTable:
    """Interns strings for one data directory.  ``intern`` returns a stable id > 0 (0 = None)."""

    def __init__(self, data_dir: Path, dev: str, dir_fd: int | None = None) -> None:
        self.next_id = 1
        self.pending = bytearray()
        self.lock = threading.Lock()
        self.ids = _Ids(self)
        self.intern = self.ids.__getitem__
        self.writer = SliceWriter(data_dir, "Strings", "table", dev, STRINGS_MAGIC, dir_fd=dir_fd)

    def flush(self) -> int:
        # bounded: a producer interrupted by a raising signal handler inside __missing__ may
        # have left the lock held; the swap below is one statement either way
        got = self.lock.acquire(timeout=2.0)
        try:
            data, self.pending = self.pending, bytearray()
        finally:
            if got:
                self.lock.release()
        return self.writer.write(data)

    def close(self) -> None:
        self.flush()
        self.writer.close()
