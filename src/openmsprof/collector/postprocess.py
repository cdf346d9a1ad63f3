"""``--all``: import each collected job into ``JOB/sqlite/msprof.db`` and export its timeline
(``JOB/timeline/``) and summary (``JOB/summary/``) through the importer/exporter functions
(``openmsprof.parse.importer``, ``openmsprof.export.msprof.timeline.export_timeline``,
``openmsprof.export.msprof.summary_export.export_summary``)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openmsprof.config.errors import ProfilingError
from openmsprof.export.msprof.msprof_analyze_layout import OUTPUT_DIR, export_summary_and_layout
from openmsprof.export.msprof.step_timeline import export_step_timeline
from openmsprof.export.msprof.svp_summary import export_svp_summary
from openmsprof.export.msprof.svp_timeline import export_svp_timeline
from openmsprof.export.msprof.timeline import export_timeline
from openmsprof.parse.importer import ensure_imported


@dataclass
class Processed:
    job: Path
    db: Path | None = None
    outputs: dict[str, Path] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _output_dir(result: Any, job: Path, kind: str) -> Path:
    if isinstance(result, (list, tuple)) and result:
        return Path(result[0]).parent
    return Path(result) if isinstance(result, (str, Path)) else job / kind


def process(job: Path, layout: str = "msprof") -> Processed:
    """Import ``job`` and export timeline + summary (``layout`` "svp": seed 002's SVP file set, as
    ``export --layout svp`` writes it); raises a one-line ProfilingError."""
    done = Processed(job)
    done.db = Path(ensure_imported(job))
    if layout == "svp":
        done.outputs["timeline"] = _output_dir(export_svp_timeline(job), job, "timeline")
        done.outputs["summary"] = _output_dir(export_svp_summary(job), job, "summary")
        return done
    done.outputs["timeline"] = _output_dir(export_timeline(job), job, "timeline")
    export_step_timeline(job)
    summary, _layout = export_summary_and_layout(job)  # + mindstudio_profiler_output/ and msprof_{ts}.db for msprof-analyze
    done.outputs["summary"] = _output_dir(summary, job, "summary")
    done.outputs["tools"] = job / OUTPUT_DIR
    if not done.db.is_file():
        raise ProfilingError(f"--all: job {str(job)!r} was exported but has no {str(done.db)!r}")
    return done


def process_all(jobs: list[Path], stream: Any = None, layout: str = "msprof") -> list[Processed]:
    """Process every job, printing where the results are; a failing job is reported and the
    others still processed.  Raises after all when any failed."""
    stream = stream or sys.stderr
    results: list[Processed] = []
    failures: list[str] = []
    for job in jobs:
        try:
            done = process(job, layout)
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
