"""``fusion_op_{dev}.csv`` (seed 003 Table 1): the ops TensorFlow's grappler fused.

Read from ``JOB/host/tf_fusion.json``, which the TensorFlow tracer writes from the post-grappler
graphs TensorFlow ran (:mod:`openmsprof.tensorflow.tf_graphs`).  Columns are msprof's: Device_id,
Model Name (the function that held the original ops, ``sess.run`` for a session graph, N/A when
not known), Model ID (N/A: TensorFlow graphs have no model id), Fusion Op (``name`` with its
kernel type, e.g. ``dense/Relu(_FusedMatMul)``), Original Ops (comma-separated), Memory Input /
Output / Weight (KB, from the shapes TensorFlow inferred; weights are inputs read from variables
or constants; N/A when a shape is not fully known), Memory Workspace (N/A: TensorFlow does not
report kernel workspace), Memory Total (the sum of the three when all are known, else N/A).
No file when the job has no fused op (a job of another framework, a graph without fusions).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from openmsprof.config.errors import ProfilingError
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof import headers as H
from openmsprof.export.msprof.tables import Num, Table
from openmsprof.fileio.read_guard import read_json
from openmsprof.tensorflow.tf_trace import FUSION_FILE

__all__ = ["FUSION_FILE", "HEADER", "fusion_op"]

log = logging.getLogger("openmsprof")
HEADER = H.FUSION_OP
NA = "N/A"


def _kb(value: Any) -> str:
    return Num(f"{value / 1024:.3f}") if isinstance(value, int) and not isinstance(value, bool) else NA


def _row(r: dict[str, Any]) -> list[str]:
    sizes = [r.get("input_bytes"), r.get("output_bytes"), r.get("weight_bytes")]
    ok = all(isinstance(v, int) and not isinstance(v, bool) for v in sizes)
    total = _kb(sum(v for v in sizes if isinstance(v, int))) if ok else NA
    original = r.get("original")
    return ["0", str(r.get("model") or NA), NA, f"{r.get('name', '')}({r.get('type', '')})",
            ",".join(str(o) for o in original) if isinstance(original, list) else NA,
            *(_kb(v) for v in sizes), NA, total]


def fusion_op(db: JobDB) -> Iterator[Table]:
    """The fusion_op table of a TensorFlow job (nothing for a job without fused ops)."""
    path = db.job / "host" / FUSION_FILE
    if not path.is_file():
        return
    try:
        rows = read_json(path, "TensorFlow fusion file")
    except ProfilingError as exc:
        log.warning("openmsprof: fusion_op not written: %s", exc)
        return
    if not isinstance(rows, list):
        log.warning("openmsprof: fusion_op not written: %r is not a JSON list", str(path))
        return
    good = [_row(r) for r in rows if isinstance(r, dict)]
    if good:
        yield Table("fusion_op", 0, HEADER, good)
