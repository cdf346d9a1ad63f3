"""op_statistic gathered in the task pass (:mod:`summary_task_pass`) instead of two more
``GROUP BY`` scans of the tasks (one on the job db, one on the tool-facing db).

The pass adds each task's clamped duration to the group of its head key (the string ids the
op_summary line depends on); the groups are then merged into op_statistic's groups: (device,
opType id, taskType id) for the job db, and for the tool-facing db (device, opType id, the Task
Type the twin gives the task).  The rows are those of :func:`summary_tasks.op_statistic_rows`
on either db, which sorts its SQL groups by (device, total descending, op type text): the order
of the groups is therefore fixed by that key unless two groups tie on it, and then (or when the
tool-facing grouping is not certain to be the db's, see :func:`twin_stats`) these functions
return None and the caller takes the SQL route.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openmsprof.export.fmt import NA
from openmsprof.export.msprof.summary_tasks import OpStat

__all__ = ["Groups", "job_stats", "twin_stats"]

#: head key (model, stream, name, opType, opState, taskType, has a COMPUTE_TASK_INFO row) →
#: [count, sum, min, max] of the clamped durations (ns), per device
Groups = dict[int, dict[tuple[Any, ...], list[int]]]


def _merge(into: dict[Any, list[int]], key: Any, acc: list[int]) -> None:
    cur = into.get(key)
    if cur is None:
        into[key] = list(acc)
        return
    cur[0] += acc[0]
    cur[1] += acc[1]
    cur[2] = min(cur[2], acc[2])
    cur[3] = max(cur[3], acc[3])


def _rows(dev: int, merged: dict[Any, list[int]], op_text: Callable[[Any], str],
          core_text: Callable[[Any], str]) -> list[OpStat] | None:
    """op_statistic_rows' rows of one device, or None when two groups tie on the sort key."""
    total = sum(acc[1] for acc in merged.values())
    out = [OpStat(dev, op_text(key[0]), core_text(key), n, tot, mn, mx,
                  100.0 * tot / total if total else 0.0)
           for key, (n, tot, mn, mx) in merged.items()]
    if len({(s.total_ns, s.op_type) for s in out}) != len(out):
        return None
    out.sort(key=lambda s: (-s.total_ns, s.op_type))
    return out


def job_stats(groups: Groups, text: Callable[[Any], str]) -> list[OpStat] | None:
    """The job db's op_statistic rows (``text``: ``JobDB.text``), or None (ties: use SQL)."""
    out: list[OpStat] = []
    for dev in sorted(groups):
        merged: dict[Any, list[int]] = {}
        for hk, acc in groups[dev].items():
            _merge(merged, (hk[3], hk[5]), acc)
        rows = _rows(dev, merged, text, lambda key: text(key[1]))
        if rows is None:
            return None
        out += rows
    return out


def twin_stats(groups: Groups, text: Callable[[Any], str],
               types: dict[tuple[Any, Any], str]) -> list[OpStat] | None:
    """The tool-facing db's op_statistic rows (``types``: :class:`Twins`' task types), or None.

    A task with a COMPUTE_TASK_INFO row has the Task Type ``types`` gives its (opType, name) in
    that db (one string id per text, NULL when opType or name is NULL); any other task keeps its
    taskType id.  Groups are kept apart by what decides the db's id (the id, the text, NULL), and
    None is returned when two of them have one op type and one Task Type text (the db may or may
    not group them together) or a classified text is N/A (empty and "N/A" texts have two ids)."""
    out: list[OpStat] = []
    for dev in sorted(groups):
        merged: dict[Any, list[int]] = {}
        for hk, acc in groups[dev].items():
            _model, _stream, name, op, _state, tt, has_info = hk
            if has_info:
                core = types.get((op, name), NA)
                if core == NA and op is not None and name is not None:
                    return None
                key: tuple[Any, ...] = (op, core, "null" if op is None or name is None else "text")
            else:
                key = (op, text(tt), "null" if tt is None else tt)  # NULL: one group with the above
            _merge(merged, key, acc)
        if len({(k[0], k[1]) for k in merged}) != len(merged):
            return None
        rows = _rows(dev, merged, text, lambda key: key[1])
        if rows is None:
            return None
        out += rows
    return out
