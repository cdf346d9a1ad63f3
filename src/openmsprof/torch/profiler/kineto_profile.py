"""``_KinetoProfile``: one torch.profiler (Kineto) collection saved as an ``…_ascend_pt`` rank dir.

Lifecycle (mirrors torch_npu): ``_init`` (prepare Kineto, create the dir) → ``_start`` (Kineto
records; an openmsprof session under ``PROF_…/`` takes mstx markers and host usage) → ``_stop`` →
``_finalize`` (FRAMEWORK/ raw trace, profiler_info_{rank}.json, profiler_metadata.json written at
once, so a later crash still leaves analysable data).  Only Kineto itself runs on the training
thread; the rank dir's creation and the window's file writes (``_window_dir``) go to the ``_writer`` thread (public
``stop()``, ``on_trace_ready`` and the exports wait for it).  The PROF_ job exists only when something
feeds it (msprof_tx markers, host_sys cpu/mem usage).  Failures are logged, never raised.
What profiler_info says of a window is built in ``_window_info``; the torch-style exports of a
saved window are ``_window_exports``.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from functools import partial
from pathlib import Path
from typing import Any, cast

import orjson

from openmsprof.config.model import ProfileConfig
from openmsprof.recorder import held_signals as _held_signals
from openmsprof.recorder import jobdir, session
from openmsprof.recorder.clock import read_pair
from openmsprof.sources import emit, host_sampler, markers  # noqa: F401  (register listeners)
from openmsprof.sources import gc_watch as _gc_watch
from openmsprof.torch.profiler import (
    _window_exports,
    _window_files,
    _window_info,
    _writer,
    prof_dir,
)
from openmsprof.torch.profiler import npu_mstx as _mstx
from openmsprof.torch.profiler._window_dir import WindowDir
from openmsprof.torch.profiler.experimental_config import _ExperimentalConfig

log = logging.getLogger("openmsprof")


class _KinetoProfile:
    """torch_npu ``_KinetoProfile``: ``start()`` / ``stop()``, ``export_chrome_trace``,
    ``export_stacks``, ``add_metadata[_json]``.  No schedule, no on_trace_ready."""

    def __init__(self, activities: Any = None, record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_flops: bool = False, with_modules: bool = False,
                 experimental_config: _ExperimentalConfig | None = None) -> None:
        if isinstance(with_flops, _ExperimentalConfig) or isinstance(with_modules, _ExperimentalConfig):
            # seed 004 prints _KinetoProfile(activities, record_shape, profile_memory, with_stack,
            # experimental_config): the 5th positional is torch's with_flops
            log.warning("openmsprof: _KinetoProfile got the experimental config as a positional argument; "
                        "using it as experimental_config (write experimental_config=... to be explicit)")
            positional = with_flops if isinstance(with_flops, _ExperimentalConfig) else with_modules
            if experimental_config is None:
                experimental_config = positional  # type: ignore[assignment]
            with_flops = False if with_flops is positional else with_flops
            with_modules = False if with_modules is positional else with_modules
        self.record_shapes = _window_info.bool_flag("record_shapes", record_shapes)
        self.profile_memory = _window_info.bool_flag("profile_memory", profile_memory)
        self.with_stack = _window_info.bool_flag("with_stack", with_stack)
        self.with_flops = _window_info.bool_flag("with_flops", with_flops)
        self.with_modules = _window_info.bool_flag("with_modules", with_modules)
        if experimental_config is not None and not isinstance(experimental_config, _ExperimentalConfig):
            log.warning("openmsprof: experimental_config must be _ExperimentalConfig; using defaults")
            experimental_config = None
        self.experimental_config = experimental_config or _ExperimentalConfig()
        self.activity_names, self._torch_acts, self._notes = _window_info.torch_activities(activities)
        self._notes += self.experimental_config.unsupported
        for note in self._notes:
            _window_info.warn_once(note)
        self._root: Path | None = None
        self._worker: str | None = None
        self._schedule_info: dict[str, int] | None = None
        self._metadata: dict[str, Any] = {}
        self._kineto: Any = None
        #: the window started Kineto (set before start_trace), was handed on, its temp trace, it is
        #: inside another profile (``_init``); see ``recorder.held_signals``
        self._tracing, self._finalized, self._tmp, self._nested = False, False, cast("Path | None", None), False
        self._session: session.Session | None = None
        self._start_mono = 0
        self._stop_t0 = 0.0
        self.prof_path: Path | None = None
        self._window: WindowDir | None = None
        self._handed_off = False  # the last window's files went to another process
        self._static_files: dict[str, Any] | None = None
        self._gc: _gc_watch.GcWatch | None = None
        self._gc_doc: dict[str, Any] | None = None
        #: what the current window lacks, said in its profiler_info (``profile``: a resumed window)
        self._partial: str | None = None
        self._usage = [h for h in self.experimental_config.to_dict()["_host_sys"] if h in ("cpu", "mem")]
        self.saved: list[Path] = []

    # -- torch_npu public methods ----------------------------------------------------------
    def start(self) -> None:
        with _held_signals.held():
            self._init()
            self._start()

    def stop(self) -> None:
        with _held_signals.held():
            self._stop()
            self._finalize()
        _writer.flush()

    def __enter__(self) -> _KinetoProfile:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def add_metadata(self, key: str, value: str) -> None:
        if not isinstance(key, str) or not isinstance(value, str):
            log.warning("openmsprof: add_metadata needs str key and value; got %r, %r", key, value)
            return
        self._metadata[key] = value

    def add_metadata_json(self, key: str, value: str) -> None:
        if not isinstance(key, str):
            log.warning("openmsprof: add_metadata_json key %r is not a str", key)
            return
        try:
            self._metadata[key] = orjson.loads(value) if isinstance(value, (str, bytes)) else orjson.loads(
                orjson.dumps(value))
        except (orjson.JSONDecodeError, TypeError) as exc:
            log.warning("openmsprof: add_metadata_json %r: value is not JSON (%s); ignored", key, exc)

    def export_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Analyse the saved rank dir and write its trace_view.json to ``path``."""
        _window_exports.chrome_trace(self.prof_path, self._kineto, path)

    def export_stacks(self, path: str | os.PathLike[str], metric: str = "self_cpu_time_total") -> None:
        """FlameGraph folded stacks of the last saved window (``_window_exports.stacks``)."""
        _window_exports.stacks(self.prof_path, path, metric)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> Any:
        return self._kineto.key_averages(group_by_input_shape, group_by_stack_n)

    def events(self) -> Any:
        return self._kineto.events()

    # -- lifecycle -------------------------------------------------------------------------
    def _init(self) -> None:
        from torch.autograd import _profiler_enabled
        from torch.profiler.profiler import _KinetoProfile as _TorchKineto

        self._tracing, self._finalized, self._tmp, self._nested = False, False, None, _profiler_enabled()
        self._partial = None  # (a new window lacks nothing yet; one dropped unsaved must not pass it on)
        if self._nested:  # (Kineto has one session: preparing another would end the running one)
            log.warning("openmsprof: another profiler is recording in this process; this window records nothing "
                        "and leaves the other's session alone")
            self._kineto = self._window = self.prof_path = None
            return
        self._kineto = _TorchKineto(activities=self._torch_acts, record_shapes=self.record_shapes,
                                    profile_memory=self.profile_memory, with_stack=self.with_stack,
                                    with_flops=self.with_flops, with_modules=self.with_modules)
        self._kineto.prepare_trace()
        root = self._root if self._root is not None else prof_dir.default_root()
        win = self._window = WindowDir(root, prof_dir.new_path(root, self._worker))
        self.prof_path = win.path
        if not prof_dir.root_ready(root):  # the first window: make (and check) the root now
            _writer.submit(win.create)

    def _ready_window(self) -> WindowDir | None:
        """The current window once its dir exists (waits for the writer only if it has not yet
        created it); None, and no prof_path, if it could not be created."""
        win = self._window
        if win is None:
            return None
        if win.ok is None:
            _writer.submit(win.create)
            _writer.flush()
        if not win.ok:
            self.prof_path = None
            return None
        return win

    def _start(self) -> None:
        if (self._kineto is None and not self._nested) or self._finalized:
            self._init()  # (finalized: the last window was handed on and a Ctrl-C kept the next one unprepared)
        if self._kineto is None:  # (a profile inside a profile: ``_init``)
            return
        self._start_mono = time.perf_counter_ns()
        self._tracing = True
        self._kineto.start_trace()
        exp = self.experimental_config
        domains = exp.to_dict()
        include = list(domains.get("_mstx_domain_include") or [])
        exclude = list(domains.get("_mstx_domain_exclude") or [])
        _mstx.set_recording(True, include, exclude)
        threshold = exp.to_dict().get("_gc_detect_threshold")
        if threshold is not None:  # torch_npu's GC detection: long collections as trace events
            self._gc = _gc_watch.GcWatch(float(threshold))
            self._gc.start()
        usage = self._usage
        win = self._ready_window() if (exp.msprof_tx or usage) and session.current() is None else None
        if win is not None:
            cfg = ProfileConfig(acl_api=False, runtime_api=False, task_time="off", msproftx=exp.msprof_tx,
                                host_sys_usage=usage, mstx_domain_include=include,
                                mstx_domain_exclude=[] if include else exclude, source="torch")
            try:
                pair = read_pair()
                self._session = session.start(cfg, output=win.path, exclusive_output=False,
                                              job_root=win.path / jobdir.new_job_name(pair.wall_ns),
                                              rank_id=prof_dir.get_rank())
            except Exception as exc:
                log.warning("openmsprof: no PROF_ job for markers this window: %s", exc)

    def _stop(self) -> None:
        self._stop_t0 = time.perf_counter()
        _mstx.set_recording(False)
        if self._gc is not None:
            self._gc_doc = self._gc.stop()
            self._gc = None
        if self._session is not None:
            try:
                if session.current() is self._session:
                    session.stop()
            except Exception as exc:
                log.warning("openmsprof: stopping the PROF_ session failed: %s", exc)
            self._session = None
        if self._kineto is not None and self._tracing:
            from torch.autograd import _profiler_enabled

            if _profiler_enabled():  # (else an exception came before its start_trace, or after its stop)
                self._kineto.stop_trace()
            self._tracing = False

    def _finalize(self) -> None:
        """Save FRAMEWORK raw data + info files now (before any analysis)."""
        if self._kineto is None or self.prof_path is None or self._finalized:
            return  # (done: an exception inside the step that ended it, after this, reaches stop())
        if not self._results():  # an exception (Ctrl-C) came between its start and its stop: no trace
            self._finalized = True
            log.warning("openmsprof: the window %s has no trace (never started, or ended by an exception or another "
                        "profiler before its stop); dropped", self.prof_path)
            self._delete()
            return
        win = self._window
        if win is not None and win.ok is None and not prof_dir.root_ready(win.root):
            win = self._ready_window()  # the first window under a root: its dir is made first
        if win is None:
            self._finalized = True
            return
        end = _window_info.end_info()
        # Into the rank dir when it exists, else beside it in the root: whoever saves the window
        # makes the dir and moves the trace in, in one job
        tmp = self._tmp = self._tmp or ((win.path / "FRAMEWORK" if win.ok else win.root)
                                        / _window_files.temp_trace_name(win.path.name, os.getpid()))
        try:
            if not os.path.exists(tmp):  # (else exported by a try that an exception ended)
                self._kineto.export_chrome_trace(os.fspath(tmp))
        except Exception as exc:
            self._finalized = True
            log.warning("openmsprof: saving %s failed: %s", win.path, exc)
            return
        spent = time.perf_counter() - self._stop_t0 if self._stop_t0 else 0.0
        if self._static_files is None:  # what every window of this profiler shares, built once
            cuda = any(a.name == "CUDA" for a in self._torch_acts)
            self._static_files = {"config": self._config_dict(), "backend": _window_info.backend(cuda),
                                  "notes": list(self._notes), "torch_version": prof_dir.torch_version_text()}
        files = {**self._static_files, "start": _window_info.start_info(self._start_mono), "end": end,
                 "rank": prof_dir.get_rank(), "meta": prof_dir.metadata(self._metadata),
                 "window_end_s": round(spent, 6)}
        if self._gc_doc is not None:
            files["gc_events"], self._gc_doc = self._gc_doc, None
        if self._partial is not None:
            files["partial"], self._partial = self._partial, None
        fallback = partial(win.save, tmp, files, self.saved)
        self._finalized = True  # (an exception until here: stop() does it again)
        self._handed_off = self._hand_off(win.path, tmp, files, fallback)
        if not self._handed_off:
            _writer.submit(fallback)

    def _results(self) -> bool:
        """Kineto's stop_trace of this window returned (its results are there to export)."""
        prof = getattr(self._kineto, "profiler", None)
        if prof is None or not hasattr(prof, "kineto_results"):  # (a torch without it: whether it was stopped)
            return prof is not None and not self._tracing
        return prof.kineto_results is not None

    def _hand_off(self, path: Path, tmp: Path, files: dict[str, Any], fallback: Any) -> bool:
        """Give the window's file work to another process; False: the writer thread does it
        (``profile`` with ``tensorboard_trace_handler`` hands it to the analysis worker)."""
        return False

    def _delete(self) -> None:
        """Drop a window that never recorded (WARMUP → stop)."""
        if self.prof_path is not None:
            path = self.prof_path
            _writer.submit(lambda: shutil.rmtree(path, ignore_errors=True))
            self.prof_path = None

    # -- info ------------------------------------------------------------------------------
    def _config_dict(self) -> dict[str, Any]:
        flags = {"record_shapes": self.record_shapes, "profile_memory": self.profile_memory,
                 "with_stack": self.with_stack, "with_flops": self.with_flops, "with_modules": self.with_modules}
        return _window_info.config_dict(self.activity_names, self._schedule_info, flags,
                                        self.experimental_config.to_dict())
