"""Encoding of the pure-Python recorder's buffers into 32-byte records (the flusher's half that
turns Python values into bytes): marker pairs column-wise, other kinds tuple by tuple, task
batches column-wise.  A tuple with an impossible value is dropped and counted, never raised."""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from openmsprof.recorder import buffers
from openmsprof.recorder.datadir import DataDir
from openmsprof.recorder.rawfile import GENERIC_DTYPE, TASKINFO_DTYPE
from openmsprof.recorder.records import API_LEVEL_CODES, COUNTER, GENERIC, TASKINFO

__all__ = ["Encoder"]

_API_CODE = {lvl: i for i, lvl in enumerate(API_LEVEL_CODES)}
_MASK32 = 0xFFFFFFFF
#: Marker ints converted per ``np.fromiter`` call (64 KiB of int64: below malloc's mmap threshold).
PIECE = 1 << 13


class Encoder:
    """Mixed into :class:`~openmsprof.recorder.flusher.Flusher`."""

    host: DataDir
    device_dir: Callable[[int], DataDir]
    mstx_source: str
    records: int
    #: the earliest timestamp a marker of this session can carry (0: no lower bound)
    ts_lo: int = 0

    def _encode_marks(self, marks: list[int], take: int, work: np.ndarray,
                      tid: int) -> tuple[memoryview, int, int, int]:
        """MARK/PUSH/POP records from the first ``take`` ints of a thread's ``marks`` (ts, code
        pairs; see :mod:`~openmsprof.recorder.pymarkers`), column-wise, in ``work`` (int64, at
        least ``3 * take``: the records' four words, kind | tid << 32, t0, t1, a | b << 32, in
        its first ``2 * take``, the ints after them); returns a view of the records' bytes (no
        copy), their count, how many ints were used (``take``, or ``take - 1`` when the run
        ends on the first half of a record: the caller leaves that int in the list) and how many
        records were dropped as impossible.

        The ints are converted :data:`PIECE` at a time, so ``np.fromiter``'s temporary stays
        under malloc's mmap threshold and is reused from the heap instead of page-faulted in
        every cycle (``work`` is reused by the caller for the same reason); the records are
        then built with eight numpy calls for the whole run (each may hand the GIL to a producer,
        so their number is kept low).  Kinds and timestamps are checked with one min and one
        max each, message ids with one max; a run with an impossible pair (a producer interrupted between its two
        appends, by KeyboardInterrupt or a signal handler, shifts every later pair by one int)
        goes to :meth:`_resync_marks`, which drops and counts what cannot be a record."""
        flat = work[2 * take:3 * take]
        it = iter(marks)
        for start in range(0, take, PIECE):
            k = min(PIECE, take - start)
            flat[start:start + k] = np.fromiter(it, dtype=np.int64, count=k)
        used, bad = take, 0
        pairs = flat.reshape(-1, 2)
        n = len(pairs)
        out = work[:4 * n].reshape(n, 4)
        word0 = out[:, 0]
        np.bitwise_and(pairs[:, 1], 0xFF, out=word0)
        np.right_shift(pairs[:, 1], 8, out=out[:, 3])
        np.bitwise_and(out[:, 3], _MASK32, out=out[:, 1])  # message ids (out[:, 1] is t0 later)
        if n and (int(word0.min()) < 1 or int(word0.max()) > 3 or int(pairs[:, 0].min()) < self.ts_lo
                  or int(pairs[:, 0].max()) > time.perf_counter_ns() or int(out[:, 1].max()) >= self._ids_top()):
            pairs, used, bad = self._resync_marks(flat.tolist())  # a copy: flat may be overwritten by out
            n = len(pairs)
            out = work[:4 * n].reshape(n, 4)
            word0 = out[:, 0]
            np.bitwise_and(pairs[:, 1], 0xFF, out=word0)
            np.right_shift(pairs[:, 1], 8, out=out[:, 3])
            if not n:  # nothing valid (a view with a zero dimension cannot be cast)
                return memoryview(b""), 0, used, bad
        hi = (tid & _MASK32) << 32
        np.bitwise_or(word0, hi - (1 << 64) if hi >= 1 << 63 else hi, out=word0)
        out[:, 1:3] = pairs[:, :1]  # t0 = t1 = ts
        return out.data.cast("B"), n, used, bad

    def _ids_top(self) -> int:
        """One past the highest string id interned so far: a code's message and domain ids lie
        below it (a producer interns before it appends); unbounded without a host table."""
        host = getattr(self, "host", None)
        return host.strings.next_id if host is not None else 1 << 40

    def _resync_marks(self, ints: list[int]) -> tuple[np.ndarray, int, int]:
        """The valid (ts, code) pairs of a run with impossible ones, the ints used, and the
        records skipped.  A pair
        is valid when its code's kind is 1-3, its ids are interned ones and its timestamp lies
        between :attr:`ts_lo` and now.  At an invalid pair, the pair after it valid means one bad
        record (skipped whole); else the pair one int later valid means a lone int (a record
        half-appended: skipped, and the run realigned).  Each skip counts one record.  A lone int
        left at the end is not used: its second half is still in the producer's list."""
        lo, hi, top = self.ts_lo, time.perf_counter_ns(), self._ids_top()

        def ok(j: int) -> bool:  # a timestamp whose low byte reads 1-3 is no code: its ids are too high
            c = ints[j + 1]
            return lo <= ints[j] <= hi and 1 <= c & 0xFF <= 3 and (c >> 8) & _MASK32 < top and c >> 40 < top

        good: list[int] = []
        i, end, bad = 0, len(ints), 0
        while i + 1 < end:
            if ok(i):
                good += ints[i:i + 2]
                i += 2
                continue
            bad += 1
            if i + 3 < end:
                i += 2 if ok(i + 2) or not ok(i + 1) else 1
            else:  # the run's end: a last int that is a timestamp may be a record's first half
                i += 1 if lo <= ints[i + 1] <= hi else 2
        return np.array(good, dtype=np.int64).reshape(-1, 2), i, bad

    def _encode_each(self, chunk: list[tuple[Any, ...]], tid: int, dirs: list[DataDir],
                     drops: list[int]) -> None:
        host = self.host
        hs = host.strings.intern
        mstx = host.out(self.mstx_source)
        api = host.out("Api")
        pack = GENERIC.pack
        tid &= _MASK32
        for rec in chunk:
            k = rec[0]
            try:
                if k == 6:  # API
                    api += pack(6, 0, _API_CODE.get(rec[4], 0), tid, rec[1], rec[2], hs(rec[3]), rec[5] & _MASK32)
                elif k == 4:  # RANGE_START
                    mstx += pack(4, 0, 0, tid, rec[1], rec[4], hs(rec[2]), hs(rec[3]))
                elif k == 5:  # RANGE_END
                    mstx += pack(5, 0, 0, tid, rec[1], rec[2], 0, 0)
                elif k == 7:  # TASK
                    d = self.device_dir(rec[1])
                    if d not in dirs:
                        dirs.append(d)
                    ds = d.strings.intern
                    out = d.out("Task")
                    task_id = rec[6] & _MASK32
                    task = pack(7, 0, rec[7] & 0xFFFF, rec[2] & _MASK32, rec[3], rec[4], ds(rec[5]), task_id)
                    out += task + TASKINFO.pack(8, 0, int(rec[14]), task_id, ds(rec[8]), ds(rec[9]), ds(rec[10]),
                                         ds(rec[11]), ds(rec[12]), rec[13] & _MASK32)
                elif k == 9:  # STEP
                    d = host if rec[5] is None else self.device_dir(rec[5])
                    if d not in dirs:
                        dirs.append(d)
                    d.out("Step").extend(pack(9, 0, int(rec[4]), tid, rec[1], rec[1], rec[2] & _MASK32, rec[3] & _MASK32))
                elif k == 12:  # STEP_RANGE
                    host.out("Step").extend(pack(12, 0, 0, tid, rec[1], rec[2], rec[3] & _MASK32, 0))
                elif k == buffers.TASK_BATCH:
                    self._encode_task_batch(rec, dirs)
                elif k == 10:  # COUNTER
                    d = host if rec[5] is None else self.device_dir(rec[5])
                    if d not in dirs:
                        dirs.append(d)
                    d.out("Counter").extend(COUNTER.pack(10, 0, 0, 0, rec[1], float(rec[4]), int(rec[2]), rec[3] & _MASK32))
            except (struct.error, TypeError, ValueError, OverflowError, AttributeError, IndexError):
                # a caller passed an impossible value: this record is dropped and counted
                drops[min(k, len(drops) - 1) if isinstance(k, int) and k >= 0 else 0] += 1

    def _encode_task_batch(self, rec: tuple[Any, ...], dirs: list[DataDir]) -> None:
        """TASK + TASK_INFO record pairs of a task batch, column-wise."""
        _, dev, model_id, strings, executors, cols = rec
        d = self.device_dir(dev)
        if d not in dirs:
            dirs.append(d)
        ds = d.strings.intern
        sid = np.array([[ds(s) for s in node] for node in strings], dtype=np.uint32).reshape(-1, 6)
        meta, stream, t0, t1, task_id, conn = cols
        n = len(t0)
        out = np.zeros(2 * n, dtype=GENERIC_DTYPE)
        task = out[0::2]
        task["kind"] = 7
        task["aux"] = model_id & 0xFFFF
        task["tid"] = stream & _MASK32
        task["t0"] = t0
        task["t1"] = t1
        task["a"] = sid[meta, 0]
        task["b"] = task_id & _MASK32
        info = out[1::2].view(TASKINFO_DTYPE)
        info["kind"] = 8
        info["aux"] = np.asarray(executors, dtype=np.uint16)[meta]
        info["task_id"] = task_id & _MASK32
        for i, col in enumerate(("op_type", "in_shapes", "in_dtypes", "out_shapes", "out_dtypes"), 1):
            info[col] = sid[meta, i]
        info["connection_id"] = conn & _MASK32
        d.out("Task").extend(out.tobytes())
        self.records += n - 1  # counted as one item by the caller
