"""Marker domain filters (``mstx_domain_include`` / ``mstx_domain_exclude``) applied by the
recorder on both backends: a marker of a filtered-out domain is not recorded, its push's pop is
not either (pairs stay paired), an included one is."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np

import openmsprof
from openmsprof import mstx
from openmsprof.recorder import rawread
from openmsprof.recorder.records import Kind


def _recorded(job: Path) -> tuple[np.ndarray, dict[int, str]]:
    data = job / "host" / "data"
    return rawread.read_all_records(data), rawread.read_strings(data)


def _markers(out: Path, **switches: object) -> tuple[list[tuple[int, str, str]], int]:
    """Marks and pushes/pops in domains "keep", "noisy" and the default one; returns the
    recorded (kind, message, domain) and the id range_start gave in "noisy"."""
    with openmsprof.profile(output=out, **switches) as prof:
        for _ in range(3):
            mstx.mark("m-default")
            mstx.mark("m-keep", "keep")
            mstx.mark("m-noisy", "noisy")
            mstx.range_push("outer", "keep")
            mstx.range_push("inner", "noisy")
            mstx.range_push("inner-default")
            mstx.range_pop()
            mstx.range_pop()
            mstx.range_pop()
        rid = mstx.range_start("cross", "noisy")
        mstx.range_end(rid)
    assert prof.job is not None
    recs, strings = _recorded(prof.job)
    out_rows = []
    for r in recs:
        if r["kind"] in (Kind.MARK, Kind.PUSH, Kind.POP, Kind.RANGE_START):
            out_rows.append((int(r["kind"]), strings.get(int(r["a"]), ""), strings.get(int(r["b"]), "")))
    return out_rows, rid


def test_excluded_domain_is_not_recorded(out_dir: Path, backend: str) -> None:
    rows, rid = _markers(out_dir, mstx_domain_exclude=["noisy"])
    msgs = [m for k, m, _d in rows if k != Kind.POP]
    assert msgs.count("m-default") == 3 and msgs.count("m-keep") == 3
    assert "m-noisy" not in msgs and "inner" not in msgs and "cross" not in msgs
    assert rid == 0
    pushes = sum(1 for k, *_ in rows if k == Kind.PUSH)
    pops = sum(1 for k, *_ in rows if k == Kind.POP)
    assert pushes == pops == 6  # outer and inner-default, 3 times: the noisy push's pop skipped


def test_included_domains_only(out_dir: Path, backend: str) -> None:
    rows, rid = _markers(out_dir, mstx_domain_include=["keep"])
    msgs = [m for k, m, _d in rows if k != Kind.POP]
    assert msgs == ["m-keep", "outer"] * 3  # the default domain is not in the list
    assert rid == 0
    assert sum(1 for k, *_ in rows if k == Kind.POP) == 3
    assert {d for k, _m, d in rows if k != Kind.POP} == {"keep"}


def test_default_domain_by_name(out_dir: Path, backend: str) -> None:
    rows, rid = _markers(out_dir, mstx_domain_include=["default", "noisy"])
    msgs = [m for k, m, _d in rows if k != Kind.POP]
    assert sorted(set(msgs)) == ["cross", "inner", "inner-default", "m-default", "m-noisy"]
    assert rid > 0
    assert sum(1 for k, *_ in rows if k == Kind.POP) == 6


def test_no_filter_records_every_domain(out_dir: Path, backend: str) -> None:
    rows, rid = _markers(out_dir)
    msgs = [m for k, m, _d in rows if k != Kind.POP]
    assert len(msgs) == 3 * 6 + 1 and rid > 0


def _texts(job: Path) -> list[str]:
    recs, strings = _recorded(job)
    return [strings.get(int(r["a"]), "") for r in recs if r["kind"] in (Kind.MARK, Kind.PUSH)]


def test_filter_is_resolved_afresh_each_session(out_dir: Path, backend: str) -> None:
    """The filter is resolved once per domain and remembered: the next session's filter (none,
    or the opposite one) decides anew for the same domain objects, and a domain equal to a
    filtered one but built at run time is filtered too."""
    noisy = "noisy"
    built = "".join(["no", "isy"])
    assert built == noisy and built is not noisy
    jobs = []
    for i, switches in enumerate(({"mstx_domain_exclude": ["noisy"]}, {}, {"mstx_domain_include": ["noisy"]})):
        with openmsprof.profile(output=out_dir / str(i), **switches) as prof:
            for _ in range(3):
                mstx.mark("lit", noisy)
                mstx.mark("built", built)
                mstx.mark("plain")
                mstx.range_push("pushed", noisy)
                mstx.range_pop()
        assert prof.job is not None
        jobs.append(_texts(prof.job))
    assert sorted(jobs[0]) == ["plain"] * 3
    assert sorted(jobs[1]) == sorted(["lit", "built", "plain", "pushed"] * 3)
    assert sorted(jobs[2]) == sorted(["lit", "built", "pushed"] * 3)


def test_default_domain_skipped_on_a_new_thread(out_dir: Path, backend: str) -> None:
    """Markers without a domain, skipped by an include filter, on a thread born inside the
    session: none recorded, nothing dropped, and the thread's one marker in the included domain
    is recorded."""
    def work() -> None:
        for _ in range(2000):
            mstx.mark("skipped")
            mstx.range_push("skipped-range")
            mstx.range_pop()
        mstx.mark("kept", "keep")

    with openmsprof.profile(output=out_dir, mstx_domain_include=["keep"]) as prof:
        t = threading.Thread(target=work)
        t.start()
        t.join()
    assert prof.job is not None
    assert _texts(prof.job) == ["kept"]
    over = json.loads((prof.job / "host" / "openmsprof_overhead.json").read_text())
    assert over["records_dropped"] == 0
