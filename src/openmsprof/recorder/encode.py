"""Encoding of the pure-Python recorder's buffers into 32-byte records (the flusher's half that
turns Python values into bytes): marker ints column-wise, other kinds tuple by tuple, task
batches column-wise.  A tuple with an impossible value is dropped and counted, never raised."""

from __future__ import annotations

import struct
import time
from array import array
from collections.abc import Callable
from typing import Any

import numpy as np

from openmsprof.recorder import buffers, slots
from openmsprof.recorder.datadir import DataDir
from openmsprof.recorder.rawfile import GENERIC_DTYPE, TASKINFO_DTYPE
from openmsprof.recorder.records import API_LEVEL_CODES, COUNTER, GENERIC, TASKINFO

__all__ = ["Encoder"]

_API_CODE = {lvl: i for i, lvl in enumerate(API_LEVEL_CODES)}
_MASK32 = 0xFFFFFFFF
_MASK63 = (1 << 63) - 1
_TS_MASK = (1 << slots.SLOT_SHIFT) - 1
#: The ``array`` type code of an unsigned 64-bit int whose conversion is direct (``L`` on LP64).
_ARRAY_CODE = "L" if array("L").itemsize == 8 else "Q"


class Encoder:
    """Mixed into :class:`~openmsprof.recorder.flusher.Flusher`."""

    host: DataDir
    device_dir: Callable[[int], DataDir]
    mstx_source: str
    records: int
    #: the earliest timestamp a marker of this session can carry (0: no lower bound)
    ts_lo: int = 0

    def _encode_marks(self, ints: list[int], work: np.ndarray, tid: int) -> tuple[memoryview, int, int]:
        """MARK/PUSH/POP records from ``ints``, taken from a thread's marker lists (one int a
        record, see :mod:`~openmsprof.recorder.pymarkers`), column-wise, in ``work`` (int64, at
        least ``5 * len(ints)``: the records' four words, kind | tid << 32, t0, t1, a | b << 32,
        in its first ``4 * len(ints)``, the slots after them); returns a view of the records'
        bytes (no copy), their count and how many records were dropped as impossible.

        The ints are converted by one ``array`` constructor (unsigned long: a direct C
        conversion, about half of ``np.fromiter``'s cost); a run holding a record in the
        negative form (no slot) goes to :meth:`_decode_slow`.  The slot's code and base come
        from :data:`~openmsprof.recorder.slots.TABLE_CODE` / ``TABLE_BASE`` by one gather
        each.  A record whose slot has no code, or whose time lies outside :attr:`ts_lo` to now,
        is dropped and counted."""
        n = len(ints)
        out = work[:4 * n].reshape(n, 4)
        slot = work[4 * n:5 * n]
        t0 = out[:, 1]
        try:
            v = np.frombuffer(array(_ARRAY_CODE, ints), dtype=np.int64)
        except (OverflowError, TypeError):
            ts, code, bad = self._decode_slow(ints)
            in_place = False
        else:
            np.right_shift(v, slots.SLOT_SHIFT, out=slot)
            np.bitwise_and(slot, slots.SLOTS - 1, out=slot)  # the 16 bits (v may read negative)
            np.bitwise_and(v, _TS_MASK, out=t0)
            t0 += slots.TABLE_BASE[slot]
            ts, code, bad, in_place = t0, slots.TABLE_CODE[slot], 0, True
        word0 = out[:, 0]
        np.bitwise_and(code, 0xFF, out=word0)
        if n and (int(word0.min()) < 1 or int(ts.min()) < self.ts_lo or int(ts.max()) > time.perf_counter_ns()):
            keep = (word0 >= 1) & (ts >= self.ts_lo) & (ts <= time.perf_counter_ns())
            ts, code = ts[keep], code[keep]  # copies: out is written below
            bad += n - len(ts)
            in_place = False
            n = len(ts)
            out = work[:4 * n].reshape(n, 4)
            word0 = out[:, 0]
            np.bitwise_and(code, 0xFF, out=word0)
            if not n:  # nothing valid (a view with a zero dimension cannot be cast)
                return memoryview(b""), 0, bad
        if not in_place:
            out[:, 1] = ts
        hi = (tid & _MASK32) << 32
        np.bitwise_or(word0, hi - (1 << 64) if hi >= 1 << 63 else hi, out=word0)
        np.right_shift(code, 8, out=out[:, 3])
        out[:, 2] = out[:, 1]  # t1 = t0
        return out.data.cast("B"), n, bad

    @staticmethod
    def _decode_slow(ints: list[Any]) -> tuple[np.ndarray, np.ndarray, int]:
        """Times and codes of a run holding negative-form records (``-1 - (ts << 64 | code)``)
        or ints no producer makes: the slotted ones still by the table, in numpy; an impossible
        one gets code 0 (dropped and counted by the caller); the third value is 0."""
        regular = list(ints)
        odd: list[tuple[int, int, int]] = []
        for j, x in enumerate(ints):
            if type(x) is int and 0 <= x < 1 << 64:
                continue
            regular[j] = 0
            w = -1 - x if type(x) is int and -(1 << 127) <= x < 0 else 0
            if 1 <= w & 0xFF <= 3:  # a marker's kind (a code the table does not hold is checked here)
                odd.append((j, w >> 64, w & _MASK63))
            else:
                odd.append((j, 0, 0))
        v = np.frombuffer(array(_ARRAY_CODE, regular), dtype=np.int64)
        slot = (v >> slots.SLOT_SHIFT) & (slots.SLOTS - 1)
        ts = (v & _TS_MASK) + slots.TABLE_BASE[slot]
        code = slots.TABLE_CODE[slot]
        if odd:
            at, t, c = (np.array(col, dtype=np.int64) for col in zip(*odd, strict=True))
            ts[at], code[at] = t, c
        return ts, code, 0

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
