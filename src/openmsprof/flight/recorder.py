"""``openmsprof.flight_recorder``: always armed, it keeps the last ``keep_s`` seconds in memory
and writes them as a PROF job when a step is slow, no step ends for ``hang_s``, the signal
arrives or an exception escapes (docs/flight-recorder.md).

The program never waits for a dump: a trigger hands it to the dump thread; a bad option is one
line on stderr at start and the program runs on unprofiled.
"""

from __future__ import annotations

import atexit
import os
import queue
import signal as _signal
import sys
import threading
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from openmsprof.config.errors import own_failure
from openmsprof.flight import dump
from openmsprof.flight.capture import Capture, current_rank, say, torch_fr
from openmsprof.flight.history import History, capture_stacks, mono_ns, thread_names
from openmsprof.flight.options import FlightOptions, check, signal_number
from openmsprof.flight.sampler import Sampler
from openmsprof.flight.taps import MarkerTap
from openmsprof.flight.triggers import RateLimit, SlowStep, Trigger
from openmsprof.recorder import held_signals as _held_signals
from openmsprof.sources import step_hooks

__all__ = ["FlightRecorder", "flight_recorder"]


class FlightRecorder:
    """Keeps markers, steps, host samples and stacks; dumps on a trigger.  See module doc."""

    def __init__(self, output: str | os.PathLike[str] | None = None, keep_s: float = 30,
                 slow_step: float | None = None, hang_s: float | None = None, on_exception: bool = True,
                 signal: str | int | None = "SIGUSR2", then_capture: int = 0, memory_mb: float = 64,
                 step_range: str | None = None, **more: Any) -> None:
        self.options = FlightOptions(output=os.fspath(output) if output is not None else ".",
                                     keep_s=keep_s, slow_step=slow_step, hang_s=hang_s,
                                     on_exception=on_exception, signal=signal,  # type: ignore[arg-type]
                                     then_capture=then_capture, memory_mb=memory_mb, step_range=step_range)
        self.errors = [f"flight recorder: unknown option {k!r}" for k in more
                       if not hasattr(self.options, k)]
        for k, v in more.items():
            if hasattr(self.options, k):
                setattr(self.options, k, v)
        self.armed = False
        self.dumps: list[Path] = []
        self.failures: list[str] = []
        self._lock = threading.RLock()  # a signal handler may run inside a held section (main thread)
        self._queue: queue.SimpleQueue[tuple[str, Any] | None] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._prev_handler: Any = None
        self._signum: int | None = None
        self._prev_hook: Any = None
        self.capture = Capture()
        self._pending = 0
        self._idle = threading.Condition(self._lock)
        self._fork_hook = False

    # -- life cycle ----------------------------------------------------------------------
    def start(self) -> FlightRecorder:
        """Arm; a bad option or a refused signal is one line each on stderr, and nothing is armed."""
        if self.armed:
            return self
        o = self.options
        errors = self.errors + check(o)
        if not errors and o.signal is not None and threading.current_thread() is not threading.main_thread():
            errors.append(f"flight recorder: signal {o.signal!r} can only be installed from the main "
                          "thread (pass signal=None)")
        if not errors and o.signal is not None:
            self._signum = signal_number(o.signal)
            try:
                self._prev_handler = _signal.signal(self._signum, self._on_signal)  # type: ignore[arg-type]
            except (OSError, ValueError, RuntimeError) as exc:
                errors.append(f"flight recorder: signal {o.signal!r} cannot be caught: {exc}")
                self._signum = None
        if errors:
            for line in errors:
                say(line)
            self.failures = errors
            return self
        self.output = Path(os.path.abspath(o.output or "."))
        self.keep_ns = int(o.keep_s * 1e9)
        self.history = History(o.keep_s, o.memory_mb)
        self.slow = SlowStep(o.slow_step, o.warmup) if o.slow_step else None
        self.limit = RateLimit(self.keep_ns)
        self.hang_ns = int(o.hang_s * 1e9) if o.hang_s else 0
        self.main_tid = threading.get_native_id()
        self.step_index = 0
        self.step_t0 = self.last_progress = mono_ns()
        self._hang_fired = True  # the watch begins at the first step end (a process that never
        # steps, e.g. a spawned DataLoader worker armed from the environment, is not watched)
        self.tap = MarkerTap(self.history, o.step_range, self._range_step)
        self.tap.install()
        step_hooks.add(self.step)
        self._worker = threading.Thread(target=self._work, name="openmsprof-flight-dump", daemon=True)
        self._worker.start()
        self.sampler = Sampler(self.history, o.stack_hz, o.host_hz, self._tick, {self._worker.ident or 0})
        self.sampler.start()
        if o.on_exception:
            self._prev_hook, sys.excepthook = sys.excepthook, self._excepthook
        atexit.register(self.stop)
        if not self._fork_hook:
            self._fork_hook = True
            os.register_at_fork(after_in_child=self._forked)
        self.armed = True
        return self

    def _forked(self) -> None:
        """A forked child (a DataLoader worker) has no sampler or dump thread: it runs disarmed."""
        if self.armed:
            self.armed = False
            self._unhook()

    def _unhook(self) -> None:
        """Undo what arming hooked: the mstx taps, the step hook, the signal handler, the
        excepthook and the exit handler."""
        self.tap.remove()
        step_hooks.remove(self.step)
        if self._signum is not None:
            try:
                _signal.signal(self._signum, self._prev_handler if self._prev_handler is not None
                               else _signal.SIG_DFL)
            except (OSError, ValueError):
                pass
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._prev_hook
        atexit.unregister(self.stop)

    def stop(self, timeout: float = 30.0) -> list[Path]:
        """Disarm; waits (at most ``timeout`` s) for dumps under way.  Returns the jobs written."""
        if not self.armed:
            return self.dumps
        self.armed = False
        self.sampler.stop()
        self._unhook()
        if self.capture.session is not None:
            self._queue.put(("end_capture", None))
        self._queue.put(None)
        if self._worker is not None:
            self._worker.join(timeout)
        return self.dumps

    def __enter__(self) -> FlightRecorder:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        if et is not None and self.armed and self.options.on_exception and not issubclass(et, GeneratorExit):
            self.trigger("exception", detail=f"{et.__name__}: {ev}"[:300])
        self.stop()

    # -- steps ---------------------------------------------------------------------------
    def step(self) -> None:
        """The current step ended (and the next began)."""
        if not self.armed:
            return
        now = mono_ns()
        self._end_step(self.step_t0, now)
        self.step_t0 = now

    def _range_step(self, t0: int, t1: int) -> None:
        if self.armed:
            self._end_step(t0, t1)

    def _end_step(self, t0: int, t1: int) -> None:
        index = self.step_index
        self.step_index = index + 1
        self.history.add_step(index, t0, t1)
        self.last_progress = t1
        self._hang_fired = False
        if self.capture.left:
            self.capture.left -= 1
            if not self.capture.left:
                self._queue.put(("end_capture", None))
        if self.slow is not None:
            hit = self.slow.check(t1 - t0)
            if hit is not None:
                self.trigger("slow_step", step=index, duration_ns=t1 - t0, median_ns=hit[0],
                             threshold_ns=hit[1], t_ns=t1)

    # -- triggers ------------------------------------------------------------------------
    def trigger(self, kind: str = "manual", *, sync: bool = False, t_ns: int | None = None, **fields: Any) -> bool:
        """Ask for a dump; False when the rate limit (one per kind per keep_s) held it back."""
        if not self.armed:
            return False
        now = mono_ns() if t_ns is None else t_ns
        if not self.limit.allow(kind, now):
            return False
        skip = {self.sampler.ident or 0, (self._worker.ident or 0) if self._worker else 0}
        trig = Trigger(kind, now, **fields)
        stacks = capture_stacks(skip)
        with self._lock:
            self._pending += 1
        if sync:
            self._dump(trig, stacks)
        else:
            self._queue.put(("dump", (trig, stacks)))
        return True

    def _tick(self, now: int) -> None:
        """Sampler thread, each tick: the hang watchdog."""
        if self.hang_ns and not self._hang_fired and now - self.last_progress > self.hang_ns:
            self._hang_fired = True  # once per stall; the next step end re-arms
            self.trigger("hang", step=self.step_index, duration_ns=now - self.last_progress,
                         threshold_ns=self.hang_ns, detail=f"no step ended for {(now - self.last_progress) / 1e9:.1f} s")

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.trigger("signal", detail=_signal.Signals(signum).name)
        prev = self._prev_handler
        if callable(prev):
            prev(signum, frame)

    def _excepthook(self, et: type[BaseException], ev: BaseException, tb: TracebackType | None) -> None:
        try:
            if not issubclass(et, KeyboardInterrupt | SystemExit):
                self.trigger("exception", sync=True, detail=f"{et.__name__}: {ev}"[:300])
        finally:
            (self._prev_hook or sys.__excepthook__)(et, ev, tb)

    # -- dump thread ---------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            what, arg = item
            try:
                if what == "dump":
                    self._dump(*arg)
                elif what == "end_capture":
                    self.capture.end()
            except Exception as exc:  # the program never dies of a dump
                say(f"flight recorder: {what} failed: {type(exc).__name__}: {exc}")

    def _dump(self, trig: Trigger, stacks: list[dict[str, Any]]) -> None:
        try:
            with _held_signals.held():  # (``sync``, on the main thread: a Ctrl-C comes once the job is whole)
                self.__dump(trig, stacks)
        except Exception as exc:
            if not own_failure(exc):  # (``trigger(sync=True)``: a user's signal handler's exception is theirs)
                raise
            say(f"flight recorder: {trig.kind} dump not written: {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._pending -= 1
                self._idle.notify_all()

    def __dump(self, trig: Trigger, stacks: list[dict[str, Any]]) -> None:
        snap = self.history.snapshot()
        _tids, names = thread_names()
        med = self.slow.median() if self.slow is not None else None
        flight = {"trigger": trig.to_dict(), "trigger_stacks": stacks, "evicted": dict(self.history.evicted),
                  "suppressed": dict(self.limit.suppressed), "median_ns": med,
                  "options": {k: v for k, v in vars(self.options).items() if k != "output"}}
        rank = current_rank()
        o = self.options
        if o.then_capture and self.capture.possible():
            root = self.capture.begin(self.output, o.then_capture, rank, snap, flight, trig.t_ns, self.keep_ns,
                                      self.main_tid, names)
        else:
            if o.then_capture:
                flight["then_capture"] = {"steps": 0, "what": "not captured: a session is already running"}
            root = dump.write_job(self.output, snap, flight, trig.t_ns, self.keep_ns, self.main_tid, names, rank)
        torch_fr(root)
        self.dumps.append(root)
        step = f" step {trig.step}" if trig.step is not None else ""
        say(f"flight recorder: {trig.kind}{step} -> {root}")

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until no dump is under way (tests, benchmarks)."""
        with self._lock:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)


def flight_recorder(output: str | os.PathLike[str] | None = None, keep_s: float = 30,
                    slow_step: float | None = None, hang_s: float | None = None, on_exception: bool = True,
                    signal: str | int | None = "SIGUSR2", then_capture: int = 0, memory_mb: float = 64,
                    **more: Any) -> FlightRecorder:
    """A :class:`FlightRecorder`; use it as ``with`` block or call ``.start()`` / ``.stop()``."""
    return FlightRecorder(output, keep_s, slow_step, hang_s, on_exception, signal, then_capture, memory_mb, **more)
