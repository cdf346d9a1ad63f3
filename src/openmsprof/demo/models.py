"""Small ONNX models built in code with ``onnx.helper`` for the examples, tests and benchmarks.

* :func:`resnet_like` — a ResNet-like CNN (stem conv, residual blocks, global pool, classifier)
  with a Mish or a LeakyReLU activation: the seed's Mish → LeakyReLU case study.
* :func:`tiny_mlp` — a two-layer MLP, small enough that per-call overheads are visible.

Run ``python -m openmsprof.demo.models OUTDIR`` (or ``python examples/models.py OUTDIR``) to write ``resnet_mish.onnx``, ``resnet_leakyrelu.onnx``
and ``tiny_mlp.onnx``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 18  # Mish is an ONNX op since opset 18


class _Graph:
    def __init__(self, seed: int) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def name(self, kind: str) -> str:
        self.n += 1
        return f"{kind}_{self.n}"

    def weight(self, shape: tuple[int, ...], scale: float = 0.1) -> str:
        name = self.name("w")
        arr = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def act(self, x: str, activation: str) -> str:
        if activation == "mish":
            return self.op("Mish", [x])
        if activation == "leakyrelu":
            return self.op("LeakyRelu", [x], alpha=0.01)
        if activation == "relu":
            return self.op("Relu", [x])
        raise ValueError(f"unknown activation {activation!r} (mish, leakyrelu, relu)")

    def conv(self, x: str, cin: int, cout: int, k: int = 3) -> str:
        return self.op("Conv", [x, self.weight((cout, cin, k, k)), self.weight((cout,))],
                       kernel_shape=[k, k], pads=[k // 2] * 4)


def resnet_like(activation: str = "mish", *, channels: int = 16, blocks: int = 2,
                size: int = 32, classes: int = 10) -> onnx.ModelProto:
    """A small ResNet-like CNN on ``1x3x{size}x{size}`` float input → ``1x{classes}``."""
    g = _Graph(seed=7)
    x = g.act(g.conv("input", 3, channels), activation)
    for _ in range(blocks):
        y = g.act(g.conv(x, channels, channels), activation)
        y = g.conv(y, channels, channels)
        x = g.act(g.op("Add", [x, y]), activation)
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x], axis=1)
    x = g.op("Gemm", [x, g.weight((classes, channels)), g.weight((classes,))], transB=1)
    return _model(g, "resnet_like_" + activation, [1, 3, size, size], x, [1, classes])


def tiny_mlp(features: int = 16, hidden: int = 32, out: int = 8) -> onnx.ModelProto:
    """``1x{features}`` → Gemm → Relu → Gemm → ``1x{out}``."""
    g = _Graph(seed=3)
    x = g.op("Gemm", ["input", g.weight((hidden, features)), g.weight((hidden,))], transB=1)
    x = g.op("Relu", [x])
    x = g.op("Gemm", [x, g.weight((out, hidden)), g.weight((out,))], transB=1)
    return _model(g, "tiny_mlp", [1, features], x, [1, out])


def _model(g: _Graph, name: str, in_shape: list[int], out: str, out_shape: list[int]) -> onnx.ModelProto:
    g.nodes.append(helper.make_node("Identity", [out], ["output"], name="output_identity"))
    graph = helper.make_graph(
        g.nodes, name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, in_shape)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, out_shape)],
        initializer=g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="openmsprof-examples")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def save_all(out_dir: str | Path) -> dict[str, Path]:
    """Write the three example models; returns name → path."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    paths = {
        "resnet_mish": d / "resnet_mish.onnx",
        "resnet_leakyrelu": d / "resnet_leakyrelu.onnx",
        "tiny_mlp": d / "tiny_mlp.onnx",
    }
    onnx.save(resnet_like("mish"), paths["resnet_mish"])
    onnx.save(resnet_like("leakyrelu"), paths["resnet_leakyrelu"])
    onnx.save(tiny_mlp(), paths["tiny_mlp"])
    return paths


if __name__ == "__main__":
    for name, path in save_all(sys.argv[1] if len(sys.argv) > 1 else ".").items():
        print(f"{name}: {path}")
