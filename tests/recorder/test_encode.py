"""The fallback's marker encoding: one int a record (a slot of the code table and the time since
the slot's base, or the negative form) into 32-byte records, in arrays the flusher reuses."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from openmsprof.recorder import (
    buffers,
    core,
    markcodes,
    pymarkers,
    rawfile,
    rawread,
    session,
    slots,
)
from openmsprof.recorder.datadir import DataDir
from openmsprof.recorder.encode import Encoder
from openmsprof.recorder.records import Kind
from openmsprof.sources import markers  # noqa: F401 - its session listener turns the markers on


def _decode(data: memoryview) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype=rawfile.GENERIC_DTYPE)


@pytest.fixture
def table(tmp_path: Path) -> DataDir:
    """A fresh code table (as a session's start makes it) over a host data dir's string ids."""
    host = DataDir(tmp_path, "host")
    pymarkers.begin(host.strings.ids)
    yield host
    pymarkers.end()
    host.close()


def _code(kind: int, a: int, b: int) -> int:
    return kind | a << 8 | b << 40


def test_one_int_a_record_becomes_that_record(table: DataDir) -> None:
    """Records of three kinds over 40 slots, ids up to the fields' widths, a tid over 2**31:
    every word as the producer packed it, t0 = t1 = its time, nothing past the work area."""
    n = 3 * 8192 + 5
    codes = [_code(1 + i % 3, (i * 7919) % (1 << 32), i % (1 << 23)) for i in range(40)]
    cs = [slots.take(c) for c in codes]
    assert all(c is not None for c in cs)
    t0 = time.perf_counter_ns()  # after the slots' base, as a producer's time always is
    ts = [t0 + 10 * i + i % 3 for i in range(n)]
    time.sleep(0.002)  # and before now
    ints = [cs[i % 40] + ts[i] for i in range(n)]  # type: ignore[operator]
    work = np.full(5 * n + 20, -1, dtype="<i8")
    data, count, bad = Encoder()._encode_marks(ints, work, tid=0xFFFF_FFF0)
    assert count == n and bad == 0 and len(data) == 32 * n
    recs = _decode(data)
    assert recs["kind"].tolist() == [codes[i % 40] & 0xFF for i in range(n)]
    assert set(recs["tid"].tolist()) == {0xFFFF_FFF0}  # a tid over 2**31: its word stays exact
    assert recs["t0"].tolist() == ts and recs["t1"].tolist() == ts
    assert recs["a"].tolist() == [(codes[i % 40] >> 8) & 0xFFFFFFFF for i in range(n)]
    assert recs["b"].tolist() == [codes[i % 40] >> 40 for i in range(n)]
    assert set(recs["flags"].tolist()) == {0} and set(recs["aux"].tolist()) == {0}
    assert work[5 * n:].tolist() == [-1] * 20, "nothing written past the work area"


def test_negative_form_records_sit_in_order_among_slotted_ones(table: DataDir) -> None:
    """A record that got no slot is one negative int carrying its time and code: a run mixing
    both forms decodes to the same records, in order."""
    c = slots.take(_code(2, 5, 0))
    assert c is not None
    t0 = time.perf_counter_ns()
    time.sleep(0.002)
    ints: list[int] = []
    want: list[tuple[int, int, int]] = []
    for i in range(3000):
        ts = t0 + 100 * i
        if i % 7 == 3:
            ints.append(-1 - (ts << 64 | _code(1, 9 + i, 3)))
            want.append((1, ts, 9 + i))
        else:
            ints.append(c + ts)
            want.append((2, ts, 5))
    data, count, bad = Encoder()._encode_marks(ints, np.empty(5 * len(ints), "<i8"), tid=4)
    recs = _decode(data)
    assert bad == 0 and count == 3000
    assert list(zip(recs["kind"].tolist(), recs["t0"].tolist(), recs["a"].tolist(), strict=True)) == want
    assert recs["t1"].tolist() == recs["t0"].tolist()


def test_impossible_ints_are_dropped_and_counted_the_rest_kept(table: DataDir) -> None:
    """A slot never taken, a time after now or before the session, an int beyond 64 bits, a
    non-int: each dropped and counted; the valid records around them kept in order."""
    c = slots.take(_code(1, 6, 0))
    assert c is not None
    now = time.perf_counter_ns()
    time.sleep(0.001)
    enc = Encoder()
    enc.ts_lo = now - 10**9
    good = [c + now + i for i in range(10)]
    junk = [(SLOT_UNUSED := 60000) << slots.SLOT_SHIFT | 5,  # a slot nobody took
            c + now + 10**12,  # a time 1000 s ahead
            -1 - ((now - 10**10) << 64 | _code(1, 6, 0)),  # before the session (negative form)
            -1 - ((now + 5) << 64 | _code(9, 6, 0)),  # no marker kind (negative form)
            1 << 70, None]
    ints = good[:4] + junk[:3] + good[4:7] + junk[3:] + good[7:]
    assert SLOT_UNUSED >= 2
    data, count, bad = enc._encode_marks(ints, np.empty(5 * len(ints), "<i8"), tid=7)  # type: ignore[arg-type]
    recs = _decode(data)
    assert bad == len(junk) and count == len(good)
    assert recs["t0"].tolist() == [now + i for i in range(10)]
    assert set(recs["a"].tolist()) == {6}


def test_a_new_epoch_leaves_records_of_old_slots_exact(table: DataDir, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the base is EPOCH_NS old, codes are cached afresh in new slots with a new base; a
    record packed with an old ``c`` still decodes to its own time and code."""
    old_c = slots.take(_code(1, 1, 0))
    monkeypatch.setattr(slots, "EPOCH_NS", 0)
    base0 = slots.base
    time.sleep(0.001)
    pymarkers.refresh()
    assert slots.base > base0 and not markcodes.MARK
    new_c = slots.take(_code(1, 1, 0))
    assert old_c is not None and new_c is not None and new_c >> 48 != old_c >> 48
    t = time.perf_counter_ns()
    ints = [old_c + t, new_c + t + 1]
    time.sleep(0.001)
    data, _n, bad = Encoder()._encode_marks(ints, np.empty(10, "<i8"), tid=1)
    assert bad == 0 and _decode(data)["t0"].tolist() == [t, t + 1]


@pytest.fixture
def python_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core, "BACKEND", "python")


def _mine(s: session.Session, kinds: tuple[int, ...] = (Kind.MARK,)) -> tuple[np.ndarray, dict[int, str]]:
    recs = rawread.read_all_records(s.job.host_data)
    return recs[(recs["tid"] == threading.get_native_id()) & np.isin(recs["kind"], kinds)], \
        rawread.read_strings(s.job.host_data)


def test_a_full_table_records_every_marker_in_the_negative_form(out_dir: Path, python_core: None) -> None:
    """With the slots spent (a flood of distinct messages), new messages are still recorded,
    exactly, in order with the cached ones, and nothing is dropped."""
    s = session.start(output=out_dir)
    try:
        for i in range(300):
            pymarkers.mark("cached")
            pymarkers.push(f"r{i % 2}")
            pymarkers.pop()
            if i == 100:
                slots._counter = itertools.count(slots.SLOTS)  # the flood took the rest
            pymarkers.mark(f"late{i % 5}")
    finally:
        session.stop()
    mine, strings = _mine(s, (Kind.MARK, Kind.PUSH, Kind.POP))
    names = [strings.get(int(a), "") if k != Kind.POP else "pop" for k, a in zip(mine["kind"], mine["a"], strict=True)]
    assert names == [x for i in range(300) for x in ("cached", f"r{i % 2}", "pop", f"late{i % 5}")]
    assert np.all(np.diff(mine["t0"]) > 0)
    assert s.overhead["records_dropped"] == 0


def test_lists_moved_to_runs_are_written_once_in_order(out_dir: Path, python_core: None) -> None:
    """Marks across many runs of one thread, drains by hand at odd points (a run taken while
    its producer fills the next, a list that is both in the runs and current): every record
    once, in order; the work arrays are reused."""
    s = session.start(output=out_dir)
    n = 0
    try:
        with s.stream.flusher._lock:  # the flusher thread stays out while this test drains by hand
            for batch in (3 * buffers.RUN + 17, buffers.RUN, 10, 5 * buffers.RUN - 1):
                for _ in range(batch):
                    pymarkers.mark(f"m{n % 5}")
                    n += 1
                buf = buffers.TLS.buf
                if batch == buffers.RUN:  # the current list in the runs too (a handler's rotation)
                    buf.runs.append(buf.marks)
                s.stream.flusher._drain(wait=True)
                assert buffers.held_marks(buf) == 0
            assert len(s.stream.flusher._spare) >= 1, "written arrays are kept for reuse"
    finally:
        session.stop()
    mine, strings = _mine(s)
    assert [strings[int(a)] for a in mine["a"]] == [f"m{i % 5}" for i in range(n)]
    assert np.all(np.diff(mine["t0"]) > 0)


def test_a_drain_with_no_valid_record_counts_them_and_collection_goes_on(out_dir: Path, python_core: None) -> None:
    """A thread whose whole run is impossible (a slot nobody took): each record counted as
    "invalid", none written, and the session keeps collecting."""
    s = session.start(output=out_dir)
    try:
        marks = buffers.allot_marks()
        with s.stream.flusher._lock:
            for _ in range(300):
                marks.append(60000 << slots.SLOT_SHIFT | 5)
            s.stream.flusher._drain(wait=True)
            assert len(marks) == 0
        pymarkers.mark("after")
    finally:
        session.stop()
    assert "collection stopped early" not in (s.job.host / "end_info").read_text()
    drops = s.overhead["drops_by_thread_kind"][str(threading.get_native_id())]
    assert drops == {"invalid": 300} and s.overhead["records_dropped"] == 300
    mine, strings = _mine(s)
    assert [strings[a] for a in mine["a"].tolist()] == ["after"]
