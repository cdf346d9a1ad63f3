"""Profiled executes write the user's own output buffers (IOBinding on every profiling
generation), also when datasets are made per execute, and every execute's tasks are recorded."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnxruntime as ort

from openmsprof import acl
from openmsprof.sources import onnxruntime_tasks as ortt
from tests.acl.helpers import jobs_under, read_job


def _dataset(size: int) -> tuple[int, int]:
    ptr, ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == 0
    ds = acl.mdl.create_dataset()
    _, ret = acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size))
    assert ret == 0
    return ds, ptr


def test_fresh_datasets_every_execute_give_right_outputs_and_tasks(models, out_dir):
    assert acl.init() == 0
    path = str(models["tiny_mlp"])
    mid, ret = acl.mdl.load_from_file(path)
    assert ret == 0
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    assert acl.prof.init(str(out_dir)) == 0
    cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0, acl.ACL_PROF_ACL_API | acl.ACL_PROF_TASK_TIME)
    assert acl.prof.start(cfg) == 0
    rng = np.random.default_rng(3)
    n = ortt.MAX_BINDINGS + 10
    model = acl.mdl.models()[mid]
    for i in range(n):
        x = rng.random((1, 16), dtype=np.float32)
        inp, iptr = _dataset(x.nbytes)
        out, optr = _dataset(8 * 4)
        assert acl.rt.memcpy(iptr, x.nbytes, acl.util.numpy_to_ptr(x), x.nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
        assert acl.mdl.execute(mid, inp, out) == 0
        y = acl.util.ptr_to_numpy(optr, (1, 8), 11).copy()
        np.testing.assert_allclose(y, ref.run(None, {"input": x})[0], rtol=1e-5, atol=1e-6)
        if i == 3:
            model.harvest(keep_running=True)  # a new generation mid-way: bound again
        assert len(model.runner._gen.io) <= ortt.MAX_BINDINGS
        acl.mdl.destroy_dataset(inp)
        acl.mdl.destroy_dataset(out)
        acl.rt.free(iptr)
        acl.rt.free(optr)
    assert acl.prof.stop(cfg) == 0
    assert acl.prof.finalize() == 0
    job = read_job(jobs_under(out_dir)[0])
    per_exec = Counter(t.conn for t in job.tasks)
    assert len(per_exec) == n and set(per_exec.values()) == {2}
