"""Host CPU and memory sampling in a sidecar process (SPEC §4.5).

The sampler runs as ``python -m openmsprof.sources.host_sampler`` so that a busy GIL in the
profiled application cannot starve it.  It reads ``/proc`` (psutil elsewhere) at the configured
frequency and appends COUNTER records to ``host/data/HostSampler.records.host.slice_*``; it exits
when stopped, when its parent dies (SIGKILL included) or on SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from openmsprof.collect import session
from openmsprof.collect.rawfile import SliceWriter
from openmsprof.collect.records import COUNTER, RECORDS_MAGIC, Kind, Series

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
    cmd = [sys.executable, "-m", "openmsprof.sources.host_sampler", "--data", str(s.job.host_data),
           "--pid", str(os.getpid()), "--freq", str(freq), "--what", what]
    env = dict(os.environ)
    src_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        _proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, close_fds=True, env=env)
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


# ------------------------------------------------------------------------ sidecar process


class _ProcReader:
    """Counter values from /proc (Linux); psutil otherwise."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.ncpu = os.cpu_count() or 1
        self.prev_cpu: list[tuple[int, int]] | None = None
        self.prev_proc: tuple[int, float] | None = None
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def cpu(self) -> list[tuple[int, float]]:
        """[(cpu id + 1 or 0 for all, busy %)] since the previous call."""
        rows: list[tuple[int, int]] = []
        with open("/proc/stat", "rb") as f:
            for line in f:
                if not line.startswith(b"cpu"):
                    break
                parts = line.split()
                vals = [int(x) for x in parts[1:]]
                idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
                rows.append((sum(vals), idle))
        out: list[tuple[int, float]] = []
        if self.prev_cpu is not None and len(self.prev_cpu) == len(rows):
            for i, ((tot, idle), (ptot, pidle)) in enumerate(zip(rows, self.prev_cpu, strict=False)):
                dt = tot - ptot
                out.append((i, 100.0 * (dt - (idle - pidle)) / dt if dt > 0 else 0.0))
        self.prev_cpu = rows
        return out

    def proc_cpu(self) -> float | None:
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            return None
        ticks = int(fields[11]) + int(fields[12])
        now = time.monotonic()
        prev, self.prev_proc = self.prev_proc, (ticks, now)
        if prev is None or now <= prev[1]:
            return None
        return 100.0 * (ticks - prev[0]) / self.tick / (now - prev[1])

    def mem(self) -> tuple[int, int, int]:
        """(total KB, used KB, process RSS KB)."""
        info: dict[bytes, int] = {}
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                k, v = line.split(b":", 1)
                info[k] = int(v.split()[0])
        total = info.get(b"MemTotal", 0)
        used = total - info.get(b"MemAvailable", info.get(b"MemFree", 0))
        rss = 0
        try:
            with open(f"/proc/{self.pid}/statm", "rb") as f:
                rss = int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
        except OSError:
            pass
        return total, used, rss


def run_sidecar(data: Path, pid: int, freq: int, cpu: bool, mem: bool, max_seconds: float = 7 * 86400) -> int:
    """Sample until the parent dies or SIGTERM.  Returns the number of samples."""
    stop = False

    def _term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _term)
    parent = pid  # the profiled process is our parent; compare with the pid we were given, so
    # a parent killed before this line ran is still noticed
    writer = SliceWriter(data, "HostSampler", "records", "host", RECORDS_MAGIC)
    reader = _ProcReader(pid)
    period = 1.0 / freq
    pack = COUNTER.pack
    n = 0
    reader.cpu()
    reader.proc_cpu()
    deadline = time.monotonic() + max_seconds
    next_t = time.monotonic() + period
    try:
        while not stop and os.getppid() == parent and time.monotonic() < deadline:
            time.sleep(max(0.0, next_t - time.monotonic()))
            next_t += period
            ts = time.perf_counter_ns()
            out = bytearray()
            if cpu:
                for sub, pct in reader.cpu():
                    out += pack(Kind.COUNTER, 0, 0, 0, ts, pct, Series.SYS_CPU_PERCENT, sub)
                pc = reader.proc_cpu()
                if pc is not None:
                    out += pack(Kind.COUNTER, 0, 0, 0, ts, pc, Series.PROC_CPU_PERCENT, 0)
            if mem:
                total, used, rss = reader.mem()
                out += pack(Kind.COUNTER, 0, 0, 0, ts, float(total), Series.SYS_MEM_TOTAL_KB, 0)
                out += pack(Kind.COUNTER, 0, 0, 0, ts, float(used), Series.SYS_MEM_USED_KB, 0)
                out += pack(Kind.COUNTER, 0, 0, 0, ts, float(rss), Series.PROC_RSS_KB, 0)
            writer.write(out)
            n += 1
    except OSError:
        pass  # disk full or job removed: stop quietly, what was written stays
    finally:
        writer.close()
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="openmsprof-host-sampler")
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--pid", required=True, type=int)
    ap.add_argument("--freq", type=int, default=50)
    ap.add_argument("--what", default="cpu,mem")
    a = ap.parse_args(argv)
    what = set(a.what.split(","))
    run_sidecar(a.data, a.pid, a.freq, "cpu" in what, "mem" in what)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
