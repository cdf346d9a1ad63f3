"""Facts about the machine a run used, for the rows that state them: host name / uid (HOST_INFO).
The CPU's clock is never written as an AI Core frequency (docs/formats.md decision 13).

Values recorded at collection (info.json ``hostname``/``hostUid``) win;
otherwise the exporting machine is asked (the usual case: export runs where collection ran).
"""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

__all__ = ["host_name", "host_uid"]

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


