"""The one profiling configuration model every entry point maps onto (docs/internals.md)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

#: AI Core metric names (docs/formats.md §7.1) accepted by acl.json / torch / CLI.
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
GE_API_VALUES: tuple[str, ...] = ("off", "l0", "l1")
HOST_SYS_VALUES: tuple[str, ...] = ("cpu", "mem", "disk", "network", "osrt", "numa")
HOST_SYS_USAGE_VALUES: tuple[str, ...] = ("cpu", "mem")
LLC_VALUES: tuple[str, ...] = ("read", "write")
PROFILER_LEVELS: tuple[str, ...] = ("", "Level_none", "Level0", "Level1", "Level2")
EXPORT_TYPES: tuple[str, ...] = ("text", "db")
STORAGE_LIMIT_MAX_MB = 4294967295


@dataclass
class ProfileConfig:
    """Every switch the seed documents name, normalised.

    Times are in the units the documents use; ``storage_limit_mb`` is None for unlimited and the
    ``*_freq`` fields are None when off.  ``task_time`` "on" is the documents' spelling of l1.
    ``unsupported`` lists switches that were asked for but cannot be honoured on this machine
    (filled by :func:`openmsprof.config.capabilities.check`), each a one-line reason; ``notes``
    holds informational lines from the loaders (defaults chosen, values reset); ``explicit``
    names the fields the entry point set itself (used by :func:`openmsprof.config.merge`).
    The torch-only fields (``profiler_level`` … ``gc_detect_threshold``) mirror
    ``_ExperimentalConfig``; ``profiler_level`` is "" outside the torch path.
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
    sys_io_sampling_freq: int | None = None
    sys_interconnection_freq: int | None = None
    dvpp_freq: int | None = None
    instr_profiling_freq: int | None = None
    llc_profiling: str = "read"
    storage_limit_mb: int | None = None
    interval: int = 0
    op_attr: bool = False
    task_memory: bool = False
    aicore_shape: bool = False
    api_stats: bool = False
    profiler_level: str = ""
    export_type: list[str] = field(default_factory=lambda: ["text"])
    data_simplification: bool = True
    record_op_args: bool = False
    mstx_domain_include: list[str] = field(default_factory=list)
    mstx_domain_exclude: list[str] = field(default_factory=list)
    gc_detect_threshold: float | None = None
    unsupported: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    explicit: list[str] = field(default_factory=list)
    source: str = "api"

    @property
    def task_time_on(self) -> bool:
        return self.task_time != "off"

    @property
    def aic_metrics_active(self) -> bool:
        """AI Core metrics count only with task_time on/l1/l2/l3 (docs/formats.md §7.2)."""
        return self.aic_metrics != "AiCoreNone" and self.task_time not in ("off", "l0")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> ProfileConfig:
        return dataclasses.replace(self, **changes)


#: Field names that describe the result of loading, not a switch.
META_FIELDS: frozenset[str] = frozenset({"unsupported", "notes", "explicit", "source"})
SWITCH_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(ProfileConfig) if f.name not in META_FIELDS
)
