"""experimental_config switches that act in the torch facade do what they say (issue 23;
tests/config/test_switch_spellings.py names these tests): ``mstx_domain_include`` /
``mstx_domain_exclude`` (a marker of a filtered domain is in neither trace_view.json nor the
window's PROF_ job; the others are in both) and ``host_sys`` cpu/mem (host usage counters in the
window's PROF_ job)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import orjson
import pytest

import openmsprof.torch.profiler as tp
from openmsprof.parse.importer import import_job
from openmsprof.recorder import rawfile, rawread
from openmsprof.recorder.records import Kind
from tests.torch.conftest import Trainer, rank_dirs


def _run(trainer: Trainer, root: Path, **domains: list[str]) -> tuple[set[str], set[str]]:
    """(names in trace_view.json, marker messages in the PROF_ job) of a window with marks in
    the domains "kept", "dropped" and the default one."""
    exp = tp._ExperimentalConfig(msprof_tx=True, data_simplification=False, **domains)  # type: ignore[arg-type]
    with tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=0, warmup=0, active=1, repeat=1),
                    on_trace_ready=tp.tensorboard_trace_handler(str(root)), experimental_config=exp) as prof:
        trainer.step()
        tp.mstx.mark("mark in kept", None, "kept")
        tp.mstx.mark("mark in dropped", None, "dropped")
        tp.mstx.range_push("range in dropped", None, "dropped")
        tp.mstx.range_push("range in kept", None, "kept")
        tp.mstx.range_pop("kept")
        tp.mstx.range_pop("dropped")
        rid = tp.mstx.range_start("cross in dropped", None, "dropped")
        tp.mstx.range_end(rid, "dropped")
        tp.mstx.mark("mark in default")
        prof.step()
    (rd,) = rank_dirs(root)
    events = orjson.loads((rd / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_bytes())
    names = {e.get("name", "") for e in events if "in " in str(e.get("name", ""))}
    (job,) = sorted(rd.glob("PROF_*"))
    res = import_job(job, progress=False)
    with sqlite3.connect(res.db_path) as db:
        msgs = {r[0] for r in db.execute("SELECT s.value FROM MSTX_EVENTS m JOIN STRING_IDS s ON s.id = m.message")
                if " in " in r[0]}  # not the ProfilerStep ranges
    return names, msgs


@pytest.mark.parametrize("domains, kept", [
    ({"mstx_domain_exclude": ["dropped"]}, {"mark in kept", "range in kept", "mark in default"}),
    ({"mstx_domain_include": ["kept"]}, {"mark in kept", "range in kept"}),
])
def test_filtered_domains_are_not_recorded(trainer: Trainer, tmp_path: Path, domains: dict[str, list[str]],
                                           kept: set[str]) -> None:
    names, msgs = _run(trainer, tmp_path / "p", **domains)
    assert msgs == kept, msgs
    assert {n for n in names if n.startswith(("mark in", "range in", "cross in"))} == kept, names


def test_host_sys_cpu_mem_sample_the_host(trainer: Trainer, tmp_path: Path) -> None:
    exp = tp._ExperimentalConfig(host_sys=["cpu", "mem"], data_simplification=False)
    root = tmp_path / "p"
    with tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=0, warmup=0, active=1, repeat=1),
                    on_trace_ready=tp.tensorboard_trace_handler(str(root)), experimental_config=exp) as prof:
        trainer.step()
        time.sleep(0.5)  # a sampling period or two
        prof.step()
    (rd,) = rank_dirs(root)
    (job,) = sorted(rd.glob("PROF_*"))
    recs = rawread.read_all_records(job / "host" / "data").view(rawfile.COUNTER_DTYPE)
    series = set(recs[recs["kind"] == Kind.COUNTER]["a"].tolist())
    assert series, "no host counters"
