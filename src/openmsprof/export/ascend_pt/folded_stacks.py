"""FlameGraph folded stacks (``outer;…;inner;op value_us``) of a saved rank dir's Kineto trace
(``export_stacks``; needs with_stack).  ``self_npu_time_total`` counts device kernel time: on a
CPU-only machine the time of the CPU kernels (see FORMATS decision 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from openmsprof.export.ascend_pt import framework

__all__ = ["folded"]


def folded(rank_dir: Path, info: dict[str, Any], metric: str) -> str:
    """The folded lines of ``rank_dir`` (``info``: its profiler_info), ``metric`` per op in µs."""
    fw = framework.load(rank_dir, info)
    child, dev_self, _dev_total = fw.op_times()
    value = dev_self if metric != "self_cpu_time_total" else np.maximum(fw.op_dur - child, 0)
    lines = []
    has = np.flatnonzero(fw.op_stack >= 0)
    order = has[np.lexsort((has, -fw.op_dur[has], fw.op_ts[has], fw.op_tid[has]))]
    for i in order.tolist():
        us = int(value[i]) // 1000
        if us > 0:
            text = fw.stacks[int(fw.op_stack[i])]
            frames = [f.replace(";", ",").replace(" ", "_") for f in reversed(text.split(";\r\n"))]
            lines.append(";".join([*frames, fw.op_name(i).replace(" ", "_")]) + f" {us}\n")
    return "".join(lines)
