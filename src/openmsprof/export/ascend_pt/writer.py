"""Analyse one ``…_ascend_pt`` rank dir into ``ASCEND_PROFILER_OUTPUT/`` (``analyse.done`` last)."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from openmsprof.collect import fs
from openmsprof.config.errors import RawDataError
from openmsprof.export.ascend_pt import framework, summary, trace_view
from openmsprof.export.ascend_pt.overlap import Overlap

OUTPUT = "ASCEND_PROFILER_OUTPUT"
_INFO_RE = re.compile(r"^profiler_info(?:_(\d+))?\.json$")
_SIMPLIFY = ("sqlite", "summary", "timeline", "analyze")


@dataclass
class Result:
    output: Path
    files: list[str]
    kernels: int
    ops: int


def read_info(rank_dir: Path) -> tuple[dict[str, Any], int | None]:
    for p in sorted(rank_dir.iterdir()):
        m = _INFO_RE.match(p.name)
        if m:
            try:
                return orjson.loads(p.read_bytes()), (int(m.group(1)) if m.group(1) else None)
            except orjson.JSONDecodeError as exc:
                raise RawDataError(f"{str(p)!r} is not valid JSON: {exc}") from None
    raise RawDataError(f"{str(rank_dir)!r} has no profiler_info*.json (not an _ascend_pt dir?)")


def _level(exp: dict[str, Any]) -> int:
    return {"Level_none": -1, "Level0": 0, "Level1": 1, "Level2": 2}.get(exp.get("_profiler_level", "Level0"), 0)


def export(rank_dir: Path, device_id: int = 0) -> Result:
    info, rank = read_info(rank_dir)
    cfg = info.get("config") or {}
    exp = cfg.get("experimental_config") or {}
    common = cfg.get("common_config") or {}
    level = _level(exp)
    types = exp.get("_export_type") or ["text"]
    types = [types] if isinstance(types, str) else types
    fw = framework.load(rank_dir, info)
    ov = Overlap(fw)
    out = fs.make_dir(rank_dir / OUTPUT)
    (out / "analyse.done").unlink(missing_ok=True)
    files: list[str] = []
    if "text" in types or not types:
        lay = trace_view.Layout(fw, device_id)
        trace_view.write(out / "trace_view.json", trace_view.events(fw, ov, lay))
        summary.kernel_details(out / "kernel_details.csv", fw, device_id, full=level >= 1)
        if "ProfilerActivity.CPU" in common.get("activities", ["ProfilerActivity.CPU"]):
            summary.operator_details(out / "operator_details.csv", fw)
            files.append("operator_details.csv")
        summary.step_trace_time(out / "step_trace_time.csv", fw, ov, device_id)
        files += ["trace_view.json", "kernel_details.csv", "step_trace_time.csv"]
        if level >= 1:
            summary.op_statistic(out / "op_statistic.csv", fw, device_id)
            summary.api_statistic(out / "api_statistic.csv")
            files += ["op_statistic.csv", "api_statistic.csv"]
    if "db" in types:
        from openmsprof.export.ascend_pt.db import write as write_db

        names = write_db(out, fw, ov, info, rank, device_id, rank_dir)
        files += names
    if exp.get("_data_simplification", True):
        simplify(rank_dir)
    fs.write_file_atomic(out / "analyse.done", b"")
    return Result(out, files, len(fw.kernels), len(fw.ops))


def simplify(rank_dir: Path) -> None:
    """data_simplification: drop intermediate PROF_ dirs; raw data, FRAMEWORK/ and outputs stay."""
    for prof in rank_dir.glob("PROF_*"):
        for sub in [prof, *[p for p in prof.iterdir() if p.is_dir()]]:
            for name in _SIMPLIFY:
                target = sub / name
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target, ignore_errors=True)
            for p in sub.glob("mindstudio_profiler_*"):
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p, ignore_errors=True)
