"""The advisor's self-contained HTML report: pictures first, evidence folded under them.

Order: job line; the roofline (operators against the measured ceilings); the per-iteration
series with p50/p95; the top operators; the compare waterfall (given a base run); then one card
per finding, linked to its evidence, which sits folded in ``<details>`` under it.  One file:
inline SVG, inline CSS, no scripts, CSP ``default-src 'none'``, nothing fetched.  Every string
from the job goes through :func:`html.escape`.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from pathlib import Path
from typing import Any

from openmsprof.analysis import advisor
from openmsprof.analysis import job_views as V
from openmsprof.analysis.charts import bar_chart, roofline_svg, series_svg, waterfall_svg
from openmsprof.analysis.patterns import TaskColumns
from openmsprof.analysis.rules_patterns import job_ceilings
from openmsprof.export.fmt import us, us_avg
from openmsprof.export.jobdb import JobDB, open_job
from openmsprof.export.msprof import summary_host as host
from openmsprof.fileio import fs

__all__ = ["CSP", "bar_chart", "build_html", "write_html"]

TOP_BARS, ROOF_POINTS, WATERFALL_STEPS = 12, 300, 8
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_COLORS = {"critical": "#b00020", "warning": "#c77700", "info": "#2b6cb0"}
_CSS = """body{font:14px system-ui,sans-serif;margin:2em;max-width:76em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;
text-align:left}td.n{text-align:right}h2{border-bottom:1px solid #ddd;margin-top:1.4em}
.card{border-left:6px solid;padding:.5em 1em;margin:.8em 0;background:#fafafa}
.sev{font-weight:bold;text-transform:uppercase}code{font-size:12px}.warn{color:#b00020}
.pics{display:flex;flex-wrap:wrap;gap:1em}.muted{color:#666}"""


def _table(header: list[str], rows: Iterable[list[Any]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(
        f'<td class="n">{escape(str(v))}</td>' if isinstance(v, (int, float)) or _numeric(v)
        else f"<td>{escape(str(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _numeric(v: Any) -> bool:
    return isinstance(v, str) and v.replace(".", "", 1).lstrip("-").isdigit()


def _roofline(db: JobDB, cols: TaskColumns) -> list[str]:
    ceil, doc = job_ceilings(db)
    roofs = V.op_roofs(db, cols, ceil)
    total = sum(r.total_ns for r in roofs) or 1
    pts = []
    for r in roofs[:ROOF_POINTS]:
        gflops, _ = r.rates()
        if r.cost.modelled and gflops and r.roof.intensity:
            pts.append((f"{r.name} ({r.op_type})", r.roof.intensity, gflops,
                        r.total_ns / total, r.roof.bound))
    unmodelled = sum(1 for r in roofs if not r.cost.modelled)
    no_flops = sum(1 for r in roofs if r.cost.modelled and not r.cost.flops)
    out = ['<h2 id="roofline">Roofline</h2>',
           roofline_svg(pts, ceil.bandwidth / 1e9, ceil.peak_flops / 1e9,
                        f"Operators against the measured ceilings ({len(pts)} shown)"),
           f'<p class="muted">Ceilings: peaks from {escape(ceil.source or "?")}; point size ='
           f" share of device time; colour = bound class. {no_flops} data-movement op groups "
           f"(no FLOPs) and {unmodelled} unmodelled op groups are not drawn.</p>"]
    if ceil.loaded:
        out.append(f'<p class="warn">Peaks measured on a loaded machine (CV above 10 %): '
                   f"{escape(', '.join(ceil.loaded))}.</p>")
    if doc.get("skipped"):
        out.append(f'<p class="muted">Not measured (time budget): '
                   f"{escape(', '.join(map(str, doc['skipped'])))}.</p>")
    return out


def _series(db: JobDB, cols: TaskColumns | None) -> list[str]:
    if db.has("STEP_TIME"):
        vals = [(e - s) / 1e3 for s, e in db.query(
            "SELECT startNs, endNs FROM STEP_TIME ORDER BY startNs") if e is not None]
        title = "Step time per step"
    elif cols is not None:
        vals = V.iteration_times(cols)
        title = "Device time per iteration (execute)"
    else:
        return []
    if len(vals) < 2:
        return []
    return ['<h2 id="steps">Iterations</h2>', series_svg(vals, title)]


def _waterfall(db: JobDB, base: Path) -> list[str]:
    from openmsprof.analysis.compare import OP_TYPE, compare_jobs

    cmp = compare_jobs(base, db.job)
    bi, ni = max(cmp.base_iterations, 1), max(cmp.new_iterations, 1)
    rows = cmp.section(OP_TYPE)
    deltas = sorted(((r.name, r.new_total_ns / ni / 1e3 - r.base_total_ns / bi / 1e3)
                     for r in rows), key=lambda x: -abs(x[1]))
    steps = deltas[:WATERFALL_STEPS]
    rest = sum(d for _, d in deltas[WATERFALL_STEPS:])
    if abs(rest) > 1e-9:
        steps.append(("other op types", rest))
    b_tot = sum(r.base_total_ns for r in rows) / bi / 1e3
    n_tot = sum(r.new_total_ns for r in rows) / ni / 1e3
    return ['<h2 id="compare">Compare with the base run</h2>',
            waterfall_svg(b_tot, steps, n_tot, f"Device time per iteration: "
                          f"{base.name} → {Path(db.job).name} ({cmp.verdict})")]


def _card(i: int, f: dict[str, Any]) -> str:
    color = _COLORS.get(f["severity"], "#555")
    ev = _table(["Evidence", "Value"], [[k, "; ".join(map(str, v)) if isinstance(v, list)
                                          else v] for k, v in f["evidence"].items()])
    events = _table(["Table", "Id", "Name", "Timeline ts (us)", "Start (us)", "Duration (us)"],
                    [[e["table"], e["id"], e["name"], e["ts_us"], e["start_us"], e["dur_us"]]
                     for e in f["events"]]) if f["events"] else ""
    chart = {"patterns": "#roofline", "top_ops": "#top-ops", "step_interval": "#steps",
             "host_gaps": "#steps"}.get(f["rule"])
    see = f' · <a href="{chart}">see chart</a>' if chart else ""
    return (f'<div class="card finding" id="f{i}" style="border-color:{color}">'
            f'<span class="sev" style="color:{color}">{escape(f["severity"])}</span> '
            f'<code>{escape(f["rule"])}</code> — {escape(f["summary"])}'
            f'<br><a href="#ev{i}">evidence ({len(f["evidence"])} figures, '
            f'{len(f["events"])} events)</a>{see}'
            f'<details id="ev{i}"><summary>Evidence</summary>{ev}{events}</details></div>')


def build_html(db: JobDB, rules: Iterable[str] | str | None = None,
               base: Path | None = None) -> str:
    """The whole report for an open database (``base``: a run to compare against)."""
    chosen = advisor.select_rules(rules)
    found = [f.to_dict(db.base_ns) for f in advisor.run_rules(db, chosen)]
    summary = advisor.job_summary(db)
    cols = V.columns(db)
    ops = V.totals_by(db, cols.typ, cols) if cols is not None else []
    total = sum(t for _, _, t in ops)
    apis = host.api_statistic_rows(db)
    job = escape(str(summary["job"]))
    out = ["<!DOCTYPE html><html><head><meta charset=\"utf-8\">",
           f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
           f"<title>openmsprof analyze — {job}</title>",
           f"<style>{_CSS}</style></head><body>",
           f"<h1>openmsprof analyze: {job}</h1>",
           f'<p class="muted">{summary.get("tasks", 0)} tasks, {summary.get("api_calls", 0)} '
           f"API calls, {summary.get('steps', 0)} steps; {len(found)} findings "
           f'(<a href="#findings">below</a>).</p>']
    if cols is not None:
        out += _roofline(db, cols)
    out += _series(db, cols)
    if ops and cols is not None:
        out += ['<h2 id="top-ops">Top operators</h2><div class="pics">',
                bar_chart([(k, t / 1000.0) for k, _, t in ops[:TOP_BARS]], "us",
                          "Device time by op type"),
                bar_chart([(k, t / 1e3) for k, _, t in V.totals_by(db, cols.name, cols)[:TOP_BARS]],
                          "us", "Device time by operator"), "</div>"]
    if base is not None:
        out += _waterfall(db, base)
    out += [f'<h2 id="findings">Findings ({len(found)})</h2>',
            "".join(_card(i, f) for i, f in enumerate(found)) or "<p>No findings.</p>"]
    tables = []
    if ops:
        tables.append(_table(["OP Type", "Count", "Total(us)", "Avg(us)", "Ratio(%)"],
                             [[k, n, us(t), us_avg(t, n), f"{100.0 * t / total if total else 0:.3f}"]
                              for k, n, t in ops[:TOP_BARS]]))
    if apis:
        tables.append(bar_chart([(f"{a.level} {a.name}", a.total_ns / 1000.0)
                                 for a in apis[:TOP_BARS]], "us", "Total time by API"))
        tables.append(_table(["Level", "API Name", "Count", "Total(us)", "Avg(us)", "Min(us)",
                              "Max(us)"],
                             [[a.level, a.name, a.calls, us(a.total_ns), us_avg(a.total_ns, a.calls),
                               us(a.min_ns), us(a.max_ns)] for a in apis[:TOP_BARS * 2]]))
    out += ["<h2>Statistics</h2>", _table(["Job", "Value"], [[k, "" if v is None else v]
                                                              for k, v in summary.items()]),
            f"<details><summary>Op type and API statistics</summary>{''.join(tables)}</details>",
            "<p><small>Timeline ts is µs since the job's BASE_NS (the openmsprof timeline); "
            "start is epoch µs (the summary files).</small></p></body></html>\n"]
    return "\n".join(out)


def write_html(job: Path | str, path: Path, rules: Iterable[str] | str | None = None, *,
               peaks: str | Path | None = None, base: Path | None = None) -> Path:
    """Write the report for ``job`` to ``path`` (0640, atomic); returns ``path``."""
    with open_job(advisor._one_job(job)) as db:
        advisor.apply_peaks(db, peaks)
        text = build_html(db, rules, base=advisor._one_job(base) if base is not None else None)
    fs.write_file_atomic(path, text.encode())
    return path
