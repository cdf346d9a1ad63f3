"""A :class:`~openmsprof.analysis.compare.Comparison` as rich tables (80 columns), CSV or JSON."""

from __future__ import annotations

import csv
import io
from typing import Any

import orjson
from rich import box
from rich.console import Console
from rich.table import Table as RichTable

from openmsprof.analysis import stats
from openmsprof.analysis.compare import API, DEVICE_TIME, OP, OP_TYPE, OVERALL, Comparison, Row

FORMATS = ("csv", "json")
_SHORT = {stats.NO_CHANGE: "n.s.", stats.TOO_FEW: "too few"}
_STYLE = {stats.FASTER: "green", stats.SLOWER: "bold red", stats.ADDED: "cyan",
          stats.REMOVED: "cyan"}
_TITLES = ((OVERALL, "Overall (per iteration)"), (OP_TYPE, "Operator types (per iteration)"),
           (OP, "Operators (per iteration)"), (API, "APIs (per call)"))


def _num(ns: float) -> str:
    if ns != ns:
        return "-"
    v = ns / 1e3
    return f"{v:.0f}" if abs(v) >= 1e6 else f"{v:.1f}"


def _pct(change: float) -> str:
    if change != change:
        return "-"
    if abs(change) == float("inf"):
        return "+inf"
    return f"{100.0 * change:+.1f}"


def _p(p: float) -> str:
    if p != p:
        return "-"
    return "<.001" if p < 0.001 else f"{p:.3f}"


def _cells(r: Row) -> list[str]:
    t = r.test
    verdict = _SHORT.get(t.verdict, t.verdict)
    style = _STYLE.get(t.verdict)
    return [r.name, f"{r.base_count}→{r.new_count}", _num(t.median_base), _num(t.median_new),
            _pct(t.change), _p(t.p), f"[{style}]{verdict}[/]" if style else verdict]


def _order(rows: list[Row]) -> list[Row]:
    """Rows with the largest absolute change of total time first."""
    return sorted(rows, key=lambda r: -abs(r.delta_total_ns))


def render_rich(cmp: Comparison, console: Console, top: int = 15) -> None:
    """Print the comparison: a summary line, then one table per section (``top`` rows each)."""
    dev = cmp.row(OVERALL, DEVICE_TIME)
    console.print(f"[bold]base[/] {cmp.base.name} ({cmp.base_iterations} iterations)")
    console.print(f"[bold]new[/]  {cmp.new.name} ({cmp.new_iterations} iterations)")
    verdict = cmp.verdict
    style = _STYLE.get(verdict, "bold")
    t = dev.test
    console.print(f"{DEVICE_TIME}: {_num(dev.base_total_ns)} → {_num(dev.new_total_ns)} us "
                  f"({_num(dev.delta_total_ns)} us); median per iteration {_pct(t.change)}%, "
                  f"{100 * (1 - cmp.alpha):g}% CI of the difference [{_num(t.ci_low)}, "
                  f"{_num(t.ci_high)}] us, p={_p(t.p)} → [{style}]{verdict}[/]")
    for section, title in _TITLES:
        rows = cmp.section(section)
        if not rows:
            continue
        shown = rows if section == OVERALL else _order(rows)[:top]
        more = f" — top {top} of {len(rows)} by |Δ total|" if len(rows) > len(shown) else ""
        table = RichTable(title=title + more, box=box.SIMPLE_HEAD, title_justify="left",
                          pad_edge=False)
        table.add_column("Name", no_wrap=True, overflow="ellipsis", max_width=22)
        table.add_column("Count", justify="right", no_wrap=True)
        for col in ("Base(us)", "New(us)", "Δ(%)", "p"):
            table.add_column(col, justify="right", no_wrap=True)
        table.add_column("Verdict", no_wrap=True)
        for r in shown:
            table.add_row(*_cells(r))
        console.print(table)
    console.print(f"Base/New: median per iteration (APIs: per call); Δ: change of the median; "
                  f"p: two-sided Mann-Whitney U; n.s. = no significant change at "
                  f"alpha={cmp.alpha:g} and |Δ| ≥ {100 * cmp.threshold:g}%.")


def _doc(cmp: Comparison) -> dict[str, Any]:
    return {"base": str(cmp.base), "new": str(cmp.new), "alpha": cmp.alpha,
            "threshold": cmp.threshold, "base_iterations": cmp.base_iterations,
            "new_iterations": cmp.new_iterations, "verdict": cmp.verdict, "rows": cmp.to_rows()}


def render_text(cmp: Comparison, fmt: str) -> str:
    """JSON (the verdict, parameters and every row) or CSV (one line per row)."""
    if fmt == "json":
        return orjson.dumps(_doc(cmp), option=orjson.OPT_INDENT_2).decode() + "\n"
    rows = cmp.to_rows()
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
    return buf.getvalue()
