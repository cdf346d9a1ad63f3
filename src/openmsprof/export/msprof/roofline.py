"""The roofline view: every operator (name, type, shapes) placed against the machine's peaks.

Per group of identical operators: count, measured total/average time, the cost model's FLOPs,
transcendentals and bytes (:mod:`openmsprof.parse.costmodel`), arithmetic intensity, the
roofline-attainable time, the achieved rates, efficiency (attainable / measured) and the bound
class.  ``memory_bound_ratio`` = (bytes/BW)/(compute time) is the portable analogue of the
seed's AI Core "Memory Bound" (> 1: memory-bound); :func:`memory_bound_ratio` gives it for one
op so other layouts (the SVP op_summary) can fill that column, documented as modelled.

The peaks come from the job (``host/peaks.json``, written at collection), else an override
file, else this machine's cache (measured once when missing).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openmsprof.config.errors import ConfigError
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof import summary_tasks as tasks
from openmsprof.export.msprof.tables import Num, Table
from openmsprof.fileio.read_guard import read_json
from openmsprof.machine import peaks as P
from openmsprof.parse.costmodel import Cost, Roofline, op_cost, roofline

__all__ = [
    "HEADER",
    "Ceilings",
    "OpRoof",
    "ceilings",
    "header_row",
    "job_peaks",
    "memory_bound_ratio",
    "op_roofs",
    "roofline_table",
]

HEADER = ["Op Name", "OP Type", "Input Shapes", "Input Data Types", "Output Shapes", "Count",
          "Total Time(us)", "Avg Time(us)", "Kind", "FLOPs", "Transcendentals", "Bytes",
          "Arithmetic Intensity(FLOP/B)", "Attainable Time(us)", "Achieved GFLOP/s",
          "Achieved GB/s", "Efficiency(%)", "Bound", "Memory Bound Ratio"]


@dataclass(frozen=True)
class Ceilings:
    """The roofline's ceilings: DRAM bandwidth B/s, GEMM FLOP/s, transcendentals/s."""

    bandwidth: float
    peak_flops: float
    special: float
    source: str = ""
    loaded: tuple[str, ...] = ()
    #: a runtime's measured ceilings by op type: conv-like FLOP/s, element-wise elements/s
    op_flops: tuple[tuple[str, float], ...] = ()
    op_elems: tuple[tuple[str, float], ...] = ()

    def roof(self, cost: Cost) -> Roofline:
        """``cost`` under these ceilings, with the runtime's class ceiling for its op type."""
        return roofline(cost, self.bandwidth, self.peak_flops, self.special,
                        flops_rate=dict(self.op_flops).get(cost.op, 0.0),
                        elem_rate=dict(self.op_elems).get(cost.op, 0.0))


def job_peaks(db: JobDB, override: str | Path | None = None) -> dict[str, Any]:
    """Peaks for ``db``'s job: ``override`` file, else the job's own, else this machine's."""
    if override is not None:
        return P.load_peaks(override)
    own = Path(db.job) / "host" / P.PEAKS_FILE
    if own.exists():
        try:
            doc = P.validate(read_json(own, "job peaks", error=ConfigError), str(own))
            doc.setdefault("source", "job")
            return doc
        except ConfigError:
            pass
    doc = P.cached(measure_missing=True) or {}
    return {**doc, "source": "this machine (the job holds no peaks)"}


def ceilings(doc: dict[str, Any], dtype: str = "float32") -> Ceilings:
    flops, elems = P.runtime_rates(doc)
    return Ceilings(P.bandwidth(doc), P.gemm_peak(doc, dtype), P.special_rate(doc),
                    str(doc.get("source", "")), tuple(doc.get("loaded", ()) or ()),
                    tuple(sorted(flops.items())), tuple(sorted(elems.items())))


def memory_bound_ratio(op_type: str, input_shapes: str, input_dtypes: str, output_shapes: str,
                       output_dtypes: str, ceil: Ceilings) -> float | None:
    """(bytes/BW)/(compute time) of one op; None when unmodelled or without compute."""
    cost = op_cost(op_type, input_shapes, input_dtypes, output_shapes, output_dtypes)
    return ceil.roof(cost).memory_bound_ratio


@dataclass(frozen=True)
class OpRoof:
    """One group of identical operators against the roofline."""

    name: str
    op_type: str
    in_shapes: str
    in_dtypes: str
    out_shapes: str
    out_dtypes: str
    count: int
    total_ns: int
    cost: Cost
    roof: Roofline

    @property
    def avg_ns(self) -> float:
        return self.total_ns / self.count if self.count else 0.0

    @property
    def efficiency(self) -> float | None:
        """Attainable / measured (1 = at the roofline)."""
        if not self.cost.modelled or self.avg_ns <= 0:
            return None
        return self.roof.attainable_ns / self.avg_ns

    def rates(self) -> tuple[float | None, float | None]:
        """Achieved GFLOP/s and GB/s (per instance)."""
        if not self.cost.modelled or self.avg_ns <= 0:
            return None, None
        return self.cost.flops / self.avg_ns, self.cost.bytes / self.avg_ns


def op_roofs(db: JobDB, ceil: Ceilings) -> list[OpRoof]:
    """Every (name, type, shapes) group with its cost and roofline, total time descending."""
    if not db.has("TASK"):
        return []
    c = lambda col: tasks._c(db, col)  # noqa: E731
    cols = [c("name"), c("opType"), c("inputShapes"), c("inputDataTypes"), c("outputShapes"),
            c("outputDataTypes")]
    sql = (f"SELECT {', '.join(cols)}, COUNT(*), SUM(MAX(t.endNs - t.startNs, 0))"
           f" FROM {tasks._from(db)} GROUP BY {', '.join(cols)} ORDER BY 8 DESC")
    out: list[OpRoof] = []
    text = db.text
    for name, typ, ish, idt, osh, odt, n, tot in db.query(sql):
        t, i, it, o, ot = text(typ), text(ish), text(idt), text(osh), text(odt)
        cost = op_cost(t, i, it, o, ot)
        out.append(OpRoof(text(name), t, i, it, o, ot, int(n), int(tot), cost,
                          ceil.roof(cost)))
    return out


def _f(v: float | None, digits: int = 3) -> Any:
    return "N/A" if v is None else Num(f"{v:.{digits}f}")


def header_row(r: OpRoof) -> list[Any]:
    """One roofline row in :data:`HEADER` order."""
    gflops, gbs = r.rates()
    m = r.cost.modelled
    eff = r.efficiency
    return [r.name, r.op_type, r.in_shapes, r.in_dtypes, r.out_shapes, r.count,
            Num(f"{r.total_ns / 1e3:.3f}"), Num(f"{r.avg_ns / 1e3:.3f}"), r.cost.kind,
            Num(f"{r.cost.flops:.0f}") if m else "N/A",
            Num(f"{r.cost.transc:.0f}") if m else "N/A",
            Num(f"{r.cost.bytes:.0f}") if m else "N/A", _f(r.roof.intensity),
            _f(r.roof.attainable_ns / 1e3) if m else "N/A", _f(gflops), _f(gbs),
            _f(None if eff is None else 100.0 * eff, 2), r.roof.bound,
            _f(r.roof.memory_bound_ratio)]


def roofline_table(db: JobDB, ceil: Ceilings | None = None) -> Iterator[Table]:
    """The roofline view as one table (``openmsprof.load(job).rows("roofline")``)."""
    if not db.has("TASK"):
        return
    ceil = ceil or ceilings(job_peaks(db))
    yield Table("roofline", "all", HEADER, (header_row(r) for r in op_roofs(db, ceil)))
