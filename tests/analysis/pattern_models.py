"""ONNX models for the pattern rules: one holding every pattern, one with the same op types in
arrangements that must not match (wrong order, wrong consumer, gaps too long)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SHAPE = [1, 8, 32, 32]


class _G:
    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.n = 0

    def const(self, value: np.ndarray) -> str:
        self.n += 1
        name = f"c{self.n}"
        self.inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def op(self, kind: str, *inputs: str, **attrs: object) -> str:
        self.n += 1
        out = f"{kind.lower()}_{self.n}"
        self.nodes.append(helper.make_node(kind, list(inputs), [out], name=out, **attrs))
        return out

    def conv(self, x: str) -> str:
        w = self.const(np.random.default_rng(self.n).standard_normal((8, 8, 3, 3)) * 0.1)
        return self.op("Conv", x, w, kernel_shape=[3, 3], pads=[1, 1, 1, 1])

    def model(self, x: str, name: str) -> onnx.ModelProto:
        self.nodes.append(helper.make_node("Identity", [x], ["output"], name="out"))
        g = helper.make_graph(self.nodes, name,
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, SHAPE)],
                              initializer=self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def all_patterns() -> onnx.ModelProto:
    """Conv→Relu, Softplus→Tanh→Mul, Sigmoid→Mul, an Erf GELU, a spelled-out LayerNorm and a
    Transpose→Relu→Transpose pair (run with graph optimizations off so nothing is fused)."""
    g = _G()
    x = g.op("Relu", g.conv("input"))
    x = g.op("Mul", x, g.op("Tanh", g.op("Softplus", x)))
    x = g.op("Mul", x, g.op("Sigmoid", x))
    erf = g.op("Erf", g.op("Div", x, g.const(np.array(np.sqrt(2.0)))))
    x = g.op("Mul", g.op("Mul", x, g.op("Add", erf, g.const(np.array(1.0)))),
             g.const(np.array(0.5)))
    mean = g.op("ReduceMean", x, axes=[-1])
    d = g.op("Sub", x, mean)
    var = g.op("ReduceMean", g.op("Pow", d, g.const(np.array(2.0))), axes=[-1])
    x = g.op("Div", d, g.op("Sqrt", g.op("Add", var, g.const(np.array(1e-5)))))
    t = g.op("Transpose", x, perm=[0, 2, 3, 1])
    x = g.op("Transpose", g.op("Relu", t), perm=[0, 3, 1, 2])
    return g.model(x, "all_patterns")


def near_misses() -> onnx.ModelProto:
    """The same op types, arranged so that no pattern matches."""
    g = _G()
    x = g.op("Add", g.conv("input"), g.const(np.array(0.1)))  # Conv → Add: not an activation
    x = g.op("Tanh", g.op("Mul", x, g.op("Softplus", x)))  # Softplus → Mul → Tanh
    x = g.op("Add", x, g.op("Sigmoid", x))  # Sigmoid → Add
    x = g.op("Mul", x, g.op("Erf", x))  # Erf → Mul (no Add)
    x = g.op("Add", x, g.op("ReduceMean", x, axes=[-1]))  # ReduceMean → Add
    t = g.op("Transpose", x, perm=[0, 2, 3, 1])  # three ops between the Transposes
    x = g.op("Transpose", g.op("Relu", g.op("Sqrt", g.op("Relu", t))), perm=[0, 3, 1, 2])
    return g.model(x, "near_misses")
