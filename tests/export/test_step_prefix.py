"""kernel_details' ``Step Id,`` cells (the step codes of ``summary_cols.kernel_codes``, in C and in
numpy) are those of ``step_of``: the step containing each start, an empty cell outside every step
(before, between, after the steps, at a step's end), on random steps and times."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest

from openmsprof.export.ascend_pt import summary_cols
from openmsprof.export.ascend_pt.framework import Framework
from openmsprof.export.ascend_pt.trace_view import step_of


@pytest.mark.parametrize("how", ["numpy", "native"])
def test_step_cells_are_those_of_step_of(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if how == "native" and summary_cols.NATIVE is None:
        pytest.skip("_summary_cols not built")
    if how == "numpy":
        monkeypatch.setattr(summary_cols, "NATIVE", None)
    rng = np.random.default_rng(26)
    for _ in range(300):
        n = int(rng.integers(1, 6))
        bounds = np.sort(rng.choice(np.arange(0, 1000, 10), 2 * n, replace=False))
        steps = [(int(rng.integers(0, 50)), int(bounds[2 * i]), int(bounds[2 * i + 1])) for i in range(n)]
        fw = cast(Framework, SimpleNamespace(steps=steps))
        ts = np.concatenate((rng.integers(-20, 1020, 60), bounds)).astype(np.int64)
        none = np.full(len(ts), -1, np.int64)
        _wait, _shape, codes = summary_cols.kernel_codes(ts, np.zeros(len(ts), np.int64), none, np.zeros(1, np.int64),
                                                         steps)
        texts = [b",", *(b"%d," % s[0] for s in steps)]
        want = [b"," if s == -1 else b"%d," % s for s in step_of(fw, ts).tolist()]
        assert [texts[c] for c in codes.tolist()] == want
