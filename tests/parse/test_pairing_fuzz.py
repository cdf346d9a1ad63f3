"""Property tests: the vectorised pairing equals a plain stack/dict reference across any chunking,
and the reader/importer survive arbitrary bytes."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openmsprof.parse.importer import import_job
from openmsprof.parse.pairing import PushPopPairer, RangePairer
from openmsprof.recorder.rawfile import GENERIC_DTYPE
from openmsprof.recorder.rawread import ReadReport, iter_record_chunks, read_strings
from openmsprof.recorder.records import HEADER, RECORDS_MAGIC

events = st.lists(st.tuples(st.integers(1, 3), st.booleans()), max_size=200)


def _recs(evs: list[tuple[int, bool]]) -> np.ndarray:
    a = np.zeros(len(evs), dtype=GENERIC_DTYPE)
    for i, (tid, is_push) in enumerate(evs):
        a[i] = (2 if is_push else 3, 0, 0, tid, i, 0, i, 0)
    return a


@given(events, st.lists(st.integers(1, 50), max_size=6))
def test_push_pop_matches_stack(evs: list[tuple[int, bool]], cuts: list[int]) -> None:
    stacks: dict[int, list[int]] = {}
    want, orphans = set(), 0
    for i, (tid, is_push) in enumerate(evs):
        if is_push:
            stacks.setdefault(tid, []).append(i)
        elif stacks.get(tid):
            want.add((stacks[tid].pop(), i))
        else:
            orphans += 1
    recs = _recs(evs)
    pairer, got, pos = PushPopPairer(), set(), 0
    for c in [*cuts, len(recs)]:
        push, pop = pairer.feed(recs[pos:pos + c])
        got |= set(zip(push["t0"].tolist(), pop["t0"].tolist(), strict=True))
        pos += c
        if pos >= len(recs):
            break
    assert got == want
    assert pairer.orphan_pops == orphans
    assert sorted(pairer.finish()["t0"].tolist()) == sorted(i for s in stacks.values() for i in s)


@given(st.permutations(list(range(40))), st.integers(1, 40))
def test_ranges_pair_by_id_in_any_order(order: list[int], cut: int) -> None:
    # ids 0..19 start (index < 20 -> start of id i, else end of id i-20), shuffled
    recs = np.zeros(40, dtype=GENERIC_DTYPE)
    for pos, k in enumerate(order):
        recs[pos] = (4 if k < 20 else 5, 0, 0, 1, pos, k % 20 + 1, 0, 0)
    pairer = RangePairer()
    got = {}
    for chunk in (recs[:cut], recs[cut:]):
        s, e = pairer.feed(chunk[chunk["kind"] == 4], chunk[chunk["kind"] == 5])
        got.update(zip(s["t1"].tolist(), e["t1"].tolist(), strict=True))
    assert got == {i: i for i in range(1, 21)}
    left, orphans = pairer.finish()
    assert len(left) == 0 and orphans == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=2000), st.booleans())
def test_reader_and_import_survive_any_bytes(data: bytes, with_header: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "PROF_000001_1_1AAAAAAAA"
        d = job / "host" / "data"
        d.mkdir(parents=True)
        body = (HEADER.pack(RECORDS_MAGIC, 1, 32, 0) if with_header else b"") + data
        (d / "Mstx.records.host.slice_0").write_bytes(body)
        (d / "Api.records.host.slice_0").write_bytes(body[::-1])
        (d / "Strings.table.host.slice_0").write_bytes(data)
        rep = ReadReport()
        n = sum(len(c) for c in iter_record_chunks(d / "Mstx.records.host.slice_0", rep, 7))
        read_strings(d, rep)
        assert n == (len(data) // 32 if with_header else 0)
        r = import_job(job, progress=False)
        assert r.db_path.is_file() and r.warnings
