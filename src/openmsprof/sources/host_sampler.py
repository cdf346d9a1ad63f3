"""Host CPU and memory sampling in a sidecar process (SPEC §4.5).

The sampler is a separate process (``sampler_proc.py``, run by path so it starts in a few tens
of milliseconds without importing the package) so that a busy GIL in the profiled application
cannot starve it.  It reads ``/proc`` at the configured frequency and appends COUNTER records to
``host/data/HostSampler.records.host.slice_*``; it takes one last sample when stopped, and exits
when its parent dies (SIGKILL included).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from openmsprof.recorder import session

_proc: subprocess.Popen[bytes] | None = None


def wanted(config: object) -> tuple[bool, bool]:
    """(cpu, mem) sampling asked for by host_sys_usage or host_sys."""
    usage = set(getattr(config, "host_sys_usage", []) or [])
    sys_ = set(getattr(config, "host_sys", []) or [])
    return ("cpu" in usage or "cpu" in sys_), ("mem" in usage or "mem" in sys_)


def _on_start(s: session.Session) -> None:
    global _proc
    cpu, mem = wanted(s.config)
    if not (cpu or mem):
        return
    what = ",".join(n for n, on in (("cpu", cpu), ("mem", mem)) if on)
    freq = max(1, min(int(s.config.host_sys_usage_freq or 50), 50))
    script = Path(__file__).with_name("sampler_proc.py")
    cmd = [sys.executable, "-S", "-E", str(script), "--data", str(s.job.host_data),
           "--pid", str(os.getpid()), "--freq", str(freq), "--what", what]
    try:
        _proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, close_fds=True)
        s.note(f"host sampler started ({what} at {freq} Hz, pid {_proc.pid})")
    except OSError as exc:
        s.note(f"host sampler could not start: {exc}", warn=True)


def _on_stop(s: session.Session) -> None:
    global _proc
    p, _proc = _proc, None
    if p is None:
        return
    try:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=3)
    except Exception:
        p.kill()


session.add_listener(_on_start, _on_stop)
