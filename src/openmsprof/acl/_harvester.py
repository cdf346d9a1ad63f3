"""The background harvester of task-profiled models, and the switch of a model between plain and
profiled execution that starts it (``acl._model`` holds the model itself).

A harvest turns a model's ORT profiling events into task records; when it runs is the
:class:`Harvester`'s policy (it scales with the executes, not with the clock).  At exit
``cleanup`` stops the thread and frees what is still profiling.
"""

from __future__ import annotations

import threading
import time
import weakref

from openmsprof.acl import _profdir
from openmsprof.acl._model import PLAIN, TASKS, Model
from openmsprof.acl._state import STATE, log
from openmsprof.recorder import threads
from openmsprof.sources import emit, ort_trash
from openmsprof.sources import onnxruntime_tasks as ortt


class Harvester:
    """Background thread: harvests task-profiled models when it is cheapest and builds the
    next profiling session of each runner ahead of time.

    A harvest (ORT's end_profiling, the parse, the task records, freeing the old session) costs
    about the same per event whenever it runs, but competes with the executes when they run;
    it also builds the next session, a fixed cost.  So harvests scale with the executes, not
    with the clock: one is due only once the executes it would harvest took ``1 / FIXED_SHARE``
    times that fixed cost (``FIXED_FACTOR`` × the last build's CPU, the start of the session's
    thread pool included: its workers spin for work when they start, ~35 ms of CPU each against
    ~1 ms for the build; execute time = executes ×
    their mean CPU time on the calling thread, sampled, learnt at each harvest: CPU, so a loaded
    machine, which stretches the wall time of executes, does not make harvests more frequent), then in an idle gap of the application (no
    execute for ``IDLE_S``, at least ``MIN_AGE_S`` after the last harvest) or after ``period``;
    and at once when the generation holds ``EVENT_BUDGET`` events (ORT stops recording a session
    at 1 M), after ``MAX_PERIOD_S`` in any case, and at stop.  The first harvest of a runner
    comes after ``period`` (nothing is learnt yet).  A SIGKILL loses the events ORT still holds:
    at most ``MAX_PERIOD_S`` of them."""

    EVENT_BUDGET = 250_000
    IDLE_S = 0.1
    MIN_AGE_S = 0.25
    FIXED_SHARE = 0.02
    FIXED_FACTOR = 2.0  # the build, plus end_profiling and freeing the old session
    MAX_PERIOD_S = 30.0

    def __init__(self, period: float = 1.0) -> None:
        self.period = period
        self.models: weakref.WeakValueDictionary[int, Model] = weakref.WeakValueDictionary()
        self.wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def ensure(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name="openmsprof-ort-harvester", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop the thread between two passes and wait for it (at exit: a daemon thread still
        inside ONNX Runtime, building or freeing a session, when the process exits makes the
        C++ runtime abort with "terminate called without an active exception").  Returns
        whether it stopped."""
        t = self._thread
        if t is None or t is threading.current_thread():
            return True
        self._stopping = True
        self.wake.set()
        t.join(timeout)
        return not t.is_alive()

    def due(self, r: ortt.ProfiledRunner) -> bool:
        """Whether ``r``'s running generation should be harvested now."""
        if not r.pending():
            return False
        age = time.monotonic() - r.last_harvest
        if age >= self.MAX_PERIOD_S or r.pending_events() >= self.EVENT_BUDGET:
            return True
        if r.harvests and r.pending_run_s() * self.FIXED_SHARE < r.build_cpu_s * self.FIXED_FACTOR:
            return False  # the executes so far would not carry the harvest's fixed cost
        return age >= self.period or (age >= self.MIN_AGE_S and r.idle_ns() >= self.IDLE_S * 1e9)

    def _run(self) -> None:
        threads.background_policy()  # its wakes (20 a second) do not preempt the executing thread
        while True:
            self.wake.wait(0.05)
            self.wake.clear()
            if self._stopping:
                return
            for m in list(self.models.values()):
                try:
                    r = m.runner
                    if r is None or m.mode == PLAIN:
                        continue
                    r.prepare_spare()
                    if m.mode == TASKS and self.due(r):
                        m.harvest(keep_running=True, background=True)
                        ort_trash.empty_trash()  # the old pool stops spinning before the new one starts
                        r.prepare_spare()
                except Exception as exc:
                    log.warning("openmsprof.acl: background harvest failed: %s", exc)
            ort_trash.empty_trash()


HARVESTER = Harvester()


def cleanup() -> None:
    """At exit: stop the harvester thread, end what is still profiling, free it (on this
    thread, before the interpreter finalizes), remove the profile directory."""
    HARVESTER.stop()
    for m in list(HARVESTER.models.values()):
        r = m.runner
        if r is not None:
            r.close()
    ort_trash.empty_trash()
    _profdir.remove()


def refresh(m: Model) -> None:
    """Plain or profiled execution for ``m`` from the current profiling state."""
    m.refresh_mode(STATE.profiling_session() is not None and emit.task_on())
    if m.mode != PLAIN:
        HARVESTER.ensure()
