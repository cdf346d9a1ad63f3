"""Seed 000 (pyACL API collection overview): every API it names exists and does what the table
says — collection to a file, the extension (msproftx) APIs between start and stop, subscription,
and iteration timestamps — and the two families it says cannot mix are refused together."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from openmsprof import acl
from openmsprof.acl._state import STATE
from openmsprof.cli.main import main
from tests.conformance.facts import texts


@pytest.fixture(autouse=True)
def _acl_reset() -> Iterator[None]:
    yield
    if STATE.initialized:
        acl.finalize()
    STATE.prof_path = None
    STATE.set_configs.clear()


def test_every_named_api_exists() -> None:
    names = sorted(set(texts("000", "apis")))  # every acl.prof.NAME the seed's table names
    assert len(names) >= 20, names
    for name in names:
        if name.endswith("*") or name == "get":  # "acl.prof.get*": the accessor family
            assert [n for n in dir(acl.prof) if n.startswith("get_")], name
        else:
            assert callable(getattr(acl.prof, name)), name


def _job(out: Path) -> Path:
    (job,) = sorted(out.glob("PROF_*"))
    assert main(["export", "summary", "-dir", str(job)]) == 0
    return job


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_collection_with_extension_and_step_apis(tmp_path: Path) -> None:
    """Extension APIs between acl.prof.start and acl.prof.stop (ACL_PROF_MSPROFTX on) and the
    iteration APIs with the seed's capitalised names."""
    assert acl.init() == 0
    assert acl.prof.init(str(tmp_path)) == 0
    cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0, acl.ACL_PROF_ACL_API | acl.ACL_PROF_MSPROFTX)
    assert acl.prof.start(cfg) == 0
    stamp = acl.prof.create_stamp()
    assert acl.prof.set_stamp_trace_message(stamp, "iteration", len("iteration")) == 0
    info = acl.prof.Create_Step_Info()
    for _ in range(2):
        assert acl.prof.get_step_timestamp(info, acl.ACL_STEP_START) == 0
        assert acl.prof.mark(stamp) == 0
        assert acl.prof.push(stamp) == 0
        assert acl.prof.pop() == 0
        rid, ret = acl.prof.range_start(stamp)
        assert ret == 0 and acl.prof.range_stop(rid) == 0
        assert acl.prof.get_step_timestamp(info, acl.ACL_STEP_END) == 0
    acl.prof.Destroy_Step_Info(info)
    acl.prof.destroy_stamp(stamp)
    assert acl.prof.stop(cfg) == 0
    assert acl.prof.destroy_config(cfg) == 0
    assert acl.prof.finalize() == 0
    job = _job(tmp_path)
    tx = _rows(job / "summary" / "msprof_tx_host.csv")
    assert [r["message"] for r in tx].count("iteration") == 6  # 2 x (mark, push/pop, range)
    steps = [r for p in (job / "summary").glob("step_trace_*.csv") for r in _rows(p)]
    assert len(steps) == 2 and all(float(r["Iteration Time(us)"]) > 0 for r in steps)


def test_subscription_and_file_collection_do_not_mix(tmp_path: Path, models: dict[str, Path]) -> None:
    """"The Profiling pyACL APIs ... cannot be called together with the Profiling pyACL APIs for
    Subscription": while a model is subscribed, acl.prof.init is refused."""
    assert acl.init() == 0
    model_id, ret = acl.mdl.load_from_file(str(models["tiny_mlp"]))
    assert ret == 0
    r, w = os.pipe()
    sub = acl.prof.create_subscribe_config(1, 0xFF, w)
    assert acl.prof.model_subscribe(model_id, sub) == 0
    assert acl.prof.init(str(tmp_path)) == acl.ACL_ERROR_PROF_API_CONFLICT
    assert acl.prof.model_un_subscribe(model_id) == 0
    assert acl.prof.init(str(tmp_path)) == 0
    assert acl.prof.finalize() == 0
    assert acl.prof.destroy_subscribe_config(sub) == 0
    os.close(r)
    assert acl.mdl.unload(model_id) == 0
