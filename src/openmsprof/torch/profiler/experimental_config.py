"""``_ExperimentalConfig``: torch_npu's extra switches, validated with warnings (docs/formats.md §7.4)."""

from __future__ import annotations

import logging
from typing import Any

from openmsprof.config.torch_config import op_attr_note
from openmsprof.torch.profiler._enums import (
    EXPORT_TYPES,
    HOST_SYS,
    LEVELS,
    METRIC_NAMES,
    METRIC_VALUES,
    AiCMetrics,
    ExportType,
    ProfilerLevel,
)

log = logging.getLogger("openmsprof")


def _warn(key: str, given: object, chosen: object) -> None:
    log.warning("openmsprof: experimental_config %s=%r is invalid; using %r", key, given, chosen)


def _bool(key: str, value: object, default: bool) -> bool:
    if isinstance(value, bool):
        return value
    _warn(key, value, default)
    return default


class _ExperimentalConfig:
    """Same parameters and defaults as torch_npu; invalid values are reset with a warning."""

    def __init__(self, profiler_level: str = ProfilerLevel.Level0,
                 aic_metrics: str = AiCMetrics.PipeUtilization, l2_cache: bool = False,
                 msprof_tx: bool = False, data_simplification: bool = True, record_op_args: bool = False,
                 op_attr: bool = False, gc_detect_threshold: float | None = None,
                 export_type: str | list[str] = ExportType.Text, host_sys: list[str] | None = None,
                 mstx_domain_include: list[str] | None = None, mstx_domain_exclude: list[str] | None = None,
                 sys_io: bool = False, sys_interconnection: bool = False, mstx: bool = False) -> None:
        self.unsupported: list[str] = []
        if profiler_level not in LEVELS:
            _warn("profiler_level", profiler_level, ProfilerLevel.Level0)
            profiler_level = ProfilerLevel.Level0
        self._profiler_level = profiler_level
        metric = METRIC_VALUES.get(aic_metrics, aic_metrics) if isinstance(aic_metrics, str) else None
        if metric not in METRIC_NAMES:
            _warn("aic_metrics", aic_metrics, AiCMetrics.AiCoreNone)
            metric = AiCMetrics.AiCoreNone
        if profiler_level in (ProfilerLevel.Level0, ProfilerLevel.Level_none):
            metric = AiCMetrics.AiCoreNone
        if metric != AiCMetrics.AiCoreNone:
            self.unsupported.append(f"aic_metrics {METRIC_NAMES[metric]}: no AI Core counters on this machine")
        self._aic_metrics = metric
        self._l2_cache = _bool("l2_cache", l2_cache, False)
        if self._l2_cache:
            self.unsupported.append("l2_cache: no NPU L2 cache counters on this machine")
        self._msprof_tx = _bool("msprof_tx", msprof_tx, False) or _bool("mstx", mstx, False)
        if profiler_level == ProfilerLevel.Level_none:
            self._msprof_tx = True
        self._data_simplification = _bool("data_simplification", data_simplification, True)
        self.record_op_args = _bool("record_op_args", record_op_args, False)
        if self.record_op_args:
            self.unsupported.append("record_op_args: the AOE operator-argument dump needs CANN; "
                                    "no *_ascend_pt_op_args directory is written here")
        if profiler_level == ProfilerLevel.Level2:
            self.unsupported.append("profiler_level Level2: no AI CPU or CANN Runtime data on this "
                                    "machine (data_preprocess.csv is not written); Level1 data are")
        types = [export_type] if isinstance(export_type, str) else export_type
        if not isinstance(types, (list, tuple)) or not types or any(t not in EXPORT_TYPES for t in types):
            _warn("export_type", export_type, [ExportType.Text])
            types = [ExportType.Text]
        if self._msprof_tx and ExportType.Db in types and profiler_level == ProfilerLevel.Level_none:
            # seed 004: "开启此功能时,不能同时配置 ExportType.Db 和 ProfilerLevel.Level_none"
            log.warning("openmsprof: experimental_config msprof_tx=True cannot be used with both "
                        "export_type=ExportType.Db and profiler_level=ProfilerLevel.Level_none; "
                        "exporting Text instead of Db")
            types = [t for t in types if t != ExportType.Db] or [ExportType.Text]
        self._export_type = list(dict.fromkeys(types))
        self._op_attr = _bool("op_attr", op_attr, False)
        if self._op_attr:
            self.unsupported.append(op_attr_note(profiler_level, ExportType.Db in self._export_type))
        if gc_detect_threshold is not None and (
                isinstance(gc_detect_threshold, bool) or not isinstance(gc_detect_threshold, (int, float))
                or gc_detect_threshold < 0):
            _warn("gc_detect_threshold", gc_detect_threshold, None)
            gc_detect_threshold = None
        self._gc_detect_threshold = gc_detect_threshold
        hs = host_sys or []
        if not isinstance(hs, (list, tuple)) or any(h not in HOST_SYS for h in hs):
            _warn("host_sys", host_sys, [])
            hs = []
        self._host_sys = list(hs)
        self._mstx_domain_include = self._strs("mstx_domain_include", mstx_domain_include)
        self._mstx_domain_exclude = [] if self._mstx_domain_include else self._strs(
            "mstx_domain_exclude", mstx_domain_exclude)
        self._sys_io = _bool("sys_io", sys_io, False)
        self._sys_interconnection = _bool("sys_interconnection", sys_interconnection, False)
        others = [h for h in self._host_sys if h not in ("cpu", "mem")]
        if others:
            self.unsupported.append(f"host_sys {','.join(others)}: only cpu and mem host sampling is "
                                    "implemented; nothing is collected for the rest")
        for on, name, what in ((self._sys_io, "sys_io", "NIC/RoCE"),
                               (self._sys_interconnection, "sys_interconnection", "PCIe/HCCS/HCCL link")):
            if on:
                self.unsupported.append(f"{name}: {what} sampling reads Ascend NPU counters; nothing "
                                        "is collected for it on this machine")

    @staticmethod
    def _strs(key: str, value: Any) -> list[str]:
        if value is None:
            return []
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return list(value)
        _warn(key, value, [])
        return []

    @property
    def profiler_level(self) -> str:
        return self._profiler_level

    @property
    def export_type(self) -> list[str]:
        return self._export_type

    @property
    def msprof_tx(self) -> bool:
        return self._msprof_tx

    @property
    def data_simplification(self) -> bool:
        return self._data_simplification

    def to_dict(self) -> dict[str, Any]:
        """The ``experimental_config`` block of profiler_info.json (docs/formats.md §3)."""
        return {
            "_profiler_level": self._profiler_level, "_aic_metrics": self._aic_metrics,
            "_l2_cache": self._l2_cache, "_msprof_tx": self._msprof_tx, "_mstx": self._msprof_tx,
            "_data_simplification": self._data_simplification, "record_op_args": self.record_op_args,
            "_export_type": self._export_type, "_host_sys": self._host_sys, "_op_attr": self._op_attr,
            "_gc_detect_threshold": self._gc_detect_threshold,
            "_mstx_domain_include": self._mstx_domain_include,
            "_mstx_domain_exclude": self._mstx_domain_exclude, "_sys_io": self._sys_io,
            "_sys_interconnection": self._sys_interconnection,
        }

