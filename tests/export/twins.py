"""The tool-facing layout rendered twice: from its own db, then from the summary's twins."""

from __future__ import annotations

from pathlib import Path

from openmsprof.export.msprof.msprof_analyze_layout import OUTPUT_DIR, export_tool_facing
from openmsprof.export.msprof.summary_export import export_summary
from openmsprof.export.msprof.summary_task_pass import Twins


def layout_from_db_and_from_twins(job: Path) -> tuple[dict[str, bytes], dict[str, bytes], Twins]:
    """(files rendered from msprof_{ts}.db, files written with the summary's twins, the twins)."""
    out = job / OUTPUT_DIR
    export_tool_facing(job, ("summary",))  # no summary given: every merged table from the db
    rendered = {p.name: p.read_bytes() for p in out.iterdir()}
    for p in out.iterdir():
        p.unlink()
    used: list[Twins | None] = []
    export_tool_facing(job, ("summary",),
                       summary=lambda twins, meanwhile: used.append(twins) or export_summary(job, twins=twins))
    (twins,) = used
    assert twins is not None
    return rendered, {p.name: p.read_bytes() for p in out.iterdir()}, twins
