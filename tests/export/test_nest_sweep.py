"""The operator nesting sweep in C (export/ascend_pt/_nest_sweep.c) against its Python reference
(``nesting.sweep``): the same parents and depths on hand-built traces with known answers and on
random traces with several threads, equal starts, zero durations, back-to-back events, partial
overlaps, negative and huge times; bad columns are refused with one line."""

from __future__ import annotations

import numpy as np
import pytest

from openmsprof.export.ascend_pt import nesting

native = pytest.importorskip("openmsprof.export.ascend_pt._nest_sweep",
                             reason="the C extension was not built (no compiler): the Python sweep runs")


def _parents(ts: list[int], dur: list[int], tid: list[int], how: object) -> tuple[list[int], list[int]]:
    saved = nesting._native
    nesting._native = how  # type: ignore[assignment]
    try:
        p, d = nesting.parents(np.asarray(ts, np.int64), np.asarray(dur, np.int64), np.asarray(tid, np.int64),
                               np.ones(len(ts), bool))
    finally:
        nesting._native = saved
    return p.tolist(), d.tolist()


@pytest.mark.parametrize("how", ["native", "python"])
def test_known_trees(how: str) -> None:
    sweep = native.sweep if how == "native" else None
    # thread 1: A [0,100) holds B [10,50) which holds C [20,30); D [50,60) starts where B ends
    # (a sibling of B, not its child); thread 2: E [5,15) alone; F [200,210) after everything
    ts = [0, 10, 20, 50, 5, 200]
    dur = [100, 40, 10, 10, 10, 10]
    tid = [1, 1, 1, 1, 2, 1]
    assert _parents(ts, dur, tid, sweep) == ([-1, 0, 1, 0, -1, -1], [0, 1, 2, 1, 0, 0])
    # equal starts: the longer one is the parent; a zero-length event at a parent's end is outside it
    assert _parents([0, 0, 100], [100, 50, 0], [7, 7, 7], sweep) == ([-1, 0, -1], [0, 1, 0])


def test_random_traces_match_the_reference() -> None:
    rng = np.random.default_rng(20261127)
    for case in range(300):
        n = int(rng.integers(1, 400))
        threads = int(rng.integers(1, 5))
        base = [0, -(10**12), 1_800_000_000_000_000_000][case % 3]
        ts = base + rng.integers(0, 2_000, n)
        dur = rng.integers(0, 400, n) * (rng.random(n) < 0.95)
        if case % 5 == 0:  # back-to-back runs: each event starts where the previous one ended
            ts = base + np.concatenate(([0], np.cumsum(dur[:-1])))
        tid = rng.integers(0, threads, n) * 1_000_003
        a = _parents(ts.tolist(), dur.tolist(), tid.tolist(), native.sweep)
        b = _parents(ts.tolist(), dur.tolist(), tid.tolist(), None)
        assert a == b, case


def test_bad_columns_are_refused() -> None:
    pos = np.arange(3, dtype=np.int64)
    col = np.zeros(3, np.int64)
    out = np.zeros(3, np.int64)
    with pytest.raises(ValueError, match="differ in length"):
        native.sweep(pos, col, col, np.zeros(2, np.int64), np.ones(3, bool), out, out.copy())
    with pytest.raises(ValueError, match="pos must increase"):
        native.sweep(np.asarray([0, 5], np.int64), col, col, col, np.ones(3, bool), out, out.copy())
    with pytest.raises(ValueError, match="pos must increase"):
        native.sweep(np.asarray([1, 1], np.int64), col, col, col, np.ones(3, bool), out, out.copy())
    with pytest.raises(ValueError, match="whole number"):
        native.sweep(pos, col, col, col, np.ones(3, bool), out, np.zeros(5, np.int32))
    with pytest.raises((TypeError, BufferError)):
        native.sweep(pos, col, col, col, np.ones(3, bool), out, bytes(24))  # read-only


def _tree_both(ts: np.ndarray, dur: np.ndarray, tid: np.ndarray, sel: np.ndarray,
               trivial: np.ndarray) -> tuple[list[list[int]], list[list[int]]]:
    """(native tree, numpy passes) of the same columns, as lists."""
    got = nesting.tree(ts, dur, tid, sel, trivial)
    saved = nesting._tree
    nesting._tree = None
    try:
        ref = nesting.tree(ts, dur, tid, sel, trivial)
    finally:
        nesting._tree = saved
    return [a.tolist() for a in got], [a.tolist() for a in ref]


def test_tree_known_answers() -> None:
    """Parents, depths and the kernel mask of a hand-built trace: A holds an allocation and B,
    B holds only views (so B is the kernel and its views are part of it; the allocation beside
    B is work of its own, A is not a kernel: work runs below it); C is a lone view at
    the top (a kernel: nothing holds it); D on another thread holds E, equal start and length
    (file order decides: D is the parent); the annotation S is not selected."""
    #        A    empty  B    view view  C(view) D   E    S
    ts = [0, 1, 10, 11, 12, 200, 5, 5, 0]
    dur = [100, 2, 50, 1, 1, 10, 20, 20, 300]
    tid = [1, 1, 1, 1, 1, 1, 2, 2, 1]
    sel = [True] * 8 + [False]
    trivial = [False, True, False, True, True, True, False, False, False]
    got, ref = _tree_both(*(np.asarray(x, np.int64) for x in (ts, dur, tid)), np.asarray(sel, bool),
                          np.asarray(trivial, bool))
    assert got == ref
    parent, depth, leaf = got
    assert parent == [-1, 0, 0, 2, 2, -1, -1, 6, -1]
    assert depth == [0, 1, 1, 2, 2, 0, 0, 1, 0]
    assert leaf == [False, True, True, False, False, True, False, True, False]


@pytest.mark.parametrize("seed", range(4))
def test_tree_random_traces_match_the_numpy_passes(seed: int) -> None:
    """Random traces: several threads, equal starts and lengths, zero lengths, back-to-back
    runs, partial overlaps, negative, huge and wrapping times, a random selection and random
    trivial flags: the native tree gives the numpy passes' parents, depths and mask."""
    rng = np.random.default_rng(seed)
    for case in range(150):
        n = int(rng.integers(0, 300))
        base = [0, -(10**12), 1_800_000_000_000_000_000, 2**63 - 1000][case % 4]
        ts = base + rng.integers(0, 500, n)
        dur = rng.integers(0, 200, n) * (rng.random(n) < 0.9)
        if case % 5 == 0:
            ts = base + np.concatenate(([0], np.cumsum(dur[:-1]))) if n else ts
        tid = rng.integers(0, int(rng.integers(1, 4)), n) * 7
        sel = rng.random(n) < [1.0, 0.8, 0.5][case % 3]
        trivial = rng.random(n) < [0.3, 0.7, 0.0, 1.0][case % 4]
        got, ref = _tree_both(ts.astype(np.int64), dur.astype(np.int64), tid.astype(np.int64), sel, trivial)
        assert got == ref, (seed, case)


def test_tree_refuses_bad_columns_naming_them() -> None:
    col = np.zeros(3, np.int64)
    sel, out, flags = np.ones(3, bool), np.zeros(3, np.int64), np.zeros(3, bool)
    with pytest.raises(ValueError, match=r"^nesting: tid has 2 items, ts has 3$"):
        nesting.tree(col, col, np.zeros(2, np.int64), sel, flags)
    with pytest.raises(ValueError, match=r"^nesting: trivial has 4 items, ts has 3$"):
        nesting.tree(col, col, col, sel, np.zeros(4, bool))
    with pytest.raises(ValueError, match=r"^tree: leaf has 2 items, ts has 3$"):
        native.tree(col, col, col, sel, flags, out, out.copy(), np.zeros(2, bool))
    with pytest.raises(ValueError, match=r"^tree: trivial and leaf are both given or both None$"):
        native.tree(col, col, col, sel, flags, out, out.copy(), None)
    with pytest.raises(ValueError, match=r"^depth: 12 bytes is not a whole number of 8-byte items$"):
        native.tree(col, col, col, sel, None, out, np.zeros(3, np.int32), None)
    with pytest.raises((TypeError, BufferError)):
        native.tree(col, col, col, sel, None, bytes(24), out, None)  # read-only


def test_kernel_order_matches_numpy() -> None:
    """The device tasks in start order (native) as numpy's stable argsort orders them, on random
    leaves, launches and communication, with equal starts and out-of-order starts; bad columns
    are refused naming them."""
    rng = np.random.default_rng(7)
    for case in range(300):
        n = int(rng.integers(0, 200))
        leaf = rng.random(n) < 0.5
        kind = rng.choice(np.asarray([0, 0, 1, 2], np.int8), n)
        ts = rng.integers(0, 50, n) if case % 2 else np.sort(rng.integers(0, 10**6, n))
        got = nesting.kernel_order(leaf, kind, ts.astype(np.int64))
        sel = np.flatnonzero((leaf & (kind != 1)) | (kind == 2))
        assert got.tolist() == sel[np.argsort(ts[sel], kind="stable")].tolist(), case
    assert nesting.kernel_order(np.asarray([True, True, False, True]), np.asarray([0, 1, 2, 0], np.int8),
                                np.asarray([5, 1, 5, 2], np.int64)).tolist() == [3, 0, 2]
    with pytest.raises(ValueError, match=r"^nesting: leaf/kind have 2/3 items, ts has 3$"):
        nesting.kernel_order(np.zeros(2, bool), np.zeros(3, np.int8), np.zeros(3, np.int64))
    with pytest.raises(ValueError, match=r"^kernels: ts has 2 items, leaf has 3$"):
        native.kernels(np.zeros(3, bool), np.zeros(3, np.int8), np.zeros(2, np.int64), np.zeros(3, np.int64))
    with pytest.raises((TypeError, BufferError)):
        native.kernels(np.zeros(3, bool), np.zeros(3, np.int8), np.zeros(3, np.int64), bytes(24))


def test_columns_of_another_type_are_refused_naming_them() -> None:
    """Each column must be numpy's type for it (an 8-byte float or unsigned column, or a byte
    mask, has the right size but not the meaning): one ValueError naming the column."""
    pos = np.arange(3, dtype=np.int64)
    col, out, sel = np.zeros(3, np.int64), np.zeros(3, np.int64), np.ones(3, bool)
    with pytest.raises(ValueError, match=r"^ts: items of format 'd' \(8 bytes\), not int64$"):
        native.sweep(pos, np.zeros(3, np.float64), col, col, sel, out, out.copy())
    with pytest.raises(ValueError, match=r"^depth: items of format 'L' \(8 bytes\), not int64$"):
        native.tree(col, col, col, sel, None, out, np.zeros(3, np.uint64), None)
    with pytest.raises(ValueError, match=r"^nested: items of format 'B' \(1 bytes\), not bool$"):
        native.sweep(pos, col, col, col, bytes(3), out, out.copy())
    with pytest.raises(ValueError, match=r"^kind: items of format '\?' \(1 bytes\), not int8$"):
        native.kernels(sel, np.zeros(3, bool), col, out)
    assert native.kernels(sel, np.zeros(3, np.int8), col, out) == 3  # (numpy's own types pass)
