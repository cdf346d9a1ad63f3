"""pyACL ``create_config(device_list, aicore_metrics, aicore_events, data_type_config)`` →
:class:`ProfileConfig` (docs/formats.md §7.1).

The ``ACL_PROF_*`` data-type bits and ``ACL_AICORE_*`` metric values are defined here; the acl
facade re-exports them.  Rules: the metrics argument counts only with ``ACL_PROF_AICORE_METRICS``;
any ``ACL_PROF_TASK_TIME*`` bit implies training trace; ``ACL_PROF_API_STATS`` switches to online
API statistics and disables every other switch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openmsprof.config.capabilities import check
from openmsprof.config.errors import ConfigError
from openmsprof.config.model import ProfileConfig
from openmsprof.config.validate import bad, show, validate

ACL_PROF_ACL_API = 0x0001
ACL_PROF_TASK_TIME = 0x0002
ACL_PROF_AICORE_METRICS = 0x0004
ACL_PROF_AICPU = 0x0008
ACL_PROF_AICPU_TRACE = ACL_PROF_AICPU  # spelling used by the seed sample
ACL_PROF_L2CACHE = 0x0010
ACL_PROF_HCCL_TRACE = 0x0020
ACL_PROF_HCCL = ACL_PROF_HCCL_TRACE  # spelling used by the seed sample
ACL_PROF_TRAINING_TRACE = 0x0040
ACL_PROF_MSPROFTX = 0x0080
ACL_PROF_RUNTIME_API = 0x0100
ACL_PROF_GE_API_L0 = 0x0200
ACL_PROF_TASK_TIME_L0 = 0x0800
ACL_PROF_TASK_MEMORY = 0x1000
ACL_PROF_TASK_TIME_L2 = 0x2000
ACL_PROF_OP_ATTR = 0x4000
ACL_PROF_TASK_TIME_L3 = 0x8000
ACL_PROF_GE_API_L1 = 0x01000000
ACL_PROF_API_STATS = 0x400000000
ACL_PROF_AICORE_SHAPE = 0x800000000

#: Every documented bit, by name.
ACL_PROF_BITS: dict[str, int] = {
    "ACL_PROF_ACL_API": ACL_PROF_ACL_API,
    "ACL_PROF_TASK_TIME": ACL_PROF_TASK_TIME,
    "ACL_PROF_AICORE_METRICS": ACL_PROF_AICORE_METRICS,
    "ACL_PROF_AICPU": ACL_PROF_AICPU,
    "ACL_PROF_L2CACHE": ACL_PROF_L2CACHE,
    "ACL_PROF_HCCL_TRACE": ACL_PROF_HCCL_TRACE,
    "ACL_PROF_TRAINING_TRACE": ACL_PROF_TRAINING_TRACE,
    "ACL_PROF_MSPROFTX": ACL_PROF_MSPROFTX,
    "ACL_PROF_RUNTIME_API": ACL_PROF_RUNTIME_API,
    "ACL_PROF_GE_API_L0": ACL_PROF_GE_API_L0,
    "ACL_PROF_TASK_TIME_L0": ACL_PROF_TASK_TIME_L0,
    "ACL_PROF_TASK_MEMORY": ACL_PROF_TASK_MEMORY,
    "ACL_PROF_TASK_TIME_L2": ACL_PROF_TASK_TIME_L2,
    "ACL_PROF_OP_ATTR": ACL_PROF_OP_ATTR,
    "ACL_PROF_TASK_TIME_L3": ACL_PROF_TASK_TIME_L3,
    "ACL_PROF_GE_API_L1": ACL_PROF_GE_API_L1,
    "ACL_PROF_API_STATS": ACL_PROF_API_STATS,
    "ACL_PROF_AICORE_SHAPE": ACL_PROF_AICORE_SHAPE,
}
ACL_PROF_KNOWN_MASK = 0
for _bit in ACL_PROF_BITS.values():
    ACL_PROF_KNOWN_MASK |= _bit

ACL_AICORE_ARITHMETIC_UTILIZATION = 0
ACL_AICORE_PIPE_UTILIZATION = 1
ACL_AICORE_MEMORY_BANDWIDTH = 2
ACL_AICORE_L0B_AND_WIDTH = 3
ACL_AICORE_RESOURCE_CONFLICT_RATIO = 4
ACL_AICORE_MEMORY_UB = 5
ACL_AICORE_L2_CACHE = 6
ACL_AICORE_PIPE_EXECUTE_UTILIZATION = 7
ACL_AICORE_MEMORY_ACCESS = 8
ACL_AICORE_NONE = 0xFF

#: ``aclprofAicoreMetrics`` value → the metric name used by acl.json / torch / ProfileConfig.
AICORE_METRIC_NAMES: dict[int, str] = {
    ACL_AICORE_ARITHMETIC_UTILIZATION: "ArithmeticUtilization",
    ACL_AICORE_PIPE_UTILIZATION: "PipeUtilization",
    ACL_AICORE_MEMORY_BANDWIDTH: "Memory",
    ACL_AICORE_L0B_AND_WIDTH: "MemoryL0",
    ACL_AICORE_RESOURCE_CONFLICT_RATIO: "ResourceConflictRatio",
    ACL_AICORE_MEMORY_UB: "MemoryUB",
    ACL_AICORE_L2_CACHE: "L2Cache",
    ACL_AICORE_PIPE_EXECUTE_UTILIZATION: "PipelineExecuteUtilization",
    ACL_AICORE_MEMORY_ACCESS: "MemoryAccess",
    ACL_AICORE_NONE: "AiCoreNone",
}
#: The C enum names (``ACL_AICORE_*``) of each metric, as torch's AiCMetrics values spell them.
AICORE_METRIC_C_NAMES: dict[str, str] = {
    "ArithmeticUtilization": "ACL_AICORE_ARITHMETIC_UTILIZATION",
    "PipeUtilization": "ACL_AICORE_PIPE_UTILIZATION",
    "Memory": "ACL_AICORE_MEMORY_BANDWIDTH",
    "MemoryL0": "ACL_AICORE_L0B_AND_WIDTH",
    "ResourceConflictRatio": "ACL_AICORE_RESOURCE_CONFLICT_RATIO",
    "MemoryUB": "ACL_AICORE_MEMORY_UB",
    "L2Cache": "ACL_AICORE_L2_CACHE",
    "PipelineExecuteUtilization": "ACL_AICORE_PIPE_EXECUTE_UTILIZATION",
    "MemoryAccess": "ACL_AICORE_MEMORY_ACCESS",
    "AiCoreNone": "ACL_AICORE_NONE",
}

_U64_MAX = (1 << 64) - 1
_WHERE = "acl.prof.create_config"


def _task_time(mask: int) -> str:
    """The highest task-time level asked for ("on" is the documents' spelling of l1)."""
    for bit, level in ((ACL_PROF_TASK_TIME_L3, "l3"), (ACL_PROF_TASK_TIME_L2, "l2"),
                       (ACL_PROF_TASK_TIME, "on"), (ACL_PROF_TASK_TIME_L0, "l0")):
        if mask & bit:
            return level
    return "off"


def from_mask(device_list: Sequence[int] | None, aicore_metrics: int, aicore_events: Any,
              data_type_config: int) -> ProfileConfig:
    """The config for ``create_config``'s arguments; :class:`ConfigError` on bad arguments
    (unknown bits named in hex, unknown metric value, bad device ids)."""
    if isinstance(data_type_config, bool) or not isinstance(data_type_config, int) \
            or not 0 <= data_type_config <= _U64_MAX:
        raise bad(_WHERE, "data_type_config", data_type_config, "a uint64 of ACL_PROF_* bits")
    unknown = data_type_config & ~ACL_PROF_KNOWN_MASK
    if unknown:
        bits = ", ".join(f"{1 << i:#x}" for i in range(64) if unknown >> i & 1)
        raise ConfigError(f"{_WHERE}: data_type_config={data_type_config:#x} has unknown bits "
                          f"{bits}; allowed: ACL_PROF_* bits (known mask {ACL_PROF_KNOWN_MASK:#x})")
    if isinstance(aicore_metrics, bool) or aicore_metrics not in AICORE_METRIC_NAMES:
        allowed = ", ".join(f"{v:#x} {n}" for v, n in AICORE_METRIC_NAMES.items())
        raise bad(_WHERE, "aicore_metrics", aicore_metrics, allowed)
    if aicore_events not in (None, 0):
        raise bad(_WHERE, "aicore_events", aicore_events, "0 or None (reserved)")
    if device_list is None or isinstance(device_list, (str, bytes)):
        raise bad(_WHERE, "device_list", device_list, "a list of device ids")
    try:
        devices = list(device_list)
    except TypeError:
        raise bad(_WHERE, "device_list", device_list, "a list of device ids") from None
    mask = data_type_config
    cfg = ProfileConfig(
        devices=devices,
        acl_api=bool(mask & ACL_PROF_ACL_API),
        runtime_api=bool(mask & ACL_PROF_RUNTIME_API),
        task_time=_task_time(mask),
        aic_metrics=AICORE_METRIC_NAMES[aicore_metrics] if mask & ACL_PROF_AICORE_METRICS
        else "AiCoreNone",
        aicpu=bool(mask & ACL_PROF_AICPU),
        l2=bool(mask & ACL_PROF_L2CACHE),
        hccl=bool(mask & ACL_PROF_HCCL_TRACE),
        msproftx=bool(mask & ACL_PROF_MSPROFTX),
        ge_api="l1" if mask & ACL_PROF_GE_API_L1 else "l0" if mask & ACL_PROF_GE_API_L0 else "off",
        op_attr=bool(mask & ACL_PROF_OP_ATTR),
        task_memory=bool(mask & ACL_PROF_TASK_MEMORY),
        aicore_shape=bool(mask & ACL_PROF_AICORE_SHAPE),
        source="pyacl",
    )
    cfg.training_trace = bool(mask & ACL_PROF_TRAINING_TRACE) or cfg.task_time_on
    if mask & ACL_PROF_AICORE_METRICS == 0 and aicore_metrics != ACL_AICORE_NONE:
        cfg.notes.append(f"aicore_metrics {show(aicore_metrics)} ignored: ACL_PROF_AICORE_METRICS not set")
    if mask & ACL_PROF_API_STATS:
        others = mask & ~ACL_PROF_API_STATS
        cfg = ProfileConfig(devices=devices, acl_api=False, task_time="off", msproftx=False,
                            api_stats=True, source="pyacl")
        if others:
            cfg.notes.append(f"ACL_PROF_API_STATS set: the other bits {others:#x} are ignored")
    cfg.explicit = ["devices", *(n for n in ("acl_api", "runtime_api", "task_time", "aic_metrics",
                                             "aicpu", "l2", "hccl", "msproftx", "training_trace",
                                             "ge_api", "op_attr", "task_memory", "aicore_shape",
                                             "api_stats"))]
    return check(validate(cfg, _WHERE))


def to_mask(cfg: ProfileConfig) -> tuple[list[int], int, int]:
    """The ``(device_list, aicore_metrics, data_type_config)`` that :func:`from_mask` maps to ``cfg``."""
    if cfg.api_stats:
        return list(cfg.devices), ACL_AICORE_NONE, ACL_PROF_API_STATS
    mask = 0
    for on, bit in ((cfg.acl_api, ACL_PROF_ACL_API), (cfg.runtime_api, ACL_PROF_RUNTIME_API),
                    (cfg.aicpu, ACL_PROF_AICPU), (cfg.l2, ACL_PROF_L2CACHE),
                    (cfg.hccl, ACL_PROF_HCCL_TRACE), (cfg.msproftx, ACL_PROF_MSPROFTX),
                    (cfg.training_trace, ACL_PROF_TRAINING_TRACE), (cfg.op_attr, ACL_PROF_OP_ATTR),
                    (cfg.task_memory, ACL_PROF_TASK_MEMORY),
                    (cfg.aicore_shape, ACL_PROF_AICORE_SHAPE)):
        if on:
            mask |= bit
    mask |= {"l0": ACL_PROF_TASK_TIME_L0, "on": ACL_PROF_TASK_TIME, "l1": ACL_PROF_TASK_TIME,
             "l2": ACL_PROF_TASK_TIME_L2, "l3": ACL_PROF_TASK_TIME_L3}.get(cfg.task_time, 0)
    mask |= {"l0": ACL_PROF_GE_API_L0, "l1": ACL_PROF_GE_API_L1}.get(cfg.ge_api, 0)
    metric = ACL_AICORE_NONE
    if cfg.aic_metrics != "AiCoreNone":
        names = {n: v for v, n in AICORE_METRIC_NAMES.items()}
        if cfg.aic_metrics not in names:
            raise ConfigError(f"{_WHERE}: aic_metrics={cfg.aic_metrics!r} has no aclprofAicoreMetrics value")
        metric = names[cfg.aic_metrics]
        mask |= ACL_PROF_AICORE_METRICS
    return list(cfg.devices), metric, mask
