"""The advisor's self-contained HTML report: job summary, top op types and API charts (inline
SVG drawn here — no scripts, no external resources), API statistics and the findings.

Every string from the job goes through :func:`html.escape`.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from pathlib import Path
from typing import Any

from openmsprof.analysis import advisor
from openmsprof.export.db import JobDB, open_job
from openmsprof.export.fmt import us, us_avg
from openmsprof.export.msprof import summary_host as host
from openmsprof.export.msprof import summary_tasks as tasks
from openmsprof.recorder import fs

TOP_BARS = 12
_COLORS = {"critical": "#b00020", "warning": "#c77700", "info": "#2b6cb0"}
_CSS = """body{font:14px system-ui,sans-serif;margin:2em;max-width:70em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;
text-align:left}td.n{text-align:right}h2{border-bottom:1px solid #ddd}
.f{border-left:4px solid;padding:.3em .8em;margin:.8em 0;background:#fafafa}
.sev{font-weight:bold;text-transform:uppercase}code{font-size:12px}"""


def bar_chart(items: list[tuple[str, float]], unit: str, title: str) -> str:
    """A horizontal bar chart as an inline ``<svg>`` (labels escaped)."""
    if not items:
        return ""
    top = max(v for _, v in items) or 1.0
    row, label_w, bar_w = 22, 260, 420
    height = row * len(items) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 120}" '
             f'height="{height}" role="img" aria-label="{escape(title)}">',
             f'<text x="0" y="14" font-weight="bold">{escape(title)}</text>']
    for i, (label, value) in enumerate(items):
        y = 24 + i * row
        w = max(1.0, bar_w * value / top)
        short = label if len(label) <= 36 else label[:35] + "…"
        parts.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">'
                     f'<title>{escape(label)}</title>{escape(short)}</text>'
                     f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row - 6}" '
                     f'fill="#2b6cb0"/><text x="{label_w + w + 6:.1f}" y="{y + 14}">'
                     f'{value:.3f} {escape(unit)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _table(header: list[str], rows: Iterable[list[Any]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(
        f'<td class="n">{escape(str(v))}</td>' if isinstance(v, (int, float)) or _numeric(v)
        else f"<td>{escape(str(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _numeric(v: Any) -> bool:
    return isinstance(v, str) and v.replace(".", "", 1).lstrip("-").isdigit()


def _op_types(db: JobDB) -> list[tuple[str, int, int]]:
    """(op type, count, total ns) over all devices and executors, total time descending."""
    sums: dict[str, tuple[int, int]] = {}
    for s in tasks.op_statistic_rows(db):
        n, t = sums.get(s.op_type, (0, 0))
        sums[s.op_type] = (n + s.calls, t + s.total_ns)
    return sorted(((k, n, t) for k, (n, t) in sums.items()), key=lambda r: -r[2])


def _finding(f: dict[str, Any]) -> str:
    color = _COLORS.get(f["severity"], "#555")
    ev = _table(["Evidence", "Value"], [[k, "; ".join(map(str, v)) if isinstance(v, list)
                                          else v] for k, v in f["evidence"].items()])
    events = _table(["Table", "Id", "Name", "Timeline ts (us)", "Start (us)", "Duration (us)"],
                    [[e["table"], e["id"], e["name"], e["ts_us"], e["start_us"], e["dur_us"]]
                     for e in f["events"]]) if f["events"] else ""
    return (f'<div class="f finding" style="border-color:{color}">'
            f'<span class="sev" style="color:{color}">{escape(f["severity"])}</span> '
            f'<code>{escape(f["rule"])}</code> — {escape(f["summary"])}{ev}{events}</div>')


def build_html(db: JobDB, rules: Iterable[str] | str | None = None) -> str:
    """The whole report for an open database."""
    chosen = advisor.select_rules(rules)
    found = advisor.run_rules(db, chosen)
    summary = advisor.job_summary(db)
    base = db.base_ns
    ops = _op_types(db)
    total = sum(t for _, _, t in ops)
    apis = host.api_statistic_rows(db)
    out = ["<!DOCTYPE html><html><head><meta charset=\"utf-8\">",
           f"<title>openmsprof analyze — {escape(str(summary['job']))}</title>",
           f"<style>{_CSS}</style></head><body>",
           f"<h1>openmsprof analyze: {escape(str(summary['job']))}</h1>",
           _table(["Job", "Value"], [[k, "" if v is None else v] for k, v in summary.items()]),
           f"<h2>Findings ({len(found)})</h2>",
           "".join(_finding(f.to_dict(base)) for f in found) or "<p>No findings.</p>"]
    if ops:
        out += ["<h2>Top operator types</h2>",
                bar_chart([(k, t / 1000.0) for k, _, t in ops[:TOP_BARS]], "us",
                          "Device time by op type"),
                _table(["OP Type", "Count", "Total(us)", "Avg(us)", "Ratio(%)"],
                       [[k, n, us(t), us_avg(t, n), f"{100.0 * t / total if total else 0:.3f}"]
                        for k, n, t in ops[:TOP_BARS]])]
    if apis:
        out += ["<h2>API statistics</h2>",
                bar_chart([(f"{a.level} {a.name}", a.total_ns / 1000.0) for a in apis[:TOP_BARS]],
                          "us", "Total time by API"),
                _table(["Level", "API Name", "Count", "Total(us)", "Avg(us)", "Min(us)",
                        "Max(us)"],
                       [[a.level, a.name, a.calls, us(a.total_ns), us_avg(a.total_ns, a.calls),
                         us(a.min_ns), us(a.max_ns)] for a in apis[:TOP_BARS * 2]])]
    out.append("<p><small>Timeline ts is µs since the job's BASE_NS (the openmsprof timeline); "
               "start is epoch µs (the summary files).</small></p></body></html>\n")
    return "\n".join(out)


def write_html(job: Path | str, path: Path, rules: Iterable[str] | str | None = None) -> Path:
    """Write the report for ``job`` to ``path`` (0640, atomic); returns ``path``."""
    with open_job(advisor._one_job(job)) as db:
        text = build_html(db, rules)
    fs.write_file_atomic(path, text.encode())
    return path
