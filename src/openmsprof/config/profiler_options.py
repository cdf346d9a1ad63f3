"""The ``"profiler"`` option keys shared by acl.json (docs/formats.md §7.2) and PROFILING_OPTIONS / TF
``profiling_options`` (§7.3): one table-driven parser and its inverse.

Values are the documents' strings (``"on"``/``"off"``, ``"cpu,mem"``, ``"{N}MB"``); numbers may be
JSON integers or decimal strings.  Anything else is a one-line :class:`ConfigError` naming the key,
the value and the allowed values.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

from openmsprof.config.capabilities import check
from openmsprof.config.errors import ConfigError, ConfigPathError, PathError
from openmsprof.config.model import STORAGE_LIMIT_MAX_MB, ProfileConfig
from openmsprof.config.paths import resolve_output
from openmsprof.config.validate import (
    CUSTOM_REG_MAX_ACL,
    CUSTOM_REG_MAX_TF,
    FREQ_RANGES,
    HOST_SYS_USAGE_FREQ_RANGE,
    INTERVAL_MAX,
    bad,
    need_metrics,
    show,
    validate,
)

Dialect = Literal["acl", "tf", "cli"]
STORAGE_LIMIT_MIN_MB = 200
ON_OFF = ("on", "off")
ACL_HOST_SYS = ("cpu", "mem", "disk", "network", "osrt")
_SOURCES = {"acl": "acl.json", "tf": "profiling_options", "cli": "command line"}
S2_METRICS = "ArithmeticUtilization"
_STORAGE_RE = re.compile(r"^([0-9]{1,12})MB$")

#: option key → (ProfileConfig field, kind).  kinds: onoff, choice:<a|b>, int:<lo>:<hi>, ...
_KEYS: dict[str, tuple[str, str]] = {
    "switch": ("switch", "onoff"),
    "output": ("output", "path"),
    "storage_limit": ("storage_limit_mb", "storage"),
    "task_time": ("task_time", "choice:on|off|l0|l1"),
    "aic_metrics": ("aic_metrics", "metrics"),
    "aicpu": ("aicpu", "onoff"),
    "l2": ("l2", "onoff"),
    "msproftx": ("msproftx", "onoff"),
    "hccl": ("hccl", "onoff"),
    "ge_api": ("ge_api", "choice:off|l0|l1"),
    "ascendcl": ("acl_api", "onoff"),
    "acl_api": ("acl_api", "onoff"),
    "runtime_api": ("runtime_api", "onoff"),
    "llc_profiling": ("llc_profiling", "choice:read|write"),
    "host_sys": ("host_sys", "list:" + "|".join(ACL_HOST_SYS)),
    "host_sys_usage": ("host_sys_usage", "list:cpu|mem"),
    "host_sys_usage_freq": ("host_sys_usage_freq", "int:{}:{}".format(*HOST_SYS_USAGE_FREQ_RANGE)),
    "interval": ("interval", f"int:0:{INTERVAL_MAX}"),
    "aacpu": ("aicpu", "onoff"),
    "aac_metrics": ("aic_metrics", "s2metrics"),
    **{k: (k, "freq:{}:{}".format(*r)) for k, r in FREQ_RANGES.items()},
}
_TF_KEYS: dict[str, tuple[str, str]] = {
    "training_trace": ("training_trace", "onoff"),
    "task_trace": ("task_time", "choice:on|off|l0|l1"),
    "fp_point": ("fp_point", "text"),
    "bp_point": ("bp_point", "text"),
}


def _keys(dialect: Dialect) -> dict[str, tuple[str, str]]:
    if dialect == "tf":
        return {**_KEYS, **_TF_KEYS}
    if dialect == "cli":
        return {**_KEYS, "training_trace": _TF_KEYS["training_trace"]}
    return _KEYS


def allowed_keys(dialect: Dialect) -> list[str]:
    return sorted(_keys(dialect))


def option_table(dialect: Dialect) -> dict[str, tuple[str, str]]:
    """Every key ``dialect`` accepts → (the ProfileConfig field it sets, its value kind)."""
    return dict(_keys(dialect))


def _int(where: str, key: str, value: Any, lo: int, hi: int) -> int:
    n: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 12:
        n = int(value)
    if n is None or not lo <= n <= hi:
        raise bad(where, key, value, f"an integer in [{lo}, {hi}]")
    return n


def _value(where: str, key: str, kind: str, value: Any, dialect: Dialect) -> Any:
    """Convert one option value to its ProfileConfig field value."""
    name, _, arg = kind.partition(":")
    if name == "s2metrics":  # seed 002: any value but ArithmeticUtilization collects nothing
        return S2_METRICS if value == S2_METRICS else "AiCoreNone"
    if name == "onoff" and dialect == "acl" and key.endswith("switch"):
        return value == "on"  # seed 002: a missing switch or any value but "on" = profiling off
    if name == "onoff":
        if value not in ON_OFF or not isinstance(value, str):
            raise bad(where, key, value, "on, off")
        return value == "on"
    if name == "choice":
        choices = arg.split("|")
        if not isinstance(value, str) or value not in choices:
            raise bad(where, key, value, ", ".join(choices))
        return value
    if name == "list":
        choices = arg.split("|")
        if not isinstance(value, str):
            raise bad(where, key, value, f"a comma list of {', '.join(choices)}")
        items = [v.strip() for v in value.split(",")]
        if value.strip() == "":
            return []
        for item in items:
            if item not in choices:
                raise bad(where, key, value, f"a comma list of {', '.join(choices)}")
        return list(dict.fromkeys(items))
    if name in ("int", "freq"):
        lo, hi = (int(x) for x in arg.split(":"))
        return _int(where, key, value, lo, hi)
    if name == "storage":
        m = _STORAGE_RE.match(value) if isinstance(value, str) else None
        n = int(m.group(1)) if m else -1
        if not STORAGE_LIMIT_MIN_MB <= n <= STORAGE_LIMIT_MAX_MB:
            raise bad(where, key, value, f'"{{N}}MB" with N in [{STORAGE_LIMIT_MIN_MB}, {STORAGE_LIMIT_MAX_MB}]')
        return n
    if name == "metrics":
        reg_max = CUSTOM_REG_MAX_TF if dialect == "tf" else CUSTOM_REG_MAX_ACL
        return need_metrics(where, key, value, reg_max)
    if name == "path":
        if not isinstance(value, str):
            raise bad(where, key, value, "a directory path")
        try:
            return str(resolve_output(value, key))
        except PathError as exc:
            raise ConfigPathError(f"{where}: {exc}") from None
    if not isinstance(value, str) or len(value) > 1024 or not value.isprintable():
        raise bad(where, key, value, "an operator name ('' = automatic)")
    return value


def parse_options(section: Mapping[str, Any], where: str, dialect: Dialect, *,
                  key_prefix: str = "") -> ProfileConfig:
    """Map the option keys of ``section`` onto a validated :class:`ProfileConfig`.

    ``switch`` defaults to off for acl.json (on for TF options and the command line, which are
    enabled by the caller); acl.json and TF options without ``output`` write to the current
    directory (decision 10), the command line leaves it to the caller.
    """
    if not isinstance(section, Mapping):
        raise bad(where, key_prefix.rstrip(".") or "options", section, "a JSON object of option keys")
    keys = _keys(dialect)
    s2 = "aacpu" in section or "aac_metrics" in section
    cfg = ProfileConfig(switch=dialect != "acl", acl_api=True, runtime_api=False, task_time="on",
                        aic_metrics="AiCoreNone" if s2 else "PipeUtilization", aicpu=s2,
                        msproftx=False, source=_SOURCES[dialect])
    seen: dict[str, tuple[str, Any]] = {}
    for key, value in section.items():
        if not isinstance(key, str) or key not in keys:
            raise ConfigError(f"{where}: unknown key {key_prefix + str(key)!r}; allowed keys: "
                              + ", ".join(allowed_keys(dialect)))
        field, kind = keys[key]
        converted = _value(where, key_prefix + key, kind, value, dialect)
        if field in seen and seen[field][1] != converted:
            other = seen[field][0]
            raise bad(where, key_prefix + key, value,
                      f"the same value as {key_prefix}{other} ({section[other]!r}), which sets it too")
        seen[field] = (key, converted)
        if kind == "s2metrics" and value not in (S2_METRICS, "AiCoreNone"):
            cfg.notes.append(f"{where}: {key_prefix}{key}={show(value)} is not {S2_METRICS}; "
                             "no AI Core metrics are collected")
        setattr(cfg, field, converted)
    cfg.explicit = sorted({f for f, _ in (keys[k] for k in section)})
    if "output" not in section and dialect != "cli":
        try:
            cfg.output = os.getcwd()
        except OSError as exc:
            raise ConfigError(f"{where}: no output given and the current directory is "
                              f"unusable ({exc.strerror})") from None
        cfg.notes.append(f"{where}: no output given; writing to the current directory {cfg.output!r}")
    return check(validate(cfg, where, min_storage_mb=STORAGE_LIMIT_MIN_MB))


def _onoff(v: bool) -> str:
    return "on" if v else "off"


_FIELD_WRITERS: dict[str, Callable[[ProfileConfig], Any]] = {
    "switch": lambda c: _onoff(c.switch),
    "task_time": lambda c: c.task_time,
    "aic_metrics": lambda c: c.aic_metrics,
    "aicpu": lambda c: _onoff(c.aicpu),
    "l2": lambda c: _onoff(c.l2),
    "msproftx": lambda c: _onoff(c.msproftx),
    "hccl": lambda c: _onoff(c.hccl),
    "ge_api": lambda c: c.ge_api,
    "ascendcl": lambda c: _onoff(c.acl_api),
    "runtime_api": lambda c: _onoff(c.runtime_api),
    "llc_profiling": lambda c: c.llc_profiling,
    "host_sys_usage_freq": lambda c: str(c.host_sys_usage_freq),
    "interval": lambda c: str(c.interval),
}


def to_options(cfg: ProfileConfig, dialect: Dialect) -> dict[str, str]:
    """The option keys (document spellings, string values) that :func:`parse_options` maps back
    to ``cfg``.  Raises :class:`ConfigError` for a value these files cannot express."""
    where = "acl.json" if dialect == "acl" else "PROFILING_OPTIONS"
    if cfg.task_time not in ("on", "off", "l0", "l1"):
        raise bad(where, "task_time", cfg.task_time, "on, off, l0, l1 in this file")
    if not set(cfg.host_sys) <= set(ACL_HOST_SYS):
        raise bad(where, "host_sys", cfg.host_sys, ", ".join(ACL_HOST_SYS))
    need_metrics(where, "aic_metrics", cfg.aic_metrics,
                 CUSTOM_REG_MAX_TF if dialect == "tf" else CUSTOM_REG_MAX_ACL)
    out = {key: write(cfg) for key, write in _FIELD_WRITERS.items()}
    if dialect == "tf":
        out["task_trace"] = out.pop("task_time")
        out["training_trace"] = _onoff(cfg.training_trace)
        out["fp_point"], out["bp_point"] = cfg.fp_point, cfg.bp_point
    if cfg.output is not None:
        out["output"] = cfg.output
    if cfg.storage_limit_mb is not None:
        out["storage_limit"] = f"{cfg.storage_limit_mb}MB"
    if cfg.host_sys:
        out["host_sys"] = ",".join(cfg.host_sys)
    if cfg.host_sys_usage:
        out["host_sys_usage"] = ",".join(cfg.host_sys_usage)
    for key in FREQ_RANGES:
        if getattr(cfg, key) is not None:
            out[key] = str(getattr(cfg, key))
    return out
