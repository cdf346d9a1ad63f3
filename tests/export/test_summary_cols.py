"""The summary CSVs' columns in C (export/ascend_pt/_summary_cols.c) against their numpy reference
(``summary_cols`` with ``NATIVE`` None): kernel codes (wait, shape, step), the operator tree's
times (``nesting.parents`` + ``nesting.op_times``), the op_statistic groups, on random columns with
ties, overlaps and edges; every bad argument is one line naming it, on both paths."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from openmsprof.export import classify
from openmsprof.export.ascend_pt import framework, nesting, pt_summary, summary_cols, text

native = pytest.importorskip("openmsprof.export.ascend_pt._summary_cols",
                             reason="the C summary columns are not built")


def _both(monkeypatch: pytest.MonkeyPatch, f: Callable[..., Any], *args: Any) -> tuple[Any, Any]:
    """(C answer, numpy answer) of ``f(*args)``."""
    monkeypatch.setattr(summary_cols, "NATIVE", native)
    a = f(*args)
    monkeypatch.setattr(summary_cols, "NATIVE", None)
    b = f(*args)
    monkeypatch.setattr(summary_cols, "NATIVE", native)
    return a, b


def _equal(a: Any, b: Any) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert np.asarray(x).dtype == np.int64
        assert np.array_equal(x, y)


def test_kernel_codes_equal_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    for trial in range(300):
        n = int(rng.integers(0, 60))
        ts = np.sort(rng.integers(-50, 5000, n)).astype(np.int64)
        dur = rng.integers(0, 400 if trial % 4 else 3, n).astype(np.int64)
        n_ops = int(rng.integers(1, 30))
        op = rng.integers(-2, n_ops, n).astype(np.int64)  # -2: any negative is "no operator"
        op_shape = rng.integers(0, 9, n_ops).astype(np.int32 if trial % 2 else np.int64)
        k = int(rng.integers(0, 5))
        edges = np.sort(rng.choice(np.arange(-100, 5100, 7), 2 * k, replace=False))
        steps = [(int(rng.integers(0, 99)), int(edges[2 * i]), int(edges[2 * i + 1])) for i in range(k)]
        a, b = _both(monkeypatch, summary_cols.kernel_codes, ts, dur, op, op_shape, steps)
        _equal(a, b)
        if n:  # known answers: the first wait is 0, no operator gives shape 0
            assert a[0][0] == 0 and all(a[1][op < 0] == 0)
            assert list(a[0][1:]) == [max(int(x) - int(y), 0) for x, y in zip(ts[1:], ts[:-1] + dur[:-1], strict=True)]


def _ops(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    """Operators on a few threads: nested runs, ties of start and duration, partial overlaps."""
    tid = rng.choice([3, 7, 11], n).astype(np.int64)
    ts = rng.integers(0, 300, n).astype(np.int64)
    ts[rng.random(n) < 0.2] = 100  # equal starts
    dur = rng.integers(0, 120, n).astype(np.int64)
    dur[rng.random(n) < 0.2] = 40  # equal durations
    m = int(rng.integers(0, 2 * n + 1))
    k_op = rng.integers(-1, max(n, 1), m).astype(np.int64) if n else np.full(m, -1, np.int64)
    return ts, dur, tid, k_op, rng.integers(0, 90, m).astype(np.int64)


def test_op_tree_times_equal_nesting(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(2)
    for _ in range(300):
        ts, dur, tid, k_op, k_dur = _ops(rng, int(rng.integers(0, 50)))
        a, b = _both(monkeypatch, summary_cols.op_tree_times, ts, dur, tid, k_op, k_dur)
        _equal(a, b)
        every = np.ones(len(ts), bool)
        saved = nesting._native
        monkeypatch.setattr(nesting, "_native", None)  # the Python sweep as a third opinion
        parent, depth = nesting.parents(ts, dur, tid, every)
        monkeypatch.setattr(nesting, "_native", saved)
        _equal(a, nesting.op_times(parent, depth, dur, every, k_op, k_dur))
        assert int(a[2].sum()) >= int(a[1].sum()) == int(k_dur[k_op >= 0].sum())


def test_op_tree_times_of_a_known_tree() -> None:
    # thread 1: A [0, 100) holds B [10, 50) holding C [20, 30), and D [60, 90); thread 2: E [0, 100)
    ts = np.asarray([0, 10, 20, 60, 0], np.int64)
    dur = np.asarray([100, 40, 10, 30, 100], np.int64)
    tid = np.asarray([1, 1, 1, 1, 2], np.int64)
    k_op, k_dur = np.asarray([2, 2, 3, -1, 4], np.int64), np.asarray([5, 6, 7, 100, 9], np.int64)
    child, dev_self, dev_total = summary_cols.op_tree_times(ts, dur, tid, k_op, k_dur)
    assert child.tolist() == [70, 10, 0, 0, 0]
    assert dev_self.tolist() == [0, 0, 11, 7, 9]
    assert dev_total.tolist() == [18, 11, 11, 7, 9]


def test_group_stats_equal_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    for trial in range(300):
        n, size = int(rng.integers(0, 80)), int(rng.integers(1, 40))
        key = rng.integers(0, size, n).astype(np.int64)
        dur = rng.integers(0, 50 if trial % 3 else 2, n).astype(np.int64)  # ties of totals
        a, b = _both(monkeypatch, summary_cols.group_stats, key, dur, size)
        assert a.dtype == np.int64 and a.shape == (len(set(key.tolist())), 5)
        assert np.array_equal(a, b)
        for k, cnt, tot, mn, mx in a.tolist():
            d = dur[key == k]
            assert (cnt, tot, mn, mx) == (len(d), int(d.sum()), int(d.min()), int(d.max()))
        firsts = [int(np.flatnonzero(key == k)[0]) for k in a[:, 0].tolist()]
        assert [(-t, f) for t, f in zip(a[:, 2].tolist(), firsts, strict=True)] == \
            sorted((-t, f) for t, f in zip(a[:, 2].tolist(), firsts, strict=True))


@pytest.mark.parametrize("how", ["native", "numpy"])
def test_bad_arguments_are_one_line(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(summary_cols, "NATIVE", native if how == "native" else None)
    i = np.arange(4, dtype=np.int64)
    cases: list[tuple[Callable[[], Any], type[Exception], str]] = [
        (lambda: summary_cols.kernel_codes(i, i[:3], i, i, []), ValueError, "ts, dur and op differ in length"),
        (lambda: summary_cols.kernel_codes(i.astype(float), i, i, i, []), ValueError, "ts is not"),
        (lambda: summary_cols.kernel_codes(i, i, i + 5, i, []), IndexError, r"names operator \d+ of 4"),
        (lambda: summary_cols.op_tree_times(i, i, i[:2], i, i), ValueError, "ts, dur and tid differ"),
        (lambda: summary_cols.op_tree_times(i, i, i, i + 4, i), IndexError, "operator"),
        (lambda: summary_cols.group_stats(i, i, 2), IndexError, "key"),
        (lambda: summary_cols.group_stats(i.reshape(2, 2), i, 9), ValueError, "key is not"),
        (lambda: summary_cols.step_sums([(i, i)] * 3, (i, i), i, i), ValueError, "3 tracks"),
        (lambda: summary_cols.step_sums([(i, i[:1])] * 4, (i, i), i, i), ValueError, "track 0's starts and ends"),
    ]
    for call, kind, words in cases:
        with pytest.raises(kind, match=words) as err:
            call()
        assert "\n" not in str(err.value) and len(str(err.value)) < 200


def test_the_c_checks_its_buffers() -> None:
    """Called directly (no Python checks), the C refuses what it cannot take, in one line."""
    i, e = np.arange(3, dtype=np.int64), np.empty(3, np.int64)
    with pytest.raises(TypeError, match="ts: not a one-dimensional int64"):
        native.kernel_codes(i.astype(np.int32), i, i, i, i[:0], i[:0], e, e, e)
    with pytest.raises(TypeError, match="wait: not a writable"):
        native.kernel_codes(i, i, i, i, i[:0], i[:0], b"x" * 24, e, e)
    with pytest.raises(ValueError, match="step_end has 1 values, step_start 0"):
        native.kernel_codes(i, i, i, i, i[:0], i[:1], e, e, e)
    with pytest.raises(ValueError, match="out has 5 values, 6 per window"):
        native.step_sums(i[:1], i[:1], (i,) * 10, np.empty(5, np.int64))
    with pytest.raises(TypeError, match="tracks: a tuple of 10"):
        native.step_sums(i, i, [i] * 10, np.empty(18, np.int64))
    with pytest.raises(ValueError, match="size 2: out has 1 values"):
        native.group_stats(i, i, 2, np.empty(1, np.int64))


def test_kept_vocabulary_texts_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The texts kept between windows stay under their bounds, whatever the windows bring (call
    stacks are long and new in every window), and a kept answer is the fresh one."""
    monkeypatch.setattr(text, "_csv_kept", {})
    monkeypatch.setattr(text, "_csv_bytes", [0])
    for w in range(60):  # 60 windows of 500 new stacks of ~1 KB
        stacks = [f"frame {w}.{i};" + "f" * 1000 for i in range(500)]
        assert text.csv_texts(stacks) == [s.encode() for s in stacks]
        assert text._csv_bytes[0] <= text._CSV_ALL
        assert sum(sum(map(len, v)) for v in text._csv_kept.values()) <= text._CSV_ALL
    huge = [f"s{i}" + "x" * 2000 for i in range(1000)]  # over _CSV_ONE: answered, not kept
    assert text.csv_texts(huge)[-1] == huge[-1].encode() and tuple(huge) not in text._csv_kept
    assert text.csv_texts(['a,"b"', "c"]) == [b'"a,""b"""', b"c"] == text.csv_texts(['a,"b"', "c"])
    monkeypatch.setattr(pt_summary, "_name_kept", {})
    monkeypatch.setattr(pt_summary, "_VOCAB_KEPT_MAX", 16)
    for w in range(20):  # new ProfilerStep#N names in every window: kept per name, bounded
        facts = pt_summary._name_facts([f"ProfilerStep#{w}", f"aten::mm{w}", "aten::add", "x,y", "aten::bmm"])
        assert facts.row.tolist() == [False, True, True, True, True] and len(pt_summary._name_kept) <= 16
        assert facts.texts == [f"ProfilerStep#{w}".encode(), f"aten::mm{w}".encode(), b"aten::add", b'"x,y"',
                               b"aten::bmm"]
        assert facts.types == [f"ProfilerStep#{w}".encode(), b"MatMul", b"aten::add", b'"x,y"', b"BatchMatMul"]
        assert facts.type_code.tolist() == [0, 1, 2, 3, 4]
        assert facts.type_texts == facts.types
    again = pt_summary._name_facts(["aten::mm1", "aten::mm2", "aten::add", "aten::mm1"])  # types in first-seen order
    assert again.type_code.tolist() == [0, 0, 1, 0] and again.type_texts == [b"MatMul", b"aten::add"]
    assert pt_summary._name_facts([]).row.tolist() == [True]


def test_framework_name_facts_are_kept_per_name_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """``framework._name_facts``: each name's prefix / trivial / kind / step N, kept per name (every
    window has new ``ProfilerStep#N`` names) under a bound, the same whether kept or fresh."""
    monkeypatch.setattr(framework, "_facts", {})
    monkeypatch.setattr(framework, "_FACTS_KEPT", 8)
    for w in range(12):
        names = (f"ProfilerStep#{w}", "aten::mm", "hcom_allReduce__1", "aten::empty", f"op{w}")
        prefix, trivial, kind, is_step, steps = framework._name_facts(names)
        assert prefix.tolist() == [0, 0, 2, 0, 0] and trivial.tolist() == [False, False, False, True, False]
        assert kind.tolist() == [int(classify.classify(n)) for n in names] and len(framework._facts) <= 8
        assert is_step.tolist() == [True, False, False, False, False] and steps == (w, -1, -1, -1, -1)
    prefix, trivial, kind, is_step, steps = framework._name_facts(())
    assert (prefix.tolist(), trivial.tolist(), kind.tolist(), is_step.tolist(), steps) == ([0], [False], [0], [False], ())
