"""Find the rank outputs under a cluster folder: torch ``*_ascend_pt`` dirs and ``PROF_*`` jobs.

A torch rank dir carries ``profiler_info_{rank}.json`` (msprof-analyze's rule); a ``PROF_*`` job
carries its rank in ``host/info.json`` (``rank_id``) or, failing that, is numbered in path order.
Duplicate ranks keep the newest collection and are reported; mixed world sizes are an error.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from openmsprof.config.errors import ConfigError, ProfilingError
from openmsprof.fileio.read_guard import read_json

__all__ = ["Discovery", "RankSource", "discover", "find_flight_jobs"]

_INFO = re.compile(r"^profiler_info_(\d+)\.json$")
_STAMP = re.compile(r"_(\d{8,})_ascend_pt$")


@dataclass(frozen=True)
class RankSource:
    """One rank's files: ``kind`` is ``"pt"`` (torch ascend_pt) or ``"prof"`` (PROF_ job)."""

    rank: int
    path: Path
    kind: str
    host: str
    world_size: int | None = None


@dataclass
class Discovery:
    ranks: list[RankSource] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _json(path: Path, problems: list[str] | None = None) -> dict:
    """The JSON object in ``path`` through the read guard; {} when absent or unusable (a refusal
    of the guard, a FIFO or link say, is added to ``problems``)."""
    if not os.path.lexists(path):
        return {}
    try:
        doc = read_json(path, path.name)
    except ProfilingError as exc:
        if problems is not None:
            problems.append(str(exc))
        return {}
    return doc if isinstance(doc, dict) else {}


def _pt_source(d: Path, problems: list[str]) -> RankSource | None:
    infos = [m for p in d.iterdir() if (m := _INFO.match(p.name))]
    if not infos:
        problems.append(f"{d}: no profiler_info_{{rank}}.json; not a rank dir")
        return None
    rank = int(infos[0].group(1))
    meta = _json(d / "profiler_metadata.json", problems)
    args = meta.get("distributed_args")
    ws = args.get("world_size") if isinstance(args, dict) else None
    ws = ws if isinstance(ws, int) else None
    worker = _STAMP.sub("", d.name)
    host = worker.rsplit("_", 1)[0] if "_" in worker else worker
    return RankSource(rank, d, "pt", host, ws)


def _prof_source(d: Path, order: int) -> RankSource:
    info: dict = {}
    for p in sorted(d.glob("host/info.json*")) + sorted(d.glob("device_*/info.json*")):
        info = _json(p)
        if info:
            break
    rank = info.get("rank_id")
    rank = rank if isinstance(rank, int) and rank >= 0 else order
    return RankSource(rank, d, "prof", str(info.get("hostname") or info.get("hostUid") or "localhost"))


def _stamp(src: RankSource) -> str:
    m = _STAMP.search(src.path.name) or re.search(r"_(\d{14,})_", src.path.name)
    return m.group(1) if m else ""


def discover(root: Path) -> Discovery:
    """Rank sources under ``root`` (itself a rank dir, or up to two levels above them)."""
    if not root.is_dir():
        raise ConfigError(f"cluster input {root}: not a directory")
    out = Discovery()
    candidates: list[Path] = []
    for level in ([root], sorted(root.iterdir()), sorted(root.glob("*/*"))):
        found = [p for p in level if p.is_dir() and (p.name.endswith("ascend_pt") or p.name.startswith("PROF_"))]
        if found:
            candidates = found
            break
    prof_order = 0
    by_rank: dict[int, RankSource] = {}
    for d in candidates:
        if d.is_symlink():
            out.problems.append(f"{d}: symbolic link refused")
            continue
        if d.name.endswith("ascend_pt"):
            src = _pt_source(d, out.problems)
        else:
            src = _prof_source(d, prof_order)
            prof_order += 1
        if src is None:
            continue
        old = by_rank.get(src.rank)
        if old is not None:
            keep, drop = (src, old) if _stamp(src) > _stamp(old) else (old, src)
            out.problems.append(f"rank {src.rank}: duplicate in {drop.path} and {keep.path}; "
                                f"using the newer {keep.path.name}")
            src = keep
        by_rank[src.rank] = src
    sizes = {s.world_size for s in by_rank.values() if s.world_size is not None}
    if len(sizes) > 1:
        detail = ", ".join(f"rank {s.rank}: {s.world_size}" for s in sorted(by_rank.values(), key=lambda s: s.rank))
        raise ConfigError(f"cluster input {root}: ranks from jobs of different world sizes ({detail})")
    out.ranks = [by_rank[r] for r in sorted(by_rank)]
    if not out.ranks:
        raise ConfigError(f"cluster input {root}: no rank outputs (*_ascend_pt with profiler_info_{{rank}}.json, "
                          "or PROF_* jobs)")
    return out


def find_flight_jobs(root: Path, depth: int = 3) -> list[Path]:
    """Flight recorder jobs: ``PROF_*`` dirs with ``host/flight.json`` under ``root`` (``root`` itself included)."""
    found: list[Path] = []
    level = [root]
    for _ in range(depth + 1):
        nxt = []
        for d in level:
            if (d / "host" / "flight.json").is_file():
                found.append(d)
                continue
            try:
                nxt += [c for c in sorted(d.iterdir()) if c.is_dir() and not c.is_symlink()]
            except OSError:
                continue
        level = nxt
    return found
