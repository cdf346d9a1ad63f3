"""``openmsprof demo``: profile a bundled ONNX model end to end and print the statistics.

Builds the ResNet-like Mish CNN of :mod:`openmsprof.demo.models`, runs it through the pyACL facade
with ``acl.prof`` API + task-time profiling, markers and host sampling, then imports the job,
exports the timeline and summaries, and shows the op statistics — the whole msprof workflow in
one command.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from openmsprof.cli.argtypes import bounded_int
from openmsprof.fileio import temp_dirs

DEFAULT_OUTPUT = "openmsprof_demo"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("demo", help="profile a bundled ONNX model and print the summary",
                              description=__doc__)
    p.add_argument("--output", default=DEFAULT_OUTPUT, help=f"where the job goes (default ./{DEFAULT_OUTPUT})")
    p.add_argument("--executes", type=bounded_int(1, 100_000), default=20, help="model executions to profile (default 20)")
    p.add_argument("--activation", choices=("mish", "leakyrelu"), default="mish")
    p.set_defaults(func=run)


def _check(ret: int, what: str) -> None:
    from openmsprof import acl

    if ret != 0:
        raise SystemExit(f"openmsprof demo: {what} failed with {ret}: {acl.get_recent_err_msg()}")


def profile_model(model_path: Path, output: Path, executes: int) -> Path:
    """Run ``model_path`` ``executes`` times under acl.prof profiling; return the job dir."""
    from openmsprof import acl, mstx
    from openmsprof.recorder import session

    _check(acl.init(), "acl.init")
    _check(acl.rt.set_device(0), "acl.rt.set_device")
    context, ret = acl.rt.create_context(0)
    _check(ret, "acl.rt.create_context")
    model_id, ret = acl.mdl.load_from_file(str(model_path))
    _check(ret, "acl.mdl.load_from_file")
    desc = acl.mdl.create_desc()
    _check(acl.mdl.get_desc(desc, model_id), "acl.mdl.get_desc")
    datasets = []
    for count, size_of in ((acl.mdl.get_num_inputs(desc), acl.mdl.get_input_size_by_index),
                           (acl.mdl.get_num_outputs(desc), acl.mdl.get_output_size_by_index)):
        ds = acl.mdl.create_dataset()
        for i in range(count):
            size = size_of(desc, i)
            ptr, ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
            _check(ret, "acl.rt.malloc")
            _, ret = acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size))
            _check(ret, "acl.mdl.add_dataset_buffer")
        datasets.append(ds)
    dims, ret = acl.mdl.get_input_dims(desc, 0)
    image = np.random.default_rng(0).random(dims["dims"], dtype=np.float32)
    in_ptr = acl.get_data_buffer_addr(acl.mdl.get_dataset_buffer(datasets[0], 0))
    _check(acl.rt.memcpy(in_ptr, image.nbytes, acl.util.numpy_to_ptr(image), image.nbytes,
                         acl.ACL_MEMCPY_HOST_TO_DEVICE), "acl.rt.memcpy")

    _check(acl.prof.init(str(output)), "acl.prof.init")
    cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0,
                                 acl.ACL_PROF_ACL_API | acl.ACL_PROF_TASK_TIME | acl.ACL_PROF_MSPROFTX)
    _check(acl.prof.start(cfg), "acl.prof.start")
    s = session.current()
    job = s.root if s is not None else None
    for i in range(executes):
        mstx.range_push(f"iteration {i}")
        _check(acl.mdl.execute(model_id, datasets[0], datasets[1]), "acl.mdl.execute")
        mstx.range_pop()
    _check(acl.prof.stop(cfg), "acl.prof.stop")
    acl.prof.destroy_config(cfg)
    _check(acl.prof.finalize(), "acl.prof.finalize")

    for ds in datasets:
        for i in range(acl.mdl.get_dataset_num_buffers(ds)):
            buf = acl.mdl.get_dataset_buffer(ds, i)
            acl.rt.free(acl.get_data_buffer_addr(buf))
            acl.destroy_data_buffer(buf)
        acl.mdl.destroy_dataset(ds)
    acl.mdl.destroy_desc(desc)
    acl.mdl.unload(model_id)
    acl.rt.destroy_context(context)
    acl.rt.reset_device(0)
    acl.finalize()
    if job is None:
        raise SystemExit("openmsprof demo: profiling did not start")
    return job


def run(args: argparse.Namespace) -> int:
    import onnx

    from openmsprof.cli.main import main as cli_main
    from openmsprof.demo.models import resnet_like

    output = Path(args.output).absolute()
    with temp_dirs.private_temp_dir("openmsprof_demo_") as tmp:
        model_path = Path(tmp) / f"resnet_{args.activation}.onnx"
        onnx.save(resnet_like(args.activation), os.fspath(model_path))
        print(f"openmsprof demo: profiling {model_path.name} ({args.executes} executes) ...")
        job = profile_model(model_path, output, args.executes)
    print(f"openmsprof demo: job written to {job}")
    for argv in (["import", "-dir", str(job)], ["export", "timeline", "-dir", str(job)],
                 ["export", "summary", "-dir", str(job)], ["show", "-dir", str(job)]):
        rc = cli_main(argv)
        if rc != 0:
            print(f"openmsprof demo: '{' '.join(argv[:2])}' failed with {rc}", file=sys.stderr)
            return rc
    print(f"\nopenmsprof demo: timeline in {job / 'timeline'}, summaries in {job / 'summary'}")
    print("open the timeline JSON in https://ui.perfetto.dev or chrome://tracing")
    return 0
