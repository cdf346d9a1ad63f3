"""kernel_details' ``Step Id,`` cells (``pt_summary._step_prefix``) are those of ``step_of``: the
step containing each start, an empty cell outside every step (before, between, after the steps,
at a step's end), on random steps and times."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import numpy as np

from openmsprof.export.ascend_pt import pt_summary
from openmsprof.export.ascend_pt.framework import Framework
from openmsprof.export.ascend_pt.trace_view import step_of


def test_step_cells_are_those_of_step_of() -> None:
    rng = np.random.default_rng(26)
    for _ in range(300):
        n = int(rng.integers(1, 6))
        bounds = np.sort(rng.choice(np.arange(0, 1000, 10), 2 * n, replace=False))
        steps = [(int(rng.integers(0, 50)), int(bounds[2 * i]), int(bounds[2 * i + 1])) for i in range(n)]
        fw = cast(Framework, SimpleNamespace(steps=steps))
        ts = np.concatenate((rng.integers(-20, 1020, 60), bounds)).astype(np.int64)
        codes, texts = pt_summary._step_prefix(fw, ts)
        want = [b"," if s == -1 else b"%d," % s for s in step_of(fw, ts).tolist()]
        assert [texts[c] for c in codes.tolist()] == want
