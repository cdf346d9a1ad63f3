"""PyTorch facade of openmsprof: the one-line swap for ``torch_npu``.

    import openmsprof.torch as torch_npu   # instead of: import torch_npu
    torch_npu.profiler.profile(...), torch_npu.profiler._ExperimentalConfig(...), torch_npu.npu.mstx()

``profiler`` and ``npu`` are imported on first use (they need torch); plain ``import openmsprof``
never imports this package."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["npu", "profiler"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
