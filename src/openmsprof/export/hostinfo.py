"""Facts about the machine a run used, for the rows that state them: host name / uid (HOST_INFO)
and the CPU's nominal clock in MHz (a host fact: it is never written as an AI Core frequency,
docs/formats.md decision 13).

Values recorded at collection (info.json ``hostname``/``hostUid``/``CPU[0].Frequency``) win;
otherwise the exporting machine is asked (the usual case: export runs where collection ran).
"""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import psutil

__all__ = ["host_name", "host_uid", "nominal_mhz"]

_GHZ = re.compile(r"@\s*([0-9.]+)\s*GHz", re.I)


def host_name(info: dict[str, Any] | None = None) -> str:
    v = (info or {}).get("hostname")
    return str(v) if v else socket.gethostname()


def host_uid(info: dict[str, Any] | None = None) -> str:
    v = (info or {}).get("hostUid")
    if v:
        return str(v)
    try:
        return Path("/etc/machine-id").read_text().strip() or host_name(info)
    except OSError:
        return host_name(info)


def _recorded(info: dict[str, Any] | None) -> int:
    cpus = (info or {}).get("CPU")
    if isinstance(cpus, list) and cpus and isinstance(cpus[0], dict):
        try:
            return int(float(cpus[0].get("Frequency") or 0))
        except (TypeError, ValueError):
            return 0
    return 0


def _cpuinfo() -> int:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return 0
    m = _GHZ.search(text)
    if m:
        return int(float(m.group(1)) * 1000)
    m = re.search(r"^cpu MHz\s*:\s*([0-9.]+)", text, re.M)
    return int(float(m.group(1))) if m else 0


def nominal_mhz(info: dict[str, Any] | None = None) -> int:
    """The CPU's nominal (rated) frequency in MHz; 0 when nothing states it."""
    mhz = _recorded(info)
    if mhz > 0:
        return mhz
    try:
        f = psutil.cpu_freq()
    except (OSError, NotImplementedError, AttributeError):
        f = None
    if f is not None and f.max > 0:
        return int(f.max)
    return _cpuinfo() or (int(f.current) if f is not None and f.current > 0 else 0)
