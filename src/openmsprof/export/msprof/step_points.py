"""FP/BP points of step_trace (``training_trace`` with ``fp_point`` / ``bp_point``, docs/formats.md §7.3).

Per iteration: FP Start = start of the first task named ``fp_point`` (as the whole name or the
tail of a scoped name, ``.../dense/MatMul``), BP End = end of the last task named ``bp_point``.
An empty point means automatic search: the first forward op (the first task whose name has no
``gradient`` in it and that is not an input/variable read) and the last gradient op (the last
task with ``gradient`` in its name — TF1 ``gradients/``, TF2 ``gradient_tape/``).  A point that
names no task of the iteration leaves that iteration's FP/BP-derived columns empty (seed 003).
"""

from __future__ import annotations

from typing import Any

from openmsprof.config.errors import ProfilingError
from openmsprof.export.jobdb import JobDB
from openmsprof.fileio.read_guard import read_json

__all__ = ["NOT_FORWARD_TYPES", "Points", "step_points", "training_points"]

#: Op types that feed an iteration rather than compute its forward pass.
NOT_FORWARD_TYPES = frozenset({
    "IteratorGetNext", "IteratorGetNextSync", "IteratorGetNextAsOptional", "ReadVariableOp",
    "_Send", "_Recv", "_HostSend", "_HostRecv", "Const", "_EagerConst", "Placeholder", "NoOp",
    "Identity", "VarHandleOp", "_Arg", "_Retval", "MakeIterator", "AnonymousIteratorV3",
    "OptionalGetValue", "OptionalHasValue",
})

Points = dict[int, tuple[int | None, int | None]]


def training_points(db: JobDB) -> tuple[str, str] | None:
    """(fp_point, bp_point) when the job ran with training_trace on, else None."""
    try:
        doc: Any = read_json(db.job / "host" / "sample.json", "sample.json")
    except (ProfilingError, TypeError):
        return None
    cfg = doc.get("openmsprof") if isinstance(doc, dict) else None
    if not isinstance(cfg, dict) or not cfg.get("training_trace"):
        return None
    return str(cfg.get("fp_point") or ""), str(cfg.get("bp_point") or "")


def _matches(point: str, name: str) -> bool:
    return name == point or name.endswith("/" + point)


def _is_forward(name: str, op_type: str) -> bool:
    return "gradient" not in name.lower() and op_type not in NOT_FORWARD_TYPES


def _is_backward(name: str) -> bool:
    return "gradient" in name.lower()


def step_points(db: JobDB, steps: list[tuple[int, int, int]], points: tuple[str, str]) -> Points:
    """{step id: (FP start ns | None, BP end ns | None)} for ``steps`` = (id, start, end)."""
    if not steps or not db.has("TASK") or "COMPUTE_TASK_INFO" not in db.tables:
        return {}
    fp, bp = points
    strings = db.strings
    order = sorted(steps, key=lambda s: s[1])
    out: Points = {sid: (None, None) for sid, _s, _e in order}
    sql = ("SELECT t.startNs, t.endNs, c.name, c.opType FROM TASK t JOIN COMPUTE_TASK_INFO c"
           " ON c.globalTaskId = t.globalTaskId WHERE t.startNs >= ? AND t.startNs < ?"
           " ORDER BY t.startNs")
    lo, hi = order[0][1], max(e for _i, _s, e in order)
    k = 0
    first_fp: int | None = None
    last_bp: int | None = None
    bp_names: dict[int | None, bool] = {}
    for start, end, name_id, type_id in db.stream(sql, (lo, hi + 1)):
        while k < len(order) and start > order[k][2]:
            out[order[k][0]] = (first_fp, last_bp)
            k += 1
            first_fp = last_bp = None
        if k >= len(order):
            break
        if start < order[k][1]:
            continue
        if first_fp is None:
            name = strings.get(name_id, "")
            if _matches(fp, name) if fp else _is_forward(name, strings.get(type_id, "")):
                first_fp = start
        is_bp = bp_names.get(name_id)
        if is_bp is None:  # decided once per op name (the names repeat every step)
            name = strings.get(name_id, "")
            is_bp = bp_names[name_id] = _matches(bp, name) if bp else _is_backward(name)
        if is_bp:
            last_bp = end if last_bp is None or end > last_bp else last_bp
    if k < len(order):
        out[order[k][0]] = (first_fp, last_bp)
    return out
