"""``profile``: torch_npu's scheduled profiler (docs/formats.md §7.4 transitions) and
``tensorboard_trace_handler``.  Nothing here raises into the training loop."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from openmsprof.recorder import held_signals as _held_signals
from openmsprof.sources import markers, step_hooks
from openmsprof.torch.profiler import _analysis_worker, _window_info, _writer, prof_dir
from openmsprof.torch.profiler._enums import ProfilerAction
from openmsprof.torch.profiler.experimental_config import _ExperimentalConfig
from openmsprof.torch.profiler.kineto_profile import _KinetoProfile
from openmsprof.torch.profiler.scheduler import Schedule, default_schedule

log = logging.getLogger("openmsprof")
_NONE = ProfilerAction.NONE
_WARMUP = ProfilerAction.WARMUP
_RECORD = ProfilerAction.RECORD
_RECORDING = (_RECORD, ProfilerAction.RECORD_AND_SAVE)


class _TraceHandler:
    """What ``tensorboard_trace_handler`` returns: where to write, and analysis on trace ready.

    The window's files are saved and analysed in the one background worker process
    (``_analysis_worker``; with ``analyse_flag=False`` only saved), never in the training process
    while that worker runs.  A sync handler's ``profile.stop()`` waits for the analyses; an async
    one (or one that does not analyse) only for the window's files."""

    def __init__(self, dir_name: Any, worker_name: Any, analyse_flag: Any, async_mode: Any) -> None:
        self.root = prof_dir.check_root(dir_name)
        self.worker = prof_dir.check_worker(worker_name)
        self.analyse_flag = _window_info.bool_flag("tensorboard_trace_handler analyse_flag", analyse_flag, True)
        self.async_mode = _window_info.bool_flag("tensorboard_trace_handler async_mode", async_mode, False)
        _writer.submit(_analysis_worker.prestart)  # it imports while the first window records

    def __call__(self, prof: _KinetoProfile) -> None:
        path = prof.prof_path
        if path is None or not self.analyse_flag or prof._handed_off:  # the worker has it already
            return
        _writer.submit(partial(_analysis_worker.submit, path, not self.async_mode))

    def wait(self) -> None:
        """``profile.stop()``: a sync handler's windows are analysed when stop returns, any
        handler's windows are on disk."""
        _writer.flush()
        if self.analyse_flag and not self.async_mode:
            _analysis_worker.wait(sync_only=True)
        _analysis_worker.wait_saved(0.0)  # what the worker has not saved yet is saved here


def tensorboard_trace_handler(dir_name: str | os.PathLike[str] | None = None, worker_name: str | None = None,
                              analyse_flag: bool = True, async_mode: bool = False) -> _TraceHandler:
    """Write each window under ``dir_name`` and analyse it in the background analysis worker
    (``async_mode=False``: ``profile.stop()`` waits for the analyses; True: it does not)."""
    return _TraceHandler(dir_name, worker_name, analyse_flag, async_mode)


class profile(_KinetoProfile):
    """torch_npu ``profile``: context manager or ``start()``/``step()``/``stop()``."""

    def __init__(self, activities: Any = None, schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable[..., Any] | None = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config: _ExperimentalConfig | None = None,
                 use_cuda: bool | None = None) -> None:
        super().__init__(activities, record_shapes, profile_memory, with_stack, with_flops, with_modules,
                         experimental_config)
        if schedule is not None and not callable(schedule):
            log.warning("openmsprof: schedule %r is not callable; recording every step", schedule)
            schedule = None
        self.schedule: Callable[[int], ProfilerAction] = schedule or default_schedule
        self._schedule_info = schedule.to_dict() if isinstance(schedule, Schedule) else None
        if on_trace_ready is not None and not callable(on_trace_ready):
            log.warning("openmsprof: on_trace_ready %r is not callable; ignored", on_trace_ready)
            on_trace_ready = None
        self.on_trace_ready = on_trace_ready
        if isinstance(on_trace_ready, _TraceHandler):
            self._root, self._worker = on_trace_ready.root, on_trace_ready.worker
        self.step_num = 0
        self._step_offset = 0
        self._step_rf: Any = None
        self.current_action = self._action(0)

    def _action(self, step: int) -> ProfilerAction:
        try:
            act = self.schedule(step)
            return act if isinstance(act, ProfilerAction) else _NONE
        except Exception as exc:
            log.warning("openmsprof: schedule(%d) failed: %s", step, exc)
            return _NONE

    # -- public ------------------------------------------------------------------------------
    def start(self) -> None:
        self._transit(_NONE, self.current_action)
        self._enter_step()

    def stop(self) -> None:
        ready = False
        with _held_signals.held():  # (a Ctrl-C meanwhile is raised once the window is handed on)
            self._exit_step()
            act = self.current_action
            try:
                if act is _WARMUP:
                    self._stop()
                    if not self._finalized:  # (else no warmup window was prepared: prof_path is the ended one's)
                        self._delete()
                elif act in _RECORDING:
                    ready = not self._finalized  # (see ``_end_window``)
                    self._stop()
                    self._finalize()
            except Exception as exc:
                log.warning("openmsprof: profiler stop failed: %s", exc)
            self.current_action = _NONE
        if ready:  # (a user's handler runs unheld: its Ctrl-C comes at once)
            self._trace_ready()
        _writer.flush()
        if isinstance(self.on_trace_ready, _TraceHandler):
            self.on_trace_ready.wait()

    def step(self) -> None:
        """Mark a step boundary; outside windows this is a counter and one schedule call."""
        if step_hooks.listeners:  # the flight recorder takes its steps from here
            step_hooks.notify()
        if self._step_rf is not None:
            self._exit_step()
        prev = self.current_action
        self.step_num += 1
        cur = self.current_action = self._action(self.step_num)
        if cur is _NONE and prev is _NONE:
            return
        self._transit(prev, cur)
        self._enter_step()

    def _hand_off(self, path: Path, tmp: Path, files: dict[str, Any], fallback: Any) -> bool:
        """A ``tensorboard_trace_handler``'s window goes to the analysis worker in one pipe write."""
        h = self.on_trace_ready
        if not isinstance(h, _TraceHandler):
            return False
        return _analysis_worker.hand_off(path, tmp, files, h.analyse_flag, not h.async_mode, fallback, self.saved,
                                         self._static_files)

    def export_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        if isinstance(self.on_trace_ready, _TraceHandler):
            log.warning("openmsprof: export_chrome_trace is ignored when tensorboard_trace_handler is set")
            return
        super().export_chrome_trace(path)

    # -- state machine -------------------------------------------------------------------------
    def _enter_step(self) -> None:
        if self.current_action in _RECORDING and self._kineto is not None:
            from torch.autograd.profiler import record_function

            name = f"ProfilerStep#{self.step_num + self._step_offset}"
            markers.push(name)
            self._step_rf = record_function(name)
            self._step_rf.__enter__()

    def _exit_step(self) -> None:
        rf, self._step_rf = self._step_rf, None
        if rf is not None:
            try:
                rf.__exit__(None, None, None)
            except Exception:
                pass
            markers.pop()

    def _trace_ready(self) -> None:
        if self.on_trace_ready is not None:
            if not isinstance(self.on_trace_ready, _TraceHandler):
                _writer.flush()  # a user's handler reads the window's files
            try:
                self.on_trace_ready(self)
            except Exception as exc:
                log.warning("openmsprof: on_trace_ready failed: %s", exc)

    def _transit(self, prev: ProfilerAction, cur: ProfilerAction) -> None:
        """The window change from ``prev`` to ``cur`` in two held parts (a Ctrl-C meanwhile is
        raised once each part is whole, ``recorder.held_signals``): the ending window's stop and
        save, then the next one's start; ``on_trace_ready`` runs between them unheld (a user's
        handler may take long: its Ctrl-C comes at once and leaves the next window unprepared:
        the next step that records prepares one, ``kineto_profile._start``, and ``stop()`` has
        none to drop)."""
        if prev is cur and cur is not ProfilerAction.RECORD_AND_SAVE and not (cur is _RECORD and self._finalized):
            return  # (a step inside a window, or between windows: nothing changes)
        try:
            with _held_signals.held():
                ready = self._end_window(prev, cur)
            if ready:
                self._trace_ready()
            with _held_signals.held():
                self._begin_window(prev, cur)
        except Exception as exc:
            log.warning("openmsprof: profiler transition %s -> %s failed: %s", prev.name, cur.name, exc)

    def _end_window(self, prev: ProfilerAction, cur: ProfilerAction) -> bool:
        """The ending window's part of a change (docs/formats.md §7.4); whether its trace is ready."""
        if prev is _WARMUP and cur is _NONE:
            log.warning("openmsprof: schedule went from WARMUP to NONE; the window is empty")
            self._start()
            self._stop()
            self._finalize()
        elif prev is _RECORD and cur in (_NONE, _WARMUP):
            log.warning("openmsprof: schedule left RECORD without RECORD_AND_SAVE; not saved for trace_ready")
            self._stop()
            self._finalize()
        elif prev is ProfilerAction.RECORD_AND_SAVE:
            fresh = not self._finalized  # (else a Ctrl-C in its handler left it ended: not handed on twice)
            self._stop()
            self._finalize()
            return fresh
        return False

    def _begin_window(self, prev: ProfilerAction, cur: ProfilerAction) -> None:
        """The next window's part of a change: prepare (``_init``) and start what ``cur`` records."""
        if prev is _WARMUP:
            if cur in _RECORDING:
                self._start()
        elif prev is _RECORD:
            if cur is _WARMUP:
                self._init()
            elif cur in _RECORDING and self._finalized:  # (no window: a Ctrl-C in on_trace_ready)
                step = self.step_num + self._step_offset
                log.warning("openmsprof: an interrupt in on_trace_ready kept a window from being prepared; "
                            "recording resumes at step %d (this window lacks the steps before)", step)
                self._start()  # (prepares it first, ``kineto_profile._start``)
                self._partial = (f"recording resumed at step {step}: an interrupt in on_trace_ready kept the "
                                 "window from being prepared, so it lacks its steps before that one")
        elif cur is not _NONE:  # (from NONE or RECORD_AND_SAVE)
            self._init()
            if cur in _RECORDING:
                self._start()
