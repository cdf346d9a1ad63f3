"""A saved window exported the torch way: ``export_chrome_trace`` and ``export_stacks``.

Both first wait until the windows ended so far are on disk (``files_landed``), then read the last
window's rank dir: the chrome trace is its analysed ``trace_view.json`` (analysed here if it was
not yet), the stacks are FlameGraph folded lines from its Kineto trace.  Failures are logged,
never raised into the training loop.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from openmsprof.fileio import fs
from openmsprof.torch.profiler import _analysis_worker, _writer, analysis
from openmsprof.torch.profiler._window_files import FRAMEWORK_TRACE

__all__ = ["STACK_METRICS", "chrome_trace", "files_landed", "stacks"]

log = logging.getLogger("openmsprof")
STACK_METRICS = ("self_cpu_time_total", "self_npu_time_total", "self_cuda_time_total")


def files_landed() -> None:
    """Wait until the windows ended so far are on disk (the writer thread's jobs, and the saves
    handed to the analysis worker; those it has not confirmed in time are saved here)."""
    _writer.flush()
    _analysis_worker.wait_saved()


def chrome_trace(prof_path: Path | None, kineto: Any, path: str | os.PathLike[str]) -> None:
    """Write the saved window's trace_view.json to ``path`` (Kineto's own export when the window
    has no saved data)."""
    try:
        files_landed()
        target = Path(os.fspath(path))
        analysed = prof_path is not None and (prof_path / "ASCEND_PROFILER_OUTPUT" / "analyse.done").exists()
        if prof_path is None or not (analysed or (prof_path / "FRAMEWORK" / FRAMEWORK_TRACE).exists()):
            if kineto is not None:
                kineto.export_chrome_trace(os.fspath(target))
            return
        out = prof_path / "ASCEND_PROFILER_OUTPUT"  # already analysed (on_trace_ready):
        if not ((out / "analyse.done").exists() and (out / "trace_view.json").exists()):
            out = _analysis_worker.analyse_now(prof_path)  # FRAMEWORK/ may be gone since
        fs.make_dir(target.parent if str(target.parent) else Path("."))
        fs.write_file_atomic(target, (out / "trace_view.json").read_bytes())
    except Exception as exc:
        log.warning("openmsprof: export_chrome_trace(%r) failed: %s", os.fspath(path), exc)


def stacks(prof_path: Path | None, path: str | os.PathLike[str], metric: str) -> None:
    """FlameGraph folded stacks (``outer;…;inner;op value_us``) of the last saved window (needs
    with_stack).  ``self_npu_time_total`` counts device kernel time: on a CPU-only machine the time
    of the CPU kernels (see FORMATS decision 1)."""
    try:
        if metric not in STACK_METRICS:
            raise ValueError(f"metric {metric!r} is not self_cpu_time_total or self_npu_time_total")
        files_landed()
        if prof_path is None:
            raise RuntimeError("no saved collection to export")
        text = analysis.folded_stacks(prof_path, metric)
        target = Path(os.fspath(path))
        fs.make_dir(target.parent if str(target.parent) else Path("."))  # as export_chrome_trace
        fs.write_file_atomic(target, text)
    except Exception as exc:
        log.warning("openmsprof: export_stacks(%r) failed: %s", os.fspath(path), exc)
