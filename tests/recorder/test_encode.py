"""The fallback's marker encoding: (ts, code) ints of a thread's list into 32-byte records, in
place, piece by piece, into arrays the flusher reuses."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from openmsprof.recorder import buffers, core, encode, rawfile, session
from openmsprof.recorder.encode import Encoder
from openmsprof.recorder.records import Kind


class _Enc(Encoder):
    def __init__(self) -> None:
        self.bad_markers = 0


def _decode(data: memoryview) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype=rawfile.GENERIC_DTYPE)


def test_pairs_across_pieces_become_records_and_a_half_pair_is_left() -> None:
    n = encode.PIECE + encode.PIECE // 2 + 3  # three pieces, the last one short
    ts = list(range(10**13, 10**13 + n))
    kinds = [1 + i % 3 for i in range(n)]
    codes = [k | (i % 1000) << 8 | (i % 7) << 40 for i, k in enumerate(kinds)]
    marks: list[int] = [x for pair in zip(ts, codes, strict=True) for x in pair]
    marks.append(42)  # a record whose producer was interrupted between its two appends
    work = np.full(3 * 2 * n + 20, -1, dtype="<i8")
    data, count = _Enc()._encode_marks(marks, len(marks) & ~1, work, tid=0xFFFF_FFF0)
    assert count == n and len(data) == 32 * n
    recs = _decode(data)
    assert recs["kind"].tolist() == kinds
    assert set(recs["tid"].tolist()) == {0xFFFF_FFF0}  # a tid over 2**31: its word stays exact
    assert recs["t0"].tolist() == ts and recs["t1"].tolist() == ts
    assert recs["a"].tolist() == [i % 1000 for i in range(n)]
    assert recs["b"].tolist() == [i % 7 for i in range(n)]
    assert work[6 * n:].tolist() == [-1] * 20, "nothing written past the work area"


def test_impossible_kinds_are_dropped_and_counted_in_any_piece() -> None:
    n = 2 * encode.PIECE
    bad = {0, 5, encode.PIECE // 2 + 1, n - 1}  # first, early, second piece, last
    marks: list[int] = []
    for i in range(n):
        marks += [1000 + i, (0 if i == 0 else 9 if i in bad else 2) | i << 8]
    enc = _Enc()
    data, count = enc._encode_marks(marks, len(marks), np.empty(6 * n, dtype="<i8"), tid=7)
    recs = _decode(data)
    assert enc.bad_markers == len(bad) and count == n - len(bad) == len(recs)
    good = [i for i in range(n) if i not in bad]
    assert recs["t0"].tolist() == [1000 + i for i in good]
    assert recs["a"].tolist() == good and set(recs["kind"].tolist()) == {Kind.PUSH}


@pytest.fixture
def python_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core, "BACKEND", "python")


def test_reused_arrays_carry_nothing_from_a_larger_earlier_chunk(out_dir: Path, python_core: None) -> None:
    """The flusher reuses a written chunk's array: a smaller later chunk writes its own rows
    only; a record its producer has half-appended waits for its second int."""
    s = session.start(output=out_dir)
    try:
        marks = buffers.allot_marks()
        code = 1 | 5 << 8
        with s.flusher._lock:  # the flusher thread stays out while this test drains by hand
            for batch in (3000, 10):
                for i in range(batch):
                    marks += [time.perf_counter_ns(), code + (i << 8)]
                marks.append(time.perf_counter_ns())  # half a record
                s.flusher._drain(wait=True)
                assert len(marks) == 1, "the half record stays for the next drain"
                marks.append(code)
            s.flusher._drain(wait=True)
            assert len(s.flusher._spare) >= 1, "written arrays are kept for reuse"
    finally:
        session.stop()
    recs = rawfile.read_all_records(s.job.host_data)
    recs = recs[(recs["tid"] == threading.get_native_id()) & (recs["kind"] <= Kind.POP)]
    assert recs["kind"].tolist() == [Kind.MARK] * 3012
    assert recs["a"].tolist() == [*range(5, 3005), 5, *range(5, 15), 5]
    assert np.all(np.diff(recs["t0"]) >= 0)
