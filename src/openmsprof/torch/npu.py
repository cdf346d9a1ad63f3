"""``torch_npu.npu`` as far as the seeds use it: ``torch_npu.npu.mstx()`` (seed 004's marker
sample) and ``synchronize()``.

    import openmsprof.torch as torch_npu      # the one changed line
    mstx = torch_npu.npu.mstx()
    mstx.mark("forward_start")
"""

from __future__ import annotations

from openmsprof.torch.profiler.npu_mstx import mstx

__all__ = ["mstx", "synchronize"]


def synchronize(device: object = None) -> None:
    """Wait for queued device work: CUDA when torch has it, else nothing to wait for (CPU)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize(device)  # type: ignore[arg-type]
