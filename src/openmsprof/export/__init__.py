"""export layer: the job database → timeline JSON, summary CSV/JSON, terminal tables.

Naming and layout rules: docs/formats.md ("Exports").
"""

from openmsprof.export.jobdb import JobDB, find_jobs, open_job
from openmsprof.export.msprof.show import render_rich, render_text, sections
from openmsprof.export.msprof.summary_export import export_summary, iter_tables, write_summary
from openmsprof.export.msprof.tables import Table
from openmsprof.export.msprof.timeline import export_timeline, write_timeline

__all__ = [
    "JobDB", "Table", "export_summary", "export_timeline", "find_jobs", "iter_tables",
    "open_job", "render_rich", "render_text", "sections", "write_summary", "write_timeline",
]
