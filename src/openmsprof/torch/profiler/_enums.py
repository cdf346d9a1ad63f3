"""torch_npu.profiler enums and the ``supported_*`` queries, answered for this machine.

Values follow docs/formats.md §7.4: ``ProfilerLevel`` values are their names, ``AiCMetrics`` values the
``ACL_AICORE_*`` strings, ``ExportType`` ``text``/``db``.
"""

from __future__ import annotations

from enum import Enum
from typing import Any


class ProfilerActivity(Enum):
    """``CPU`` = framework operators; ``NPU`` = the accelerator torch has (CUDA when present)."""

    CPU = "CPU"
    NPU = "NPU"

    def __str__(self) -> str:
        return f"ProfilerActivity.{self.name}"


class ProfilerAction(Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


class ProfilerLevel:
    Level_none = "Level_none"
    Level0 = "Level0"
    Level1 = "Level1"
    Level2 = "Level2"


class AiCMetrics:
    PipeUtilization = "ACL_AICORE_PIPE_UTILIZATION"
    ArithmeticUtilization = "ACL_AICORE_ARITHMETIC_UTILIZATION"
    Memory = "ACL_AICORE_MEMORY_BANDWIDTH"
    MemoryL0 = "ACL_AICORE_L0B_AND_WIDTH"
    ResourceConflictRatio = "ACL_AICORE_RESOURCE_CONFLICT_RATIO"
    MemoryUB = "ACL_AICORE_MEMORY_UB"
    L2Cache = "ACL_AICORE_L2_CACHE"
    MemoryAccess = "ACL_AICORE_MEMORY_ACCESS"
    AiCoreNone = "ACL_AICORE_NONE"


class ExportType:
    Text = "text"
    Db = "db"


class HostSystem:
    CPU = "cpu"
    MEM = "mem"
    DISK = "disk"
    NETWORK = "network"
    OSRT = "osrt"
    NUMA = "numa"


LEVELS: tuple[str, ...] = ("Level_none", "Level0", "Level1", "Level2")
EXPORT_TYPES: tuple[str, ...] = ("text", "db")
HOST_SYS: tuple[str, ...] = ("cpu", "mem", "disk", "network", "osrt", "numa")
#: metric value -> short name, and short name -> value.
METRIC_NAMES: dict[str, str] = {v: k for k, v in vars(AiCMetrics).items() if k[0] != "_"}
METRIC_VALUES: dict[str, str] = {k: v for v, k in METRIC_NAMES.items()}


def device_backend() -> str:
    """What the NPU activity maps to here: ``CUDA`` when torch sees a GPU, else ``none``."""
    try:
        import torch

        return "CUDA" if torch.cuda.is_available() else "none"
    except Exception:
        return "none"


def supported_activities() -> set[ProfilerActivity]:
    """CPU always; NPU only when a device torch can profile (CUDA) exists."""
    acts = {ProfilerActivity.CPU}
    if device_backend() != "none":
        acts.add(ProfilerActivity.NPU)
    return acts


def supported_profiler_level() -> set[str]:
    return set(LEVELS)


def supported_ai_core_metrics() -> set[str]:
    """No AI Core counters exist on this machine: only ``AiCoreNone`` is honoured."""
    return {AiCMetrics.AiCoreNone}


def supported_export_type() -> set[str]:
    return set(EXPORT_TYPES)


def activity_name(act: Any) -> str | None:
    """Accept ProfilerActivity, torch's ProfilerActivity or the strings ``CPU``/``NPU``/``CUDA``."""
    name = getattr(act, "name", act)
    if not isinstance(name, str):
        return None
    name = name.split(".")[-1].upper()
    if name == "CUDA":
        name = "NPU"
    return name if name in ("CPU", "NPU") else None
