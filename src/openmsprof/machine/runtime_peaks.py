"""Ceilings a runtime's own kernels reach (part of ``openmsprof peaks``): per op class, not per
machine.

A BLAS GEMM is not the ceiling of ONNX Runtime's convolution (MLAS's NCHWc kernels may beat
numpy's GEMM), and numpy's vectorised ``exp`` is not the ceiling of a runtime whose Softplus
evaluates ``log(exp(x) + 1)`` one element at a time.  So, when ONNX Runtime is present, this
module times ONNX Runtime itself on fixed synthetic work, chosen once and independent of any
profiled model:

* ``Conv``: one 3×3 convolution, 128 → 128 channels, 56×56, batch 1 (0.92 GFLOP);
* element-wise transcendental kernels (:data:`ORT_ELEMENTWISE`) on one 2^20-element float32
  tensor of N(0, 1) values (Log: |x| + 0.5): output elements per second.

Each is the best and median of ``RUNS`` runs with the CV, as the machine peaks.  The cost
model uses them by the op type's spelling (``"Conv"``, ``"Softplus"``): a Conv's compute
ceiling is the larger of the GEMM peak and the runtime's conv rate; a measured element-wise op
costs ``elements / rate``.  Op types not measured keep the machine ceilings.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["CONV_SHAPE", "ELEMENTS", "ORT_ELEMENTWISE", "measure_onnxruntime"]

#: (channels in = out, height = width, kernel)
CONV_SHAPE = (128, 56, 3)
ELEMENTS = 1 << 20
#: ONNX op type → opset that has it (unary, float32)
ORT_ELEMENTWISE = {"Exp": 17, "Log": 17, "Tanh": 17, "Erf": 17, "Sigmoid": 17, "Softplus": 17,
                   "Elu": 17, "Selu": 17, "Softmax": 17, "LogSoftmax": 17, "Mish": 18,
                   "Gelu": 20}

def _ort(load: bool) -> Any:
    ort = sys.modules.get("onnxruntime")
    if ort is None and load and importlib.util.find_spec("onnxruntime") is not None:
        try:
            ort = importlib.import_module("onnxruntime")
        except Exception:
            return None
    return ort


def _model(op: str, opset: int, x_shape: list[int], w_shape: list[int] | None) -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = []
    if w_shape is None:
        node = helper.make_node(op, ["x"], ["y"])
    else:
        w = np.random.default_rng(0).standard_normal(w_shape).astype(np.float32) * 0.05
        inits.append(numpy_helper.from_array(w, "w"))
        node = helper.make_node(op, ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph([node], op, [x], [y], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()  # type: ignore[no-any-return]


def measure_onnxruntime(runs: Callable[[Callable[[], object], float, bool], list[float] | None],
                        stat: Callable[[list[float], float, str], dict[str, Any]],
                        deadline: float, skipped: list[str], load: bool) -> dict[str, Any]:
    """ONNX Runtime's conv rate (GFLOP/s) and element rates (Gelem/s); {} without it
    (without onnx to build the test graphs, too).
    ``runs(fn, deadline, must)`` times ``fn`` (None: no time left; the conv always runs);
    ``stat`` makes a figure."""
    ort = _ort(load)
    if ort is None or importlib.util.find_spec("onnx") is None:
        return {}
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    out: dict[str, Any] = {"version": str(getattr(ort, "__version__", "?")), "flops": {},
                           "elements": {}}
    c, hw, k = CONV_SHAPE
    jobs: list[tuple[str, str, int, list[int], list[int] | None, float]] = [
        ("flops", "Conv", 17, [1, c, hw, hw], [c, c, k, k], 2.0 * c * c * k * k * hw * hw / 1e9)]
    jobs += [("elements", op, opset, [1, 16, 256, 256], None, ELEMENTS / 1e9)
             for op, opset in ORT_ELEMENTWISE.items()]
    normal = np.random.default_rng(1).standard_normal(ELEMENTS).astype(np.float32)
    for group, op, opset, shape, w, work in jobs:
        if op != "Conv" and time.perf_counter() > deadline:
            skipped.append(f"onnxruntime {op}")
            continue
        try:
            sess = ort.InferenceSession(_model(op, opset, shape, w), opts,
                                        providers=["CPUExecutionProvider"])
        except Exception:  # an op this runtime version lacks
            skipped.append(f"onnxruntime {op} (not supported)")
            continue
        if w:
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        else:  # N(0, 1) inputs, both branches of every kernel; Log's made positive
            x = (np.abs(normal) + np.float32(0.5) if op == "Log" else normal).reshape(shape)
        feed = {"x": x}
        times = runs(lambda s=sess, f=feed: s.run(None, f), deadline,  # type: ignore[misc]
                     op == "Conv")
        if times is None:
            skipped.append(f"onnxruntime {op}")
            continue
        out[group][op] = stat(times, work, "GFLOP/s" if group == "flops" else "Gelem/s")
    return out  # also when every kernel was skipped: the runtime was tried on this machine
