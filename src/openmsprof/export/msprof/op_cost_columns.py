"""op_summary's cost columns (``FLOPs``, ``Bytes``, ``Memory Bound Ratio``), one cached
computation per distinct (op type, shapes, dtypes) signature.

The ratio needs the machine's peaks: the job's own (``host/peaks.json``), else this machine's
cached figures; export never measures, so without either it is ``N/A``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from openmsprof.config.errors import ConfigError
from openmsprof.export.fmt import NA
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof.tables import Num
from openmsprof.fileio.read_guard import read_json
from openmsprof.machine import peaks as P
from openmsprof.parse.costmodel import op_cost, roofline

__all__ = ["COST_COLUMNS", "cost_columns", "cost_values", "export_peaks"]

Ids = int | None
#: The cost columns' names, as op_summary, kernel_details and the docs spell them.
COST_COLUMNS = ["FLOPs", "Bytes", "Memory Bound Ratio"]
Values = tuple[float | None, float | None, float | None]


def export_peaks(db: JobDB) -> dict[str, Any] | None:
    """The job's peaks, else this machine's cached ones, else None (never measured here)."""
    own = Path(db.job) / "host" / P.PEAKS_FILE
    try:
        return P.validate(read_json(own, "job peaks", error=ConfigError), str(own))
    except ConfigError:
        return P.cached(measure_missing=False)


def cost_columns(db: JobDB) -> Callable[[Ids, Ids, Ids, Ids, Ids], list[Any]]:
    """A function of the row's string ids → [FLOPs, Bytes, Memory Bound Ratio]."""
    doc = export_peaks(db)
    bw, peak, special = ((P.bandwidth(doc), P.gemm_peak(doc), P.special_rate(doc))
                         if doc else (0.0, 0.0, 0.0))
    cache: dict[tuple[Ids, ...], list[Any]] = {}
    text = db.text

    def columns(typ: Ids, ish: Ids, idt: Ids, osh: Ids, odt: Ids) -> list[Any]:
        key = (typ, ish, idt, osh, odt)
        hit = cache.get(key)
        if hit is None:
            c = op_cost(text(typ), text(ish), text(idt), text(osh), text(odt))
            if not c.modelled:
                hit = [NA, NA, NA]
            else:
                ratio = roofline(c, bw, peak, special).memory_bound_ratio if doc else None
                hit = [Num(f"{c.flops:.0f}"), Num(f"{c.bytes:.0f}"),
                       NA if ratio is None else Num(f"{ratio:.3f}")]
            cache[key] = hit
        return hit

    return columns


def cost_values(doc: dict[str, Any] | None) -> Callable[[str, str, str, str | None, str | None],
                                                        Values]:
    """A function of (op type, input shapes, input dtypes, output shapes, output dtypes) texts →
    (FLOPs, bytes, memory-bound ratio), None where unmodelled (the ratio also without ``doc``,
    the peaks); cached per signature.  Used by the torch kernel_details and db."""
    bw, peak, special = ((P.bandwidth(doc), P.gemm_peak(doc), P.special_rate(doc))
                         if doc else (0.0, 0.0, 0.0))
    cache: dict[tuple[str | None, ...], Values] = {}

    def values(typ: str, ish: str, idt: str, osh: str | None, odt: str | None) -> Values:
        key = (typ, ish, idt, osh, odt)
        hit = cache.get(key)
        if hit is None:
            c = op_cost(typ, ish, idt, osh, odt)
            if not c.modelled:
                hit = (None, None, None)
            else:
                ratio = roofline(c, bw, peak, special).memory_bound_ratio if doc else None
                hit = (c.flops, c.bytes, ratio)
            cache[key] = hit
        return hit

    return values
