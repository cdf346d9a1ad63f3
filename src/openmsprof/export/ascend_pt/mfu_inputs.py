"""What msprof-analyze ``cluster -m operator_mfu`` needs to report each op's achieved ÷ peak
(docs/formats.md decision 15), written with the db export:

* ``{rank dir}/device_{id}/info.json.{id}``: its ``DeviceInfo`` peak formula is
  ``ai_core_num × aic_frequency(MHz) × 8192 × 10⁶`` FLOP/s (16·16·16·2 per cycle); we write
  ``ai_core_num`` 1 and the ``aic_frequency`` that makes the product this machine's **measured**
  float32 GEMM peak (``openmsprof peaks``).  It is a CPU peak, not a clock: ``peak_source``,
  ``peak_flops`` and ``executor`` say so beside it, and no AICORE_FREQ row is written (decision 13).
* MSTX_EVENTS ranges in domain ``mfu_flops`` with message ``{FLOPs}-{op name}``, the interface the
  recipe reads FLOPs from: one per computing kernel our cost model prices (its API is the only
  one starting in the range, and it launched that one kernel).  Their connectionId is the
  "none" id, so ``mstx_sum`` (which skips those) does not list them as user ranges.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from openmsprof.export.ascend_pt.framework import Framework
from openmsprof.fileio import fs
from openmsprof.machine import peaks as P

__all__ = ["DOMAIN", "OPS_PER_CYCLE", "flops_ranges", "write_device_info"]

#: msprof-analyze's ChipPeakFLOPSCalculator: FLOPs per AI Core cycle (FLOAT16 class)
OPS_PER_CYCLE = 16 * 16 * 16 * 2
DOMAIN = "mfu_flops"
NO_CONNECTION = 4294967295
RANGE = 2  # ENUM_MSTX_EVENT_TYPE start/end


def write_device_info(rank_dir: Path, device_id: int, executor: str, doc: dict[str, Any] | None) -> Path | None:
    """The device-info JSON with the measured peak; None (nothing written) without peaks."""
    peak = P.gemm_peak(doc) if doc else 0.0
    if peak <= 0:
        return None
    info = {"DeviceInfo": [{"id": device_id, "ai_core_num": 1, "aiv_num": 1,
                            "aic_frequency": f"{peak / (OPS_PER_CYCLE * 1e6):.6f}",
                            "peak_flops": peak, "peak_source": "openmsprof peaks: measured float32 GEMM",
                            "executor": executor}]}
    folder = rank_dir / f"device_{device_id}"
    fs.make_dir(folder)
    path = folder / f"info.json.{device_id}"
    fs.write_file_atomic(path, orjson.dumps(info, option=orjson.OPT_INDENT_2))
    return path


def flops_ranges(fw: Framework, conn: np.ndarray, flops: dict[int, float],
                 intern: Any, tid_of: Any) -> Iterator[tuple[int | None, ...]]:
    """MSTX_EVENTS rows (see the module docstring); ``flops``: kernel index → modelled FLOPs,
    ``conn``: kernel → launching API's operator event (-1 none)."""
    if not flops:
        return
    per_api = np.bincount(conn[conn >= 0], minlength=fw.n_ops) if (conn >= 0).any() else np.zeros(0, np.int64)
    starts = np.sort(fw.op_ts[np.unique(conn[conn >= 0])]) if len(per_api) else np.zeros(0, np.int64)
    domain = intern(DOMAIN)
    for rid, (j, f) in enumerate(sorted(flops.items())):
        e = int(conn[j])
        if e < 0 or f <= 0 or per_api[e] != 1:
            continue
        ts = int(fw.op_ts[e])
        if np.searchsorted(starts, ts + 1, "right") - np.searchsorted(starts, ts, "left") != 1:
            continue  # another API starts inside the range: the recipe would book its kernels too
        name = fw.kernels.name_of(j)
        tid = tid_of(e)
        yield ts, ts + 1, RANGE, rid, None, intern(f"{int(f)}-{name}"), tid, tid, domain, NO_CONNECTION
