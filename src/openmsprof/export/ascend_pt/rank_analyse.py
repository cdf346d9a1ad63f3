"""Analyse one ``…_ascend_pt`` rank dir into ``ASCEND_PROFILER_OUTPUT/`` (``analyse.done`` once every
output file is written, before data_simplification removes the raw data)."""

from __future__ import annotations

import contextlib
import gc
import os
import re
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from openmsprof.config.errors import AlreadySimplified, PathError, RawDataError
from openmsprof.export import overhead
from openmsprof.export.ascend_pt import (
    cann,
    comm_views,
    framework,
    gc_track,
    kernel_job,
    memory,
    npu_records,
    text,
    trace_split,
    trace_tracks,
)
from openmsprof.export.ascend_pt import (
    folded_stacks as _folded,
)
from openmsprof.export.ascend_pt import pt_summary as summary
from openmsprof.export.ascend_pt.overlap import Overlap
from openmsprof.export.ascend_pt.rank_extras import Extras
from openmsprof.fileio import fs
from openmsprof.fileio.read_guard import escape, read_json

OUTPUT = "ASCEND_PROFILER_OUTPUT"
_INFO_RE = re.compile(r"^profiler_info(?:_(\d+))?\.json$")
_SIMPLIFY = ("sqlite", "summary", "timeline", "analyze")


@dataclass
class Result:
    output: Path
    files: list[str]
    kernels: int
    ops: int
    #: the profiler_info the analysis read, and its file name (so a caller adding figures to it
    #: need not find, read and parse it again)
    info: dict[str, Any] | None = None
    info_name: str | None = None


def read_info(rank_dir: Path, names: list[str] | None = None) -> tuple[dict[str, Any], int | None]:
    """profiler_info(_N).json of ``rank_dir`` and its rank (``names``: the dir's listing, if read)."""
    for name in sorted(os.listdir(rank_dir) if names is None else names):
        m = _INFO_RE.match(name)
        if m:
            p = rank_dir / name
            doc = read_json(p, "profiler info", error=RawDataError)
            if not isinstance(doc, dict):
                raise RawDataError(f"profiler info {escape(p)!r} is not a JSON object")
            return doc, (int(m.group(1)) if m.group(1) else None)
    raise RawDataError(f"{str(rank_dir)!r} has no profiler_info*.json (not an _ascend_pt dir?)")


def _level(exp: dict[str, Any]) -> int:
    return {"Level_none": -1, "Level0": 0, "Level1": 1, "Level2": 2}.get(exp.get("_profiler_level", "Level0"), 0)


def export(rank_dir: Path, device_id: int = 0, parallel: bool = True, private: bool = False) -> Result:
    """Analyse ``rank_dir``.  ``parallel``: a forked child may format half of trace_view.json
    (large traces only; pass False inside a process that must not fork).  ``private``: the dir is
    a private copy that appears whole once analysed (the analysis worker's staged copy): a fresh
    output dir's files are then created in place, with no temp file each.  The cyclic GC is paused
    meanwhile: millions of short-lived event dicts would otherwise trigger full collections."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _export(rank_dir, device_id, parallel, private)
    finally:
        if enabled:
            gc.enable()


def _export(rank_dir: Path, device_id: int, parallel: bool, private: bool) -> Result:
    names = os.listdir(rank_dir)  # one listing: profiler_info, the PROF_ jobs, logs/
    info, rank = read_info(rank_dir, names)
    cfg = info.get("config") or {}
    exp = cfg.get("experimental_config") or {}
    common = cfg.get("common_config") or {}
    level = _level(exp)
    types = exp.get("_export_type") or ["text"]
    types = [types] if isinstance(types, str) else types
    try:
        fw = framework.load(rank_dir, info, parallel=parallel)
    except RawDataError:
        done = rank_dir / OUTPUT / "analyse.done"
        if not (rank_dir / "FRAMEWORK" / framework.FRAMEWORK_TRACE).exists() and done.is_file() \
                and exp.get("_data_simplification", True):
            raise AlreadySimplified(f"{escape(rank_dir)!r} was analysed already and its raw framework data "
                                    f"(FRAMEWORK/) was removed by data_simplification; {OUTPUT}/ kept as it is",
                                    rank_dir / OUTPUT) from None
        raise
    simplifying = exp.get("_data_simplification", True)
    keep_framework = common.get("with_stack") is True
    if not simplifying or keep_framework:  # else FRAMEWORK/ goes at the end: no records to write
        npu_records.write(rank_dir, fw, info)  # torch_npu's raw records beside the Kineto trace
    ov = Overlap(fw)
    extra = Extras(rank_dir, fw, rank if rank is not None else _rank_id(info), level,
                   common.get("profile_memory") is True, info=info, jobs=_jobs(rank_dir, names))
    out, took_logs, fresh = _output_dir(rank_dir / OUTPUT,
                                        rank_dir / "logs" if simplifying and "logs" in names else None)
    with text.in_place(out) if private and fresh else contextlib.nullcontext():  # (a staged copy: no temp files)
        files: list[str] = []
        if "text" in types or not types:
            lay = trace_tracks.Layout(fw, device_id)
            k = fw.kernels
            conn = {int(k.event[j]): int(extra.apis.conn[j]) for j in np.flatnonzero(k.comm).tolist()} \
                if len(k.event) else {}
            lay.comm = comm_views.trace_events(extra.comm, extra.group, lay.communication, device_id, conn) \
                if extra.comm else []  # (no group to read: trace_events gives [] for no operation)
            lay.apis = extra.apis if level >= 1 else None
            lay.extra = overhead.trace_events(extra.overhead, trace_tracks.enc_pid(fw.pid, 8, trace_tracks.HOST_DEV),
                                              int(fw.op_ts.min()) if fw.n_ops else None)
            if exp.get("_gc_detect_threshold", 0) is not None:  # a window saved with it off has no GC file
                lay.extra += gc_track.trace_events(gc_track.read(rank_dir),
                                                   trace_tracks.enc_pid(fw.pid, 9, trace_tracks.HOST_DEV))
            trace_tracks.fitted(fw, ov, lay)  # before the fork: both halves write the same fit
            tv = out / "trace_view.json"
            pending = trace_split.start_tail(tv, fw, ov, lay) if parallel else None
            cpu = "ProfilerActivity.CPU" in common.get("activities", ["ProfilerActivity.CPU"])
            trace_split.write(tv, fw, ov, lay, pending, _summaries(out, fw, ov, device_id, level, cpu, extra, files))
            files += ["operator_details.csv"] if cpu and level >= 0 else []
            files += ["trace_view.json"]
            files += ["kernel_details.csv", "op_statistic.csv", "step_trace_time.csv"] if level >= 0 else []
            files += ["api_statistic.csv"] if level >= 1 else []
        if "db" in types:
            from openmsprof.export.ascend_pt.torch_db import write as write_db

            files += write_db(out, fw, ov, info, rank, device_id, rank_dir, extra=extra)
    # analyse.done before the simplification: a process killed between the two leaves a finished
    # analysis with its FRAMEWORK/ (kept), never one whose raw data is gone and that reads as unfinished
    _mark_done(out / "analyse.done")
    if simplifying:  # (the listing of the start, less the logs/ that became the output dir)
        simplify(rank_dir, keep_framework=keep_framework,
                 names=[n for n in names if n != "logs"] if took_logs else names)
    return Result(out, files, len(fw.kernels), fw.n_ops, info, next(n for n in sorted(names) if _INFO_RE.match(n)))


def _jobs(rank_dir: Path, names: list[str]) -> list[Path]:
    """The rank dir's ``PROF_*`` job dirs, sorted (from its listing)."""
    return [rank_dir / n for n in sorted(names) if n.startswith("PROF_") and (rank_dir / n).is_dir()]


def _output_dir(out: Path, leftover: Path | None = None) -> tuple[Path, bool, bool]:
    """``ASCEND_PROFILER_OUTPUT/`` made fresh (two syscalls: the usual case, a window analysed
    once), or the existing one with its ``analyse.done`` removed (checked as ``fs.make_dir`` does).
    ``leftover``: the rank dir's ``logs/``, which data_simplification removes when empty: an empty
    one of ours is renamed into the fresh output dir instead (creating a dir is the costly syscall
    on some file systems, and removing one adds to the cost of the next).  Returns the dir, whether
    ``leftover`` became it, and whether the dir is fresh (made by this call, empty)."""
    if leftover is not None and _took_leftover(leftover, out):
        return out, True, True
    try:
        return fs.make_new_dir(out), False, True
    except PathError:
        out = fs.make_dir(out)
    (out / "analyse.done").unlink(missing_ok=True)
    return out, False, False


def _took_leftover(leftover: Path, out: Path) -> bool:
    """Whether the empty dir ``leftover`` (a real dir of this user) became ``out`` (mode
    ``fs.DIR_MODE``).  rename never replaces a non-empty dir, a file or a link (nor follows one):
    where ``out`` is any of those it fails and nothing moved; an empty dir it may replace is what
    a fresh output dir is anyway."""
    try:
        st = os.lstat(leftover)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or os.listdir(leftover):
            return False
        os.rename(leftover, out)
    except OSError:
        return False
    if stat.S_IMODE(st.st_mode) != fs.DIR_MODE:  # (ours are made with it: no chmod then)
        os.chmod(out, fs.DIR_MODE)
    return True


def _mark_done(path: Path) -> None:
    """The empty ``analyse.done``: created at once where it is absent (``_output_dir`` removed
    it; an empty file needs no temp file to appear whole), else replaced atomically."""
    try:
        os.close(fs.open_new(path, append=False))
    except PathError:
        fs.write_file_atomic(path, b"")


def folded_stacks(rank_dir: Path, metric: str) -> str:
    """FlameGraph folded stacks of ``rank_dir`` (``export_stacks``; ``folded_stacks.folded``)."""
    return _folded.folded(rank_dir, read_info(rank_dir)[0], metric)


def _rank_id(info: dict[str, Any]) -> int | None:
    r = info.get("rank_id")
    return r if isinstance(r, int) and not isinstance(r, bool) and r >= 0 else None


def _summaries(out: Path, fw: framework.Framework, ov: Overlap, device_id: int, level: int,
               cpu: bool, extra: Extras, files: list[str]) -> Iterator[None]:
    """The CSV exports (a generator, run while the trace_view child works)."""
    if extra.memory is not None:
        files += memory.write_csvs(out, extra.memory)
    if extra.comm_views:
        files += comm_views.write_json(out, extra.comm, extra.group)
    if level < 0:  # Level_none (seed 004: "不采集所有Level层级控制的数据"): trace_view (mstx) only
        yield None
        return
    summary.kernel_details(out / "kernel_details.csv", fw, device_id, full=level >= 1)
    if cpu:
        summary.operator_details(out / "operator_details.csv", fw)
    summary.step_trace_time(out / "step_trace_time.csv", fw, ov, device_id)
    summary.op_statistic(out / "op_statistic.csv", fw, device_id)  # whenever kernel_details is
    if level >= 1:
        summary.api_statistic(out / "api_statistic.csv", cann.statistic_rows(fw, extra.apis))
    # the kernel database `analyze` reads, from kernel_details' columns (after the CSV: fresh;
    # last, while the trace_view child may still be working); only for a large window, where
    # building it from the CSV at the first `analyze` would cost seconds: a small rank dir keeps
    # seed 004's layout (no .openmsprof/) and `analyze` builds its cache in well under a second
    if len(fw.kernels) >= kernel_job.EAGER_MIN_KERNELS:
        kernel_job.write_kernel_db(out.parent, *summary.kernel_columns(fw, device_id))
    yield None


def simplify(rank_dir: Path, keep_framework: bool = False, names: list[str] | None = None) -> None:
    """data_simplification (seed 004): after the export only ASCEND_PROFILER_OUTPUT/ and the
    PROF_ raw data stay — FRAMEWORK/ and the PROF_ dirs' intermediate folders go.  FRAMEWORK/ is
    kept when ``keep_framework`` (with_stack: export_stacks reads the call stacks from it).
    ``names``: the rank dir's entries when the caller listed them (else listed here)."""
    framework_dir = rank_dir / "FRAMEWORK"
    if not keep_framework:
        _remove_framework(framework_dir)
    names = os.listdir(rank_dir) if names is None else names
    if "logs" in names:
        try:
            (rank_dir / "logs").rmdir()  # an empty leftover (nothing logged there)
        except OSError:
            pass
    for prof in [rank_dir / n for n in names if n.startswith("PROF_")]:
        if not prof.is_dir():
            continue
        for sub in [prof, *[p for p in prof.iterdir() if p.is_dir()]]:
            for name in _SIMPLIFY:
                target = sub / name
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target, ignore_errors=True)
            for p in sub.glob("mindstudio_profiler_*"):
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p, ignore_errors=True)


def _remove_framework(framework_dir: Path) -> None:
    """``FRAMEWORK/`` removed: its trace and the dir (three syscalls) when that is all it holds,
    else the whole tree; a link is left alone."""
    try:
        if not stat.S_ISDIR(os.lstat(framework_dir).st_mode):
            return
    except OSError:
        return
    try:
        os.unlink(framework_dir / framework.FRAMEWORK_TRACE)
        os.rmdir(framework_dir)
    except OSError:
        shutil.rmtree(framework_dir, ignore_errors=True)
