"""Operator nesting per thread: one sort + stack sweep gives each op its parent and depth; kernel
selection and self/subtree times are then numpy passes over depth levels (O(n log n) overall).

The sweep is the classic one: events sorted by (tid, start, -duration, file order); an event's
parent is the nearest earlier event on the same thread still open at its start (the top of the
stack after popping events that ended at or before that start).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from openmsprof.config import native_ext

if TYPE_CHECKING:
    from openmsprof.export.ascend_pt.columns import Columns

_ext = native_ext.load("openmsprof.export.ascend_pt._nest_sweep", "OPENMSPROF_NEST_SWEEP_PYTHON")
#: ``_nest_sweep.c``'s ``sweep`` (None when not built: ``sweep`` below, the reference, runs).
_native: Callable[..., None] | None = _ext.sweep if _ext is not None else None
#: ``_nest_sweep.c``'s ``tree``: sort, sweep and kernel mask in one call (None: the numpy passes).
_tree: Callable[..., None] | None = _ext.tree if _ext is not None else None
#: ``_nest_sweep.c``'s ``kernels``: ``kernel_order`` in one call (None: numpy).
_kernels: Callable[..., int] | None = _ext.kernels if _ext is not None else None

#: Allocation / view / metadata operators: inside a computing operator they are part of it.
TRIVIAL = frozenset((
    "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::as_strided", "aten::as_strided_",
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::_reshape_alias", "aten::resize_", "aten::detach",
    "detach", "aten::detach_", "aten::alias", "aten::expand", "aten::t", "aten::transpose", "aten::permute",
    "aten::unsqueeze", "aten::squeeze", "aten::slice", "aten::select", "aten::resolve_conj",
    "aten::resolve_neg", "aten::contiguous", "aten::flatten", "aten::numpy_T", "aten::lift_fresh",
))


def _columns(ts: np.ndarray, dur: np.ndarray, tid: np.ndarray, sel: np.ndarray) -> tuple[np.ndarray, ...]:
    """The columns as ``_tree`` reads them (one line naming a column of another length)."""
    n = len(ts)
    for name, col in (("dur", dur), ("tid", tid), ("sel", sel)):
        if len(col) != n:
            raise ValueError(f"nesting: {name} has {len(col)} items, ts has {n}")
    i64 = np.int64
    return (np.ascontiguousarray(ts, i64), np.ascontiguousarray(dur, i64), np.ascontiguousarray(tid, i64),
            np.ascontiguousarray(sel, bool))


def tree(ts: np.ndarray, dur: np.ndarray, tid: np.ndarray, sel: np.ndarray,
         trivial: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``parents`` and ``kernel_mask`` at once: (parent, depth, kernel mask) of the ``sel``
    events; one native call when built (``_tree``), else the numpy passes below."""
    if _tree is None:
        parent, depth = parents(ts, dur, tid, sel)
        return parent, depth, kernel_mask(parent, depth, trivial, sel)
    cols = _columns(ts, dur, tid, sel)
    if len(trivial) != len(ts):
        raise ValueError(f"nesting: trivial has {len(trivial)} items, ts has {len(ts)}")
    n = len(ts)
    parent, depth, leaf = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, bool)
    _tree(*cols, np.ascontiguousarray(trivial, bool), parent, depth, leaf)
    return parent, depth, leaf


def kernel_order(leaf: np.ndarray, kind: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """The device tasks of a CPU trace in start order (equal starts in index order): events of
    ``leaf`` that are not launches (``kind`` 1), and communication (``kind`` 2); one native call
    when built, else numpy."""
    n = len(ts)
    if len(leaf) != n or len(kind) != n:
        raise ValueError(f"nesting: leaf/kind have {len(leaf)}/{len(kind)} items, ts has {n}")
    if _kernels is not None:
        out = np.empty(n, np.int64)
        count = _kernels(np.ascontiguousarray(leaf, bool), np.ascontiguousarray(kind, np.int8),
                         np.ascontiguousarray(ts, np.int64), out)
        return out[:count]
    sel = np.flatnonzero((leaf & (kind != 1)) | (kind == 2))
    return sel[np.argsort(ts[sel], kind="stable")]


def parents(ts: np.ndarray, dur: np.ndarray, tid: np.ndarray, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(parent index or -1, depth) for the events where ``sel``; others get -1 / 0."""
    n = len(ts)
    if _tree is not None and _native is not None:  # sort and sweep in one native call
        parent, depth = np.empty(n, np.int64), np.empty(n, np.int64)
        _tree(*_columns(ts, dur, tid, sel), None, parent, depth, None)
        return parent, depth
    parent = np.full(n, -1, np.int64)
    depth = np.zeros(n, np.int64)
    idx = np.flatnonzero(sel)
    if not len(idx):
        return parent, depth
    order = idx[np.lexsort((-dur[idx], ts[idx], tid[idx]))]
    o_ts, o_end, o_tid = ts[order], (ts + dur)[order], tid[order]
    if _native is not None:  # the C sweep is linear: every event, no pre-pass for flat runs (an
        # event after which all earlier ones of its thread ended pops the stack empty anyway)
        m = len(order)
        po = np.full(m, -1, np.int64)
        dep = np.zeros(m, np.int64)
        _native(np.arange(m, dtype=np.int64), np.ascontiguousarray(o_ts, np.int64),
                np.ascontiguousarray(o_end, np.int64), np.ascontiguousarray(o_tid, np.int64), np.ones(m, bool),
                po, dep)
        has = po >= 0
        parent[order[has]] = order[po[has]]
        depth[order] = dep
        return parent, depth
    # Events that start at or after every earlier event of their thread ended have no parent:
    # only the others need the sweep (flat traces skip it entirely).
    same = np.zeros(len(order), bool)
    same[1:] = o_tid[1:] == o_tid[:-1]
    run_end = _segmented_max(o_end, same)
    prev_max = np.empty(len(order), np.int64)
    prev_max[0] = np.iinfo(np.int64).min
    prev_max[1:] = np.where(same[1:], run_end[:-1], np.iinfo(np.int64).min)
    nested = prev_max > o_ts
    if not nested.any():
        return parent, depth
    # sweep only over runs that contain nesting: a run starts at a top-level event
    top = ~nested
    start_of = np.maximum.accumulate(np.where(top, np.arange(len(order)), 0))
    need = np.zeros(len(order), bool)
    need[start_of[nested]] = True
    need |= nested
    po = np.full(len(order), -1, np.int64)
    dep = np.zeros(len(order), np.int64)
    (_native or sweep)(np.flatnonzero(need).astype(np.int64), np.ascontiguousarray(o_ts, np.int64),
                       np.ascontiguousarray(o_end, np.int64), np.ascontiguousarray(o_tid, np.int64),
                       np.ascontiguousarray(nested, bool), po, dep)
    has = po >= 0
    parent[order[has]] = order[po[has]]
    depth[order] = dep
    return parent, depth


def sweep(pos: np.ndarray, ts: np.ndarray, end: np.ndarray, tid: np.ndarray, nested: np.ndarray,
          parent: np.ndarray, depth: np.ndarray) -> None:
    """The stack sweep of ``parents`` over the sorted events at positions ``pos`` (increasing):
    fills ``parent`` (position of the innermost open event) and ``depth`` (open events) where an
    event has one; the stack restarts at a new thread or an event that is not ``nested``.  The
    reference of the native ``_nest_sweep.sweep`` (same arguments), which runs when built."""
    tsl, endl, tidl, nestl = ts.tolist(), end.tolist(), tid.tolist(), nested.tolist()
    par = parent.tolist()
    dep = depth.tolist()
    stack: list[int] = []
    cur = None
    for p in pos.tolist():
        t = tsl[p]
        if tidl[p] != cur or not nestl[p]:
            stack = []
            cur = tidl[p]
        while stack and endl[stack[-1]] <= t:
            stack.pop()
        if stack:
            par[p] = stack[-1]
            dep[p] = len(stack)
        stack.append(p)
    parent[:] = par
    depth[:] = dep


def _segmented_max(x: np.ndarray, same: np.ndarray) -> np.ndarray:
    """Running maximum of ``x`` restarting where ``same`` is False."""
    seg = np.cumsum(~same) - 1
    lo = int(x.min())
    span = int(x.max()) - lo + 1
    if span * (int(seg[-1]) + 1) < 2**62:
        shifted = (x - lo) + seg * span
        return np.maximum.accumulate(shifted) - seg * span + lo
    out = x.copy()
    starts = [*np.flatnonzero(~same).tolist(), len(x)]
    for a, b in itertools.pairwise(starts):
        out[a:b] = np.maximum.accumulate(x[a:b])
    return out


def levels(depth: np.ndarray, sel: np.ndarray) -> list[np.ndarray]:
    """Indices of ``sel`` events grouped by depth, deepest first (depth ≥ 1 only)."""
    idx = np.flatnonzero(sel & (depth > 0))
    if not len(idx):
        return []
    d = depth[idx]
    order = np.argsort(d, kind="stable")
    idx, d = idx[order], d[order]
    bounds = np.flatnonzero(np.diff(d)) + 1
    return list(reversed(np.split(idx, bounds)))


def kernel_mask(parent: np.ndarray, depth: np.ndarray, trivial: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """Ops that computed: no descendant does real work (only allocation/view ops below them), and
    not an allocation/view op inside such an operator."""
    busy = np.zeros(len(parent), bool)  # has a child that is busy or not trivial
    for lv in levels(depth, sel):
        flag = busy[lv] | ~trivial[lv]
        busy[parent[lv[flag]]] = True
    has_parent = parent >= 0
    parent_busy = np.zeros(len(parent), bool)
    parent_busy[has_parent] = busy[parent[has_parent]]
    return sel & ~busy & ~(trivial & has_parent & ~parent_busy)


def op_times(parent: np.ndarray, depth: np.ndarray, dur: np.ndarray, sel: np.ndarray, k_op: np.ndarray,
             k_dur: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per op: summed duration of direct children, own kernel time, subtree kernel time (ns)."""
    n = len(parent)
    has = sel & (parent >= 0)
    child = np.zeros(n, np.int64)
    np.add.at(child, parent[has], dur[has])
    dev_self = np.zeros(n, np.int64)
    valid = k_op >= 0
    np.add.at(dev_self, k_op[valid], k_dur[valid])
    dev_total = dev_self.copy()
    for lv in levels(depth, sel):
        np.add.at(dev_total, parent[lv], dev_total[lv])
    return child, dev_self, dev_total


def call_stacks(cols: Columns, sel: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Per op a code into the returned stack texts (``"inner;\\r\\nouter"``, from the enclosing
    python_function events, with_stack), or -1.  Equal stacks share one text."""
    n = len(cols.op_ts)
    code = np.full(n, -1, np.int64)
    npy = len(cols.py_ts)
    if not npy:
        return code, []
    ops = np.flatnonzero(sel)
    kind = np.concatenate((np.zeros(npy, np.int64), np.ones(len(ops), np.int64)))
    index = np.concatenate((np.arange(npy), ops))
    tid = np.concatenate((cols.py_tid, cols.op_tid[ops]))
    ts = np.concatenate((cols.py_ts, cols.op_ts[ops]))
    ndur = -np.concatenate((cols.py_dur, cols.op_dur[ops]))
    order = np.lexsort((index, kind, ndur, ts, tid))
    names = cols.py_names.items
    py_name = cols.py_name.tolist()
    texts: dict[str, int] = {}
    out: list[str] = []
    stack: list[tuple[int, str]] = []
    cur = None
    res_i: list[int] = []
    res_c: list[int] = []
    for t_id, t, nd, k, i in zip(tid[order].tolist(), ts[order].tolist(), ndur[order].tolist(),
                                 kind[order].tolist(), index[order].tolist(), strict=True):
        if t_id != cur:
            stack, cur = [], t_id
        while stack and stack[-1][0] <= t:
            stack.pop()
        if k == 0:
            name = names[py_name[i]]
            stack.append((t - nd, name + ";\r\n" + stack[-1][1] if stack else name))
        elif stack:
            text = stack[-1][1]
            c = texts.get(text)
            if c is None:
                c = texts[text] = len(out)
                out.append(text)
            res_i.append(i)
            res_c.append(c)
    if res_i:
        code[np.asarray(res_i, np.int64)] = np.asarray(res_c, np.int64)
    return code, out
