"""``--all``: import each collected job into ``JOB/sqlite/msprof.db`` and export its timeline
(``JOB/timeline/``) and summary (``JOB/summary/``) through the importer/exporter functions
(``openmsprof.parse.importer``, ``openmsprof.export.timeline.export_timeline``,
``openmsprof.export.summary.export_summary``)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openmsprof.config.errors import ProfilingError


@dataclass
class Processed:
    job: Path
    db: Path | None = None
    outputs: dict[str, Path] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _function(module: str, name: str) -> Callable[..., Any] | None:
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return None
    fn = getattr(mod, name, None)
    return fn if callable(fn) else None


def _import(job: Path) -> Path:
    """Import (or re-import when stale) through the importer; without one, the exporters
    import on their own and the database is where the contract puts it."""
    fn = _function("openmsprof.parse.importer", "ensure_imported") or _function("openmsprof.parse.importer", "import_job")
    if fn is None:
        return job / "sqlite" / "msprof.db"
    result = fn(job)
    return Path(getattr(result, "db_path", result))


def _export(kind: str, job: Path) -> Path:
    fn = _function(f"openmsprof.export.{kind}", f"export_{kind}")
    if fn is None:
        raise ProfilingError(f"--all: the {kind} exporter (openmsprof.export.{kind}) is not installed")
    result = fn(job)
    if isinstance(result, (list, tuple)) and result:
        return Path(result[0]).parent
    return Path(result) if isinstance(result, (str, Path)) else job / kind


def process(job: Path) -> Processed:
    """Import ``job`` and export timeline + summary; raises a one-line ProfilingError."""
    done = Processed(job)
    done.db = _import(job)
    for kind in ("timeline", "summary"):
        done.outputs[kind] = _export(kind, job)
    if not done.db.is_file():
        raise ProfilingError(f"--all: job {str(job)!r} was exported but has no {str(done.db)!r}")
    return done


def process_all(jobs: list[Path], stream: Any = None) -> list[Processed]:
    """Process every job, printing where the results are; a failing job is reported and the
    others still processed.  Raises after all when any failed."""
    stream = stream or sys.stderr
    results: list[Processed] = []
    failures: list[str] = []
    for job in jobs:
        try:
            done = process(job)
        except ProfilingError as exc:
            failures.append(f"{job.name}: {exc}")
            continue
        results.append(done)
        print(f"openmsprof: job {job}", file=stream)
        print(f"openmsprof:   database  {done.db}", file=stream)
        for kind, path in done.outputs.items():
            print(f"openmsprof:   {kind:<9} {path}", file=stream)
    if failures:
        raise ProfilingError("; ".join(failures))
    return results
