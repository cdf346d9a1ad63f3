"""Load a rank dir's FRAMEWORK/ Kineto trace into columns (epoch ns) ready for every export.

On a CPU-only machine the device "kernels" are the innermost ``cpu_op`` events that computed
(operators with no working operator below them; allocation/view children count as part of them); with CUDA they are Kineto's GPU
kernels.  ``gloo:``/``nccl:`` annotations are communication work; ``c10d::`` operators only launch
it, so they are not kernels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from openmsprof.config.errors import RawDataError

FRAMEWORK_TRACE = "torch.kineto_trace.json"
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
COMM_PREFIXES = ("gloo:", "nccl:", "hccl:", "mpi:", "ucc:")
LAUNCH_PREFIXES = ("c10d::",)
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
MAX_JSON_BYTES = 10 * 1024**3


def to_ns(ts: list[float], offset_ns: int) -> np.ndarray:
    """Kineto µs floats → epoch ns (int64)."""
    return np.rint(np.asarray(ts, dtype=np.float64) * 1000.0).astype(np.int64) + offset_ns


@dataclass
class Kernels:
    """Device tasks in start order: name, ts/dur ns, stream, executor, source op index (-1 none)."""

    name: list[str] = field(default_factory=list)
    ts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    dur: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    stream: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    core: list[str] = field(default_factory=list)
    op: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    comm: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    def __len__(self) -> int:
        return len(self.name)


@dataclass
class Framework:
    pid: int
    offset_ns: int
    ops: list[dict[str, Any]]           # cpu_op + user_annotation X events (raw Kineto dicts)
    op_ts: np.ndarray
    op_dur: np.ndarray
    op_tid: np.ndarray
    op_leaf: np.ndarray                 # bool: a cpu_op that is a CPU kernel (see _kernel_mask)
    op_annotation: np.ndarray           # bool: user_annotation (record_function)
    python: list[dict[str, Any]]
    flows: list[dict[str, Any]]
    memory: list[dict[str, Any]]
    steps: list[tuple[int, int, int]]   # (step id, start ns, end ns)
    kernels: Kernels
    backend: str
    tids: list[int]


#: Allocation / view / metadata operators: inside a computing operator they are part of it.
TRIVIAL = frozenset((
    "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::as_strided", "aten::as_strided_",
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::_reshape_alias", "aten::resize_", "aten::detach",
    "detach", "aten::detach_", "aten::alias", "aten::expand", "aten::t", "aten::transpose", "aten::permute",
    "aten::unsqueeze", "aten::squeeze", "aten::slice", "aten::select", "aten::resolve_conj",
    "aten::resolve_neg", "aten::contiguous", "aten::flatten", "aten::numpy_T", "aten::lift_fresh",
))


def _kernel_mask(ts: np.ndarray, dur: np.ndarray, tid: np.ndarray, cpu: np.ndarray,
                 names: list[str]) -> np.ndarray:
    """cpu_op events that computed: no descendant does real work (only allocation/view ops below
    them), and not an allocation/view op inside such an operator."""
    n = len(ts)
    idx = np.flatnonzero(cpu)
    kernel = np.zeros(n, bool)
    if not len(idx):
        return kernel
    order = idx[np.lexsort((-dur[idx], ts[idx], tid[idx]))].tolist()
    trivial = [nm in TRIVIAL for nm in names]
    busy_child = [False] * n
    parent = [-1] * n
    tsl, endl, tidl = ts.tolist(), (ts + dur).tolist(), tid.tolist()
    stack: list[int] = []
    cur = None
    for i in order:
        if tidl[i] != cur:
            while stack:
                c = stack.pop()
                if stack and (busy_child[c] or not trivial[c]):
                    busy_child[stack[-1]] = True
            cur = tidl[i]
        while stack and endl[stack[-1]] <= tsl[i]:
            c = stack.pop()
            if stack and (busy_child[c] or not trivial[c]):
                busy_child[stack[-1]] = True
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    while stack:
        c = stack.pop()
        if stack and (busy_child[c] or not trivial[c]):
            busy_child[stack[-1]] = True
    for i in order:
        if busy_child[i]:
            continue
        p = parent[i]
        kernel[i] = not (trivial[i] and p >= 0 and not busy_child[p])
    return kernel


def clock_offset(info: dict[str, Any]) -> int:
    """Epoch ns − monotonic ns from profiler_info's end_info (when Kineto gives no base time)."""
    end = info.get("end_info") or {}
    try:
        return int(end["collectionTimeEnd"]) - int(end["MonotonicTimeEnd"])
    except (KeyError, TypeError, ValueError):
        raise RawDataError("profiler_info end_info lacks collectionTimeEnd/MonotonicTimeEnd") from None


def load(rank_dir: Path, info: dict[str, Any]) -> Framework:
    path = rank_dir / "FRAMEWORK" / FRAMEWORK_TRACE
    if not path.is_file():
        raise RawDataError(f"no framework data in {str(rank_dir)!r} (missing FRAMEWORK/{FRAMEWORK_TRACE})")
    if path.stat().st_size > MAX_JSON_BYTES:
        raise RawDataError(f"{str(path)!r} is larger than 10 GiB; refused")
    try:
        doc = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise RawDataError(f"{str(path)!r} is not valid JSON: {exc}") from None
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    base = doc.get("baseTimeNanoseconds") if isinstance(doc, dict) else None
    offset = int(base) if isinstance(base, int) else clock_offset(info)
    ops: list[dict[str, Any]] = []
    python: list[dict[str, Any]] = []
    flows: list[dict[str, Any]] = []
    memory: list[dict[str, Any]] = []
    gpu: list[dict[str, Any]] = []
    pid = 0
    for e in events:
        ph = e.get("ph")
        cat = e.get("cat")
        if ph == "X":
            if cat == "cpu_op" or cat == "user_annotation":
                ops.append(e)
            elif cat == "python_function":
                python.append(e)
            elif cat in GPU_CATS:
                gpu.append(e)
        elif ph in ("s", "f") and cat == "fwdbwd":
            flows.append(e)
        elif ph == "i" and e.get("name") == "[memory]":
            memory.append(e)
    for e in ops:
        if isinstance(e.get("pid"), int):
            pid = e["pid"]
            break
    ts = to_ns([e["ts"] for e in ops], offset)
    dur = np.rint(np.asarray([e.get("dur", 0) for e in ops], np.float64) * 1000).astype(np.int64)
    tid = np.asarray([e.get("tid", 0) if isinstance(e.get("tid"), int) else 0 for e in ops], np.int64)
    annot = np.asarray([e.get("cat") == "user_annotation" for e in ops], bool)
    names = [e.get("name", "") for e in ops]
    launch = np.asarray([n.startswith(LAUNCH_PREFIXES) for n in names], bool)
    comm = np.asarray([n.startswith(COMM_PREFIXES) for n in names], bool)
    leaf = _kernel_mask(ts, dur, tid, ~annot, names)
    steps = []
    for i in np.flatnonzero(annot):
        m = _STEP_RE.match(names[i])
        if m:
            steps.append((int(m.group(1)), int(ts[i]), int(ts[i] + dur[i])))
    steps.sort(key=lambda s: s[1])
    tids = sorted(set(tid.tolist()))
    stream_of = {t: i for i, t in enumerate(tids)}
    if gpu:
        kernels, backend = _gpu_kernels(gpu, ops, offset), "CUDA"
    else:
        sel = np.flatnonzero((leaf & ~launch) | comm)
        sel = sel[np.argsort(ts[sel], kind="stable")]
        kernels = Kernels(name=[names[i] for i in sel], ts=ts[sel], dur=dur[sel],
                          stream=np.asarray([stream_of[t] for t in tid[sel].tolist()], np.int64),
                          core=["COMMUNICATION" if comm[i] else "CPU" for i in sel],
                          op=np.where(comm[sel], -1, sel).astype(np.int64), comm=comm[sel])
        backend = "CPU"
    return Framework(pid=pid, offset_ns=offset, ops=ops, op_ts=ts, op_dur=dur, op_tid=tid, op_leaf=leaf,
                     op_annotation=annot, python=python, flows=flows, memory=memory, steps=steps,
                     kernels=kernels, backend=backend, tids=tids)


def _gpu_kernels(gpu: list[dict[str, Any]], ops: list[dict[str, Any]], offset: int) -> Kernels:
    """CUDA kernels/memcpy from Kineto; the source op is the cpu_op with the same External id."""
    by_ext: dict[Any, int] = {}
    for i, e in enumerate(ops):
        ext = (e.get("args") or {}).get("External id")
        if ext is not None and e.get("cat") == "cpu_op":
            by_ext.setdefault(ext, i)
    gpu.sort(key=lambda e: e["ts"])
    ts = to_ns([e["ts"] for e in gpu], offset)
    dur = np.rint(np.asarray([e.get("dur", 0) for e in gpu], np.float64) * 1000).astype(np.int64)
    return Kernels(name=[e.get("name", "") for e in gpu], ts=ts, dur=dur,
                   stream=np.asarray([int(e.get("tid", 0)) if isinstance(e.get("tid"), int) else 0
                                      for e in gpu], np.int64),
                   core=["CUDA"] * len(gpu),
                   op=np.asarray([by_ext.get((e.get("args") or {}).get("External id"), -1) for e in gpu],
                                 np.int64),
                   comm=np.asarray(["nccl" in e.get("name", "").lower() for e in gpu], bool))


def shapes_text(args: dict[str, Any]) -> tuple[str, str]:
    """(``"8,16;16,32"``, ``"float;float"``) from Kineto's Input Dims / Input type."""
    dims = args.get("Input Dims")
    types = args.get("Input type")
    s = ";".join(",".join(str(x) for x in d) if isinstance(d, list) else "" for d in dims) if dims else ""
    t = ";".join(str(x) for x in types) if types else ""
    return s, t


def call_stacks(fw: Framework) -> dict[int, str]:
    """op index → ``"inner;\\r\\nouter"`` from the enclosing python_function events (with_stack)."""
    if not fw.python:
        return {}
    out: dict[int, str] = {}
    py_ts = to_ns([e["ts"] for e in fw.python], fw.offset_ns)
    py_dur = np.rint(np.asarray([e.get("dur", 0) for e in fw.python], np.float64) * 1000).astype(np.int64)
    items: list[tuple[int, int, int, int, int]] = []  # (tid, ts, -dur, kind 0 py / 1 op, index)
    for i, e in enumerate(fw.python):
        items.append((e.get("tid", 0), int(py_ts[i]), -int(py_dur[i]), 0, i))
    for i in np.flatnonzero(~fw.op_annotation).tolist():
        items.append((int(fw.op_tid[i]), int(fw.op_ts[i]), -int(fw.op_dur[i]), 1, i))
    items.sort()
    stack: list[tuple[int, str]] = []
    cur_tid = None
    for tid, ts, ndur, kind, i in items:
        if tid != cur_tid:
            stack, cur_tid = [], tid
        while stack and stack[-1][0] <= ts:
            stack.pop()
        if kind == 0:
            stack.append((ts - ndur, fw.python[i].get("name", "")))
        elif stack:
            out[i] = ";\r\n".join(name for _end, name in reversed(stack))
    return out


def op_times(fw: Framework) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per op: time of direct child ops, own kernel time, kernel time of its whole subtree (ns)."""
    n = len(fw.ops)
    ops = np.flatnonzero(~fw.op_annotation)
    ts, dur, tid = fw.op_ts, fw.op_dur, fw.op_tid
    child = np.zeros(n, np.int64)
    dev_self = np.zeros(n, np.int64)
    k = fw.kernels
    valid = k.op >= 0
    np.add.at(dev_self, k.op[valid], k.dur[valid])
    dev_total = dev_self.copy()
    order = ops[np.lexsort((-dur[ops], ts[ops], tid[ops]))].tolist()
    tsl, endl, tidl, durl = ts.tolist(), (ts + dur).tolist(), tid.tolist(), dur.tolist()
    stack: list[int] = []
    cur = None
    for i in order:
        if tidl[i] != cur:
            while len(stack) > 1:
                c = stack.pop()
                dev_total[stack[-1]] += dev_total[c]
            stack, cur = [], tidl[i]
        while stack and endl[stack[-1]] <= tsl[i]:
            c = stack.pop()
            if stack:
                dev_total[stack[-1]] += dev_total[c]
        if stack:
            child[stack[-1]] += durl[i]
        stack.append(i)
    while len(stack) > 1:
        c = stack.pop()
        dev_total[stack[-1]] += dev_total[c]
    return child, dev_self, dev_total
