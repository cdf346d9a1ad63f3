"""Real jobs for the advisor tests, profiled through the pyACL facade and the Python API."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import onnx

import openmsprof
from openmsprof import acl
from openmsprof.cli.cmd_demo import profile_model
from openmsprof.demo.models import resnet_like, tiny_mlp
from openmsprof.recorder import session
from openmsprof.sources import emit

HOSTILE = '<script>alert("x")</script>&'
SLEEP_S = 0.25
SLEEP_AFTER = 3  # the sleep comes after this many executes
SLEEPY_EXECUTES = 15  # enough steady executes that a loaded machine cannot move their median much


def _ok(ret: int) -> None:
    assert ret == 0, acl.get_recent_err_msg()


def mish_job(root: Path) -> Path:
    """The bundled CNN with Mish (Softplus-heavy), 20 executes."""
    path = root / "mish.onnx"
    onnx.save(resnet_like("mish"), os.fspath(path))
    out = root / "mish"
    out.mkdir()
    return profile_model(path, out, 20)


def hostile_model() -> onnx.ModelProto:
    model = tiny_mlp()
    for i, node in enumerate(model.graph.node):
        node.name = f"{HOSTILE}{i}"
    return model


def sleepy_job(root: Path, executes: int = SLEEPY_EXECUTES) -> Path:
    """Model load inside the profiled window, ``SLEEP_S`` of host time between two executes,
    operator names with HTML in them."""
    path = root / "hostile.onnx"
    onnx.save(hostile_model(), os.fspath(path))
    out = root / "sleepy"
    out.mkdir()
    _ok(acl.init())
    _ok(acl.rt.set_device(0))
    context, ret = acl.rt.create_context(0)
    _ok(ret)
    _ok(acl.prof.init(str(out)))
    cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0,
                                 acl.ACL_PROF_ACL_API | acl.ACL_PROF_TASK_TIME)
    _ok(acl.prof.start(cfg))
    s = session.current()
    assert s is not None
    job = s.root
    model_id, ret = acl.mdl.load_from_file(str(path))
    _ok(ret)
    desc = acl.mdl.create_desc()
    _ok(acl.mdl.get_desc(desc, model_id))
    datasets = []
    for count, size_of in ((acl.mdl.get_num_inputs(desc), acl.mdl.get_input_size_by_index),
                           (acl.mdl.get_num_outputs(desc), acl.mdl.get_output_size_by_index)):
        ds = acl.mdl.create_dataset()
        for i in range(count):
            size = size_of(desc, i)
            ptr, ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
            _ok(ret)
            acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size))
        datasets.append(ds)
    x = np.ones((1, 16), dtype=np.float32)
    in_ptr = acl.get_data_buffer_addr(acl.mdl.get_dataset_buffer(datasets[0], 0))
    _ok(acl.rt.memcpy(in_ptr, x.nbytes, acl.util.numpy_to_ptr(x), x.nbytes,
                      acl.ACL_MEMCPY_HOST_TO_DEVICE))
    for i in range(executes):
        if i == SLEEP_AFTER:
            time.sleep(SLEEP_S)
        _ok(acl.mdl.execute(model_id, datasets[0], datasets[1]))
    for ds in datasets:
        for i in range(acl.mdl.get_dataset_num_buffers(ds)):
            buf = acl.mdl.get_dataset_buffer(ds, i)
            acl.rt.free(acl.get_data_buffer_addr(buf))
            acl.destroy_data_buffer(buf)
        acl.mdl.destroy_dataset(ds)
    acl.mdl.destroy_desc(desc)
    _ok(acl.mdl.unload(model_id))
    _ok(acl.prof.stop(cfg))
    acl.prof.destroy_config(cfg)
    _ok(acl.prof.finalize())
    acl.rt.destroy_context(context)
    acl.rt.reset_device(0)
    acl.finalize()
    return job


STEP_S, SLOW_STEP_S, SLOW_STEP = 0.003, 0.03, 5


def steps_job(root: Path, steps: int = 8) -> Path:
    """Framework steps of ``STEP_S`` with one ``SLOW_STEP_S`` outlier; an unsupported switch."""
    out = root / "steps"
    out.mkdir()
    s = openmsprof.start(out, aic_metrics="PipeUtilization")
    # Step boundaries are laid out exactly (no sleeps): the rule must find the one outlier,
    # and a loaded machine must not stretch a normal step into a second one.
    t0 = emit.now_ns()
    for i in range(steps):
        dur = int((SLOW_STEP_S if i == SLOW_STEP else STEP_S) * 1e9)
        emit.record_step_range(t0, t0 + dur, i)
        t0 += dur + 200_000
    openmsprof.stop()
    return s.root
