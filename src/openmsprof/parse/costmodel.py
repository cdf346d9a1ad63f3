"""A per-operator cost model from shapes: FLOPs, transcendental evaluations and bytes moved.

Pure functions of an operator's type and its tensor shapes/dtypes as the job stores them
(msprof spelling: ``"1,3,32,32;16,3,3,3;16"``, dtypes ``"FLOAT;FLOAT;FLOAT"``), so the importer,
the exporters and the advisor all compute the same numbers.

* FLOPs count 2 per multiply-accumulate and agree with ``torch.utils.flop_counter`` for
  mm/addmm/bmm/matmul (``2·m·n·k``), convolution (``2·N·Cout·(Cin/g)·∏k·∏out_spatial``;
  transposed: the input's spatial size) and scaled-dot-product attention (two bmm's).  Bias
  and the softmax are not counted, as there.
* Element-wise ops get documented weights per output element (:data:`ELEMENTWISE`):
  ``(flops, transcendentals)``; e.g. Softplus = (1, 2): one add, one exp, one log1p.
* Bytes are unfused: every input (weights included) read once, every output written once.
* Anything else is *unmodelled*: no FLOPs are claimed (``Cost.modelled`` is False).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "DATA_MOVEMENT",
    "ELEMENTWISE",
    "OVERHEAD_NS",
    "Cost",
    "Roofline",
    "dtype_bytes",
    "op_cost",
    "parse_shapes",
    "roofline",
]

#: Element-wise ops: (flops, transcendental evaluations) per output element.
ELEMENTWISE: dict[str, tuple[float, float]] = {
    "add": (1, 0), "sub": (1, 0), "mul": (1, 0), "div": (1, 0), "neg": (1, 0), "abs": (1, 0),
    "relu": (1, 0), "max": (1, 0), "min": (1, 0), "sqrt": (1, 0), "reciprocal": (1, 0),
    "leakyrelu": (2, 0), "leaky_relu": (2, 0), "prelu": (2, 0), "clip": (2, 0),
    "hardtanh": (2, 0), "hardsigmoid": (3, 0), "hardswish": (4, 0), "hardsigmoid_": (3, 0),
    "batchnormalization": (2, 0), "batch_norm": (2, 0), "where": (1, 0), "equal": (1, 0),
    "greater": (1, 0), "less": (1, 0), "not": (1, 0), "and": (1, 0), "or": (1, 0),
    "exp": (0, 1), "log": (0, 1), "tanh": (0, 1), "erf": (0, 1), "sin": (0, 1), "cos": (0, 1),
    "pow": (0, 1), "sigmoid": (2, 1), "softplus": (1, 2), "elu": (2, 1), "selu": (3, 1),
    "mish": (2, 3), "silu": (2, 1), "swish": (2, 1), "gelu": (4, 1), "fastgelu": (6, 1),
    "biasgelu": (5, 1), "quickgelu": (3, 1), "softmax": (3, 1), "_softmax": (3, 1),
    "logsoftmax": (3, 2), "log_softmax": (3, 2), "layernormalization": (8, 1),
    "layer_norm": (8, 1), "native_layer_norm": (8, 1), "instancenormalization": (8, 1),
    "add_": (1, 0), "mul_": (1, 0), "relu_": (1, 0), "copy_": (0, 0),
    # TensorFlow spellings
    "addv2": (1, 0), "biasadd": (1, 0), "realdiv": (1, 0), "relu6": (2, 0), "maximum": (1, 0),
    "minimum": (1, 0), "squareddifference": (2, 0), "square": (1, 0), "rsqrt": (1, 0),
    "fusedbatchnormv3": (2, 0), "fusedbatchnorm": (2, 0),
}
#: Ops that only move data: no FLOPs, bytes in + out.
DATA_MOVEMENT = {"transpose", "reorderinput", "reorderoutput", "concat", "cat", "split",
                 "slice", "gather", "cast", "pad", "expand", "tile", "flatten", "reshape",
                 "squeeze", "unsqueeze", "identity", "copy", "to", "contiguous", "clone",
                 "permute", "view", "copy_", "memcpy", "memcpytohost", "memcpyfromhost",
                 "dequantizelinear", "quantizelinear"}
#: Reductions and pools: one FLOP per input element.
REDUCTION = {"reducemean", "reducesum", "reducemax", "reducemin", "globalaveragepool",
             "globalmaxpool", "averagepool", "maxpool", "mean", "sum", "adaptive_avg_pool2d",
             "max_pool2d", "avg_pool2d", "max_pool2d_with_indices"}
MATMUL = {"matmul", "gemm", "fusedgemm", "fusedmatmul", "mm", "addmm", "bmm", "baddbmm",
          "linear", "matmulinteger", "qgemm", "batchmatmulv2", "batchmatmulv3", "batchmatmul"}
#: TensorFlow convolutions: NHWC activations, HWIO filters.
TF_CONV = {"Conv2D", "Conv3D", "DepthwiseConv2dNative", "_FusedConv2D"}
CONV = {"conv", "fusedconv", "nchwcconv", "convolution", "_convolution", "conv1d", "conv2d",
        "conv3d", "mkldnn_convolution", "convinteger", "qlinearconv"}
CONV_T = {"convtranspose", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}
SDPA = {"scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_attention_math"}
_DTYPE = {"float": 4, "float32": 4, "double": 8, "float64": 8, "float16": 2, "half": 2,
          "bfloat16": 2, "c10::bfloat16": 2, "c10::half": 2, "int64": 8, "long int": 8,
          "long": 8, "int32": 4, "int": 4, "int16": 2, "short": 2, "int8": 1, "uint8": 1,
          "unsigned char": 1, "signed char": 1, "bool": 1, "uint16": 2, "uint32": 4,
          "uint64": 8, "float8": 1, "complex64": 8, "complex128": 16}
#: Below this attainable time an op is dominated by fixed per-op overhead.
OVERHEAD_NS = 10_000

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Cost:
    """The modelled work of one op: ``kind`` is matmul, conv, attention, elementwise,
    reduction, data or unmodelled (then flops/transc are 0 and claim nothing)."""

    kind: str
    flops: float = 0.0
    transc: float = 0.0
    bytes: float = 0.0
    op: str = ""  # the op type as the job spells it (a runtime's measured ceiling is keyed by it)
    elems: float = 0.0  # output elements of an element-wise op

    @property
    def modelled(self) -> bool:
        return self.kind != "unmodelled"


UNMODELLED = Cost("unmodelled")


def parse_shapes(text: str | None) -> list[Shape | None]:
    """``"1,3,32,32;16"`` → [(1, 3, 32, 32), (16,)]; ``""`` entries → () (a scalar);
    anything unreadable (``N/A``, ``?``) → None for that tensor."""
    if not text or text == "N/A":
        return []
    out: list[Shape | None] = []
    for part in text.split(";"):
        part = part.strip().strip("[]")
        if not part:
            out.append(())
            continue
        try:
            out.append(tuple(int(d) for d in part.split(",")))
        except ValueError:
            out.append(None)
    return out


def dtype_bytes(name: str) -> int:
    """Bytes per element of a dtype name (ONNX ``FLOAT``, torch ``c10::BFloat16``); 4 if unknown."""
    return _DTYPE.get(name.strip().lower().replace("torch.", ""), 4)


def _elems(s: Shape) -> int:
    return math.prod(s) if s else 1


def _tensor_bytes(shapes: list[Shape | None], dtypes: list[str]) -> float:
    total = 0.0
    for i, s in enumerate(shapes):
        if s is None:
            continue
        total += _elems(s) * dtype_bytes(dtypes[i] if i < len(dtypes) else "float")
    return total


def _base(op_type: str) -> str:
    t = op_type.strip().lower()
    return t.split("::", 1)[1] if "::" in t else t


def _matmul(ins: list[Shape], outs: list[Shape], t: str) -> float | None:
    a, b = (ins[1], ins[2]) if t in ("addmm", "baddbmm") and len(ins) >= 3 else (ins[0], ins[1])
    if len(a) < 1 or len(b) < 1:
        return None
    if t == "linear":  # weight (out, in)
        return 2.0 * _elems(a[:-1]) * b[0] * a[-1]
    k = a[-1]
    if t in ("gemm", "fusedgemm", "qgemm"):  # transA/transB unknown: k is A's dim not in out
        out = outs[0] if outs else None
        if out is not None and len(out) == 2 and len(a) == 2:
            k = a[1] if a[0] == out[0] else a[0]
            return 2.0 * out[0] * out[1] * k
    if outs and outs[0]:
        return 2.0 * _elems(outs[0]) * k
    batch = _elems(a[:-2]) if len(a) > 2 else 1
    m = a[-2] if len(a) >= 2 else 1
    return 2.0 * batch * m * b[-1] * k


@lru_cache(maxsize=65536)
def op_cost(op_type: str, in_shapes: str | None, in_dtypes: str | None,
            out_shapes: str | None = None, out_dtypes: str | None = None) -> Cost:
    """The :class:`Cost` of one op from its stored shape/dtype texts (cached per signature)."""
    t = _base(op_type)
    ins_raw = parse_shapes(in_shapes)
    outs_raw = parse_shapes(out_shapes)
    idt = (in_dtypes or "").split(";")
    odt = (out_dtypes or "").split(";") if out_dtypes and out_dtypes != "N/A" else idt[:1]
    if not ins_raw or any(s is None for s in ins_raw):
        return UNMODELLED
    ins = [s for s in ins_raw if s is not None]
    outs = [s for s in outs_raw if s is not None]
    nbytes = _tensor_bytes(list(ins_raw), idt) + _tensor_bytes(list(outs_raw), odt)
    if not outs and (t in ELEMENTWISE or t in DATA_MOVEMENT):
        # torch records no outputs: the output is the largest input's shape
        big = max(ins, key=_elems)
        outs = [big]
        nbytes += _elems(big) * dtype_bytes(idt[0] if idt else "float")
    try:
        if op_type in TF_CONV and len(ins) >= 2 and outs:
            w, out = ins[1], outs[0]
            per_out = _elems(w[:-2]) if op_type == "DepthwiseConv2dNative" else _elems(w[:-1])
            return Cost("conv", 2.0 * _elems(out) * per_out, 0.0, nbytes, op_type)
        if t in MATMUL and len(ins) >= 2:
            f = _matmul(ins, outs, t)
            if f is None:
                return UNMODELLED
            if not outs_raw:
                a = ins[1] if t in ("addmm", "baddbmm") and len(ins) >= 3 else ins[0]
                nbytes += f / (2.0 * (a[-1] or 1)) * dtype_bytes(idt[0] if idt else "float")
            return Cost("matmul", f, 0.0, nbytes)
        if t in CONV and len(ins) >= 2 and outs and len(outs[0]) >= 3:
            x, w, out = ins[0], ins[1], outs[0]
            return Cost("conv", 2.0 * x[0] * _elems(out[2:]) * _elems(w), 0.0, nbytes, op_type)
        if t in CONV_T and len(ins) >= 2:
            x, w = ins[0], ins[1]
            return Cost("conv", 2.0 * x[0] * _elems(x[2:]) * _elems(w), 0.0, nbytes, op_type)
        if t in SDPA and len(ins) >= 3 and all(len(s) == 4 for s in ins[:3]):
            bh = ins[0][0] * ins[0][1]
            sq, dq, sk, dv = ins[0][2], ins[0][3], ins[1][2], ins[2][3]
            if not outs_raw:
                nbytes += bh * sq * dv * dtype_bytes(idt[0] if idt else "float")
            return Cost("attention", 2.0 * bh * sq * dq * sk + 2.0 * bh * sq * sk * dv,
                        0.0, nbytes)
    except (IndexError, ValueError):
        return UNMODELLED
    if t in ELEMENTWISE and outs:
        f, tr = ELEMENTWISE[t]
        n = _elems(outs[0])
        return Cost("elementwise" if not tr else "transcendental", f * n, tr * n, nbytes,
                    op_type, float(n))
    if t in REDUCTION:
        return Cost("reduction", float(_elems(ins[0])), 0.0, nbytes)
    if t in DATA_MOVEMENT:
        return Cost("data", 0.0, 0.0, nbytes)
    return UNMODELLED


@dataclass(frozen=True)
class Roofline:
    """An op against the machine's ceilings (times in ns, rates per second)."""

    memory_ns: float
    compute_ns: float
    attainable_ns: float
    bound: str  # memory | compute | overhead | unmodelled
    memory_bound_ratio: float | None  # (bytes/BW)/(compute time); None when no compute
    intensity: float | None  # FLOP/byte


def roofline(cost: Cost, bandwidth: float, peak_flops: float, special: float = 0.0, *,
             flops_rate: float = 0.0, elem_rate: float = 0.0) -> Roofline:
    """Place ``cost`` under the roofline of ``bandwidth`` (B/s), ``peak_flops`` (FLOP/s) and the
    transcendental rate ``special`` (evaluations/s; 0 = counted as 10 FLOPs each).

    A runtime's measured ceiling for this op class, when known, replaces the machine's:
    ``flops_rate`` (FLOP/s its own conv kernels reach; used when above ``peak_flops``),
    ``elem_rate`` (output elements/s its kernel for this element-wise op type reaches: the
    compute time is then elements / rate)."""
    if not cost.modelled:
        return Roofline(0.0, 0.0, 0.0, "unmodelled", None, None)
    mem = cost.bytes / bandwidth * 1e9 if bandwidth > 0 else 0.0
    if elem_rate > 0 and cost.elems > 0:
        comp = cost.elems / elem_rate * 1e9
    else:
        peak = max(peak_flops, flops_rate)
        flops = cost.flops + (0.0 if special > 0 else 10.0 * cost.transc)
        comp = flops / peak * 1e9 if peak > 0 else 0.0
        if special > 0:
            comp += cost.transc / special * 1e9
    att = max(mem, comp)
    bound = "overhead" if att < OVERHEAD_NS else "memory" if mem >= comp else "compute"
    ratio = mem / comp if comp > 0 else None
    inten = cost.flops / cost.bytes if cost.bytes > 0 else None
    return Roofline(mem, comp, att, bound, ratio, inten)
