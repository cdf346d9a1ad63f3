"""The tolerant reader of raw files used by import: a data directory's slices per stream, record
chunks and string tables, what it could not use counted in a :class:`ReadReport`.

A torn tail (a partial record or string entry) is dropped and counted; a file with a bad header,
or refused by the guarded open (link, FIFO, oversized), is skipped and counted.  File names are
those of :mod:`~openmsprof.recorder.rawfile` (``{Source}.{records|table}.{dev}[.pid{pid}].slice_{n}``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np

from openmsprof.config.errors import RawDataError
from openmsprof.fileio import fs
from openmsprof.recorder.packed_read import BLOCK_HEADER, unpack_blocks
from openmsprof.recorder.rawfile import GENERIC_DTYPE
from openmsprof.recorder.records import (
    FORMAT_VERSION,
    HEADER,
    PACKED_VERSION,
    RECORD_SIZE,
    RECORDS_MAGIC,
    STRING_ENTRY,
    STRINGS_MAGIC,
)

__all__ = ["ReadReport", "child_pids", "iter_record_chunks", "list_slices", "read_all_records", "read_strings"]

_SLICE_RE = re.compile(r"^(?P<source>[A-Za-z0-9]+)\.(?P<kind>records|table)\.(?P<dev>[A-Za-z0-9]+)"
                       r"(?:\.pid(?P<pid>[1-9]\d{0,9}))?\.slice_(?P<n>\d+)$")


@dataclass
class ReadReport:
    """What a reader could not use.  ``warnings`` are one-line texts for the user."""

    files: int = 0
    records: int = 0
    dropped_bytes: int = 0
    #: records of damaged packed blocks, skipped (their bytes were read)
    dropped_records: int = 0
    skipped_files: int = 0
    warnings: list[str] = field(default_factory=list)

    def merge(self, other: ReadReport) -> None:
        self.files += other.files
        self.records += other.records
        self.dropped_bytes += other.dropped_bytes
        self.dropped_records += other.dropped_records
        self.skipped_files += other.skipped_files
        self.warnings.extend(other.warnings)


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


def _check_header(path: Path, head: bytes, magic: bytes, report: ReadReport) -> int:
    """The file's format version (1, or 2 for packed records), or 0 (counted) when unusable."""
    if len(head) < HEADER.size:
        report.dropped_bytes += len(head)
        report.warnings.append(f"{path.name}: file shorter than its header ({len(head)} bytes); skipped")
        report.skipped_files += 1
        return 0
    got_magic, version, rsize, _ = HEADER.unpack(head)
    if got_magic != magic:
        report.skipped_files += 1
        report.warnings.append(f"{path.name}: not an openmsprof raw file (bad magic); skipped")
        return 0
    packed = version == PACKED_VERSION and magic == RECORDS_MAGIC
    if (version != FORMAT_VERSION and not packed) or rsize != RECORD_SIZE:
        report.skipped_files += 1
        report.warnings.append(
            f"{path.name}: unknown record version {version} (size {rsize}); skipped"
        )
        return 0
    return version


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
        version = _check_header(path, f.read(HEADER.size), RECORDS_MAGIC, report)
        if version == PACKED_VERSION:
            yield from _packed_chunks(path, f, report, chunk_records)
            return
        if not version:
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


def _packed_chunks(path: Path, f: BinaryIO, report: ReadReport, chunk_records: int) -> Iterator[np.ndarray]:
    """The records of a packed slice (version 2), whole blocks at a time, about ``chunk_records``
    a read (a record is at least 8 bytes packed).  Damaged blocks are skipped and counted with
    their records; a torn last block is dropped and counted; a header no encoder writes ends the
    file's reading (the rest counted as dropped)."""
    name = fs.escape(path.name)
    left = fs.MAX_SLICE_BYTES  # a file that grows while read is still bounded
    carry = b""
    while left > 0:
        data = f.read(min(max(chunk_records, 1) * 8, left))
        left -= len(data)
        if not data:
            break
        buf = carry + data if carry else data
        got = unpack_blocks(buf)
        carry = buf[got.consumed:]
        if got.bad_blocks:
            report.warnings.append(f"{name}: {got.bad_blocks} damaged block(s) of {got.bad_records} "
                                   f"record(s) skipped")
            report.dropped_records += got.bad_records
        if len(got.records):
            report.records += len(got.records)
            yield got.records
        if got.unframed:  # (the rest is counted from the file's size, not read to be counted)
            at = f.tell() - len(carry)
            rest = len(carry) + max(0, min(left, os.fstat(f.fileno()).st_size - f.tell()))
            report.dropped_bytes += rest
            report.warnings.append(f"{name}: bad block header at byte {at}; the last {rest} bytes dropped")
            return
    if carry:
        n = BLOCK_HEADER.unpack_from(carry)[0] if len(carry) >= BLOCK_HEADER.size else 0
        report.dropped_bytes += len(carry)
        report.warnings.append(f"{name}: torn tail of {len(carry)} bytes dropped"
                               + (f" (a block of {n} record(s))" if n else ""))


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
