"""The collect switches: CLI values → :class:`ProfileConfig` → acl.json + child environment.

Defaults follow seed 002 (SVP ``msprof.pyc collect``: ``switch`` and ``acl_api`` on, ``interval``
0) except for the two NPU-only switches: ``aicpu`` (seed: on) and ``aic_metrics`` (seed:
ArithmeticUtilization) default to off / AiCoreNone, because a machine without those units could
only report them unsupported on every run; asking for them explicitly records that note in the
job.  A collected program also gets host CPU/memory usage and mstx markers, so a plain Python
program with no acl calls still yields data.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import orjson

from openmsprof.config.errors import ConfigError
from openmsprof.config.model import AICORE_METRICS, HOST_SYS_USAGE_VALUES, ProfileConfig
from openmsprof.config.validate import validate

#: Path of the acl.json written for the program; ``openmsprof.acl.init`` honours it.
ACL_JSON_ENV = "OPENMSPROF_ACL_JSON"
#: JSON ProfileConfig (or a path to one) read by ``openmsprof/_bootstrap/sitecustomize.py``.
AUTOSTART_ENV = "OPENMSPROF_AUTOSTART"
#: The PYTHONPATH entry added for the child, so the bootstrap can remove exactly it again.
BOOTSTRAP_ENV = "OPENMSPROF_BOOTSTRAP_DIR"

_FIELDS = {f.name: f for f in dataclasses.fields(ProfileConfig)}


def on_off(value: str | bool, flag: str) -> bool:
    """``on``/``off`` (also true/false, 1/0) → bool; anything else is a one-line ConfigError."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("on", "true", "1", "yes"):
        return True
    if text in ("off", "false", "0", "no"):
        return False
    raise ConfigError(f"{flag} {value!r} is not valid; use on or off")


def build_config(*, switch: str | bool = "on", acl_api: str | bool = "on", aicpu: str | bool = "off",
                 aic_metrics: str = "AiCoreNone", interval: int | str = 0,
                 host_sys_usage: str = "cpu,mem", output: str | None = None,
                 base: ProfileConfig | None = None) -> ProfileConfig:
    """Validate the collect flags and lay them over ``base`` (default: a fresh ProfileConfig)."""
    if aic_metrics not in AICORE_METRICS:
        raise ConfigError(f"--aic_metrics {aic_metrics!r} is not valid; allowed: {', '.join(AICORE_METRICS)}")
    try:
        n = int(interval)
    except (TypeError, ValueError):
        raise ConfigError(f"--interval {interval!r} is not an integer") from None
    if n < 0:
        raise ConfigError(f"--interval {n} must be >= 0")
    usage = [u.strip() for u in host_sys_usage.split(",") if u.strip()] if host_sys_usage else []
    for u in usage:
        if u not in HOST_SYS_USAGE_VALUES:
            raise ConfigError(f"--host_sys_usage {u!r} is not valid; allowed: {', '.join(HOST_SYS_USAGE_VALUES)}")
    cfg = base if base is not None else ProfileConfig()
    cfg = cfg.replace(switch=on_off(switch, "--switch"), acl_api=on_off(acl_api, "--acl_api"),
                      aicpu=on_off(aicpu, "--aicpu"), aic_metrics=aic_metrics, interval=n,
                      host_sys_usage=usage, output=output, source="collect")
    return validate(cfg, "openmsprof collect")


def config_from_dict(data: dict[str, Any]) -> ProfileConfig:
    """Rebuild a ProfileConfig from :meth:`ProfileConfig.to_dict` output (unknown keys ignored,
    so a newer host may drive an older board)."""
    if not isinstance(data, dict):
        raise ConfigError(f"profile config must be a JSON object, got {type(data).__name__}")
    known = {k: v for k, v in data.items() if k in _FIELDS}
    try:
        return ProfileConfig(**known)
    except TypeError as exc:
        raise ConfigError(f"profile config is not valid: {exc}") from None


def load_config_file(path: str | os.PathLike[str]) -> ProfileConfig:
    """Read a JSON ProfileConfig written by :func:`dump_config` (the remote side of collect)."""
    p = Path(path)
    try:
        data = orjson.loads(p.read_bytes())
    except OSError as exc:
        raise ConfigError(f"profile config {str(p)!r} cannot be read: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"profile config {str(p)!r} is not valid JSON: {exc}") from None
    return config_from_dict(data)


def dump_config(config: ProfileConfig) -> bytes:
    return orjson.dumps(config.to_dict())


def _onoff(flag: bool) -> str:
    return "on" if flag else "off"


def acl_json(config: ProfileConfig) -> dict[str, Any]:
    """The acl.json document (``{"profiler": {...}}``, docs/formats.md §7.2 keys) for ``config``."""
    try:
        from openmsprof.config.acl_json import to_acl_json
    except ImportError:
        return _acl_json(config)
    return to_acl_json(config)


def _acl_json(config: ProfileConfig) -> dict[str, Any]:
    prof: dict[str, Any] = {
        "switch": _onoff(config.switch),
        "acl_api": _onoff(config.acl_api),
        "aicpu": _onoff(config.aicpu),
        "aic_metrics": config.aic_metrics,
        "interval": str(config.interval),
        "task_time": config.task_time,
        "runtime_api": _onoff(config.runtime_api),
        "msproftx": _onoff(config.msproftx),
    }
    if config.output:
        prof["output"] = config.output
    if config.host_sys_usage:
        prof["host_sys_usage"] = ",".join(config.host_sys_usage)
        prof["host_sys_usage_freq"] = str(config.host_sys_usage_freq)
    if config.storage_limit_mb is not None:
        prof["storage_limit"] = f"{config.storage_limit_mb}MB"
    return {"profiler": prof}


def bootstrap_dir() -> Path:
    """The directory holding the autostart ``sitecustomize.py``."""
    from openmsprof import _bootstrap

    return Path(_bootstrap.__file__).resolve().parent


def child_env(base: dict[str, str], config: ProfileConfig, acl_path: Path) -> dict[str, str]:
    """The environment for the profiled program: acl.json path, autostart config, bootstrap on
    PYTHONPATH (first).  With ``switch`` off only the acl.json (switch off) is set."""
    env = dict(base)
    env[ACL_JSON_ENV] = str(acl_path)
    if not config.switch:
        env.pop(AUTOSTART_ENV, None)
        return env
    boot = str(bootstrap_dir())
    env[AUTOSTART_ENV] = dump_config(config).decode()
    env[BOOTSTRAP_ENV] = boot
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = boot + (os.pathsep + old if old else "")
    return env
