"""TensorFlow's optimized graphs → op shapes and the ops grappler fused.

TensorFlow's host trace names each executed op and its type but carries no shapes (at any
host tracer level) and does not say which ops a fused kernel replaced.  Both are in the graphs
TensorFlow actually ran, after grappler (gathered by :mod:`openmsprof.tensorflow.tf_graph_collect`).

:func:`analyse` imports each partition graph into a fresh ``tf.Graph`` (TensorFlow's shape
inference: unknown dimensions stay ``-1``, an unknown rank is ``-2``) and gives per ``(node name,
op type)`` the input/output shapes and dtypes — dropped where two graphs disagree — and one
:class:`Fusion` per node with a ``fused_ops`` attribute (``_FusedMatMul``, ``_FusedConv2D``,
``_MklNativeFusedMatMul``, ``_FusedBatchNormEx``...): its original ops are the node itself (it
keeps the name of the last fused op) and the producers along its first input that the
optimized graph no longer has, at most one per fused op.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["IO_OPS", "Fusion", "GraphInfo", "analyse", "shapes_text", "tensor_bytes", "tensor_text"]

#: Producers whose outputs count as weights in fusion_op's Memory Weight.
WEIGHT_PRODUCERS = frozenset({"ReadVariableOp", "_MklReadVariableOp", "Const", "VariableV2",
                              "VarHandleOp", "Variable"})
IO_OPS = frozenset({"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval"})
_FEED = re.compile(r"_arg_(.+)_0_\d+")
_DTYPE_NAMES = {"float32": "FLOAT", "float16": "FLOAT16", "float64": "DOUBLE", "bfloat16": "BF16",
                "int64": "INT64", "int32": "INT32", "int16": "INT16", "int8": "INT8",
                "uint8": "UINT8", "bool": "BOOL", "string": "STRING", "resource": "RESOURCE",
                "variant": "VARIANT"}


@dataclass
class Fusion:
    """One fused node of an optimized graph (a fusion_op row)."""

    model: str
    name: str
    op_type: str
    original: list[str]
    #: bytes of inputs (non-weight), outputs, weights; None where a shape is not fully known
    input_bytes: int | None
    output_bytes: int | None
    weight_bytes: int | None


@dataclass
class GraphInfo:
    """Per (node name, op type): (input shapes, input dtypes, output shapes, output dtypes)."""

    shapes: dict[tuple[str, str], tuple[str, str, str, str]] = field(default_factory=dict)
    fusions: list[Fusion] = field(default_factory=list)
    graphs: int = 0
    failed: list[str] = field(default_factory=list)


def _dtype(t: Any) -> str:
    dt = t.dtype.base_dtype
    return _DTYPE_NAMES.get(dt.name, dt.name.upper())


def shapes_text(shapes: Any) -> str:
    """``"8,16;16,4"``: dims joined by ``,``, tensors by ``;`` (-1 unknown dim, -2 unknown rank;
    empty when no rank is known at all, as for eager ops' per-op graphs)."""
    if all(s.rank is None for s in shapes):
        return ""
    return ";".join("-2" if s.rank is None else ",".join("-1" if d is None else str(d) for d in s.as_list())
                    for s in shapes)


def tensor_bytes(tensors: Any) -> int | None:
    """Total bytes of fully known dense tensors, else None."""
    total = 0
    for t in tensors:
        dt = t.dtype.base_dtype
        size = getattr(dt, "size", 0)
        if not t.shape.is_fully_defined() or not size or dt.name in ("resource", "variant", "string"):
            return None
        total += t.shape.num_elements() * size
    return total


def tensor_text(tensors: Any) -> tuple[str, str, int | None]:
    """(``"8,16;16,4"``, ``"FLOAT;FLOAT"``, total bytes or None) of TF tensors."""
    return (shapes_text([t.shape for t in tensors]), ";".join(_dtype(t) for t in tensors),
            tensor_bytes(tensors))


def _pre_index(pre: Any) -> dict[str, tuple[list[str], str]]:
    """node name → (inputs without control inputs, function name or "") of a pre-optimization
    graph and the functions of its library."""
    idx: dict[str, tuple[list[str], str]] = {}
    if pre is None:
        return idx
    for n in pre.node:
        idx[n.name] = ([i.split(":")[0] for i in n.input if not i.startswith("^")], "")
    for f in pre.library.function:
        for n in f.node_def:
            idx.setdefault(n.name, ([i.split(":")[0] for i in n.input if not i.startswith("^")],
                                    f.signature.name))
    return idx


def _original_ops(name: str, n_fused: int, pre: dict[str, tuple[list[str], str]],
                  post_names: set[str]) -> tuple[list[str], str]:
    """The chain of pre-optimization ops a fused node replaced (its own name last)."""
    parts = name.split("/")
    for cut in range(len(parts)):  # inlined functions prefix their nodes' names
        local = "/".join(parts[cut:])
        if local in pre:
            prefix = "/".join(parts[:cut])
            break
    else:
        return [name], ""
    chain = [local]
    func = pre[local][1]
    for _ in range(n_fused):
        inputs = pre[chain[-1]][0]
        if not inputs:
            break
        prev = inputs[0]
        full = f"{prefix}/{prev}" if prefix else prev
        if prev not in pre or full in post_names:
            break
        chain.append(prev)
    return [f"{prefix}/{c}" if prefix else c for c in reversed(chain)], func


def analyse(graphs: list[tuple[str, Any, Any]]) -> GraphInfo:
    """Shapes and fusions of (model name, partition GraphDef, pre-optimization GraphDef) triples."""
    import tensorflow as tf

    info = GraphInfo()
    found: dict[tuple[str, str], Any] = {}  # key -> [in shapes, in dtypes, out shapes, out dtypes]
    seen_fusions: set[tuple[str, str]] = set()
    for model, gdef, pre in graphs:
        g = tf.Graph()
        gdef, renamed = _importable(gdef, pre)
        try:
            with g.as_default():
                tf.graph_util.import_graph_def(gdef, name="")
        except Exception as exc:
            info.failed.append(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            continue
        info.graphs += 1
        post_names = {n.name for n in gdef.node}
        pre_idx = _pre_index(pre)
        for op in g.get_operations():
            if op.type in IO_OPS or op.type in ("_Recv", "_Send", "NoOp"):
                continue
            name = renamed.get(op.name, op.name)
            _merge(found, (name, op.type), op)
            fused = op.node_def.attr["fused_ops"].list.s if "fused_ops" in op.node_def.attr else []
            if fused and (model, op.name) not in seen_fusions:
                seen_fusions.add((model, op.name))
                original, func = _original_ops(name, len(fused), pre_idx, post_names)
                weights = [t for t in op.inputs if t.op.type in WEIGHT_PRODUCERS]
                data = [t for t in op.inputs if t.op.type not in WEIGHT_PRODUCERS]
                label = model if model != "N/A" else func or model
                info.fusions.append(Fusion(label, name, op.type, original, tensor_bytes(data),
                                           tensor_bytes(op.outputs), tensor_bytes(weights)))
    info.shapes = {k: (shapes_text(v[0]), v[1], shapes_text(v[2]), v[3]) for k, v in found.items() if v}
    return info


def _merge(found: dict[tuple[str, str], Any], key: tuple[str, str], op: Any) -> None:
    """Record ``op``'s shapes under ``key``; a node of the same name and type in another graph
    (Keras' train and evaluate functions) merges to the most specific shape compatible with both
    (differing dims become -1); differing dtypes or arities drop the key (``None``)."""
    ins, outs = [t.shape for t in op.inputs], [t.shape for t in op.outputs]
    row = [ins, ";".join(_dtype(t) for t in op.inputs), outs, ";".join(_dtype(t) for t in op.outputs)]
    if key not in found:
        found[key] = row
        return
    old = found[key]
    if old is None:
        return
    if old[1] != row[1] or old[3] != row[3] or len(old[0]) != len(ins) or len(old[2]) != len(outs):
        found[key] = None
        return
    old[0] = [a.most_specific_compatible_shape(b) for a, b in zip(old[0], ins, strict=True)]
    old[2] = [a.most_specific_compatible_shape(b) for a, b in zip(old[2], outs, strict=True)]


def _importable(gdef: Any, pre: Any = None) -> tuple[Any, dict[str, str]]:
    """``gdef`` with the node names Python's importer refuses (a leading ``_``, as eager
    ``_EagerConst`` nodes and a session's ``_arg_…`` feeds have) renamed, and the map back to
    TensorFlow's names.  A session's feed ``_arg_{placeholder}_{port}_{index}`` gets the shape
    its placeholder declares in the pre-optimization graph (``pre``)."""
    bad = {n.name for n in gdef.node if n.name.startswith("_")}
    if not bad:
        return gdef, {}
    new = {b: "openmsprof" + b for b in bad}
    out = type(gdef)()
    out.CopyFrom(gdef)
    declared = {n.name: n.attr["shape"] for n in pre.node if n.op == "Placeholder"} if pre is not None else {}
    for n in out.node:
        m = _FEED.fullmatch(n.name) if n.op == "_Arg" and "_output_shapes" not in n.attr else None
        if m and m.group(1) in declared:
            n.attr["_output_shapes"].list.shape.add().CopyFrom(declared[m.group(1)].shape)
    for n in out.node:
        n.name = new.get(n.name, n.name)
        for i, inp in enumerate(n.input):
            ctrl = inp.startswith("^")
            base, sep, port = inp.lstrip("^").partition(":")
            if base in new:
                n.input[i] = ("^" if ctrl else "") + new[base] + sep + port
    return out, {v: k for k, v in new.items()}
