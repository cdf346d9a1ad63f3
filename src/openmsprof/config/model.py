"""The one profiling configuration model every entry point maps onto (SPEC §4.1)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

#: AI Core metric names (FORMATS.md §7.1) accepted by acl.json / torch / CLI.
AICORE_METRICS: tuple[str, ...] = (
    "ArithmeticUtilization",
    "PipeUtilization",
    "Memory",
    "MemoryL0",
    "ResourceConflictRatio",
    "MemoryUB",
    "L2Cache",
    "PipelineExecuteUtilization",
    "MemoryAccess",
    "AiCoreNone",
)
TASK_TIME_VALUES: tuple[str, ...] = ("on", "off", "l0", "l1", "l2", "l3")
HOST_SYS_VALUES: tuple[str, ...] = ("cpu", "mem", "disk", "network", "osrt")
HOST_SYS_USAGE_VALUES: tuple[str, ...] = ("cpu", "mem")


@dataclass
class ProfileConfig:
    """Every switch the seed documents name, normalised.

    Times are in the units the documents use; ``storage_limit_mb`` is None for unlimited.
    ``unsupported`` lists switches that were asked for but cannot be honoured on this machine
    (filled by :func:`openmsprof.config.capabilities.check`), each a one-line reason.
    """

    switch: bool = True
    output: str | None = None
    devices: list[int] = field(default_factory=lambda: [0])
    acl_api: bool = True
    runtime_api: bool = False
    task_time: str = "on"
    aic_metrics: str = "AiCoreNone"
    aicpu: bool = False
    l2: bool = False
    hccl: bool = False
    msproftx: bool = True
    training_trace: bool = False
    fp_point: str = ""
    bp_point: str = ""
    ge_api: str = "off"
    host_sys: list[str] = field(default_factory=list)
    host_sys_usage: list[str] = field(default_factory=list)
    host_sys_usage_freq: int = 50
    sys_hardware_mem_freq: int | None = None
    storage_limit_mb: int | None = None
    interval: int = 0
    op_attr: bool = False
    task_memory: bool = False
    api_stats: bool = False
    unsupported: list[str] = field(default_factory=list)
    source: str = "api"

    @property
    def task_time_on(self) -> bool:
        return self.task_time != "off"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> ProfileConfig:
        return dataclasses.replace(self, **changes)
