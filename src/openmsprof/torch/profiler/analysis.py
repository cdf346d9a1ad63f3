"""Offline parsing: ``analyse(profiler_path)`` for a rank dir or a folder of them; windows a killed
run left only as temp traces are adopted first (``_orphans``).  Also runnable as ``python -m openmsprof.torch.profiler.analysis PATH`` (offline; the trace handler's
windows are analysed by ``_analysis_worker``)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from openmsprof.config.errors import AlreadySimplified, PathError, ProfilingError
from openmsprof.config.paths import resolve_output
from openmsprof.config.validate import show
from openmsprof.torch.profiler import _analysis_claim, _analysis_stage, _orphans

log = logging.getLogger("openmsprof")


def rank_dirs(path: Path) -> list[Path]:
    """``path`` itself if it is an ``*ascend_pt`` dir, else its ``*ascend_pt`` children."""
    if path.name.endswith("ascend_pt"):
        return [path]
    return sorted(p for p in path.iterdir() if p.is_dir() and p.name.endswith("ascend_pt"))


def _exporter() -> ModuleType:
    """The Ascend views' exporter: the torch facade's one upward import (docs/internals.md), made
    lazily here so that a training process that never analyses never loads parse/export."""
    from openmsprof.export.ascend_pt import rank_analyse

    return rank_analyse


def preload() -> None:
    """Import the exporter now (the analysis worker does, before its first window)."""
    _exporter()


def analyse_dir(rank_dir: Path, parallel: bool = True) -> Path:
    """Analyse one rank dir; returns its ASCEND_PROFILER_OUTPUT.  Raises ProfilingError.
    ``parallel=False`` inside the training process (no fork there)."""
    return _exporter().export(rank_dir, parallel=parallel).output


def analyse_dir_info(rank_dir: Path, parallel: bool = True, private: bool = False) -> tuple[str, dict[str, Any]]:
    """``analyse_dir``, returning the name and the parsed document of the profiler_info the
    analysis read (``_analysis_claim.record_overhead`` adds its figures without reading it again).
    ``private``: ``rank_dir`` is a staged copy, published whole (``rank_analyse.export``)."""
    res = _exporter().export(rank_dir, parallel=parallel, private=private)
    return res.info_name, res.info


def folded_stacks(rank_dir: Path, metric: str) -> str:
    """FlameGraph folded stacks of a saved (unsimplified) rank dir, ``metric`` per op."""
    return str(_exporter().folded_stacks(rank_dir, metric))


def analyse(profiler_path: str | os.PathLike[str], max_process_number: int | None = None,
            export_type: str | list[str] | None = None) -> list[Path]:
    """Parse every ``*_ascend_pt`` dir under ``profiler_path``; bad dirs are reported and skipped.
    Unsaved windows whose writer is gone are saved first (``_orphans.adopt``, one line each), and
    the stage dirs of an analysis worker that is gone are removed (``_analysis_stage.sweep``), as
    is the claims file where no claim is held (``_analysis_claim.tidy``)."""
    if not isinstance(profiler_path, (str, os.PathLike)):
        raise PathError(f"profiler_path={show(profiler_path)} is invalid; allowed: a directory path")
    path = resolve_output(os.fspath(profiler_path), "profiler_path")
    if not path.is_dir():
        raise PathError(f"profiler_path {os.fspath(profiler_path)!r} is not a directory")
    done = []
    _orphans.adopt(path)
    for p in _analysis_stage.sweep(path):
        log.warning("openmsprof: removed %s, left by an analysis worker that is gone", p)
    _analysis_claim.tidy(path)  # (the claims file a killed run left; kept while anyone holds a claim)
    dirs = rank_dirs(path)
    if not dirs:
        raise PathError(f"no *_ascend_pt directory under {os.fspath(profiler_path)!r}")
    for d in dirs:
        try:
            done.append(analyse_dir(d))
        except AlreadySimplified as exc:  # healthy: its output stands (one line, not an error)
            log.warning("openmsprof: %s", exc)
            done.append(Path(str(exc.output)))
        except ProfilingError as exc:
            log.warning("openmsprof: %s: %s", d, exc)
    return done


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m openmsprof.torch.profiler.analysis PROFILER_PATH", file=sys.stderr)
        return 2
    try:
        out = analyse(args[0])
    except ProfilingError as exc:
        print(f"openmsprof: error: {exc}", file=sys.stderr)
        return 1
    for o in out:
        print(o)
    return 0 if out else 1


if __name__ == "__main__":
    sys.exit(main())
