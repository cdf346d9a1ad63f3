"""A loaded model: its plain ONNX Runtime session and its profiling sessions (harvested by ``_harvester``).

Profiling off ⇒ executes run on the plain session through a cached IOBinding bound to the
user's buffers (no per-operator cost).  Task profiling or a subscription ⇒ executes run on a
:class:`~openmsprof.sources.onnxruntime_tasks.ProfiledRunner` (IOBindings to the same buffers on
each profiling session); a background harvester thread (``_harvester``) turns its events into task records when
that is cheapest (once the executes carry a harvest's fixed cost: then idle gaps or a period; a
size threshold; at stop), builds the next profiling session ahead of time
and frees ended ones, while a subscribed model is harvested right after each execute so its op
records are in the pipe before execute returns.  ORT writes its profiles to a RAM disk when one
with room is there.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnxruntime as ort

from openmsprof.acl import _profdir
from openmsprof.acl._codes import ORT_TYPES
from openmsprof.acl._state import STATE, log, own
from openmsprof.sources import onnxruntime_tasks as ortt
from openmsprof.sources import ort_columns, ort_task_records, subscription

OPT_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
OPT_ENV = "OPENMSPROF_ORT_OPT_LEVEL"
PROVIDERS_ENV = "OPENMSPROF_ORT_PROVIDERS"
PLAIN, TASKS, SUBSCRIBED = 0, 1, 2
_gens = itertools.count(1)


def default_opt_level() -> str:
    level = os.environ.get(OPT_ENV, "all").strip().lower() or "all"
    return level if level in OPT_LEVELS else "all"


def providers() -> list[str]:
    avail = ort.get_available_providers()
    wanted = os.environ.get(PROVIDERS_ENV, "")
    if wanted:
        chosen = [p.strip() for p in wanted.split(",") if p.strip() in avail]
        if chosen:
            return chosen
    return [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in avail]


@dataclass
class IOSpec:
    name: str
    dims: list[int]  # -1 = dynamic
    acl_type: int
    np_type: str
    size: int  # bytes; 0 when a dim is dynamic


def _specs(args: list[Any]) -> list[IOSpec]:
    out = []
    for a in args:
        dims = [d if isinstance(d, int) and d >= 0 else -1 for d in a.shape]
        acl_type, np_type = ORT_TYPES.get(a.type, (-1, "uint8"))
        size = 0
        if all(d >= 0 for d in dims):
            size = 1
            for d in dims:
                size *= d
            size *= np.dtype(np_type).itemsize
        out.append(IOSpec(a.name, dims, acl_type, np_type, size))
    return out


class Model:
    """One ``acl.mdl.load_from_file`` result."""

    def __init__(self, model_id: int, path: str, opt_level: str, device_id: int = 0) -> None:
        self.id = model_id
        self.path = path
        self.device_id = device_id
        self.opt_level = opt_level
        self.providers = providers()
        self.plain = ort.InferenceSession(path, self._options(False), providers=self.providers)
        self.inputs = _specs(self.plain.get_inputs())
        self.outputs = _specs(self.plain.get_outputs())
        self.out_names = [o.name for o in self.outputs]
        self.mode = PLAIN
        self.count = 0
        #: sample every ``every``-th execute (the profiling session's interval; set by refresh_mode)
        self.every = 0
        self.runner: ortt.ProfiledRunner | None = None
        self.writer: subscription.PipeWriter | None = None
        self.sub_config = 0
        #: (input dataset, output dataset) → binding (see mdl._bind)
        self.bindings: dict[tuple[int, int], Any] = {}
        self.noted: set[int] = set()
        self._opt_path: str | None = None

    def _options(self, profiling: bool) -> ort.SessionOptions:
        so = ort.SessionOptions()
        so.graph_optimization_level = OPT_LEVELS[self.opt_level]
        so.log_severity_level = 3
        if profiling:
            so.enable_profiling = True
            # ORT names the file prefix + a millisecond stamp: a unique prefix per generation
            so.profile_file_prefix = os.path.join(_profdir.path(), f"m{self.id}_{os.getpid()}_{next(_gens)}")
        return so

    def _profiled_session(self) -> ort.InferenceSession:
        """A profiling session on the graph optimised once and saved: every generation then
        loads the same graph unoptimised, so generated node names (``ReorderOutput_token_N``,
        inlined functions) stay the same across generations, and creation is cheaper."""
        if self._opt_path is None:
            opt_path = os.path.join(_profdir.path(), f"model{self.id}_{os.getpid()}.optimized.onnx")
            so = self._options(False)
            so.optimized_model_filepath = opt_path
            try:
                ort.InferenceSession(self.path, so, providers=self.providers)
                self._opt_path = opt_path if os.path.isfile(opt_path) else ""
            except Exception as exc:
                if not own(exc):
                    raise
                self._opt_path = ""
        if self._opt_path:
            so = self._options(True)
            so.graph_optimization_level = OPT_LEVELS["disable"]
            try:
                return ort.InferenceSession(self._opt_path, so, providers=self.providers)
            except Exception as exc:
                if not own(exc):
                    raise
                self._opt_path = ""
        return ort.InferenceSession(self.path, self._options(True), providers=self.providers)

    def describe(self) -> str:
        return (f"model {self.id} ({self.path}): ONNX Runtime graph optimisation level "
                f"'{self.opt_level}' on {', '.join(self.providers)}; fused node names differ from "
                f"the ONNX graph (set {OPT_ENV}=disable or acl.mdl.set_graph_optimization_level"
                f"('disable') before loading for the unoptimised graph)")

    def refresh_mode(self, tasks: bool) -> None:
        """Choose plain or profiled execution from the current profiling state."""
        mode = SUBSCRIBED if self.writer is not None else TASKS if tasks else PLAIN
        if mode != PLAIN and self.runner is None:
            dynamic = any(d < 0 for spec in self.inputs for d in spec.dims)
            self.runner = ortt.ProfiledRunner(self._profiled_session, self._io_binding, dynamic)
        s = STATE.profiling_session()
        if mode != PLAIN and s is not None and id(s) not in self.noted:
            self.noted.add(id(s))
            s.note(self.describe())
            s.extra_info.setdefault("acl_models", {})[str(self.id)] = {
                "path": self.path, "graph_optimization_level": self.opt_level,
                "providers": self.providers}
        self.every = s.config.interval if s is not None else 0
        self.mode = mode

    def _io_binding(self, sess: ort.InferenceSession, feeds: dict[str, Any]) -> Any:
        """An IOBinding of ``sess`` to the user's buffers behind ``feeds`` (None when an output
        has a dynamic shape: those are copied out)."""
        b = next((b for b in list(self.bindings.values()) if b.feeds is feeds), None)
        if b is None or b.io is None:
            return None
        io = sess.io_binding()
        for spec in self.inputs:
            arr = feeds[spec.name]
            io.bind_input(spec.name, "cpu", 0, arr.dtype, list(arr.shape), arr.ctypes.data)
        for spec, view in zip(self.outputs, b.out_views, strict=True):
            io.bind_output(spec.name, "cpu", 0, np.dtype(spec.np_type), spec.dims, view.ctypes.data)
        return io

    def harvest(self, keep_running: bool, background: bool = False) -> None:
        """Turn the profiled runs so far into task records and subscription records
        (``background``: parse in short GIL holds so that executes go on meanwhile)."""
        runner = self.runner
        if runner is None:
            return
        if not keep_running:
            self.runner = None
        try:
            profile, launches = runner.harvest(keep_running, _yield_gil if background else None)
            if profile is None or not len(profile.node_ts):
                return
            ort_task_records.emit_tasks(profile, launches, runner.nodes.metas, self.id, self.device_id)
            writer = self.writer
            if writer is not None:
                self.publish(writer, profile, runner.nodes.metas)
        except Exception as exc:  # profiling never breaks the application
            if not own(exc):  # (a user's signal handler's exception goes on to the caller)
                raise
            log.warning("openmsprof.acl: harvesting ONNX Runtime profile of model %d failed: %s", self.id, exc)

    def publish(self, writer: subscription.PipeWriter, profile: ort_columns.Profile, metas: list[ort_columns.NodeMeta]) -> None:
        """Subscription records of every node of ``profile`` (in start order) to the pipe."""
        for meta in metas:
            if meta.op_index < 0:
                meta.op_index = subscription.OP_TABLE.intern(meta.name, meta.op_type)
        order = np.argsort(profile.node_ts, kind="stable")
        op_index = np.array([m.op_index for m in metas], np.int64)[profile.node_meta[order]]
        start = profile.node_ts[order]
        data = subscription.encode_columns(self.id, self.device_id, op_index,
                                           ort_task_records.stream_indexes(profile.node_tid[order]),
                                           start // 1000, (start + profile.node_dur[order]) // 1000)
        before = writer.dropped
        writer.write(data)
        if writer.dropped > before:
            s = STATE.profiling_session()
            msg = (f"subscription of model {self.id}: {writer.dropped - before} op records "
                   f"dropped (pipe full or closed; {writer.dropped} in all)")
            if s is not None:
                s.note(msg, warn=True)
            else:
                log.warning("openmsprof.acl: %s", msg)

    def close(self) -> None:
        self.harvest(keep_running=False)
        self.mode = PLAIN
        self.bindings.clear()


def _yield_gil() -> None:
    os.sched_yield()
