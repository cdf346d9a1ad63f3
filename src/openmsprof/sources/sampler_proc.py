"""The host sampler process: ``python -S -E sampler_proc.py --data DIR --pid PID ...``.

Standard library only and run by path, so it starts in milliseconds; the record layout comes from
``recorder/records.py`` loaded by file path (that module imports nothing but ``struct`` and
``enum``).  It samples /proc at ``--freq`` Hz, appends COUNTER records to
``DIR/HostSampler.records.host.slice_{n}`` (0640, O_EXCL|O_NOFOLLOW): one sample at start (then
it writes ``R`` to stdout), one per period, one last on SIGTERM (so even a short session has a
reading at its start and its end), and exits when its parent dies.  Per process (the profiled
one and its descendants, by PID, through psutil when ``--lib`` lets it import): CPU % of one core
and RSS, the PID as the COUNTER sub index.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

_spec = importlib.util.spec_from_file_location(
    "_omsp_records", Path(__file__).resolve().parents[1] / "recorder" / "records.py")
assert _spec is not None and _spec.loader is not None
records: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(records)

SLICE_BYTES = 64 * 1024 * 1024
#: the first sample's CPU interval (seconds; shorter than the period at low frequencies)
FIRST_INTERVAL_S = 0.01
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)


class Writer:
    """Append-only slices with the raw file header; rotates at 64 MB."""

    def __init__(self, data: Path) -> None:
        self.data, self.index, self.fd, self.size = data, -1, -1, 0

    def write(self, buf: bytes) -> None:
        if self.fd < 0 or self.size + len(buf) > SLICE_BYTES:
            self.close()
            self.index += 1
            self.path = self.data / f"HostSampler.records.host.slice_{self.index}"
            self.fd = os.open(self.path, _FLAGS, 0o640)
            os.fchmod(self.fd, 0o640)
            head = records.HEADER.pack(records.RECORDS_MAGIC, records.FORMAT_VERSION, records.RECORD_SIZE, 0)
            os.write(self.fd, head)
            self.size = len(head)
        os.write(self.fd, buf)
        self.size += len(buf)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            done = os.open(str(self.path) + ".done", _FLAGS, 0o640)
            os.fchmod(done, 0o640)
            os.close(done)


class ProcReader:
    """Counter values from /proc."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.prev_cpu: list[tuple[int, int]] | None = None
        self.prev_proc: tuple[int, float] | None = None
        self.tick = os.sysconf("SC_CLK_TCK")
        self.page_kb = os.sysconf("SC_PAGE_SIZE") // 1024

    def cpu(self) -> list[tuple[int, float]]:
        """[(cpu id + 1, or 0 for all; busy %)] since the previous call."""
        rows: list[tuple[int, int]] = []
        with open("/proc/stat", "rb") as f:
            for line in f:
                if not line.startswith(b"cpu"):
                    break
                vals = [int(x) for x in line.split()[1:]]
                rows.append((sum(vals), vals[3] + (vals[4] if len(vals) > 4 else 0)))
        out: list[tuple[int, float]] = []
        if self.prev_cpu is not None and len(self.prev_cpu) == len(rows):
            for i, ((tot, idle), (ptot, pidle)) in enumerate(zip(rows, self.prev_cpu, strict=True)):
                dt = tot - ptot
                out.append((i, 100.0 * (dt - (idle - pidle)) / dt if dt > 0 else 0.0))
        self.prev_cpu = rows
        return out

    def proc_cpu(self) -> float | None:
        """CPU of the profiled process in % of one core since the previous call."""
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
                rss = int(f.read().split()[1]) * self.page_kb
        except OSError:
            pass
        return total, used, rss


class TreeReader:
    """CPU % (of one core) and RSS of the profiled process and its descendants (DataLoader
    workers, pool processes), per PID, through psutil; None where psutil cannot be imported."""

    def __init__(self, pid: int, psutil: Any) -> None:
        self.psutil, self.pid = psutil, pid
        self.known: dict[int, Any] = {}

    def read(self) -> list[tuple[int, float | None, int]]:
        """[(pid, cpu % since the previous read or None for a process first seen, rss KB)]."""
        ps = self.psutil
        try:
            root = self.known.get(self.pid) or ps.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except ps.Error:
            return []
        out: list[tuple[int, float | None, int]] = []
        seen: dict[int, Any] = {}
        for p in procs:
            old = self.known.get(p.pid)
            p = old if old is not None else p
            try:
                with p.oneshot():
                    if p.status() == ps.STATUS_ZOMBIE:  # exited, not yet reaped: no memory, no CPU
                        continue
                    pct = p.cpu_percent(None)
                    rss = p.memory_info().rss // 1024
            except ps.Error:
                continue
            seen[p.pid] = p
            out.append((p.pid, pct if old is not None else None, rss))
        self.known = seen
        return out


def _psutil(lib: str | None) -> Any:
    if lib:
        sys.path.insert(0, lib)
    try:
        import psutil
    except ImportError:
        return None
    return psutil


def sample(reader: ProcReader, cpu: bool, mem: bool, tree: TreeReader | None = None) -> bytes:
    """One round of COUNTER records; per-process series carry the PID as sub index."""
    pack, kind, series = records.COUNTER.pack, records.Kind.COUNTER, records.Series
    ts = time.perf_counter_ns()
    out = bytearray()
    procs = tree.read() if tree is not None else None
    if cpu:
        for sub, pct in reader.cpu():
            out += pack(kind, 0, 0, 0, ts, pct, series.SYS_CPU_PERCENT, sub)
        if procs is None:
            pc = reader.proc_cpu()
            if pc is not None:
                out += pack(kind, 0, 0, 0, ts, pc, series.PROC_CPU_PERCENT, reader.pid)
        else:
            for pid, ppct, _rss in procs:
                if ppct is not None:
                    out += pack(kind, 0, 0, 0, ts, ppct, series.PROC_CPU_PERCENT, pid)
    if mem:
        total, used, rss = reader.mem()
        out += pack(kind, 0, 0, 0, ts, float(total), series.SYS_MEM_TOTAL_KB, 0)
        out += pack(kind, 0, 0, 0, ts, float(used), series.SYS_MEM_USED_KB, 0)
        for pid, _pct, prss in procs if procs is not None else [(reader.pid, None, rss)]:
            out += pack(kind, 0, 0, 0, ts, float(prss), series.PROC_RSS_KB, pid)
    return bytes(out)


def _ready() -> None:
    """Tell the parent (our stdout, a pipe) that the first sample is written."""
    try:
        os.write(1, b"R")
    except OSError:
        pass  # no reader (started by hand, or the parent is gone)


def run(data: Path, pid: int, freq: int, cpu: bool, mem: bool, max_seconds: float = 7 * 86400,
        lib: str | None = None) -> int:
    """Sample until SIGTERM (one last sample) or until the parent dies.  Returns samples taken.
    ``lib``: the directory psutil is imported from (this process runs with ``-S``)."""
    stop = False

    def _term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _term)
    writer = Writer(data)
    reader = ProcReader(pid)
    ps = _psutil(lib)
    tree = TreeReader(pid, ps) if ps is not None else None
    reader.cpu()
    reader.proc_cpu()
    if tree is not None:
        tree.read()
    period = 1.0 / freq
    n = 0
    deadline = time.monotonic() + max_seconds
    try:
        # the sample at start (CPU over a first short interval), then "ready" on stdout: the
        # session waits for it before its SIGTERM, so a short session has both samples
        time.sleep(min(period, FIRST_INTERVAL_S))
        writer.write(sample(reader, cpu, mem, tree))
        n += 1
        _ready()
    except OSError:
        writer.close()
        return n
    next_t = time.monotonic() + period
    try:
        # ``pid`` is our parent: compare with it, so a parent killed before we started is noticed
        while not stop and os.getppid() == pid and time.monotonic() < deadline:
            time.sleep(max(0.0, next_t - time.monotonic()))
            next_t += period
            writer.write(sample(reader, cpu, mem, tree))
            n += 1
        if stop:
            writer.write(sample(reader, cpu, mem, tree))
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
    ap.add_argument("--lib", default=None, help="directory holding psutil (per-process usage)")
    a = ap.parse_args(argv)
    what = set(a.what.split(","))
    run(a.data, a.pid, max(1, a.freq), "cpu" in what, "mem" in what, lib=a.lib)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
