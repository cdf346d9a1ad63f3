"""Validation of :class:`ProfileConfig` values; builds configs from keyword switches.

Every error is a one-line :class:`ConfigError` (or :class:`PathError` for the output path) of the
form ``{where}: {key}={value!r} is invalid; allowed: {allowed}`` where ``where`` names the entry
point (file path, environment variable, command line, Python call).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import Any

from openmsprof.config.capabilities import check
from openmsprof.config.errors import ConfigError, ConfigPathError, PathError
from openmsprof.config.model import (
    AICORE_METRICS,
    EXPORT_TYPES,
    GE_API_VALUES,
    HOST_SYS_USAGE_VALUES,
    HOST_SYS_VALUES,
    LLC_VALUES,
    META_FIELDS,
    PROFILER_LEVELS,
    STORAGE_LIMIT_MAX_MB,
    TASK_TIME_VALUES,
    ProfileConfig,
)
from openmsprof.config.paths import check_path_text

_FIELDS = {f.name for f in dataclasses.fields(ProfileConfig)}
_BOOLS = ("switch", "acl_api", "runtime_api", "aicpu", "l2", "hccl", "msproftx", "training_trace",
          "op_attr", "task_memory", "aicore_shape", "api_stats", "data_simplification",
          "record_op_args")
#: Optional frequencies (None = off) and their ranges in Hz (docs/formats.md §7.2).
FREQ_RANGES: dict[str, tuple[int, int]] = {
    "sys_hardware_mem_freq": (1, 100),
    "sys_io_sampling_freq": (1, 100),
    "dvpp_freq": (1, 100),
    "sys_interconnection_freq": (1, 50),
    "instr_profiling_freq": (300, 30000),
}
HOST_SYS_USAGE_FREQ_RANGE = (1, 50)
INTERVAL_MAX = 4294967295
MAX_CUSTOM_REGS = 8
CUSTOM_REG_MAX_ACL = 0x7FFFFFFF
CUSTOM_REG_MAX_TF = 0x6E


def show(value: Any) -> str:
    """``repr`` of a user value, shortened to stay on one readable line (a value too deep or an
    integer too long for ``repr`` shows its type)."""
    try:
        text = repr(value)
    except (RecursionError, ValueError, MemoryError):
        text = f"<{type(value).__name__}>"
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:200])
    return text if len(text) <= 80 else text[:77] + "..."


def bad(where: str, key: str, value: Any, allowed: str) -> ConfigError:
    """The standard one-line error naming entry point, key, value and what is allowed."""
    return ConfigError(f"{where}: {key}={show(value)} is invalid; allowed: {allowed}")


def need_bool(where: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise bad(where, key, value, "True or False")
    return value


def need_choice(where: str, key: str, value: Any, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if not isinstance(value, str) or value not in choices:
        raise bad(where, key, value, ", ".join(c if c else "''" for c in choices))
    return value


def need_int(where: str, key: str, value: Any, lo: int, hi: int, unit: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise bad(where, key, value, f"an integer in [{lo}, {hi}]{unit}")
    return value


def need_subset(where: str, key: str, value: Any, choices: Iterable[str]) -> list[str]:
    """A list of names from ``choices``; duplicates dropped, order kept."""
    choices = tuple(choices)
    if not isinstance(value, (list, tuple)):
        raise bad(where, key, value, f"a list of {', '.join(choices)}")
    out: list[str] = []
    for item in value:
        if not isinstance(item, str) or item not in choices:
            raise bad(where, key, item, ", ".join(choices))
        if item not in out:
            out.append(item)
    return out


def need_str_list(where: str, key: str, value: Any) -> list[str]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise bad(where, key, value, "a list of strings")
    return list(value)


def parse_custom_metrics(where: str, key: str, text: str, reg_max: int = CUSTOM_REG_MAX_ACL) -> str:
    """Check ``Custom:r1,r2,…`` (≤ 8 registers, hex or decimal, in [0x1, reg_max]); return it
    normalised as ``Custom:0x..,0x..``."""
    allowed = f"Custom: then 1 to {MAX_CUSTOM_REGS} registers in [0x1, {reg_max:#x}], hex or decimal"
    body = text[len("Custom:"):]
    regs = [r.strip() for r in body.split(",")]
    if not body.strip() or len(regs) > MAX_CUSTOM_REGS:
        raise bad(where, key, text, allowed)
    values: list[int] = []
    for reg in regs:
        try:
            n = int(reg, 16) if reg.lower().startswith("0x") else int(reg, 10)
        except ValueError:
            raise bad(where, key, text, allowed) from None
        if not 1 <= n <= reg_max:
            raise bad(where, key, text, allowed)
        values.append(n)
    return "Custom:" + ",".join(f"{n:#x}" for n in values)


def need_metrics(where: str, key: str, value: Any, reg_max: int = CUSTOM_REG_MAX_ACL) -> str:
    if isinstance(value, str) and value.startswith("Custom:"):
        return parse_custom_metrics(where, key, value, reg_max)
    if not isinstance(value, str) or value not in AICORE_METRICS:
        raise bad(where, key, value, ", ".join(AICORE_METRICS) + ", Custom:r1,...")
    return value


def need_output(where: str, key: str, value: Any) -> str | None:
    """Output path text: forbidden characters, lengths and ``..`` refused (:class:`ConfigPathError`)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad(where, key, value, "a path string")
    try:
        text = check_path_text(value, key)
    except PathError as exc:
        raise ConfigPathError(f"{where}: {exc}") from None
    if ".." in text.split("/"):
        raise ConfigPathError(f"{where}: {key} {text!r} contains a '..' component; give the directory without it")
    return text


def validate(cfg: ProfileConfig, where: str = "profiling config", *,
             min_storage_mb: int = 1) -> ProfileConfig:
    """Check every field of ``cfg`` (types, enums, ranges of docs/formats.md §7.2); return a normalised copy.

    ``min_storage_mb`` is 1 for the Python API (small limits are handy on small disks) and 200 in
    the file/CLI loaders, which parse ``storage_limit`` themselves.
    """
    w = where
    for name in _BOOLS:
        need_bool(w, name, getattr(cfg, name))
    out = need_output(w, "output", cfg.output)
    if not isinstance(cfg.devices, (list, tuple)):
        raise bad(w, "devices", cfg.devices, "a list of device ids")
    devices = [need_int(w, "devices", d, 0, 65535) for d in cfg.devices]
    if len(set(devices)) != len(devices):
        raise bad(w, "devices", cfg.devices, "distinct device ids")
    need_choice(w, "task_time", cfg.task_time, TASK_TIME_VALUES)
    metrics = need_metrics(w, "aic_metrics", cfg.aic_metrics)
    for name in ("fp_point", "bp_point"):
        if not isinstance(getattr(cfg, name), str):
            raise bad(w, name, getattr(cfg, name), "an operator name ('' = automatic)")
    need_choice(w, "ge_api", cfg.ge_api, GE_API_VALUES)
    need_choice(w, "llc_profiling", cfg.llc_profiling, LLC_VALUES)
    need_choice(w, "profiler_level", cfg.profiler_level, PROFILER_LEVELS)
    host_sys = need_subset(w, "host_sys", cfg.host_sys, HOST_SYS_VALUES)
    usage = need_subset(w, "host_sys_usage", cfg.host_sys_usage, HOST_SYS_USAGE_VALUES)
    need_int(w, "host_sys_usage_freq", cfg.host_sys_usage_freq, *HOST_SYS_USAGE_FREQ_RANGE, " Hz")
    for name, (lo, hi) in FREQ_RANGES.items():
        if getattr(cfg, name) is not None:
            need_int(w, name, getattr(cfg, name), lo, hi, " Hz (or None = off)")
    if cfg.storage_limit_mb is not None:
        need_int(w, "storage_limit_mb", cfg.storage_limit_mb, min_storage_mb, STORAGE_LIMIT_MAX_MB,
                 " MB (or None = unlimited)")
    need_int(w, "interval", cfg.interval, 0, INTERVAL_MAX)
    export = need_subset(w, "export_type", cfg.export_type, EXPORT_TYPES)
    if not export:
        raise bad(w, "export_type", cfg.export_type, "a non-empty list of text, db")
    include = need_str_list(w, "mstx_domain_include", cfg.mstx_domain_include)
    exclude = need_str_list(w, "mstx_domain_exclude", cfg.mstx_domain_exclude)
    g = cfg.gc_detect_threshold
    if g is not None and (isinstance(g, bool) or not isinstance(g, (int, float))
                          or not math.isfinite(g) or g < 0):
        raise bad(w, "gc_detect_threshold", g, "None or a number >= 0 (ms)")
    for name in ("unsupported", "notes", "explicit"):
        need_str_list(w, name, getattr(cfg, name))
    if not isinstance(cfg.source, str):
        raise bad(w, "source", cfg.source, "a string")
    return cfg.replace(output=out, devices=devices, aic_metrics=metrics, host_sys=host_sys,
                       host_sys_usage=usage, export_type=export, mstx_domain_include=include,
                       mstx_domain_exclude=exclude, unsupported=list(cfg.unsupported),
                       notes=list(cfg.notes), explicit=list(cfg.explicit))


def from_kwargs(**switches: Any) -> ProfileConfig:
    """Build a validated config from Python keyword switches (field names of ProfileConfig), with
    ``unsupported`` filled by :func:`~openmsprof.config.capabilities.check`."""
    allowed = sorted(_FIELDS - META_FIELDS)
    unknown = sorted(set(switches) - set(allowed))
    if unknown:
        raise ConfigError(
            f"Python switches: unknown profiling switch {unknown[0]!r}; allowed: {', '.join(allowed)}"
        )
    for name in ("host_sys", "host_sys_usage", "export_type"):
        if isinstance(switches.get(name), str):  # "cpu,mem" as on the command line
            switches[name] = [v.strip() for v in switches[name].split(",") if v.strip()]
    cfg = ProfileConfig(**switches)
    cfg.source = "python"
    cfg.explicit = sorted(switches)
    return check(validate(cfg, "Python switches"))
