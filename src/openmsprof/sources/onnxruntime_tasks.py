"""ONNX Runtime per-node profiling → openmsprof task records.

ONNX Runtime profiles a session only when it is created with ``enable_profiling``; its events
stay in memory until ``end_profiling()`` writes them as JSON and switches profiling off for that
session for good.  :class:`ProfiledRunner` therefore keeps *generations*: a profiling session
that executes run on, swapped for a fresh one (built ahead of time in the background) whenever
the events are harvested — after every execute of a subscribed model, about once a second
otherwise, and at stop.  Harvesting parses ORT's JSON (``model_run`` spans and the
``*_kernel_time`` node spans inside them), aligns ORT's epoch µs to our monotonic clock and
hands the runs to the caller.  Models that are not profiled never touch this module.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from openmsprof.sources import emit

_KERNEL = "_kernel_time"
_DTYPES = {"float": "FLOAT", "float16": "FLOAT16", "double": "DOUBLE", "int64": "INT64",
           "int32": "INT32", "int8": "INT8", "uint8": "UINT8", "bool": "BOOL", "bfloat16": "BF16"}
_streams: dict[int, int] = {}
_task_ids = iter(range(1, 1 << 62))
_stream_lock = threading.Lock()


def stream_index(tid: int) -> int:
    """Index of an executing thread within this process (FORMATS decision 9)."""
    idx = _streams.get(tid)
    if idx is None:
        with _stream_lock:
            idx = _streams.setdefault(tid, len(_streams))
    return idx


@dataclass
class Op:
    """One executed node; times are epoch ns (ORT's clock, µs resolution)."""

    name: str
    op_type: str
    tid: int
    start_ns: int
    dur_ns: int
    in_shapes: str
    in_dtypes: str
    out_shapes: str
    out_dtypes: str
    provider: str = ""


@dataclass
class Run:
    """One ``model_run`` with its ops in start order."""

    start_ns: int
    dur_ns: int
    tid: int
    ops: list[Op] = field(default_factory=list)


_shape_cache: dict[bytes, tuple[str, str]] = {}


def _shapes(items: Any) -> tuple[str, str]:
    """ORT ``[{"float": [1, 3]}, ...]`` → ("1,3;...", "FLOAT;...") (memoised: shapes repeat)."""
    key = orjson.dumps(items)
    hit = _shape_cache.get(key)
    if hit is not None:
        return hit
    if len(_shape_cache) > 4096:
        _shape_cache.clear()
    hit = _shape_cache[key] = _shapes_uncached(items)
    return hit


def _shapes_uncached(items: Any) -> tuple[str, str]:
    shapes, dtypes = [], []
    for item in items or ():
        for dtype, dims in item.items():
            dtypes.append(_DTYPES.get(dtype, dtype.upper()))
            shapes.append(",".join(str(d) for d in dims))
    return ";".join(shapes), ";".join(dtypes)


def parse_profile(data: bytes, start_ns: int) -> list[Run]:
    """ORT profile JSON → runs (in start order).  ``start_ns`` = ``get_profiling_start_time_ns``."""
    events = orjson.loads(data)
    runs: list[Run] = []
    nodes: list[dict[str, Any]] = []
    for ev in events:
        cat = ev.get("cat")
        if cat == "Node":
            if ev.get("name", "").endswith(_KERNEL):
                nodes.append(ev)
        elif cat == "Session" and ev.get("name") == "model_run":
            runs.append(Run(start_ns + ev["ts"] * 1000, ev["dur"] * 1000, int(ev.get("tid", 0))))
    runs.sort(key=lambda r: r.start_ns)
    starts = [r.start_ns for r in runs]
    for ev in nodes:
        t = start_ns + ev["ts"] * 1000
        tid = int(ev.get("tid", 0))
        owner = None
        i = bisect.bisect_right(starts, t) - 1
        for r in runs[max(0, i - 8): i + 1][::-1]:  # latest run of the same thread holding t
            if t <= r.start_ns + r.dur_ns:
                if r.tid == tid:
                    owner = r
                    break
                owner = owner or r
        if owner is None:
            continue
        args = ev.get("args", {})
        ins, in_t = _shapes(args.get("input_type_shape"))
        outs, out_t = _shapes(args.get("output_type_shape"))
        owner.ops.append(Op(ev["name"][: -len(_KERNEL)], args.get("op_name", ""), tid, t,
                            ev["dur"] * 1000, ins, in_t, outs, out_t, args.get("provider", "")))
    return runs


def emit_tasks(runs: list[Run], launches: list[tuple[int, int, int]], model_id: int,
               device_id: int) -> int:
    """Record every op of ``runs`` as a task; ``launches`` = (t0, t1, connection id) of the
    executes that produced them (paired in start order).  Returns the number of tasks."""
    if not emit.task_on():
        return 0
    to_mono = emit.epoch_to_mono
    launches = sorted(launches)
    n = 0
    for i, run in enumerate(runs):
        conn = launches[i][2] if i < len(launches) else 0
        for op in run.ops:
            t0 = to_mono(op.start_ns)
            emit.record_task(device_id, stream_index(op.tid), op.name, t0, t0 + op.dur_ns,
                             next(_task_ids), op_type=op.op_type, model_id=model_id,
                             input_shapes=op.in_shapes, input_dtypes=op.in_dtypes,
                             output_shapes=op.out_shapes, output_dtypes=op.out_dtypes,
                             connection_id=conn, executor=executor_of(op.provider))
            n += 1
    return n


def executor_of(provider: str) -> emit.Executor:
    """The real executor of an ORT execution provider (FORMATS decision 1)."""
    if provider.startswith("CPU") or not provider:
        return emit.Executor.CPU
    if provider.startswith(("CUDA", "Tensorrt")):
        return emit.Executor.CUDA
    return emit.Executor.OTHER


class _Gen:
    __slots__ = ("active", "launches", "sess")

    def __init__(self, sess: Any) -> None:
        self.sess = sess
        self.launches: list[tuple[int, int, int]] = []
        self.active: list[int] = []


class ProfiledRunner:
    """Runs a model on profiling-enabled ORT sessions and harvests their events.

    ``factory()`` builds a new profiling InferenceSession.  The execute path takes no lock:
    it marks itself active on the current generation, runs, and appends its launch record.
    """

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory
        self._gen = _Gen(factory())
        self._spare: Any = None
        self._spare_lock = threading.Lock()
        self._harvest_lock = threading.Lock()
        self.last_harvest = time.monotonic()

    def run(self, outputs: list[str] | None, feeds: dict[str, Any], conn: int) -> Any:
        """``sess.run`` on the current generation, remembering (t0, t1, conn)."""
        while True:
            g = self._gen
            g.active.append(1)
            if g is self._gen:
                break
            g.active.pop()
        try:
            t0 = emit.now_ns()
            out = g.sess.run(outputs, feeds)
            g.launches.append((t0, emit.now_ns(), conn))
            return out
        finally:
            g.active.pop()

    def pending(self) -> int:
        return len(self._gen.launches)

    def prepare_spare(self) -> None:
        """Build the next generation's session now (called from a background thread)."""
        with self._spare_lock:
            if self._spare is None:
                self._spare = self.factory()

    def harvest(self, keep_running: bool = True) -> tuple[list[Run], list[tuple[int, int, int]]]:
        """Swap in a fresh generation (or none), end the old one's profiling and parse it."""
        with self._harvest_lock:
            old = self._gen
            with self._spare_lock:
                spare, self._spare = self._spare, None
            if keep_running:
                self._gen = _Gen(spare if spare is not None else self.factory())
            elif spare is not None:
                _remove(spare.end_profiling())
            deadline = time.monotonic() + 5.0
            while old.active and time.monotonic() < deadline:
                time.sleep(0.0002)
            self.last_harvest = time.monotonic()
            if not old.launches and not keep_running:
                path = old.sess.end_profiling()
                _remove(path)
                return [], []
            start_ns = old.sess.get_profiling_start_time_ns()
            path = old.sess.end_profiling()
            if not path:
                return [], old.launches
            try:
                with open(path, "rb") as f:
                    data = f.read()
            finally:
                _remove(path)
            return parse_profile(data, start_ns), old.launches


#: Keep ONNX Runtime's own profile files in this directory instead of deleting them
#: (to compare against them, e.g. in tests).
KEEP_ENV = "OPENMSPROF_ORT_PROFILE_KEEP"


def _remove(path: str) -> None:
    try:
        if not path:
            return
        keep = os.environ.get(KEEP_ENV)
        if keep and os.path.isdir(keep):
            os.replace(path, os.path.join(keep, os.path.basename(path)))
        else:
            os.unlink(path)
    except OSError:
        pass
