"""``_task_lines.render`` (export/msprof/_task_lines.c) is memory-safe whatever Python hands it
or does from its callbacks: a start index outside the list is an IndexError (it was read out of
bounds: a negative one segfaulted); rows, group lists and cached tails are owned across head(),
tail(), __add__, __lt__ and __bool__ that drop or resize them.  Each scenario runs in its own
interpreter, so a regression fails its test by the signal instead of killing the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from openmsprof.export.msprof import summary_task_pass as tp

pytestmark = pytest.mark.skipif(tp._native is None, reason="the C extension was not built (no compiler)")
_SRC = str(Path(tp.__file__).resolve().parents[3])

_PRELUDE = """
import gc, json
from openmsprof.export.msprof import _task_lines as native
PIECES = ("0,N/A,", ",1,Conv,Conv,N/A,CPU,", "0,Conv,CPU,1,")
KEY = (None, 1, 2, 3, None, 4, 1)
def row(start, end, tid, tail=None):
    return (start, end, tid, *KEY, *(tail or (1,) * 11))
def ctx(head=None, groups=None, tails=None, tail=None, tensor=False):
    heads = {}
    def default_head(key):
        h = heads[key] = (PIECES, True, PIECES, True, True)
        return h
    return (heads, head or default_head, tails if tails is not None else {}, tails if tails is not None else {},
            tail or (lambda cpu, key: ",t"), {} if groups is None else groups, 10, tensor, True)
"""


def _run(body: str) -> object:
    code = _PRELUDE + textwrap.dedent(body)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": _SRC})
    assert p.returncode == 0, f"exit {p.returncode} (negative: killed by that signal): {p.stderr[-2000:]}"
    return json.loads(p.stdout)


def test_start_index_outside_the_list_is_an_index_error() -> None:
    out = _run("""
        rows = [row(1_000, 2_000, 1), row(3_000, 4_000, 2)]
        res = {}
        for i in (-1, -2, -(1 << 40), 3, 1 << 40):
            try:
                native.render(rows, i, None, True, ctx())
            except IndexError as exc:
                res[str(i)] = str(exc)
        res["at_end"] = list(native.render(rows, 2, None, True, ctx())[:3])
        print(json.dumps(res))
    """)
    assert isinstance(out, dict)
    assert sorted(k for k in out if k != "at_end") == sorted(str(i) for i in (-1, -2, -(1 << 40), 3, 1 << 40))
    assert out["-1"] == "render: start index -1 outside 0..2"
    assert out["at_end"] == [2, None, True]  # the end itself is a valid (empty) start


def test_head_emptying_the_row_list_mid_render() -> None:
    """head() drops every row (the only reference to the row being rendered): the row is kept
    alive until it is rendered, and the loop ends where the list now ends."""
    out = _run("""
        rows = [row(1_000, 2_000, 7, tuple(range(11))), row(3_000, 4_000, 8), row(5_000, 6_000, 9)]
        heads = {}
        def head(key):
            rows.clear()
            gc.collect()
            h = heads[key] = (PIECES, True, PIECES, True, True)
            return h
        c = ctx(head=head, tensor=True)
        c = (heads,) + c[1:]
        i, prev, complete, ops, times, _, _ = native.render(rows, 0, None, True, c)
        print(json.dumps([i, prev, ops.decode(), times.decode()]))
    """)
    assert out == [1, 2_000, "0,N/A,7,1,Conv,Conv,N/A,CPU,1.000,1.000,0.000,t\n",
                   "0,Conv,CPU,1,7,1.000,1.000,2.000\n"]


def test_group_values_that_resize_or_drop_their_list() -> None:
    """A group's count whose __add__ empties the list is a TypeError, not a read past its end; a
    minimum whose __lt__ drops the group from the dict leaves a valid list behind."""
    out = _run("""
        res = {}
        class Shrinks(int):
            def __add__(self, other):
                groups[KEY].clear()
                return int(self) + other
        groups = {KEY: [Shrinks(1), 10, 10, 10]}
        try:
            native.render([row(1_000, 2_000, 1)], 0, None, True, ctx(groups=groups))
        except TypeError as exc:
            res["shrinks"] = str(exc)
        class Drops(int):
            def __gt__(self, other):
                if KEY in groups2:
                    kept.append(groups2.pop(KEY))
                gc.collect()
                return False
            __lt__ = __gt__
        kept = []
        groups2 = {KEY: [1, 10, Drops(10), Drops(10)]}
        native.render([row(1_000, 2_000, 1)], 0, None, True, ctx(groups=groups2))
        res["dropped"] = [int(x) for x in kept[0]]
        print(json.dumps(res))
    """)
    assert out == {"shrinks": "groups: a list of four expected", "dropped": [2, 1_010, 10, 10]}


def test_a_cached_tail_whose_truth_drops_it_from_the_cache() -> None:
    out = _run("""
        class Tail(str):
            def __bool__(self):
                tails.clear()
                gc.collect()
                return True
        tails = {}
        tails[(1,) * 11] = Tail(",cached")
        i, prev, complete, ops, times, _, _ = native.render([row(1_000, 2_000, 1)], 0, None, True,
                                                            ctx(tails=tails, tensor=True))
        print(json.dumps([i, ops.decode()]))
    """)
    assert out == [1, "0,N/A,1,1,Conv,Conv,N/A,CPU,1.000,1.000,0.000,cached\n"]
