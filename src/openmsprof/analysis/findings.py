"""What the advisor reports: :class:`Finding` (a rule's verdict with evidence numbers) and
:class:`EventRef` (a link to one row behind it, to find in the timeline or the database).

Times in the JSON form follow the exports: ``start_us`` is epoch µs as in the summaries
(``Task Start Time(us)``), ``ts_us`` is µs since the job's ``BASE_NS`` as in the timeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openmsprof.export.fmt import us

CRITICAL, WARNING, INFO = "critical", "warning", "info"
#: Severities, most severe first.
SEVERITIES = (CRITICAL, WARNING, INFO)


@dataclass(frozen=True)
class EventRef:
    """One database row behind a finding.

    ``table`` is ``TASK`` (``id`` = globalTaskId), ``CANN_API`` (``id`` = connectionId),
    ``STEP_TIME`` (``id`` = step id) or ``GAP`` (idle time; ``id`` = globalTaskId of the task
    after it)."""

    table: str
    id: int
    name: str
    start_ns: int
    dur_ns: int

    def to_dict(self, base_ns: int) -> dict[str, Any]:
        return {"table": self.table, "id": self.id, "name": self.name,
                "start_us": us(self.start_ns), "ts_us": us(self.start_ns - base_ns),
                "dur_us": us(self.dur_ns)}

    def describe(self, base_ns: int) -> str:
        """One line, e.g. ``TASK 42 'conv1' at ts 1234.500 us, 81.000 us``."""
        key = {"TASK": "globalTaskId", "CANN_API": "connectionId", "STEP_TIME": "step",
               "GAP": "before globalTaskId"}.get(self.table, "id")
        return (f"{self.table} {key}={self.id} {self.name!r} at ts {us(self.start_ns - base_ns)}"
                f" us, {us(self.dur_ns)} us")


@dataclass
class Finding:
    """A rule's result: severity, a one-line summary, evidence numbers and the events behind."""

    rule: str
    severity: str
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    events: list[EventRef] = field(default_factory=list)

    def to_dict(self, base_ns: int) -> dict[str, Any]:
        return {"rule": self.rule, "severity": self.severity, "summary": self.summary,
                "evidence": self.evidence,
                "events": [e.to_dict(base_ns) for e in self.events]}


def ms(ns: float) -> str:
    """``ns`` as milliseconds text for summaries (``12.345 ms``)."""
    return f"{ns / 1e6:.3f} ms"


def pct(part: float, whole: float) -> float:
    """Percentage rounded to 0.01 (0 when ``whole`` is 0)."""
    return round(100.0 * part / whole, 2) if whole else 0.0


def severity_rank(severity: str) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)
