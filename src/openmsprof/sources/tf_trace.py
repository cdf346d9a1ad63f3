"""Collect TensorFlow's own host trace for a session and turn it into openmsprof records.

:class:`TfTracer` runs ``tf.profiler.experimental`` with TensorFlow's default options (host
tracer level 2 — every executed op is traced at levels 1–3 alike — no Python tracer) for the
profiled window.  At :meth:`TfTracer.stop` it reads the
``XSpace`` TensorFlow wrote under ``JOB/host/tf_xplane/`` (kept: TensorBoard reads it too) and
records every op as a task, ``sess.run``/``tf.function`` calls as API spans and iterations as
steps through :mod:`openmsprof.sources.emit`.  Nothing is recorded per step while training runs,
so the per-step cost is that of TensorFlow's own tracer.  TensorFlow is imported lazily.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from openmsprof.recorder import fs
from openmsprof.recorder.records import NO_MODEL, ApiLevel, Executor
from openmsprof.recorder.session import Session
from openmsprof.sources import emit
from openmsprof.sources.onnxruntime_tasks import reserve_task_ids, stream_index
from openmsprof.sources.tf_graphs import GraphInfo, SessionGraphs, analyse
from openmsprof.sources.tf_xplane import TfTrace, parse_xspace

__all__ = ["TfTracer", "emit_trace", "find_point", "graph_collection", "newest_xplane"]

HOST_TRACER_LEVEL = 2
#: The fused nodes of the window's optimized graphs (read by ``export/msprof/fusion_op``).
FUSION_FILE = "tf_fusion.json"


def newest_xplane(logdir: Path) -> Path | None:
    """The most recent ``*.xplane.pb`` TensorFlow wrote under ``logdir``."""
    found = sorted(logdir.glob("plugins/profile/*/*.xplane.pb"), key=lambda p: p.stat().st_mtime_ns)
    return found[-1] if found else None


def find_point(point: str, names: list[str]) -> bool:
    """Whether ``point`` names an op (exactly, or as the tail of a scoped name)."""
    tail = "/" + point
    return any(n == point or n.endswith(tail) for n in names)


def _protect(root: Path) -> None:
    """0750 dirs / 0640 files for what TensorFlow wrote (it follows the umask)."""
    for dirpath, _dirnames, filenames in os.walk(root):
        os.chmod(dirpath, fs.DIR_MODE)
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), fs.FILE_MODE)


def _call_links(trace: TfTrace, t0: np.ndarray) -> tuple[list[int], np.ndarray]:
    """A connection id per call, and per op the id of the top-level call whose span holds its
    start (0 = none): the flow from a sess.run / tf.function call to the ops it ran."""
    conns = [emit.new_connection_id() for _ in trace.calls]
    top: list[tuple[int, int, int]] = []  # (t0, t1, conn) of calls not nested in an earlier one
    for (_n, c0, c1, _tid), conn in sorted(zip(trace.calls, conns, strict=True), key=lambda x: x[0][1]):
        if not top or c0 >= top[-1][1]:
            top.append((c0, c1, conn))
    link = np.zeros(len(t0), np.int64)
    if top and len(t0):
        starts = np.array([c[0] for c in top], np.int64)
        ends = np.array([c[1] for c in top], np.int64)
        ids = np.array([c[2] for c in top], np.int64)
        k = np.searchsorted(starts, t0, side="right") - 1
        ok = (k >= 0) & (t0 <= ends[np.maximum(k, 0)])
        link[ok] = ids[k[ok]]
    return conns, link


def emit_trace(trace: TfTrace, step_offset: int = 0,
               shapes: dict[tuple[str, str], tuple[str, str, str, str]] | None = None) -> tuple[int, int]:
    """Record ``trace`` (tasks on device 0 linked to their call, calls as Model-level API spans,
    steps); ``shapes`` per (node name, op type) from the optimized graphs.  Returns (tasks, steps)."""
    shift = emit.epoch_to_mono(0)
    n = len(trace.t0)
    raw_t0 = np.asarray(trace.t0, np.int64)
    conns, link = _call_links(trace, raw_t0)
    if n and emit.task_on():
        t0 = raw_t0 + shift
        t1 = np.maximum(np.asarray(trace.t1, np.int64) + shift, t0)
        tids = np.asarray(trace.tid, np.int64)
        uniq, inv = np.unique(tids, return_inverse=True)
        stream = np.array([stream_index(int(t)) for t in uniq], np.int64)[inv]
        first = reserve_task_ids(n)
        shapes = shapes or {}
        none = ("", "", "", "")
        strings = [(name, typ, *shapes.get((name, typ), none)) for name, typ in trace.nodes]
        emit.record_tasks(0, NO_MODEL, strings, [int(Executor.CPU)] * len(strings),
                          np.asarray(trace.node, np.int64), stream, t0, t1,
                          np.arange(first, first + n, dtype=np.int64), link)
    for (name, c0, c1, _tid), conn in zip(trace.calls, conns, strict=True):
        emit.record_api(name, ApiLevel.MODEL, c0 + shift, c1 + shift, conn)
    for s0, s1, num in trace.steps:
        emit.record_step_range(s0 + shift, s1 + shift, num + step_offset)
    return n, len(trace.steps)


class TfTracer:
    """TensorFlow's profiler for the window of one openmsprof session."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.logdir = session.root / "host" / "tf_xplane"
        self.running = False
        self.steps = 0
        #: sess.run signatures' partition graphs (filled by the Session.run wrapper)
        self.session_graphs = SessionGraphs()
        self.collecting = False

    def start(self) -> bool:
        """Start TensorFlow's tracer; False (noted in the job log) when it cannot run."""
        import tensorflow as tf

        fs.make_dir(self.logdir)
        opts = tf.profiler.experimental.ProfilerOptions(host_tracer_level=HOST_TRACER_LEVEL,
                                                        python_tracer_level=0)
        self.start_wall = time.time_ns()
        try:
            tf.profiler.experimental.start(str(self.logdir), options=opts)
        except Exception as exc:  # another tf.profiler is running, for instance
            self.session.note(f"TensorFlow's profiler could not start ({type(exc).__name__}: "
                              f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}); "
                              "no TensorFlow ops are recorded in this job", warn=True)
            return False
        self.running = True
        self.collecting = graph_collection(True)
        return True

    def stop(self) -> tuple[int, int]:
        """Stop TensorFlow's tracer and record what it saw.  Returns (tasks, steps)."""
        if not self.running:
            return 0, 0
        self.running = False
        import tensorflow as tf

        try:
            tf.profiler.experimental.stop()
        except Exception as exc:
            self.session.note(f"TensorFlow's profiler failed to stop: {exc}", warn=True)
            return 0, 0
        path = newest_xplane(self.logdir)
        if path is None:
            self.session.note(f"TensorFlow wrote no trace under {str(self.logdir)!r}", warn=True)
            return 0, 0
        _protect(self.logdir)
        trace = parse_xspace(path.read_bytes(), self.start_wall)
        graphs = self._graphs()
        tasks, steps = emit_trace(trace, self.steps, graphs.shapes)
        self.steps += steps
        self._check_points(trace)
        self._note_threads(trace)
        self._note_graphs(graphs, trace)
        self.session.note(f"TensorFlow trace {path.name}: {tasks} ops, {len(trace.calls)} calls, "
                          f"{steps} iterations")
        return tasks, steps

    def _graphs(self) -> GraphInfo:
        """Shapes and fusions of the optimized graphs TensorFlow ran in the window."""
        found = list(self.session_graphs.graphs)
        self.session_graphs = SessionGraphs()
        if self.collecting:
            self.collecting = False
            try:
                found += _collected_function_graphs()
            except Exception as exc:
                self.session.note(f"TensorFlow's function graphs could not be read: {exc}", warn=True)
        try:
            return analyse(found)
        except Exception as exc:
            self.session.note(f"TensorFlow's optimized graphs could not be analysed: {exc}", warn=True)
            return GraphInfo()

    def _note_graphs(self, graphs: GraphInfo, trace: TfTrace) -> None:
        with_shapes = sum(1 for k in trace.nodes if k in graphs.shapes)
        self.session.note(f"TensorFlow optimized graphs: {graphs.graphs} read, shapes for "
                          f"{with_shapes} of {len(trace.nodes)} traced ops, {len(graphs.fusions)} "
                          "fused nodes (fusion_op)")
        for err in graphs.failed[:3]:
            self.session.note(f"a TensorFlow graph could not be imported for its shapes: {err}")
        rows = [{"model": f.model, "name": f.name, "type": f.op_type, "original": f.original,
                 "input_bytes": f.input_bytes, "output_bytes": f.output_bytes,
                 "weight_bytes": f.weight_bytes} for f in graphs.fusions]
        path = self.session.root / "host" / FUSION_FILE
        old = []
        if path.is_file():  # a second window of the same job
            old = orjson.loads(path.read_bytes())
        fs.write_file_atomic(path, orjson.dumps(old + rows))

    def _check_points(self, trace: TfTrace) -> None:
        cfg = self.session.config
        if not cfg.training_trace:
            return
        names = [n for n, _t in trace.nodes]
        for key in ("fp_point", "bp_point"):
            point = getattr(cfg, key)
            if point and not find_point(point, names):
                self.session.note(f"{key} {point!r} names no op TensorFlow ran; the FP/BP columns "
                                  "of step_trace stay empty", warn=True)

    def _note_threads(self, trace: TfTrace) -> None:
        """Which TensorFlow thread each Stream ID of the ops is (thread names are not records)."""
        used = sorted({stream_index(t): trace.thread_names.get(t, str(t)) for t in set(trace.tid)}.items())
        if used:
            self.session.note("TensorFlow threads by Stream ID: "
                              + ", ".join(f"{i} = {name}" for i, name in used))

    def describe(self) -> dict[str, Any]:
        return {"logdir": str(self.logdir), "host_tracer_level": HOST_TRACER_LEVEL}


_collecting: list[bool] = [False]


def graph_collection(on: bool) -> bool:
    """Switch TensorFlow's function-graph collection (TF2 functions instantiated meanwhile keep
    their optimized graphs); False when the eager context cannot.  Switching it on again would
    drop what was collected, so an already running collection is left as it is."""
    if on and _collecting[0]:
        return True
    try:
        from tensorflow.python.eager import context

        ctx = context.context()
        if on:
            ctx.enable_graph_collection()
        else:
            ctx.disable_graph_collection()
    except Exception:
        return False
    _collecting[0] = on
    return True


def _collected_function_graphs() -> list[tuple[str, Any, Any]]:
    from tensorflow.python.eager import context

    ctx = context.context()
    rm = ctx.export_run_metadata()
    graph_collection(False)
    if rm is None:
        return []
    return [("N/A", pg, fg.pre_optimization_graph) for fg in rm.function_graphs for pg in fg.partition_graphs]
