"""The msprof job views: per-device ``timeline/`` and ``summary/``, terminal tables (``show``)."""

from openmsprof.export.msprof.show import render_rich, render_text, sections
from openmsprof.export.msprof.summary_export import export_summary, iter_tables, write_summary
from openmsprof.export.msprof.tables import Table
from openmsprof.export.msprof.timeline import export_timeline, write_timeline

__all__ = [
    "Table",
    "export_summary",
    "export_timeline",
    "iter_tables",
    "render_rich",
    "render_text",
    "sections",
    "write_summary",
    "write_timeline",
]
