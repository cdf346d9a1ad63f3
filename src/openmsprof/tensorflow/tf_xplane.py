"""TensorFlow's own trace (an ``XSpace`` from ``tf.profiler.experimental``) → plain columns.

Reads the ``/host:CPU`` plane that TensorFlow's host tracer fills and sorts its events into:

* **ops** — executor events named ``"{node name}:{op type}"`` whose display name is the type
  (graph ops of ``sess.run`` and ``tf.function``), async-op completions
  (``ExecutorState::ProcessAsync::Done`` with ``name``/``kernel_type`` stats) and eager ops
  (``EagerLocalExecute: {type}`` outside functions);
* **calls** — ``SessionRun`` and ``tf.function`` calls (events with a ``tf_function_call`` stat);
* **steps** — ``tf.profiler.experimental.Trace(..., step_num=N)`` events when the program marks
  its steps, else each top-level ``SessionRun``, else each top-level ``tf.function`` call on the
  Python thread (a Keras ``fit`` iteration, a custom loop's step).

Times are epoch ns: the plane's times are relative to ``profile_start_time`` of the
``Task Environment`` plane.  TensorFlow is imported lazily (only to find ``xplane_pb2``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TfTrace", "parse_xspace", "xspace_class"]

_PB_MODULES = ("tensorflow.tsl.profiler.protobuf.xplane_pb2", "tsl.profiler.protobuf.xplane_pb2",
               "tensorflow.core.profiler.protobuf.xplane_pb2")
_ASYNC_DONE = "ExecutorState::ProcessAsync::Done"
_EAGER_PREFIX = "EagerLocalExecute: "
#: Keras' per-iteration functions (Keras 3 and tf-keras): preferred as steps when present.
KERAS_STEP_FUNCTIONS = ("multi_step_on_iterator", "one_step_on_iterator", "one_step_on_data",
                        "train_function", "one_step_on_data_distributed")


def xspace_class() -> Any:
    """TensorFlow's ``XSpace`` protobuf class (ImportError naming the modules tried)."""
    for name in _PB_MODULES:
        try:
            return importlib.import_module(name).XSpace
        except ImportError:
            continue
    raise ImportError("TensorFlow's xplane_pb2 was not found (tried " + ", ".join(_PB_MODULES) + ")")


@dataclass
class TfTrace:
    """Columns of one trace.  Op ``i`` is node ``node[i]`` (index into ``nodes``: (name, type))."""

    nodes: list[tuple[str, str]] = field(default_factory=list)
    node: list[int] = field(default_factory=list)
    t0: list[int] = field(default_factory=list)
    t1: list[int] = field(default_factory=list)
    tid: list[int] = field(default_factory=list)
    #: (name, t0, t1, tid) of SessionRun and tf.function calls.
    calls: list[tuple[str, int, int, int]] = field(default_factory=list)
    #: (t0, t1, step number) in time order.
    steps: list[tuple[int, int, int]] = field(default_factory=list)
    thread_names: dict[int, str] = field(default_factory=dict)
    start_ns: int = 0


def _stat_value(s: Any, plane: Any) -> Any:
    if s.HasField("ref_value"):
        return plane.stat_metadata[s.ref_value].name
    for f in ("str_value", "int64_value", "uint64_value", "double_value"):
        if s.HasField(f):
            return getattr(s, f)
    return None


class _Plane:
    """Per-plane lookup tables: what each event metadata id means."""

    def __init__(self, plane: Any, trace: TfTrace) -> None:
        self.plane = plane
        self.stat_ids = {v.name: k for k, v in plane.stat_metadata.items()}
        self.ops: dict[int, int] = {}  # metadata id -> node index
        self.special: dict[int, str] = {}  # metadata id -> "session", "async", "eager", "other"
        node_index: dict[tuple[str, str], int] = {}
        for mid, md in plane.event_metadata.items():
            name, typ = md.name, md.display_name
            if typ and name.endswith(":" + typ) and len(name) > len(typ) + 1:
                key = (name[: -len(typ) - 1], typ)
            elif name.startswith(_EAGER_PREFIX) and not name[len(_EAGER_PREFIX):].startswith("__inference"):
                eager = name[len(_EAGER_PREFIX):]
                key = (eager, eager)
            else:
                self.special[mid] = ("session" if name == "SessionRun" else
                                     "async" if name == _ASYNC_DONE else "other")
                continue
            idx = node_index.get(key)
            if idx is None:
                idx = node_index[key] = len(trace.nodes)
                trace.nodes.append(key)
            self.ops[mid] = idx
        self.nodes = node_index


def parse_xspace(data: bytes, fallback_start_ns: int = 0) -> TfTrace:
    """The ops, calls and steps of a serialized ``XSpace``."""
    space = xspace_class()()
    space.ParseFromString(data)
    trace = TfTrace(start_ns=fallback_start_ns)
    for plane in space.planes:
        if plane.name == "Task Environment":
            ids = {v.name: k for k, v in plane.stat_metadata.items()}
            for s in plane.stats:
                if s.metadata_id == ids.get("profile_start_time"):
                    trace.start_ns = int(_stat_value(s, plane))
    for plane in space.planes:
        if plane.name == "/host:CPU":
            _host_plane(plane, trace)
    return trace


def _host_plane(plane: Any, trace: TfTrace) -> None:
    p = _Plane(plane, trace)
    func_id = p.stat_ids.get("tf_function_call")
    step_id = p.stat_ids.get("step_num")
    name_id, kind_id = p.stat_ids.get("name"), p.stat_ids.get("kernel_type")
    sessions: list[tuple[int, int, int]] = []
    funcs: list[tuple[str, int, int, int]] = []
    marked: list[tuple[int, int, int]] = []
    ops, special = p.ops, p.special
    node_list, t0s, t1s, tids = trace.node, trace.t0, trace.t1, trace.tid
    for line in plane.lines:
        tid = line.id
        trace.thread_names[tid] = line.display_name or line.name
        base = trace.start_ns + line.timestamp_ns
        for e in line.events:
            mid = e.metadata_id
            idx = ops.get(mid)
            t0 = base + e.offset_ps // 1000
            if idx is not None:
                node_list.append(idx)
                t0s.append(t0)
                t1s.append(t0 + e.duration_ps // 1000)
                tids.append(tid)
                continue
            what = special.get(mid)
            t1 = t0 + e.duration_ps // 1000
            if what == "session":
                sessions.append((t0, t1, tid))
                continue
            stats = {s.metadata_id: s for s in e.stats} if len(e.stats) else {}
            if what == "async" and name_id in stats and kind_id in stats:
                key = (str(_stat_value(stats[name_id], plane)), str(_stat_value(stats[kind_id], plane)))
                i = p.nodes.get(key)
                if i is None:
                    i = p.nodes[key] = len(trace.nodes)
                    trace.nodes.append(key)
                node_list.append(i)
                t0s.append(t0)
                t1s.append(t1)
                tids.append(tid)
            elif func_id is not None and func_id in stats:
                funcs.append((plane.event_metadata[mid].name, t0, t1, tid))
            elif step_id is not None and step_id in stats:
                marked.append((t0, t1, int(_stat_value(stats[step_id], plane) or 0)))
    trace.calls.extend(("sess.run", t0, t1, tid) for t0, t1, tid in sessions)
    trace.calls.extend(funcs)
    trace.calls.sort(key=lambda c: c[1])
    trace.steps = _steps(marked, sessions, funcs)


def _top_level(spans: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Spans not nested in an earlier span of the same thread, in time order."""
    out: list[tuple[int, int, int]] = []
    end: dict[int, int] = {}
    for t0, t1, tid in sorted(spans):
        if t0 >= end.get(tid, -1):
            out.append((t0, t1, tid))
            end[tid] = t1
    return out


def _steps(marked: list[tuple[int, int, int]], sessions: list[tuple[int, int, int]],
           funcs: list[tuple[str, int, int, int]]) -> list[tuple[int, int, int]]:
    if marked:
        return sorted(marked)
    if sessions:
        spans = _top_level(sessions)
    else:
        keras = [(t0, t1, tid) for n, t0, t1, tid in funcs if n in KERAS_STEP_FUNCTIONS]
        spans = _top_level(keras or [(t0, t1, tid) for _n, t0, t1, tid in funcs])
    return [(t0, t1, i + 1) for i, (t0, t1, _tid) in enumerate(spans)]
