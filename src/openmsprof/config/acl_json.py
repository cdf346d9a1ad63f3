"""acl.json ``"profiler"`` section → :class:`ProfileConfig` (docs/formats.md §7.2, S2 spellings included).

``load_acl_json(path)`` returns None when the file has no ``"profiler"`` section or its switch is
not ``"on"`` (seed 002: any other value means off; the other keys' mistakes are then warnings,
one line each, since the application must run); every other problem (unreadable file, invalid JSON, wrong types, unknown keys, bad values,
hostile output paths) is a one-line :class:`ConfigError` / :class:`PathError` naming the file.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from openmsprof.config.errors import ConfigError, ConfigPathError, PathError
from openmsprof.config.model import ProfileConfig
from openmsprof.config.paths import check_path_text, find_symlink
from openmsprof.config.profiler_options import parse_options, to_options
from openmsprof.config.validate import bad, show
from openmsprof.fileio.read_guard import MAX_JSON_DEPTH, JSONTooDeep, parse_bounded, read_regular

log = logging.getLogger("openmsprof.config")

#: acl.json files larger than this are refused (a config file, not data).
MAX_ACL_JSON_BYTES = 10 * 1024 * 1024


def parse_profiler_section(section: Mapping[str, Any], where: str = "acl.json") -> ProfileConfig:
    """Map a ``"profiler"`` object onto a validated config (``switch`` False unless "on")."""
    return parse_options(section, where, "acl", key_prefix="profiler.")


def parse_acl_json_bytes(data: bytes, where: str = "acl.json") -> ProfileConfig | None:
    """Parse the text of an acl.json; None without a profiler section or with switch off."""
    if not data.strip():
        return None
    try:
        doc = parse_bounded(data, MAX_JSON_DEPTH)  # the read guard's depth bound, as every reader
    except JSONTooDeep:
        raise ConfigError(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels; refused") from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(
            f"{where}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    if not isinstance(doc, dict):
        raise bad(where, "top level", type(doc).__name__, "a JSON object")
    section = doc.get("profiler")
    if section is None:
        return None
    if not isinstance(section, dict):
        raise bad(where, "profiler", section, "a JSON object of profiler keys")
    if section.get("switch") != "on":
        # seed 002: "如果缺失该参数或参数值不为on,则表示关闭Profiling" -- nothing else is read
        if "switch" in section and section["switch"] != "off":
            log.warning("openmsprof: %s: profiler.switch=%s is not \"on\"; profiling off", where,
                        show(section["switch"]))
        try:  # the other keys are still checked, and their mistakes said, but never fatal
            parse_profiler_section(section, where)
        except ConfigError as exc:
            log.warning("openmsprof: %s (ignored: profiling is off)", exc)
        return None
    cfg = parse_profiler_section(section, where)
    return cfg if cfg.switch else None


def read_config_file(path: str | os.PathLike[str], what: str,
                     limit: int = MAX_ACL_JSON_BYTES) -> bytes:
    """Read a small config file safely (no symlinks, size-capped); errors name the file."""
    text = os.fspath(path)
    try:
        check_path_text(text, what)
    except PathError as exc:
        raise ConfigPathError(str(exc)) from None
    link = find_symlink(Path(os.path.abspath(text)))
    if link is not None:
        raise ConfigPathError(f"{what} {text!r} goes through a symbolic link at {str(link)!r}; refused")
    return read_regular(text, what, limit, ConfigError)


def load_acl_json(path: str | os.PathLike[str]) -> ProfileConfig | None:
    """The profiling config of the acl.json at ``path``, or None when it does not enable profiling."""
    data = read_config_file(path, "acl.json")
    return parse_acl_json_bytes(data, f"acl.json {os.fspath(path)}")


def to_acl_json(cfg: ProfileConfig) -> dict[str, Any]:
    """``{"profiler": {...}}`` that loads back as ``cfg`` (for writing an acl.json for a child)."""
    return {"profiler": to_options(cfg, "acl")}
