"""When the background harvester harvests a task-profiled model: not after every execute nor on the
clock, but once the executes carry the harvest's fixed cost (issue 26: it scales with executes),
then in idle gaps of the application or after ``period``; at a size threshold (events per execute
measured at each harvest), and after ``MAX_PERIOD_S`` at the latest."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from openmsprof import acl
from openmsprof.acl import _harvester
from openmsprof.recorder import threads
from tests.acl.test_profiled_execute import _dataset


def test_harvest_policy_size_idle_age(models, out_dir, monkeypatch):
    monkeypatch.setattr(_harvester.HARVESTER, "period", 1e9)  # the shared thread leaves this model alone
    monkeypatch.setattr(_harvester.HARVESTER, "MIN_AGE_S", 1e9)
    assert acl.init() == 0
    mid, ret = acl.mdl.load_from_file(str(models["tiny_mlp"]))
    assert ret == 0
    inp, iptr = _dataset(16 * 4)
    out, _optr = _dataset(8 * 4)
    x = np.ones((1, 16), np.float32)
    acl.rt.memcpy(iptr, x.nbytes, acl.util.numpy_to_ptr(x), x.nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE)
    assert acl.prof.init(str(out_dir)) == 0
    cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0, acl.ACL_PROF_TASK_TIME)
    assert acl.prof.start(cfg) == 0
    h = _harvester.Harvester(period=5.0)  # a private policy object (the shared thread keeps its own)
    model = acl.mdl.models()[mid]
    r = model.runner
    for _ in range(20):
        assert acl.mdl.execute(mid, inp, out) == 0
    model.harvest(keep_running=True)  # a harvest measures the events per execute
    assert r.events_per_run == 2 + 2  # tiny_mlp optimised: two kernels, plus two session events
    assert not h.due(r)  # nothing pending
    assert r.run_s > 0  # and the mean time of an execute
    for _ in range(10):
        assert acl.mdl.execute(mid, inp, out) == 0
    r.last_harvest = time.monotonic()
    r.prepare_spare()  # (built now, so that the shared thread does not overwrite build_cpu_s below)
    r.build_cpu_s = 0.0  # first the ladder alone (a model whose next session costs nothing)
    assert not h.due(r)  # busy, young, small: keep collecting
    h.EVENT_BUDGET = 10 * r.events_per_run
    assert h.due(r)  # size threshold, whatever the age
    h.EVENT_BUDGET = _harvester.Harvester.EVENT_BUDGET
    time.sleep(h.MIN_AGE_S + 0.05)
    assert r.idle_ns() >= h.IDLE_S * 1e9
    assert h.due(r)  # an idle gap, old enough
    h.IDLE_S = 10.0
    assert not h.due(r)
    r.last_harvest = time.monotonic() - h.period
    assert h.due(r)  # the period
    # a fixed cost the ten pending executes do not carry: neither the clock nor a gap harvests
    r.build_cpu_s = r.pending_run_s() * h.FIXED_SHARE / h.FIXED_FACTOR * 1.5
    h.IDLE_S = 0.0
    assert not h.due(r)
    for _ in range(10):  # twice the executes: now they carry it (1.5 x ten executes' share)
        assert acl.mdl.execute(mid, inp, out) == 0
    assert h.due(r)
    r.build_cpu_s = 1e6  # whatever the fixed cost, the loss bound holds
    r.last_harvest = time.monotonic() - h.MAX_PERIOD_S
    assert h.due(r)
    assert acl.prof.stop(cfg) == 0
    assert acl.prof.finalize() == 0
    assert acl.mdl.unload(mid) == 0


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="no SCHED_BATCH on this OS")
def test_harvester_and_flusher_threads_do_not_preempt_executes(models, out_dir):
    """The harvester and the recorder's flusher wake periodically while the application executes:
    they run under SCHED_BATCH (normal CPU share, but their wakes do not preempt it)."""
    assert acl.init() == 0
    mid, ret = acl.mdl.load_from_file(str(models["tiny_mlp"]))
    assert ret == 0
    inp, _iptr = _dataset(16 * 4)
    out, _optr = _dataset(8 * 4)
    assert acl.prof.init(str(out_dir)) == 0
    cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0, acl.ACL_PROF_TASK_TIME)
    assert acl.prof.start(cfg) == 0
    assert acl.mdl.execute(mid, inp, out) == 0
    time.sleep(0.2)
    policies = {t.name: threads.policy_name(t.native_id) for t in threading.enumerate()
                if t.name in ("openmsprof-ort-harvester", "openmsprof-flusher") and t.native_id}
    assert policies == {"openmsprof-ort-harvester": "SCHED_BATCH", "openmsprof-flusher": "SCHED_BATCH"}
    assert threads.policy_name(threading.get_native_id()) == "SCHED_OTHER"  # the caller's is untouched
    assert acl.prof.stop(cfg) == 0
    assert acl.prof.finalize() == 0
    assert acl.mdl.unload(mid) == 0


@pytest.mark.skipif((os.cpu_count() or 1) < 2 or not os.path.isdir("/proc/self/task"),
                    reason="needs an ONNX Runtime thread pool (2+ cores) and /proc")
def test_a_sessions_fixed_cost_counts_its_thread_pool(models, out_dir, monkeypatch):
    """The next session's thread pool starts while it is built and its workers spin for work on
    their own threads: the harvest's fixed cost includes their CPU, not only the building thread's
    (that alone undercounted it ~30x: harvests came ~30x too often)."""
    monkeypatch.setattr(_harvester.HARVESTER, "period", 1e9)  # the shared thread leaves this model alone
    monkeypatch.setattr(_harvester.HARVESTER, "MIN_AGE_S", 1e9)
    assert acl.init() == 0
    mid, ret = acl.mdl.load_from_file(str(models["resnet_mish"]))
    assert ret == 0
    inp, _iptr = _dataset(3 * 32 * 32 * 4)
    out, _optr = _dataset(10 * 4)
    assert acl.prof.init(str(out_dir)) == 0
    cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0, acl.ACL_PROF_TASK_TIME)
    assert acl.prof.start(cfg) == 0
    model = acl.mdl.models()[mid]
    r = model.runner
    assert acl.mdl.execute(mid, inp, out) == 0
    r.prepare_spare()
    spare = r._spare
    assert spare is not None and spare.born  # the pool's worker threads, born during the build
    time.sleep(0.3)
    model.harvest(keep_running=True)  # swaps the spare in: its fixed cost is measured now
    assert r._gen is spare
    assert r.build_cpu_s > spare.build_s > 0
    assert acl.prof.stop(cfg) == 0
    assert acl.prof.finalize() == 0
    assert acl.mdl.unload(mid) == 0


def test_a_background_harvest_frees_the_ended_session_at_once(models, tmp_path):
    """After its last execute, a session's thread pool workers spin for work until it is freed
    (~1 ms of CPU a ms each): a background harvest frees the ended session at once, before its
    parse and the next build; a harvest on the caller's thread leaves it to empty_trash()."""
    import itertools
    import weakref

    import onnxruntime as ort

    from openmsprof.sources import onnxruntime_tasks as ortt
    from openmsprof.sources import ort_trash

    gens = itertools.count()

    def factory():
        so = ort.SessionOptions()
        so.enable_profiling = True
        so.profile_file_prefix = str(tmp_path / f"p{next(gens)}")
        return ort.InferenceSession(str(models["tiny_mlp"]), so, providers=["CPUExecutionProvider"])

    r = ortt.ProfiledRunner(factory)
    feeds = {"input": np.ones((1, 16), np.float32)}
    try:
        for background in (True, False):
            r.run(None, feeds, conn=1)
            ended = weakref.ref(r._gen.sess)
            profile, launches = r.harvest(keep_running=True, pause=(lambda: None) if background else None)
            assert len(launches) == 1 and profile is not None and len(profile.node_ts) > 0
            assert (ended() is None) is background
            ort_trash.empty_trash()
            assert ended() is None
    finally:
        r.close()
        ort_trash.empty_trash()
