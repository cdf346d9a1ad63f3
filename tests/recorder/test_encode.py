"""The fallback's marker encoding: (ts, code) ints of a thread's list into 32-byte records, in
place, piece by piece, into arrays the flusher reuses."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from openmsprof.recorder import buffers, core, encode, pymarkers, rawfile, session
from openmsprof.recorder.datadir import DataDir
from openmsprof.recorder.encode import Encoder
from openmsprof.recorder.records import Kind
from openmsprof.sources import markers  # noqa: F401 - its session listener turns the markers on


def _decode(data: memoryview) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype=rawfile.GENERIC_DTYPE)


def test_pairs_across_pieces_become_records_and_a_half_pair_is_left() -> None:
    n = encode.PIECE + encode.PIECE // 2 + 3  # three pieces, the last one short
    t0 = time.perf_counter_ns() - n - 10
    ts = list(range(t0, t0 + n))
    kinds = [1 + i % 3 for i in range(n)]
    codes = [k | (i % 1000) << 8 | (i % 7) << 40 for i, k in enumerate(kinds)]
    marks: list[int] = [x for pair in zip(ts, codes, strict=True) for x in pair]
    marks.append(42)  # a record whose producer was interrupted between its two appends
    work = np.full(3 * 2 * n + 20, -1, dtype="<i8")
    data, count, used, dropped = Encoder()._encode_marks(marks, len(marks) & ~1, work, tid=0xFFFF_FFF0)
    assert count == n and len(data) == 32 * n and used == 2 * n and dropped == 0
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
    t0 = time.perf_counter_ns() - n - 10
    for i in range(n):
        marks += [t0 + i, (0 if i == 0 else 9 if i in bad else 2) | i << 8]
    enc = Encoder()
    enc.ts_lo = t0 - 10**9
    data, count, used, dropped = enc._encode_marks(marks, len(marks), np.empty(6 * n, dtype="<i8"), tid=7)
    recs = _decode(data)
    assert dropped == len(bad) and count == n - len(bad) == len(recs) and used == 2 * n
    good = [i for i in range(n) if i not in bad]
    assert recs["t0"].tolist() == [t0 + i for i in good]
    assert recs["a"].tolist() == good and set(recs["kind"].tolist()) == {Kind.PUSH}


def _pairs(n: int, first_a: int = 0, low_byte: int | None = None) -> list[int]:
    """n marks 10 ns apart; ``low_byte``: the timestamps' low byte (the one a code's kind is in)."""
    t0 = time.perf_counter_ns() - 10 * n - 1000
    if low_byte is not None:
        t0 -= (t0 - low_byte) % 256
    step = 10 if low_byte is None else 256
    t0 -= step * n
    return [x for i in range(n) for x in (t0 + step * i, 1 | (first_a + i) << 8)]


def _encoder(tmp_path: Path, strings: int) -> Encoder:
    """An encoder whose host string table has ``strings`` ids interned (the codes' ids)."""
    enc = Encoder()
    enc.host = DataDir(tmp_path, "host")
    for i in range(strings):
        enc.host.strings.intern(f"m{i}")
    return enc


@pytest.mark.parametrize("low_byte", [None, 2])
@pytest.mark.parametrize("where", [0, 1, 7, 2 * encode.PIECE - 1])
def test_a_record_half_appended_mid_run_costs_that_record_only(tmp_path: Path, where: int,
                                                              low_byte: int | None) -> None:
    """A producer interrupted between its two appends (KeyboardInterrupt, a signal handler that
    raises) leaves a lone timestamp: every later pair is shifted by one int.  The encoder
    realigns: all the complete records, one counted invalid; also when the next timestamp's low
    byte reads as a kind (``low_byte=2``: it is no code, its ids were never interned)."""
    n = 2 * encode.PIECE
    marks = _pairs(n, low_byte=low_byte)
    marks.insert(2 * where, marks[2 * where] - 1)  # the interrupted call's timestamp
    take = len(marks) & ~1  # odd length: the last int waits (it is a complete record's ts here)
    enc = _encoder(tmp_path, n)
    enc.ts_lo = marks[0] - 10**9
    data, count, used, dropped = enc._encode_marks(marks, take, np.empty(3 * take, dtype="<i8"), tid=3)
    recs = _decode(data)
    assert dropped == 1
    assert used == take - 1, "the last pair's timestamp is left for the next drain"
    assert recs["a"].tolist() == list(range(n - 1)) and count == n - 1
    assert set(recs["kind"].tolist()) == {Kind.MARK}
    rest = marks[used:]
    assert len(rest) == 2 and rest[1] & 0xFF == Kind.MARK, "the list is realigned"


def test_a_lone_timestamp_at_the_end_waits_and_a_lone_code_is_dropped(tmp_path: Path) -> None:
    enc = _encoder(tmp_path, 4)
    marks = _pairs(4)
    enc.ts_lo = marks[0] - 10**9
    marks.insert(4, 99)  # a stray int that is neither: counted, skipped
    data, count, used, dropped = enc._encode_marks(marks, 8, np.empty(24, dtype="<i8"), tid=3)
    assert count == 3 and dropped == 1 and used == 7
    assert _decode(data)["a"].tolist() == [0, 1, 2]


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
        for i in range(3100):  # the ids the codes below carry are interned ones
            s.host_dir.strings.intern(f"s{i}")
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



def test_a_half_record_in_a_live_session_costs_one_counted_record(out_dir: Path, python_core: None) -> None:
    """The list state an interrupted mark leaves (its timestamp appended, its code not: CPython
    can deliver KeyboardInterrupt there when the call is not specialised) in a running session:
    the later records are all on disk, unshifted, and the lost one is counted as "invalid" in
    the overhead file and end_info."""
    s = session.start(output=out_dir)
    try:
        for i in range(3000):
            pymarkers.mark(f"m{i % 3}")
            if i == 1234:
                buffers.TLS.marks.append(time.perf_counter_ns())  # the interrupted call's half
        s.flusher.drain()
        for i in range(3000, 5000):
            pymarkers.mark(f"m{i % 3}")
    finally:
        session.stop()
    recs = rawfile.read_all_records(s.job.host_data)
    mine = recs[(recs["tid"] == threading.get_native_id()) & (recs["kind"] == Kind.MARK)]
    strings = rawfile.read_strings(s.job.host_data)
    assert [strings[a] for a in mine["a"].tolist()] == [f"m{i % 3}" for i in range(5000)]
    assert np.all(np.diff(mine["t0"]) > 0)
    drops = s.overhead["drops_by_thread_kind"][str(threading.get_native_id())]
    assert drops == {"invalid": 1} and s.overhead["records_dropped"] == 1
    assert "openmsprofDropped" in (s.job.host / "end_info").read_text()


def test_a_drain_with_no_valid_record_counts_them_and_collection_goes_on(out_dir: Path, python_core: None) -> None:
    """A thread whose whole run is impossible pairs (codes with ids never interned) or one
    interrupted mark: each counted, none written, and the session keeps collecting."""
    s = session.start(output=out_dir)
    try:
        marks = buffers.allot_marks()
        with s.flusher._lock:
            for i in range(300):
                marks += [time.perf_counter_ns(), 1 | (10**6 + i) << 8]
            s.flusher._drain(wait=True)
            assert len(marks) == 0
        pymarkers.mark("after")
    finally:
        session.stop()
    assert "collection stopped early" not in (s.job.host / "end_info").read_text()
    drops = s.overhead["drops_by_thread_kind"][str(threading.get_native_id())]
    assert drops == {"invalid": 300} and s.overhead["records_dropped"] == 300
    recs = rawfile.read_all_records(s.job.host_data)
    mine = recs[(recs["tid"] == threading.get_native_id()) & (recs["kind"] == Kind.MARK)]
    strings = rawfile.read_strings(s.job.host_data)
    assert [strings[a] for a in mine["a"].tolist()] == ["after"]
