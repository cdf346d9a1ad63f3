"""Output names (docs/formats.md §2 naming rule, job-level variant; see docs/formats.md).

Exports go to job-level folders ``JOB/summary/`` and ``JOB/timeline/``:
``summary/{name}_{dev}[_slice_{k}].csv|json`` and ``timeline/msprof_{dev}[_slice_{k}].json``,
``{dev}`` = device id or ``host``.  No timestamp, so re-export replaces files in place.
"""

from __future__ import annotations

import re
from pathlib import Path

SUMMARY_DIR = "summary"
TIMELINE_DIR = "timeline"
HOST = "host"


def dev_text(dev: int | str) -> str:
    """``host`` for the host side (str or negative id), else the device id."""
    if isinstance(dev, str):
        return dev
    return HOST if dev < 0 else str(dev)


def summary_file(name: str, dev: int | str, ext: str, slice_k: int | None = None) -> str:
    """``{name}_{dev}[_slice_{k}].{ext}``."""
    part = "" if slice_k is None else f"_slice_{slice_k}"
    return f"{name}_{dev_text(dev)}{part}.{ext}"


def timeline_file(dev: int | str, slice_k: int | None = None) -> str:
    """``msprof_{dev}[_slice_{k}].json``."""
    part = "" if slice_k is None else f"_slice_{slice_k}"
    return f"msprof_{dev_text(dev)}{part}.json"


def family(path: Path) -> re.Pattern[str]:
    """Pattern matching ``path``'s name and its ``_slice_{k}`` siblings (stale-file cleanup)."""
    stem, ext = path.stem, path.suffix
    return re.compile(rf"^{re.escape(stem)}(_slice_\d+)?{re.escape(ext)}$")


def remove_stale(written: list[Path], base: Path) -> None:
    """Delete files of ``base``'s family that this export did not write (old slices)."""
    keep = {p.name for p in written}
    pattern = family(base)
    if not base.parent.is_dir():
        return
    for p in base.parent.iterdir():
        if pattern.match(p.name) and p.name not in keep and not p.is_symlink():
            try:
                p.unlink()
            except OSError:
                pass
