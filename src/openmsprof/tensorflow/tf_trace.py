"""Collect TensorFlow's own host trace for a session and turn it into openmsprof records.

:class:`TfTracer` runs ``tf.profiler.experimental`` with TensorFlow's default options (host
tracer level 2 — every executed op is traced at levels 1–3 alike — no Python tracer) for the
profiled window.  At :meth:`TfTracer.stop` it reads the
``XSpace`` TensorFlow wrote under ``JOB/host/tf_xplane/`` (kept: TensorBoard reads it too) and
records every op as a task, ``sess.run``/``tf.function`` calls as API spans and iterations as
steps through :mod:`openmsprof.sources.emit`, with the shapes of the optimized graphs
(:mod:`openmsprof.tensorflow.tf_graphs`); the fused nodes go to ``JOB/host/tf_fusion.json``.
Nothing is recorded per step while training runs, so the per-step cost is that of TensorFlow's
own tracer; with ``OPENMSPROF_TF_ROLL_S`` (:mod:`openmsprof.tensorflow.tf_roll`) the tracer is
stopped, restarted and harvested at a period.  TensorFlow is imported lazily.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from openmsprof.fileio import fs
from openmsprof.recorder.records import NO_MODEL, ApiLevel, Executor
from openmsprof.recorder.session import Session
from openmsprof.sources import emit
from openmsprof.sources.ort_task_records import reserve_task_ids, stream_index
from openmsprof.tensorflow.tf_graph_collect import (
    SessionGraphs,
    collected_function_graphs,
    graph_collection,
)
from openmsprof.tensorflow.tf_graphs import GraphInfo, analyse
from openmsprof.tensorflow.tf_roll import Roller
from openmsprof.tensorflow.tf_setup_runs import drop_setup_steps
from openmsprof.tensorflow.tf_xplane import TfTrace, parse_xspace

__all__ = ["TfTracer", "emit_trace", "find_point", "newest_xplane"]

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
        self.lock = threading.Lock()
        self.roller: Roller | None = None
        self.gaps: list[int] = []
        self.parts = 0
        self.fusion_keys: set[tuple[str, str]] = set()
        self.shapes: dict[tuple[str, str], tuple[str, str, str, str]] = {}
        self.names: set[tuple[str, str]] = set()
        self.shaped: set[tuple[str, str]] = set()
        self.threads: dict[int, str] = {}
        self.tasks = self.calls = self.graph_count = self.fusions = 0
        #: wall windows of sess.run calls of initializers only (not iterations)
        self.setup_runs: list[tuple[int, int]] = []

    def start(self) -> bool:
        """Start TensorFlow's tracer; False (noted in the job log) when it cannot run."""
        fs.make_dir(self.logdir)
        self.start_wall = time.time_ns()
        try:
            _tf_start(self.logdir)
        except Exception as exc:  # another tf.profiler is running, for instance
            self.session.note(f"TensorFlow's profiler could not start ({type(exc).__name__}: "
                              f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}); "
                              "no TensorFlow ops are recorded in this job", warn=True)
            return False
        self.running = True
        self.collecting = graph_collection(True)
        self.roller = Roller.start_for(self, self.session)
        return True

    def roll(self) -> None:
        """Stop TensorFlow's tracer, start it again at once and record the part just stopped
        (the roller thread's period; what runs during the restart is not traced)."""
        with self.lock:
            if not self.running:
                return
            t0 = time.perf_counter_ns()
            data = self._stop_tf()
            try:
                _tf_start(self.logdir)
            except Exception as exc:
                self.running = False
                self.session.note(f"TensorFlow's profiler could not restart ({exc}); the rest of "
                                  "the window has no TensorFlow ops", warn=True)
            self.gaps.append(time.perf_counter_ns() - t0)
            start_wall, self.start_wall = self.start_wall, time.time_ns()
        if data is not None:
            self._harvest(data, start_wall)

    def stop(self) -> tuple[int, int]:
        """Stop TensorFlow's tracer and record what it saw.  Returns (tasks, steps)."""
        if self.roller is not None:
            self.roller.halt()
        with self.lock:
            was_running, self.running = self.running, False
            if not was_running and not self.gaps:  # never started
                return self.tasks, self.steps
            data = self._stop_tf() if was_running else None  # None: a failed restart ended it
        if data is not None:
            self._harvest(data, self.start_wall)
        _protect(self.logdir)
        self._check_points()
        self._note_threads()
        self.session.note(f"TensorFlow optimized graphs: {self.graph_count} read, shapes for "
                          f"{len(self.shaped)} of {len(self.names)} traced ops, {self.fusions} "
                          "fused nodes (fusion_op)")
        if self.gaps:
            self.session.note(f"TensorFlow's tracer rolled {len(self.gaps)} times; it traced nothing "
                              f"for {sum(self.gaps) / 1e6:.1f} ms in all (ops running across a roll "
                              "are not recorded)")
        self.session.note(f"TensorFlow trace: {self.tasks} ops, {self.calls} calls, {self.steps} iterations")
        return self.tasks, self.steps

    def _stop_tf(self) -> bytes | None:
        """Stop TensorFlow's tracer; the XSpace it wrote (None, noted, when it wrote none)."""
        import tensorflow as tf

        try:
            tf.profiler.experimental.stop()
        except Exception as exc:
            self.session.note(f"TensorFlow's profiler failed to stop: {exc}", warn=True)
            return None
        path = newest_xplane(self.logdir)
        if path is None:
            self.session.note(f"TensorFlow wrote no trace under {str(self.logdir)!r}", warn=True)
            return None
        data = path.read_bytes()
        if self.roller is not None:  # TensorFlow names runs by the second: keep each part apart
            self.parts += 1
            path.parent.rename(path.parent.with_name(f"{path.parent.name}_part{self.parts}"))
        return data

    def _harvest(self, data: bytes, start_wall: int) -> None:
        """Record one XSpace (the whole window, or one roll's part of it)."""
        trace = parse_xspace(data, start_wall)
        trace.steps = drop_setup_steps(trace.steps, self.setup_runs)
        graphs = self._graphs()
        for k, v in graphs.shapes.items():
            self.shapes.setdefault(k, v)
        tasks, steps = emit_trace(trace, self.steps, self.shapes)
        self.tasks += tasks
        self.steps += steps
        self.calls += len(trace.calls)
        self.names.update(trace.nodes)
        self.shaped.update(k for k in trace.nodes if k in self.shapes)
        self.threads.update({t: trace.thread_names.get(t, str(t)) for t in set(trace.tid)})
        self._write_fusions(graphs)

    def _graphs(self) -> GraphInfo:
        """Shapes and fusions of the optimized graphs TensorFlow ran in the window."""
        found, self.session_graphs.graphs = self.session_graphs.graphs, []
        if self.collecting:
            self.collecting = self.running
            try:
                found += collected_function_graphs(keep=self.running)
            except Exception as exc:
                self.session.note(f"TensorFlow's function graphs could not be read: {exc}", warn=True)
        try:
            info = analyse(found)
            self.graph_count += info.graphs
            for err in info.failed[:3]:
                self.session.note(f"a TensorFlow graph could not be imported for its shapes: {err}")
            return info
        except Exception as exc:
            self.session.note(f"TensorFlow's optimized graphs could not be analysed: {exc}", warn=True)
            return GraphInfo()

    def _write_fusions(self, graphs: GraphInfo) -> None:
        new = [f for f in graphs.fusions if (f.model, f.name) not in self.fusion_keys]
        if not new:  # a roll's graphs repeat what an earlier part gave
            return
        self.fusion_keys.update((f.model, f.name) for f in new)
        self.fusions += len(new)
        rows = [{"model": f.model, "name": f.name, "type": f.op_type, "original": f.original,
                 "input_bytes": f.input_bytes, "output_bytes": f.output_bytes,
                 "weight_bytes": f.weight_bytes} for f in new]
        path = self.session.root / "host" / FUSION_FILE
        old = orjson.loads(path.read_bytes()) if path.is_file() else []  # an earlier roll or window
        fs.write_file_atomic(path, orjson.dumps(old + rows))

    def _check_points(self) -> None:
        cfg = self.session.config
        if not cfg.training_trace:
            return
        names = [n for n, _t in self.names]
        for key in ("fp_point", "bp_point"):
            point = getattr(cfg, key)
            if point and not find_point(point, names):
                self.session.note(f"{key} {point!r} names no op TensorFlow ran; the FP/BP columns "
                                  "of step_trace stay empty", warn=True)

    def _note_threads(self) -> None:
        """Which TensorFlow thread each Stream ID of the ops is (thread names are not records)."""
        used = sorted({stream_index(t): name for t, name in self.threads.items()}.items())
        if used:
            self.session.note("TensorFlow threads by Stream ID: "
                              + ", ".join(f"{i} = {name}" for i, name in used))

    def describe(self) -> dict[str, Any]:
        return {"logdir": str(self.logdir), "host_tracer_level": HOST_TRACER_LEVEL}


def _tf_start(logdir: Path) -> None:
    import tensorflow as tf

    opts = tf.profiler.experimental.ProfilerOptions(host_tracer_level=HOST_TRACER_LEVEL,
                                                    python_tracer_level=0)
    tf.profiler.experimental.start(str(logdir), options=opts)
