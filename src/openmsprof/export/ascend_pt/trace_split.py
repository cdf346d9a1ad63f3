"""Write ``trace_view.json`` using both cores: a forked child formats the second half of the
events (kernels, flows, overlap tracks) into a part file while this process formats the first half
(metadata, operators, Python functions, fwdbwd flows) and the CSVs; the part is then appended.

The child only formats and writes (no locks, no logging) and leaves with ``os._exit``.  If it
fails, or forking is not possible, the second half is written here: the bytes are the same.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterable
from pathlib import Path

from openmsprof.config.errors import PathError
from openmsprof.export.ascend_pt import text, trace_view
from openmsprof.export.ascend_pt.framework import Framework
from openmsprof.export.ascend_pt.overlap import Overlap
from openmsprof.export.ascend_pt.trace_tracks import Layout
from openmsprof.export.fork_worker import ForkWorker, fork_allowed
from openmsprof.fileio import fs

#: Below this many operators a fork costs more than it saves.
MIN_OPS = 50_000


#: Groups are gathered up to this many bytes per write (a small window: one write in all).
WRITE_BYTES = 1 << 20
#: Buffers per writev (Linux's IOV_MAX is 1024).
IOV_MAX = 1024


def _write_parts(fd: int, parts: list[bytes]) -> None:
    """Write ``parts`` in order with one writev per ``IOV_MAX`` of them (no joined copy); a short
    or failed writev goes on with ``fs.write_all`` from where it stopped (a full disk is its
    ``StorageError``)."""
    for i in range(0, len(parts), IOV_MAX):
        batch = parts[i:i + IOV_MAX]
        try:
            done = os.writev(fd, batch)
        except OSError:  # nothing was written: write_all meets the same error and names it
            done = 0
        if done < sum(map(len, batch)):
            fs.write_all(fd, memoryview(b"".join(batch))[done:])


def _groups(fd: int, groups: Iterable[list[bytes]], first: bool, lead: bytes = b"", end: bytes = b"") -> bool:
    """Write each non-empty group comma-joined (a comma before each but the very first); groups
    are gathered up to ``WRITE_BYTES`` and written together by ``_write_parts`` (a group of one
    text is written as it is: no copy).  ``lead`` / ``end``: bytes written before / after the
    groups, in the same writes (a small window: one writev in all).  Returns whether no group
    was written yet."""
    parts: list[bytes] = [lead] if lead else []
    size = len(lead)
    for g in groups:
        if not g:
            continue
        if not first:
            parts.append(b",")
        first = False
        part = b",".join(g)
        parts.append(part)
        size += len(part) + 1
        if size >= WRITE_BYTES or len(parts) >= IOV_MAX:
            _write_parts(fd, parts)
            parts, size = [], 0
    if end:
        parts.append(end)
    if parts:
        _write_parts(fd, parts)
    return first


class Pending:
    """The second half being formatted by a child process."""

    def __init__(self, part: Path, worker: ForkWorker) -> None:
        self.part, self.worker = part, worker

    def collect(self, fd: int | None) -> bool:
        """Wait for the child; append its part to ``fd`` (None: just discard it).  False when the
        child failed, and nothing was appended."""
        try:
            _data, code = self.worker.result()
            if fd is None or code != 0:
                return False
            try:
                src = open(self.part, "rb")  # noqa: SIM115
            except OSError:
                return False
            with src:
                while block := src.read(16 << 20):
                    fs.write_all(fd, block)
            return True
        finally:
            with contextlib.suppress(OSError):
                self.part.unlink()


def start_tail(path: Path, fw: Framework, ov: Overlap, lay: Layout) -> Pending | None:
    """Fork a child that writes the second half (each group led by a comma) to a part file."""
    if fw.n_ops < MIN_OPS or not fork_allowed():
        return None
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    with contextlib.suppress(OSError):
        part.unlink()

    def body(_pipe: int) -> int:  # pragma: no cover - runs in the child (checked by the parent)
        fd = fs.open_new(part, append=False)
        _groups(fd, trace_view.tail(fw, ov, lay), first=False)
        os.close(fd)
        return 0

    worker = ForkWorker.start(body)
    return None if worker is None else Pending(part, worker)


def write(path: Path, fw: Framework, ov: Overlap, lay: Layout, pending: Pending | None,
          between: Iterable[None] = ()) -> None:
    """Write the first half, run ``between`` (other exports, while the child works), then the
    second half (from the child's part when it succeeded).  Temp file + rename, 0640 (created in
    place inside a ``text.in_place`` dir)."""
    placed = text.placed_in(path)
    tmp = path if placed else path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = fs.open_new(tmp, append=False)
    except PathError:  # a leftover of a killed writer of this pid (or a link planted there)
        if placed:
            raise
        tmp.unlink(missing_ok=True)
        fd = fs.open_new(tmp, append=False)
    try:
        if pending is None:  # both halves here: formatted before ``between``, in as few writes as fit
            _groups(fd, itertools.chain(trace_view.head(fw, ov, lay), trace_view.tail(fw, ov, lay)),
                    first=True, lead=b"[", end=b"]")
            for _ in between:
                pass
        else:
            first = _groups(fd, trace_view.head(fw, ov, lay), first=True, lead=b"[")
            for _ in between:
                pass
            done = pending.collect(None if first else fd)
            _groups(fd, () if done else trace_view.tail(fw, ov, lay), first=first, end=b"]")
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        if pending is not None and pending.part.exists():
            pending.collect(None)
        raise
    os.close(fd)
    if not placed:
        os.replace(tmp, path)
