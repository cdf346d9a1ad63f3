"""``cost_cells.cost_column``: the table of cells kept from window to window serves the next window
although its ``ProfilerStep#N`` names are new (they are never kernels), and is rebuilt when a name
that has cells changed: the cells are always those of a process that kept nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from openmsprof.export.ascend_pt import cost_cells
from openmsprof.machine import peaks

SHAPES = [("", ""), ("64,256;512,256", "float;float"), ("64,512;64,512", "float;float")]


@pytest.fixture(autouse=True)
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No peaks cache (ratios N/A, FLOPs and bytes still given), nothing kept before or after."""
    monkeypatch.setenv("OPENMSPROF_CACHE", str(tmp_path / "cache"))
    peaks._kept = None
    cost_cells._values.clear()
    cost_cells._cost_codes.clear()
    yield
    peaks._kept = None
    cost_cells._values.clear()
    cost_cells._cost_codes.clear()


def _cells(names: list[str], name: list[int], shape: list[int]) -> list[bytes]:
    fw = SimpleNamespace(cols=SimpleNamespace(shapes=SimpleNamespace(items=list(SHAPES))))
    codes, cells = cost_cells.cost_column(fw, names, np.asarray(name, np.int64),  # type: ignore[arg-type]
                                          np.asarray(shape, np.int64))
    return [cells[c] for c in codes.tolist()]


def _kept_nothing(names: list[str], name: list[int], shape: list[int]) -> list[bytes]:
    cost_cells._cost_codes.clear()
    return _cells(names, name, shape)


def test_a_new_windows_step_names_keep_the_table_and_a_changed_kernel_name_rebuilds_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[int, int]] = []  # the (name, shape) pairs the cost model was asked about
    texts = cost_cells._cost_texts

    def counted(fw: object, names: list[str]) -> tuple[object, object]:
        cells, kept = texts(fw, names)  # type: ignore[arg-type]

        def cell(n: int, s: int) -> bytes:
            asked.append((n, s))
            return cells(n, s)
        return cell, kept

    monkeypatch.setattr(cost_cells, "_cost_texts", counted)
    name, shape = [1, 2, 1, 3], [1, 2, 1, 0]
    first = _cells(["ProfilerStep#1", "aten::addmm", "aten::add", "aten::empty"], name, shape)
    assert first[0] == b"8388608,655360,N/A"  # 2 * 64 * 512 * 256 FLOPs; no peaks: no ratio
    assert first[1] != first[0] and first[3] == b"N/A,N/A,N/A"
    assert sorted(asked) == [(1, 1), (2, 2), (3, 0)]
    # the next window: only the step's name is new
    nxt = ["ProfilerStep#2", "aten::addmm", "aten::add", "aten::empty"]
    asked.clear()
    assert _cells(nxt, name, shape) == first
    assert asked == []  # every cell from the kept table
    # a window whose vocabulary has the two kernels the other way round
    swapped = ["ProfilerStep#3", "aten::add", "aten::addmm", "aten::empty"]
    got = _cells(swapped, name, shape)
    assert sorted(asked) == [(1, 1), (2, 2), (3, 0)]
    assert got == _kept_nothing(swapped, name, shape)
    assert got[0] != first[0] and got[1] != first[1]  # (the stale table would give ``first`` again)
    # a longer vocabulary is a new table too
    longer = [*nxt, "aten::mul"]
    assert _cells(longer, [*name, 4], [*shape, 2]) == _kept_nothing(longer, [*name, 4], [*shape, 2])
