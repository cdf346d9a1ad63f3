"""torch_npu ``_ExperimentalConfig`` values and ``profiler_config.json`` → :class:`ProfileConfig`
(docs/formats.md §7.4).

Inside a training loop profiling must never kill the job, so — as torch_npu does — an invalid
value is never raised: it is reset to its default and one warning line says which key, the value
given and the value chosen.  Every function returns ``(result, warnings)``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import orjson

from openmsprof.config.acl_mask import AICORE_METRIC_C_NAMES
from openmsprof.config.capabilities import check
from openmsprof.config.errors import ConfigError, ProfilingError
from openmsprof.config.model import AICORE_METRICS, HOST_SYS_VALUES, ProfileConfig
from openmsprof.config.validate import need_output, show, validate

PROFILER_LEVELS = ("Level_none", "Level0", "Level1", "Level2")
#: AiCMetrics: the §7.1 names minus PipelineExecuteUtilization.
TORCH_AIC_METRICS = tuple(m for m in AICORE_METRICS if m != "PipelineExecuteUtilization")
_C_TO_NAME = {c: n for n, c in AICORE_METRIC_C_NAMES.items() if n in TORCH_AIC_METRICS}
EXPERIMENTAL_KEYS = ("profiler_level", "aic_metrics", "l2_cache", "op_attr", "gc_detect_threshold",
                     "data_simplification", "record_op_args", "export_type", "mstx", "msprof_tx",
                     "mstx_domain_include", "mstx_domain_exclude", "host_sys", "sys_io",
                     "sys_interconnection")
_TASK_TIME = {"Level_none": "off", "Level0": "l0", "Level1": "l1", "Level2": "l2"}


def op_attr_note(level: str, db: bool) -> str:
    """What ``op_attr=True`` does here (seed 004: attributes of aclnn operators, parsed only into
    the Db export, not at Level_none): accepted, and said not supported on this machine."""
    why = ("at Level_none op_attr has no effect (seed 004)" if level == "Level_none" else
           "not supported here: operator attributes are those of aclnn operators on an Ascend NPU; "
           "COMPUTE_TASK_INFO.attrInfo stays N/A")
    return f"op_attr=True accepted; {why}" + ("" if db else " (they would appear only in the Db export)")


class _Reader:
    """Reads keys of a mapping or attributes of an object, collecting reset warnings."""

    def __init__(self, source: Mapping[str, Any] | object | None, where: str) -> None:
        self.where = where
        self.warnings: list[str] = []
        if source is None:
            self.values: dict[str, Any] = {}
        elif isinstance(source, Mapping):
            self.values = dict(source)
        else:  # an _ExperimentalConfig-like object: public or ``_``-prefixed attributes
            self.values = {}
            for key in EXPERIMENTAL_KEYS:
                for attr in (key, "_" + key):
                    if hasattr(source, attr):
                        self.values[key] = getattr(source, attr)
                        break

    def warn(self, key: str, value: Any, chosen: Any, allowed: str) -> None:
        self.warnings.append(f"{self.where}: {key}={show(value)} is invalid, reset to "
                             f"{chosen!r}; allowed: {allowed}")

    def get(self, key: str, default: Any) -> Any:
        value = self.values.get(key, default)
        return getattr(value, "value", value)  # enum members carry their string in .value

    def flag(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            self.warn(key, value, default, "True or False")
            return default
        return value

    def choice(self, key: str, default: str, choices: tuple[str, ...],
               aliases: Mapping[str, str] | None = None) -> str:
        value = self.get(key, default)
        if isinstance(value, str) and aliases and value in aliases:
            return aliases[value]
        if not isinstance(value, str) or value not in choices:
            self.warn(key, value, default, ", ".join(choices))
            return default
        return value

    def names(self, key: str, choices: tuple[str, ...] | None) -> list[str]:
        value = self.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)):
            self.warn(key, value, [], "a list" + (f" of {', '.join(choices)}" if choices else ""))
            return []
        out: list[str] = []
        for item in value:
            item = getattr(item, "value", item)
            if not isinstance(item, str) or (choices is not None and item not in choices):
                self.warnings.append(f"{self.where}: {key} item {show(item)} is invalid and dropped; "
                                     f"allowed: {', '.join(choices) if choices else 'strings'}")
            elif item not in out:
                out.append(item)
        return out


def from_experimental(experimental: Mapping[str, Any] | object | None,
                      where: str = "experimental_config") -> tuple[ProfileConfig, list[str]]:
    """Map ``_ExperimentalConfig`` values (an object or a dict) onto a config; never raises."""
    r = _Reader(experimental, where)
    for key in r.values:
        if key not in EXPERIMENTAL_KEYS:
            r.warnings.append(f"{where}: unknown key {key!r} ignored; allowed: {', '.join(EXPERIMENTAL_KEYS)}")
    level = r.choice("profiler_level", "Level0", PROFILER_LEVELS)
    metrics = r.choice("aic_metrics", "PipeUtilization", TORCH_AIC_METRICS, _C_TO_NAME)
    if level in ("Level0", "Level_none") and metrics != "AiCoreNone":
        if "aic_metrics" in r.values:
            r.warnings.append(f"{where}: aic_metrics={metrics!r} needs Level1 or Level2; "
                              f"reset to 'AiCoreNone' at {level}")
        metrics = "AiCoreNone"
    export = r.names("export_type", ("text", "db")) or ["text"]
    op_attr = r.flag("op_attr", False)
    mstx_key = "mstx" if "mstx" in r.values else "msprof_tx"
    mstx = r.flag(mstx_key, False)
    if level == "Level_none" and not mstx:
        if mstx_key in r.values:
            r.warnings.append(f"{where}: {mstx_key}=False reset to True: Level_none collects only mstx")
        mstx = True
    include = r.names("mstx_domain_include", None)
    exclude = r.names("mstx_domain_exclude", None)
    if include and exclude:
        r.warnings.append(f"{where}: mstx_domain_include and mstx_domain_exclude both set; "
                          "include wins, exclude ignored")
        exclude = []
    gc = r.get("gc_detect_threshold", None)
    if gc is not None and (isinstance(gc, bool) or not isinstance(gc, (int, float))
                           or not math.isfinite(gc) or gc < 0):
        r.warn("gc_detect_threshold", gc, None, "None or a number >= 0 (ms)")
        gc = None
    host_sys = r.names("host_sys", HOST_SYS_VALUES)
    cfg = ProfileConfig(
        profiler_level=level, task_time=_TASK_TIME[level], aic_metrics=metrics,
        acl_api=level in ("Level1", "Level2"), runtime_api=level == "Level2",
        aicpu=level == "Level2", l2=r.flag("l2_cache", False), op_attr=op_attr,
        gc_detect_threshold=None if gc is None else float(gc),
        data_simplification=r.flag("data_simplification", True),
        record_op_args=r.flag("record_op_args", False), export_type=export, msproftx=mstx,
        mstx_domain_include=include, mstx_domain_exclude=exclude, host_sys=host_sys,
        host_sys_usage=[h for h in host_sys if h in ("cpu", "mem")],
        sys_io_sampling_freq=100 if r.flag("sys_io", False) else None,
        sys_interconnection_freq=50 if r.flag("sys_interconnection", False) else None,
        source="torch", explicit=sorted(k for k in r.values if k in EXPERIMENTAL_KEYS),
    )
    cfg.notes.extend(r.warnings)
    if op_attr:  # accepted, said in the job log (not a reset, so not a warning)
        cfg.notes.append(f"{where}: {op_attr_note(level, 'db' in export)}")
    try:
        return check(validate(cfg, where)), r.warnings
    except ConfigError as exc:  # not reachable with the resets above; never raise here anyway
        r.warnings.append(f"{exc}; all experimental_config values reset to their defaults")
        return ProfileConfig(profiler_level="Level0", task_time="l0", source="torch"), r.warnings


# ------------------------------------------------------------------ profiler_config.json


@dataclass
class DynamicProfilerConfig:
    """profiler_config.json of ``dynamic_profile`` (docs/formats.md §7.4 defaults); ``config`` holds the
    switches (experimental_config, prof_dir as output)."""

    activities: list[str] = field(default_factory=lambda: ["CPU", "NPU"])
    prof_dir: str = "./"
    analyse: bool = False
    async_mode: bool = False
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False
    active: int = 1
    warmup: int = 0
    start_step: int = 0
    is_rank: bool = False
    rank_list: list[int] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    config: ProfileConfig = field(default_factory=ProfileConfig)


#: key → (lowest allowed int) for the integer keys.
_INT_KEYS = {"active": 1, "warmup": 0, "start_step": -1}
_BOOL_KEYS = ("analyse", "async_mode", "record_shapes", "profile_memory", "with_stack",
              "with_flops", "with_modules", "is_rank")


def parse_profiler_config(doc: bytes | str | Mapping[str, Any],
                          where: str = "profiler_config.json"
                          ) -> tuple[DynamicProfilerConfig | None, list[str]]:
    """Map a profiler_config.json (text or decoded) onto a :class:`DynamicProfilerConfig`.

    Invalid JSON or a non-object gives ``(None, [warning])`` (the file is ignored); invalid values
    are reset to their defaults with a warning each.  Never raises.
    """
    if isinstance(doc, (bytes, str)):
        try:
            doc = orjson.loads(doc)
        except orjson.JSONDecodeError as exc:
            return None, [f"{where}: invalid JSON at line {exc.lineno} column {exc.colno}: "
                          f"{exc.msg}; file ignored"]
    if not isinstance(doc, Mapping):
        return None, [f"{where}: top level is {type(doc).__name__}, not a JSON object; file ignored"]
    out = DynamicProfilerConfig()
    r = _Reader(doc, where)
    known = {f.name for f in fields(DynamicProfilerConfig)} - {"config"} | {"experimental_config"}
    for key in doc:
        if key not in known:
            r.warnings.append(f"{where}: unknown key {key!r} ignored; allowed: {', '.join(sorted(known))}")
    for key in _BOOL_KEYS:
        setattr(out, key, r.flag(key, getattr(out, key)))
    for key, lo in _INT_KEYS.items():
        value = doc.get(key, getattr(out, key))
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            r.warn(key, value, getattr(out, key), f"an integer >= {lo}")
        else:
            setattr(out, key, value)
    acts = r.names("activities", ("CPU", "NPU"))
    if "activities" in doc and not acts:
        r.warn("activities", doc["activities"], out.activities, "a non-empty list of CPU, NPU")
    out.activities = acts or out.activities
    prof_dir = doc.get("prof_dir", out.prof_dir)
    try:
        out.prof_dir = need_output(where, "prof_dir", prof_dir) or out.prof_dir
    except ProfilingError:
        r.warn("prof_dir", prof_dir, out.prof_dir, "a directory path without '..' or shell characters")
    ranks = doc.get("rank_list", [])
    if not isinstance(ranks, list) or any(isinstance(x, bool) or not isinstance(x, int) or x < 0
                                          for x in ranks):
        r.warn("rank_list", ranks, [], "a list of rank ids >= 0")
    else:
        out.rank_list = list(dict.fromkeys(ranks))
    meta = doc.get("metadata", {})
    if not isinstance(meta, dict):
        r.warn("metadata", meta, {}, "a JSON object")
    else:
        out.metadata = meta
    exp = doc.get("experimental_config", {})
    if not isinstance(exp, Mapping):
        r.warn("experimental_config", exp, {}, "a JSON object")
        exp = {}
    out.config, exp_warnings = from_experimental(exp, f"{where}: experimental_config")
    out.config.output = out.prof_dir
    out.config.source = "profiler_config.json"
    return out, r.warnings + exp_warnings


def load_profiler_config(path: str | os.PathLike[str]) -> tuple[DynamicProfilerConfig | None, list[str]]:
    """Read and parse a profiler_config.json; an unreadable file gives ``(None, [warning])``."""
    from openmsprof.config.acl_json import read_config_file

    try:
        data = read_config_file(path, "profiler_config.json")
    except ProfilingError as exc:
        return None, [f"{exc}; file ignored"]
    return parse_profiler_config(data, f"profiler_config.json {os.fspath(path)}")
