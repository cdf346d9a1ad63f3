"""Bounding what a killed TensorFlow job loses: roll TensorFlow's tracer at a period.

TensorFlow keeps its trace in memory until its profiler stops, so a job killed with SIGKILL
mid-window has no TensorFlow ops.  With ``OPENMSPROF_TF_ROLL_S=<seconds>`` (off by default: each
roll costs a stop, a restart and a parse while training runs, see benchmarks/README.md) a
:class:`Roller` thread stops TensorFlow's tracer at that period, starts it again at once and
records the part just stopped, so a kill loses at most one period of ops.  Ops running across a
roll, and whatever runs during the restart, are not traced; the job log says how long the
tracer was off in all.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Protocol

from openmsprof.recorder.session import Session

__all__ = ["ENV", "Roller", "roll_period"]

ENV = "OPENMSPROF_TF_ROLL_S"
MIN_S, MAX_S = 0.2, 3600.0


class _Rollable(Protocol):
    def roll(self) -> None: ...


def roll_period(session: Session) -> float | None:
    """The period of ``OPENMSPROF_TF_ROLL_S`` (None: off; a bad value is noted and means off)."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not MIN_S <= value <= MAX_S:
        session.note(f"{ENV}={raw!r} is not a number of seconds in [{MIN_S}, {MAX_S:g}]; TensorFlow's "
                     "tracer is not rolled", warn=True)
        return None
    return value


class Roller:
    """A daemon thread calling ``tracer.roll()`` every ``period`` seconds until :meth:`halt`."""

    def __init__(self, tracer: _Rollable, period: float) -> None:
        self.tracer, self.period = tracer, period
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name="openmsprof-tf-roll", daemon=True)

    @classmethod
    def start_for(cls, tracer: Any, session: Session) -> Roller | None:
        period = roll_period(session)
        if period is None:
            return None
        roller = cls(tracer, period)
        roller.thread.start()
        session.note(f"TensorFlow's tracer rolls every {period:g} s ({ENV})")
        return roller

    def _run(self) -> None:
        while not self.stop_event.wait(self.period):
            try:
                self.tracer.roll()
            except Exception as exc:  # the training program never dies because of profiling
                import logging

                logging.getLogger("openmsprof").warning("openmsprof: rolling TensorFlow's tracer "
                                                        "failed: %s", exc)
                return

    def halt(self) -> None:
        self.stop_event.set()
        if self.thread is not threading.current_thread():
            self.thread.join()
