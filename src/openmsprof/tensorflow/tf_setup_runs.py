"""``sess.run`` calls that set up rather than train: a run of variable or table initializers only
(``sess.run(tf.global_variables_initializer())``) is not an iteration (seed 003: five training
steps are five rows of step_trace).

The Session.run wrapper asks :func:`is_setup_run` about the fetches and records the run's wall
window; :func:`drop_setup_steps` then removes the top-level session span inside such a window
from the iterations and numbers the rest 1, 2, ...
"""

from __future__ import annotations

from typing import Any

__all__ = ["drop_setup_steps", "is_setup_run"]

_MAX_DEPTH = 16


def _fetched_ops(fetches: Any, out: list[Any]) -> bool:
    """Operations (a tensor's producer) named by ``fetches``; False for anything else."""
    if isinstance(fetches, (list, tuple)):
        return all(_fetched_ops(f, out) for f in fetches)
    op = getattr(fetches, "op", fetches)
    if not hasattr(op, "control_inputs") or not hasattr(op, "type"):
        return False
    out.append(op)
    return True


def _init_names(graph: Any) -> set[str]:
    names: set[str] = set()
    for key in ("variables", "local_variables"):
        for v in graph.get_collection(key):
            init = getattr(v, "initializer", None)
            if init is not None:
                names.add(init.name)
    for op in graph.get_collection("table_initializer"):
        names.add(getattr(op, "name", ""))
    return names


def _is_init(op: Any, names: set[str], depth: int = 0) -> bool:
    if op.name in names:
        return True
    if depth > _MAX_DEPTH or op.type != "NoOp" or list(op.inputs):  # an empty group: setup too
        return False
    return all(_is_init(c, names, depth + 1) for c in op.control_inputs)


def is_setup_run(graph: Any, fetches: Any) -> bool:
    """True when every fetch is an initializer op (or a group of them); never raises."""
    try:
        ops: list[Any] = []
        if not _fetched_ops(fetches, ops) or not ops:
            return False
        names = _init_names(graph)
        return bool(names) and all(_is_init(op, names) for op in ops)
    except Exception:
        return False


def drop_setup_steps(steps: list[tuple[int, int, int]],
                     windows: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """Steps numbered 1..n (one per top-level run) without those lying in a setup run's wall
    window, renumbered; steps the program numbered itself are kept as they are."""
    if not windows or [n for _s, _e, n in steps] != list(range(1, len(steps) + 1)):
        return steps
    kept = [(s, e) for s, e, _n in steps
            if not any(w0 <= (s + e) // 2 <= w1 for w0, w1 in windows)]
    return [(s, e, i + 1) for i, (s, e) in enumerate(kept)]
