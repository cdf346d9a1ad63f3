"""Append-only raw files: the writer used by the flusher and the tolerant reader used by import.

Layout of a data directory (``host/data`` or ``device_{id}/data``)::

    {Source}.records.{dev}.slice_{n}   header + fixed 32-byte records (records.py)
    Strings.table.{dev}.slice_{n}      header + (u32 id, u32 len, utf-8) entries
    X.done                             written when slice X is closed cleanly

A process forked during the session writes its own stream beside its parent's, with its own
string ids: the same names with ``.pid{pid}`` after the device (``Mstx.records.host.pid4242.slice_0``).

The flusher writes string entries before any record that refers to them, so a reader that
stops at a torn tail never sees a dangling string id.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from openmsprof.config.errors import RawDataError
from openmsprof.fileio import fs
from openmsprof.recorder.records import (
    FORMAT_VERSION,
    HEADER,
    RECORD_SIZE,
    RECORDS_MAGIC,
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
_SLICE_RE = re.compile(r"^(?P<source>[A-Za-z0-9]+)\.(?P<kind>records|table)\.(?P<dev>[A-Za-z0-9]+)"
                       r"(?:\.pid(?P<pid>[1-9]\d{0,9}))?\.slice_(?P<n>\d+)$")


def slice_name(source: str, kind: str, dev: str, n: int) -> str:
    return f"{source}.{kind}.{dev}.slice_{n}"


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


# ----------------------------------------------------------------------------- reading


@dataclass
class ReadReport:
    """What a reader could not use.  ``warnings`` are one-line texts for the user."""

    files: int = 0
    records: int = 0
    dropped_bytes: int = 0
    skipped_files: int = 0
    warnings: list[str] = field(default_factory=list)

    def merge(self, other: ReadReport) -> None:
        self.files += other.files
        self.records += other.records
        self.dropped_bytes += other.dropped_bytes
        self.skipped_files += other.skipped_files
        self.warnings.extend(other.warnings)


def stream_name(dev: str, pid: int | None) -> str:
    """The ``dev`` part of a stream's file names: ``dev`` for the session's own process,
    ``dev.pid{pid}`` for a process forked during the session."""
    return dev if pid is None else f"{dev}.pid{pid}"


def child_pids(data_dir: Path) -> list[int]:
    """The pids of the forked processes with a stream in ``data_dir``, ascending."""
    pids: set[int] = set()
    if data_dir.is_dir():
        for p in data_dir.iterdir():
            m = _SLICE_RE.match(p.name)
            if m and m["pid"] is not None:
                pids.add(int(m["pid"]))
    return sorted(pids)


def list_slices(data_dir: Path, kind: str = "records", pid: int | None = None) -> list[tuple[str, str, int, Path]]:
    """(source, dev, n, path) for every slice of ``kind`` in ``data_dir``, in write order: the
    session process's own stream, or with ``pid`` the stream of that forked child."""
    out: list[tuple[str, str, int, Path]] = []
    if not data_dir.is_dir():
        return out
    want = None if pid is None else str(pid)
    for p in data_dir.iterdir():
        m = _SLICE_RE.match(p.name)
        if m and m["kind"] == kind and m["pid"] == want and not p.is_symlink():
            out.append((m["source"], m["dev"], int(m["n"]), p))
    out.sort(key=lambda x: (x[0], x[1], x[2]))
    return out


def _check_header(path: Path, head: bytes, magic: bytes, report: ReadReport) -> bool:
    if len(head) < HEADER.size:
        report.dropped_bytes += len(head)
        report.warnings.append(f"{path.name}: file shorter than its header ({len(head)} bytes); skipped")
        report.skipped_files += 1
        return False
    got_magic, version, rsize, _ = HEADER.unpack(head)
    if got_magic != magic:
        report.skipped_files += 1
        report.warnings.append(f"{path.name}: not an openmsprof raw file (bad magic); skipped")
        return False
    if version != FORMAT_VERSION or rsize != RECORD_SIZE:
        report.skipped_files += 1
        report.warnings.append(
            f"{path.name}: unknown record version {version} (size {rsize}); skipped"
        )
        return False
    return True


def iter_record_chunks(path: Path, report: ReadReport, chunk_records: int = 1 << 18) -> Iterator[np.ndarray]:
    """Yield GENERIC_DTYPE arrays of at most ``chunk_records`` from one slice; a torn tail
    (a partial record) is counted in ``report.dropped_bytes``."""
    report.files += 1
    try:
        fd, _size = fs.open_regular(path, "raw file", fs.MAX_SLICE_BYTES, RawDataError)
    except RawDataError as exc:
        report.skipped_files += 1
        report.warnings.append(f"{exc}; skipped")
        return
    with os.fdopen(fd, "rb") as f:
        if not _check_header(path, f.read(HEADER.size), RECORDS_MAGIC, report):
            return
        left = fs.MAX_SLICE_BYTES  # a file that grows while read is still bounded
        while left > 0:
            buf = f.read(min(chunk_records * RECORD_SIZE, left))
            if not buf:
                break
            left -= len(buf)
            whole = len(buf) - len(buf) % RECORD_SIZE
            if whole != len(buf):
                rest = f.read(min(RECORD_SIZE, left))
                if rest:  # the file grew while reading: keep going in order
                    buf += rest
                    left -= len(rest)
                    whole = len(buf) - len(buf) % RECORD_SIZE
                tail = len(buf) - whole
                if tail:
                    report.dropped_bytes += tail
                    report.warnings.append(f"{fs.escape(path.name)}: torn tail of {tail} bytes dropped")
            if whole:
                arr = np.frombuffer(buf, dtype=GENERIC_DTYPE, count=whole // RECORD_SIZE)
                report.records += len(arr)
                yield arr
            if whole != len(buf) or len(buf) < chunk_records * RECORD_SIZE:
                break


def read_strings(data_dir: Path, report: ReadReport | None = None, pid: int | None = None) -> dict[int, str]:
    """Every interned string of one stream of ``data_dir`` (the session process's, or forked
    child ``pid``'s), tolerant of a torn tail."""
    report = report if report is not None else ReadReport()
    table: dict[int, str] = {}
    for _src, _dev, _n, path in list_slices(data_dir, "table", pid):
        try:
            data = fs.read_regular(path, "string table", fs.MAX_TABLE_BYTES, RawDataError)
        except RawDataError as exc:
            report.skipped_files += 1
            report.warnings.append(f"{exc}; skipped")
            continue
        if not _check_header(path, data[: HEADER.size], STRINGS_MAGIC, report):
            continue
        pos, end = HEADER.size, len(data)
        while pos + STRING_ENTRY.size <= end:
            sid, n = STRING_ENTRY.unpack_from(data, pos)
            if pos + STRING_ENTRY.size + n > end:
                break
            start = pos + STRING_ENTRY.size
            table[sid] = data[start:start + n].decode("utf-8", "replace")
            pos = start + n
        if pos != end:
            report.dropped_bytes += end - pos
            report.warnings.append(f"{path.name}: torn string table tail of {end - pos} bytes dropped")
    return table


def read_all_records(data_dir: Path, report: ReadReport | None = None, pid: int | None = None) -> np.ndarray:
    """All records of one stream of a data directory in one array (small jobs, tests).
    Streaming callers use :func:`iter_record_chunks` per slice instead."""
    report = report if report is not None else ReadReport()
    parts = [c for _s, _d, _n, p in list_slices(data_dir, pid=pid) for c in iter_record_chunks(p, report)]
    if not parts:
        return np.zeros(0, dtype=GENERIC_DTYPE)
    return np.concatenate(parts)


