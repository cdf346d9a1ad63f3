"""Host CPU and memory sampling in a sidecar process (docs/guide.md §1).

The sampler is a separate process (``sampler_proc.py``, run by path so it starts in a few tens
of milliseconds without importing the package) so that a busy GIL in the profiled application
cannot starve it.  It reads ``/proc`` at the configured frequency and appends COUNTER records to
``host/data/HostSampler.records.host.slice_*``; it takes one sample at start (stop waits for it,
up to ``READY_TIMEOUT_S``), one last sample when stopped, and exits when its parent dies
(SIGKILL included).
"""

from __future__ import annotations

import importlib.util
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

from openmsprof.recorder import session

_proc: subprocess.Popen[bytes] | None = None
#: how long stop waits for a sampler still starting (a loaded machine) before its SIGTERM
READY_TIMEOUT_S = 5.0


def wanted(config: object) -> tuple[bool, bool]:
    """(cpu, mem) sampling asked for by host_sys_usage or host_sys."""
    usage = set(getattr(config, "host_sys_usage", []) or [])
    sys_ = set(getattr(config, "host_sys", []) or [])
    return ("cpu" in usage or "cpu" in sys_), ("mem" in usage or "mem" in sys_)


def _psutil_dir() -> str | None:
    """Where psutil is installed (the sampler runs with ``-S`` and imports it from there)."""
    spec = importlib.util.find_spec("psutil")
    if spec is None or not spec.origin:
        return None
    return str(Path(spec.origin).resolve().parent.parent)


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
    lib = _psutil_dir()
    if lib:
        cmd += ["--lib", lib]
    try:
        _proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
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
        if p.stdout is not None:  # its first sample first: a short session still gets one
            ready, _, _ = select.select([p.stdout], [], [], READY_TIMEOUT_S)
            if not ready:
                s.note(f"host sampler not ready after {READY_TIMEOUT_S:g} s; stopped without "
                       "its first sample", warn=True)
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=3)
    except Exception:
        p.kill()
    finally:
        if p.stdout is not None:
            p.stdout.close()


session.add_listener(_on_start, _on_stop)
