"""``show``: the job's statistics as terminal tables (rich, 80 columns) or CSV/JSON for scripts.

Sections: top operators by total time, op statistics, API statistics, steps, host usage — the
same numbers as the summary files.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import orjson
from rich import box
from rich.console import Console
from rich.table import Table as RichTable

from openmsprof.export.fmt import ratio, us, us_avg
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof import summary_host as host
from openmsprof.export.msprof import summary_tasks as tasks

Section = tuple[str, list[str], list[list[Any]]]
#: Columns right-aligned in the terminal view.
_NUMERIC = {"Count", "Total(us)", "Avg(us)", "Max(us)", "Min(us)", "Ratio(%)", "Duration(us)",
            "Iteration Time(us)", "Value", "Iteration", "Dev", "Layer Id", "Time(us)", "Time Ratio",
            "CPU Id", "Clock(Hz)", "Attainable(us)", "Eff(%)", "MBR", "GFLOP/s", "GB/s"}


def top_operators(db: JobDB, top: int) -> list[list[Any]]:
    """Operators (by name) with the largest total time, all devices."""
    if not db.has("TASK"):
        return []
    c = tasks._c
    sql = (f"SELECT {c(db, 'name')}, {c(db, 'opType')}, COUNT(*), SUM(MAX(t.endNs - t.startNs, 0)),"
           f" MAX(t.endNs - t.startNs) FROM {tasks._from(db)}"
           f" GROUP BY {c(db, 'name')}, {c(db, 'opType')} ORDER BY 4 DESC LIMIT ?")
    rows = db.query(sql, (top,))
    (total,), = db.query("SELECT TOTAL(MAX(endNs - startNs, 0)) FROM TASK")
    return [[db.text(n), db.text(o), cnt, us(tot), us_avg(tot, cnt), ratio(tot, total)]
            for n, o, cnt, tot, _ in rows]


def sections(db: JobDB, top: int = 20) -> list[Section]:
    """The statistics shown, as (title, header, rows); empty sections are left out."""
    out: list[Section] = []
    ops = top_operators(db, top)
    if ops:
        out.append(("Top operators by total time",
                    ["Op Name", "OP Type", "Count", "Total(us)", "Avg(us)", "Ratio(%)"], ops))
    stats = tasks.op_statistic_rows(db)[:top]
    if stats:
        out.append(("Op statistics", ["Dev", "OP Type", "Core Type", "Count", "Total(us)",
                                      "Avg(us)", "Ratio(%)"],
                    [[s.dev, s.op_type, s.core_type, s.calls, us(s.total_ns),
                      us_avg(s.total_ns, s.calls), f"{s.ratio:.3f}"] for s in stats]))
    apis = host.api_statistic_rows(db)[:top]
    if apis:
        out.append(("API statistics", ["Level", "API Name", "Count", "Total(us)", "Avg(us)",
                                       "Max(us)"],
                    [[a.level, a.name, a.calls, us(a.total_ns), us_avg(a.total_ns, a.calls),
                      us(a.max_ns)] for a in apis]))
    steps = [r for t in host.step_trace(db) for r in t.rows]
    if steps:
        out.append(("Steps", ["Dev", "Iteration", "Model ID", "Iteration End(us)",
                              "Iteration Time(us)"],
                    [[r[0], r[1], r[9], str(r[4]), str(r[5])] for r in steps[:top]]))
    usage: list[list[Any]] = []
    for t in host.host_cpu_usage(db):
        for _, total, occ, rec in t.rows:
            usage += [["CPU", "Total Cpu Numbers", total], ["CPU", "Occupied Cpu Numbers", occ],
                      ["CPU", "Recommend Cpu Numbers", rec]]
    for t in host.host_mem_usage(db):
        for _, total, peak, rec in t.rows:
            usage += [["Memory", "Total Memory(KB)", total], ["Memory", "Peak Used Memory(KB)", peak],
                      ["Memory", "Recommend Memory(KB)", rec]]
    if usage:
        out.append(("Host usage", ["Resource", "Metric", "Value"], usage))
    dropped = dropped_section(db)
    if dropped is not None:
        out.append(dropped)
    return out


def _key(title: str) -> str:
    """``Op statistic (device 0, model m 1)`` → ``op_statistic_device_0_model_m_1``."""
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")


def roofline_ceilings(db: JobDB, peaks: str | None = None) -> str:
    """One line naming the roofline's ceilings and where they come from."""
    from openmsprof.export.msprof import roofline as R

    ceil = R.ceilings(R.job_peaks(db, peaks))
    return (f"ceilings: DRAM {ceil.bandwidth / 1e9:.1f} GB/s, GEMM {ceil.peak_flops / 1e9:.1f} "
            f"GFLOP/s, special functions {ceil.special / 1e9:.2f} G/s (peaks: {ceil.source})"
            + "".join(f"; runtime {op} {rate / 1e9:.1f} GFLOP/s" for op, rate in ceil.op_flops)
            + (f"; runtime element rates for {', '.join(op for op, _ in ceil.op_elems)}"
               if ceil.op_elems else "")
            + (f"; CV above 10 %: {', '.join(ceil.loaded)}" if ceil.loaded else ""))


def roofline_section(db: JobDB, top: int, peaks: str | None = None) -> Section | None:
    """Operators against the roofline (``show --roofline``): the largest ``top`` by time."""
    from openmsprof.export.msprof import roofline as R

    if not db.has("TASK"):
        return None
    doc = R.job_peaks(db, peaks)
    ceil = R.ceilings(doc)
    rows = []
    for r in R.op_roofs(db, ceil)[:top]:
        gflops, gbs = r.rates()
        eff = r.efficiency
        m = r.cost.modelled
        rows.append([r.name, r.op_type, r.count, f"{r.avg_ns / 1e3:.3f}",
                     f"{r.roof.attainable_ns / 1e3:.3f}" if m else "N/A",
                     "N/A" if eff is None else f"{100 * eff:.1f}", r.roof.bound,
                     "N/A" if r.roof.memory_bound_ratio is None else
                     f"{r.roof.memory_bound_ratio:.3g}",
                     "N/A" if gflops is None else f"{gflops:.3g}",
                     "N/A" if gbs is None else f"{gbs:.3g}"])
    return ("Roofline", ["Op Name", "OP Type", "Count", "Avg(us)", "Attainable(us)", "Eff(%)",
                    "Bound", "MBR", "GFLOP/s", "GB/s"], rows)


def dropped_section(db: JobDB) -> Section | None:
    """Records the recorder dropped at collection, by thread and kind (None when none)."""
    try:
        rows = db.query("SELECT value FROM META_DATA WHERE name='DROPPED_RECORDS'")
        info = orjson.loads(rows[0][0]) if rows else {}
    except Exception:
        return None
    total = info.get("total") if isinstance(info, dict) else None
    if not isinstance(total, int) or total <= 0:
        return None
    by = info.get("by_thread_kind") or {}
    out = [[tid, kind, n] for tid, kinds in sorted(by.items()) if isinstance(kinds, dict)
           for kind, n in sorted(kinds.items())]
    return ("DROPPED at collection", ["Thread", "Kind", "Records"], out or [["all", "all", total]])


def render_rich(title: str, secs: list[Section], console: Console) -> None:
    """Print ``secs`` as rich tables: names are ellipsised so 80 columns suffice, headers never
    (each column is at least as wide as its header)."""
    console.print(f"[bold]{title}[/bold]")
    if not secs:
        console.print("no statistics: the job holds no task, API, step or host usage data")
        return
    for name, header, rows in secs:
        table = RichTable(title=name, box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
        for col in header:
            numeric = col in _NUMERIC
            # numbers never shrink; names give way (rich collapses only wrappable columns)
            table.add_column(col, justify="right" if numeric else "left", no_wrap=numeric,
                             overflow="ellipsis", max_width=None if numeric else 28, min_width=len(col))
        for row in rows:
            table.add_row(*(str(v) for v in row))
        console.print(table)


def render_text(secs: list[Section], fmt: str) -> str:
    """``secs`` as JSON (``{section: [row objects]}``) or CSV (``# section`` then a table)."""
    if fmt == "json":
        data = {_key(n): [dict(zip(h, r, strict=False)) for r in rows] for n, h, rows in secs}
        return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n"
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for i, (name, header, rows) in enumerate(secs):
        if i:
            buf.write("\n")
        buf.write(f"# {_key(name)}\n")
        w.writerow(header)
        w.writerows(rows)
    return buf.getvalue()
