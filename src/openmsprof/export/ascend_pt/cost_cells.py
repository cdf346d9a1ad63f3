"""kernel_details' cost cells (``FLOPs,Bytes,Memory Bound Ratio``) per kernel, kept from window to window.

The cost model (``op_cost_columns.cost_values``) of each kernel's op type and input shapes, on this
machine's cached peaks (else the ratio is N/A): one cell text per distinct (name, shape) code pair,
the table of codes and the per-signature cells kept while the vocabularies and the peaks stand
(the same operators window after window).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import numpy as np

from openmsprof.export import classify
from openmsprof.export.ascend_pt.framework import Framework
from openmsprof.export.msprof.op_cost_columns import cost_values
from openmsprof.machine import peaks as P

__all__ = ["cost_column"]

#: the cost cells' codes of the last vocabularies: (cells cache, kernel names, shape items, code by
#: name * len(items) + shape (-1: not yet), cells) — the same operators window after window (the
#: names but the new ``ProfilerStep#N`` ranges of each window, which are never kernels: see ``_changed``)
_cost_codes: list[tuple[object, tuple[str, ...], tuple[tuple[str, str], ...], np.ndarray, list[bytes]]] = []
#: the largest table of codes kept (names x shapes); past it the codes are found per window
_COST_TABLE = 1 << 20
#: ``_cost_codes`` is read and filled under it (windows may be analysed on two threads at once);
#: a new one in a forked child (a thread of the parent may have held it)
_lock = threading.Lock()


def _new_lock() -> None:
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock)


def cost_column(fw: Framework, names: list[str], name: np.ndarray, shape: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """The cost cells of each kernel (name code, shape code) as (codes, texts)."""
    cost, kept = _cost_texts(fw, names)
    if not len(name):
        return np.zeros(0, np.int64), []
    items = fw.cols.shapes.items
    span = len(items)
    if len(names) * span > _COST_TABLE:
        return _cost_codes_once(cost, name, shape)
    key = name * span + shape
    shapes = tuple(items)
    with _lock:
        last = _cost_codes[0] if _cost_codes else None
        changed = (_changed(last[1], names, last[3], span)
                   if last is not None and last[0] is kept and last[2] == shapes else None)
        if last is None or changed is None:
            last = (kept, tuple(names), shapes, np.full(len(names) * span, -1, np.int64), [])
            _cost_codes[:] = [last]
        elif changed:  # this window's table: a copy (the last one's answers stay as they were)
            last = (kept, tuple(names), shapes, last[3].copy(), list(last[4]))
            _cost_codes[:] = [last]
        table, cells = last[3], last[4]
        codes = table[key]
        if bool((codes < 0).any()):  # pairs not seen with these vocabularies yet
            for k in np.unique(key[codes < 0]).tolist():
                table[k] = len(cells)
                cells.append(cost(k // span, k % span))
            codes = table[key]
    return codes, cells


def _changed(kept_names: tuple[str, ...], names: list[str], table: np.ndarray, span: int) -> list[int] | None:
    """The codes whose name differs from the kept table's (a new window's ``ProfilerStep#N``), or
    None where the table does not serve ``names``: another length, or a changed name with a cell
    in the table (a cell depends on its own name and shape only)."""
    if len(kept_names) != len(names):
        return None
    changed = [i for i, (a, b) in enumerate(zip(kept_names, names, strict=True)) if a != b]
    if changed and bool((table.reshape(len(names), span)[changed] >= 0).any()):
        return None
    return changed


def _cost_codes_once(cost: Callable[[int, int], bytes], name: np.ndarray,
                     shape: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """``cost_column`` for vocabularies too large for a kept table: the window's own pairs."""
    span = int(shape.max()) + 1
    uniq, inv = np.unique(name.astype(np.int64) * span + shape, return_inverse=True)
    n_u, s_u = np.divmod(uniq, span)
    return inv.reshape(-1).astype(np.int64), [cost(a, c) for a, c in zip(n_u.tolist(), s_u.tolist(), strict=True)]


#: (peaks document, its cost function, windows served, cost cells by (op type, shapes, dtypes))
_values: list[tuple[object, Callable[..., tuple[float | None, float | None, float | None]], int,
                    dict[tuple[str, str, str], bytes]]] = []
#: the cost model's per-signature cache is kept this many windows (then rebuilt: bounded memory)
_VALUES_WINDOWS = 1000


def _cost_values() -> tuple[Callable[..., tuple[float | None, float | None, float | None]],
                            dict[tuple[str, str, str], bytes]]:
    """``cost_values`` of this machine's cached peaks and the cells it gave, kept from window to
    window while the peaks stand (the same operators window after window)."""
    doc = P.cached_read_only()
    kept = _values[0] if _values else None
    if kept is None or kept[0] is not doc or kept[2] >= _VALUES_WINDOWS:
        kept = (doc, cost_values(doc), 0, {})
    _values[:] = [(kept[0], kept[1], kept[2] + 1, kept[3])]
    return kept[1], kept[3]


def _cost_texts(fw: Framework, names: list[str]) -> tuple[Callable[[int, int], bytes], object]:
    """(kernel name code, shape code) → the ``FLOPs,Bytes,Memory Bound Ratio`` cells (cost model
    of the kernel's type and input shapes; this machine's cached peaks, else the ratio is N/A),
    and the kept cells' cache it uses (its identity changes with the peaks)."""
    values, kept = _cost_values()
    items = fw.cols.shapes.items

    def cells(name: int, shape: int) -> bytes:
        key = (classify.op_type(names[name]), *items[shape])
        hit = kept.get(key)  # type: ignore[call-overload]
        if hit is None:
            f, b, r = values(key[0], key[1], key[2], None, None)
            hit = kept[key] = (b"N/A,N/A,N/A" if f is None or b is None else  # type: ignore[index]
                               b"%.0f,%.0f,%b" % (f, b, b"N/A" if r is None else b"%.3f" % r))
        return hit  # type: ignore[no-any-return]

    return cells, kept
