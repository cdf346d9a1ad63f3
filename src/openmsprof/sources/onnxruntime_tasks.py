"""ONNX Runtime per-node profiling → openmsprof task records.

ONNX Runtime profiles a session only when it is created with ``enable_profiling``; its events
stay in memory until ``end_profiling()`` writes them as JSON and switches profiling off for that
session for good (run-level profiling exists in ORT's C API but not in its Python binding).
:class:`ProfiledRunner` therefore keeps *generations*: a profiling session that executes run on,
swapped for a fresh one (built and bound ahead of time in the background) whenever the events
are harvested — after every execute of a subscribed model; otherwise once the executes carry a
harvest's fixed cost (a session build, its thread pool's start included), then in idle gaps of
the application or after a period, when a generation holds about ``EVENT_BUDGET`` events (ORT
stops recording a session at 1 M), and at stop (see ``acl._harvester.Harvester``).  Harvesting
parses ORT's JSON into columns (:mod:`ort_profile`); :mod:`ort_task_records` aligns ORT's epoch
µs to our monotonic clock and emits the tasks as one batch, and :mod:`ort_trash` disposes of the
ended sessions and their files.  Models that are not profiled never touch this module.
"""

from __future__ import annotations

import functools
import mmap
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from openmsprof.sources import emit, ort_trash
from openmsprof.sources.ort_columns import Profile
from openmsprof.sources.ort_profile import NodeTable

__all__ = ["ProfiledRunner"]

#: IOBindings cached per generation (one per input/output dataset pair in use).
MAX_BINDINGS = 64
#: every CPU_SAMPLE-th execute has its CPU time taken (two clock reads: ~0.5 µs), for the harvest policy
CPU_SAMPLE = 16
#: Profiles from this size on are parsed from an mmap of the file instead of a copy.
MMAP_FROM = 1 << 20
_now = emit.now_ns


class _Gen:
    __slots__ = ("active", "born", "build_s", "cpu", "io", "launches", "sess")

    def __init__(self, sess: Any) -> None:
        self.sess = sess
        #: threads that appeared while the session was built (its thread pool) and the building
        #: thread's CPU seconds (see :meth:`ProfiledRunner.prepare_spare`)
        self.born: list[str] = []
        self.build_s = 0.0
        self.launches: list[tuple[int, int, int]] = []
        #: the calling thread's CPU seconds of every ``CPU_SAMPLE``-th execute
        self.cpu: list[float] = []
        self.active: list[int] = []
        #: id(feeds) → (feeds, IOBinding or None, its run callable or None)
        self.io: dict[int, tuple[Any, Any, Callable[[], Any] | None]] = {}


def _entry(sess: Any, feeds: Any, io: Any) -> tuple[Any, Any, Callable[[], Any] | None]:
    """A generation's binding cache entry: the run of ``sess`` on ``io`` as one callable (the
    pybind method itself where the Python wrapper's checks are known to pass: CPU/CUDA, no
    WebGPU graph capture)."""
    if io is None:
        return feeds, None, None
    try:
        c_sess, c_io = sess._sess, io._iobinding
        fast = io._session is c_sess and not c_sess.is_webgpu_graph_capture_enabled()
    except AttributeError:
        fast = False
    if fast:
        return feeds, io, functools.partial(c_sess.run_with_iobinding, c_io, None)
    return feeds, io, functools.partial(sess.run_with_iobinding, io)


class ProfiledRunner:
    """Runs a model on profiling-enabled ORT sessions and harvests their events.

    ``factory()`` builds a new profiling InferenceSession; ``binder(sess, feeds)`` optionally
    returns an IOBinding of ``sess`` to the caller's own buffers for ``feeds`` (outputs are then
    written in place and :meth:`run` returns ``[]``).  The execute path takes no lock: it marks
    itself active on the current generation, runs, and appends its launch record.
    """

    def __init__(self, factory: Callable[[], Any], binder: Callable[[Any, Any], Any] | None = None,
                 dynamic: bool = False) -> None:
        self.factory = factory
        self.binder = binder
        self.nodes = NodeTable(dynamic)
        self._gen = _Gen(factory())
        self._spare: _Gen | None = None
        self._spare_lock = threading.Lock()
        self._harvest_lock = threading.Lock()
        self.last_harvest = time.monotonic()
        self.harvests = 0
        #: ORT events per execute, learnt at each harvest (0: not yet known)
        self.events_per_run = 0.0
        #: CPU seconds the last build of a generation took, its thread pool's start included
        #: (a harvest's fixed cost; see :meth:`_measure_build`)
        self.build_cpu_s = 0.0
        #: mean CPU seconds of one execute on its calling thread (every ``CPU_SAMPLE``-th
        #: execute timed), learnt at each harvest (0: not yet known)
        self.run_s = 0.0

    def run(self, outputs: list[str] | None, feeds: dict[str, Any], conn: int, t0: int = 0) -> Any:
        """One execute on the current generation, remembering (t0, t1, conn) (``t0``: when the
        caller's execute began; now when 0)."""
        g = self._gen
        active = g.active
        active.append(1)
        if g is not self._gen:  # swapped by a harvest meanwhile: run on the new generation
            active.pop()
            return self.run(outputs, feeds, conn, t0)
        try:
            hit = g.io.get(id(feeds))
            if hit is None or hit[0] is not feeds:
                if len(g.io) >= MAX_BINDINGS:  # datasets made per execute: bounded
                    g.io.clear()
                hit = g.io[id(feeds)] = _entry(g.sess, feeds, self._bind(g.sess, feeds))
            if not t0:
                t0 = _now()
            c0 = time.thread_time() if not len(g.launches) % CPU_SAMPLE else -1.0
            fast = hit[2]
            if fast is not None:
                fast()
                out: Any = []
            else:
                out = g.sess.run(outputs, feeds)
            g.launches.append((t0, _now(), conn))
            if c0 >= 0:
                g.cpu.append(time.thread_time() - c0)
            return out
        finally:
            active.pop()

    def _bind(self, sess: Any, feeds: Any) -> Any:
        if self.binder is None:
            return None
        try:
            return self.binder(sess, feeds)
        except Exception:
            return None

    def pending(self) -> int:
        return len(self._gen.launches)

    def pending_run_s(self) -> float:
        """Estimated execute CPU time (s) held by the running generation (0 until a harvest has measured)."""
        return len(self._gen.launches) * self.run_s

    def pending_events(self) -> float:
        """Estimated ORT events held by the running generation (0 until a harvest has measured)."""
        return len(self._gen.launches) * self.events_per_run

    def idle_ns(self) -> int:
        """Nanoseconds since the last execute of the running generation ended (0: none yet, or
        one is running now)."""
        g = self._gen
        launches = g.launches
        return max(0, _now() - launches[-1][1]) if launches and not g.active else 0

    def prepare_spare(self) -> None:
        """Build (and bind) the next generation now (called from a background thread)."""
        if self._spare is not None:
            return
        with self._spare_lock:
            if self._spare is None:
                before = _tids()
                c0 = time.thread_time()
                g = _Gen(self.factory())
                for key, (feeds, io, _) in list(self._gen.io.items())[-MAX_BINDINGS:]:
                    if io is not None:  # feeds still bound to the caller's buffers
                        g.io[key] = _entry(g.sess, feeds, self._bind(g.sess, feeds))
                g.build_s = time.thread_time() - c0
                g.born = sorted(_tids() - before) if before else []
                self.build_cpu_s = max(self.build_cpu_s, g.build_s)
                self._spare = g

    def _measure_build(self, g: _Gen) -> None:
        """A session's whole fixed cost, learnt when it is swapped in before its first execute:
        the building thread's CPU plus what its new thread pool burnt meanwhile (ONNX Runtime's
        workers spin for work once they start: ~35 ms of CPU each here against ~1 ms for the
        build itself, and a session has one worker per core but one)."""
        if g.born:  # the largest seen: a swap that came before the spin ended must not lower it
            self.build_cpu_s = max(self.build_cpu_s, g.build_s + _threads_cpu_s(g.born))

    def harvest(self, keep_running: bool = True, pause: Callable[[], None] | None = None
                ) -> tuple[Profile | None, list[tuple[int, int, int]]]:
        """Swap in the next generation (or none), end the old one's profiling and parse it
        (``pause`` is called between parse chunks: see :meth:`NodeTable.parse`)."""
        with self._harvest_lock:
            old = self._gen
            spare, self._spare = self._spare, None
            if keep_running:
                if spare is not None and not spare.launches:
                    self._measure_build(spare)
                self._gen = spare if spare is not None else _Gen(self.factory())
            elif spare is not None:
                ort_trash.discard_profile(spare.sess.end_profiling())
                ort_trash.graveyard.append(spare)
            deadline = time.monotonic() + 5.0
            while old.active and time.monotonic() < deadline:
                time.sleep(0.0002)
            self.last_harvest = time.monotonic()
            self.harvests += 1
            if old.cpu:  # CPU, not wall: a loaded machine stretches the wall, not the work
                self.run_s = sum(old.cpu) / len(old.cpu)
            start_ns = old.sess.get_profiling_start_time_ns()
            path = old.sess.end_profiling()
            if pause is None:
                ort_trash.graveyard.append(old)  # freeing a session with many events takes ms: not here
            else:  # a background harvest frees it now: its pool's workers, spinning for work
                old.sess, old.io = None, {}  # that will not come, stop before the parse and the next build
            if not old.launches or not path:
                ort_trash.discard_profile(path)
                return None, old.launches
            try:
                with open(path, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    if size < MMAP_FROM:  # (a subscribed execute's profile: a few kB)
                        return self._learn(self.nodes.parse(f.read(), start_ns, pause)), old.launches
                    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                        return self._learn(self.nodes.parse(data, start_ns, pause)), old.launches
            finally:
                ort_trash.discard_profile(path)

    def _learn(self, profile: Profile) -> Profile:
        """Remember the events per execute (ORT writes one event per kernel and two session
        events per run)."""
        if profile.runs:
            self.events_per_run = (len(profile.node_ts) + 2 * profile.runs) / profile.runs
        return profile

    def close(self) -> None:
        """End the profiling of every session left (at exit: ORT would write their profiles while
        the interpreter tears down, after the profile directory is gone)."""
        with self._harvest_lock:
            for g in (self._gen, self._spare):
                if g is not None and g.sess is not None:
                    try:
                        ort_trash.discard_profile(g.sess.end_profiling())
                    except Exception:
                        pass
                    ort_trash.graveyard.append(g)
            self._spare = None


_TASKS = "/proc/self/task"


def _tids() -> set[str]:
    """The ids of this process's threads (empty where /proc is not there)."""
    try:
        return set(os.listdir(_TASKS))
    except OSError:
        return set()


def _threads_cpu_s(tids: list[str]) -> float:
    """CPU seconds the threads ``tids`` have run so far (schedstat: ns; ended threads count 0)."""
    total = 0
    for tid in tids:
        try:
            with open(f"{_TASKS}/{tid}/schedstat", "rb") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9
