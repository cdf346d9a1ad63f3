"""``openmsprof analyze`` on a flight recorder dump: what made the step slow compared with the
median steps kept before it (the stack frames and mstx ranges that grew, with their share), or
where each thread waits at a hang (docs/flight-recorder.md)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from openmsprof.config.errors import ProfilingError, RawDataError
from openmsprof.fileio.read_guard import read_regular
from openmsprof.flight.dump import FLIGHT_FILE
from openmsprof.parse.importer import ensure_imported

__all__ = ["db_ranges", "explain", "load_flight", "render_text", "top_frame"]

_OWN_THREADS = ("openmsprof-flight",)


def load_flight(job: Path) -> dict[str, Any] | None:
    """The job's ``host/flight.json``, or None when the job is not a flight dump."""
    path = job / "host" / FLIGHT_FILE
    if not path.is_file():
        return None
    doc = orjson.loads(read_regular(path, "flight.json", 512 << 20, RawDataError))
    return doc if isinstance(doc, dict) else None


def _name(frame: list[Any]) -> str:
    return f"{frame[1]} ({Path(str(frame[0])).name}:{frame[2]})"


def _library(path: str) -> bool:
    """Frames of the standard library, installed packages and openmsprof itself."""
    return (path.startswith("<") or "/lib/python3" in path or "site-packages" in path
            or "/openmsprof/" in path)


def top_frame(frames: list[list[Any]]) -> list[Any] | None:
    """The innermost frame of a stack that is not the flight recorder's own code."""
    for fr in frames:
        if "/openmsprof/flight/" not in str(fr[0]):
            return fr
    return frames[0] if frames else None


def _frame_growth(doc: dict[str, Any], windows: np.ndarray, slow: int, slow_ns: int,
                  median_ns: float) -> list[dict[str, Any]]:
    """Per function: estimated ms in the slow step vs a median step, and its sample shares."""
    frames = doc["stacks"]["frames"]
    main = doc.get("main_tid")
    funcs = [(str(f[0]), str(f[1])) for f in frames]
    samples = [s for s in doc["stacks"]["samples"] if s[1] == main]
    if not samples:
        return []
    ts = np.array([s[0] for s in samples], dtype=np.int64)
    which = np.searchsorted(windows[:, 0], ts, side="right") - 1
    inside = (which >= 0) & (ts < windows[np.clip(which, 0, None), 1])
    counts: dict[tuple[str, str], list[float]] = {}
    n_slow = n_norm = 0
    for k, s in enumerate(samples):
        if not inside[k]:
            continue
        is_slow = int(which[k]) == slow
        n_slow += is_slow
        n_norm += not is_slow
        ids = s[2]
        for depth, fid in enumerate(reversed(ids)):
            key = funcs[fid]
            c = counts.setdefault(key, [0.0, 0.0, 0.0, 0.0])
            c[0 if is_slow else 1] += 1
            c[2] += depth
            c[3] += 1
    out: list[dict[str, Any]] = []
    for (file, func), (cs, cn, dsum, dn) in counts.items():
        share_s = cs / n_slow if n_slow else 0.0
        share_n = cn / n_norm if n_norm else 0.0
        grow = share_s * slow_ns - share_n * median_ns
        out.append({"function": func, "file": file, "slow_ms": share_s * slow_ns / 1e6,
                    "median_ms": share_n * median_ns / 1e6, "growth_ms": grow / 1e6,
                    "share_slow": share_s, "share_median": share_n, "depth": dsum / max(dn, 1)})
    out.sort(key=lambda r: (-r["growth_ms"], -r["depth"]))
    return out


def db_ranges(job: Path) -> list[tuple[str, int, int]]:
    """The job's closed mstx ranges (push/pop, start/end) from its database, imported if needed."""
    try:
        db = ensure_imported(job)
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            return [(str(m), int(a), int(b)) for m, a, b in con.execute(
                "SELECT s.value, e.startNs, e.endNs FROM MSTX_EVENTS e JOIN STRING_IDS s ON s.id = e.message "
                "WHERE e.eventType IN (1, 2) AND e.endNs > e.startNs")]
    except (ProfilingError, sqlite3.Error, OSError):
        return []


def _range_growth(ranges: list[tuple[str, int, int]], windows: np.ndarray, slow: int) -> list[dict[str, Any]]:
    """Per mstx range name: ms inside the slow step vs the median over the other steps."""
    per: dict[str, np.ndarray] = {}
    for msg, t0, t1 in ranges:
        lo = np.maximum(windows[:, 0], t0)
        hi = np.minimum(windows[:, 1], t1)
        acc = per.setdefault(str(msg), np.zeros(len(windows)))
        acc += np.clip(hi - lo, 0, None)
    out: list[dict[str, Any]] = []
    others = np.arange(len(windows)) != slow
    for msg, acc in per.items():
        med = float(np.median(acc[others])) if others.any() else 0.0
        out.append({"range": msg, "slow_ms": float(acc[slow]) / 1e6, "median_ms": med / 1e6,
                    "growth_ms": (float(acc[slow]) - med) / 1e6})
    out.sort(key=lambda r: -r["growth_ms"])
    return out


def _threads(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for t in doc.get("trigger_stacks", []):
        if str(t.get("thread", "")).startswith(_OWN_THREADS):
            continue
        frames = t.get("frames", [])
        fr = top_frame(frames)
        where = _name(fr) if fr else "?"
        user = next((f for f in frames if not _library(str(f[0]))), None)
        if fr is not None and user is not None and user is not fr:
            where += f" called from {_name(user)}"
        out.append({"thread": t.get("thread"), "tid": t.get("tid"), "waits_in": where,
                    "frames": [_name(f) for f in t.get("frames", [])[:8]]})
    return out


def explain(job: Path) -> dict[str, Any] | None:
    """The explanation of a flight dump, or None when ``job`` is not one."""
    doc = load_flight(job)
    if doc is None:
        return None
    trig = doc.get("trigger", {})
    steps = doc.get("steps", [])
    res: dict[str, Any] = {"trigger": trig, "threads": _threads(doc), "lines": []}
    lines: list[str] = res["lines"]
    kind, step = trig.get("kind"), trig.get("step")
    index = {s[0]: k for k, s in enumerate(steps)}
    if steps:
        windows = np.array([[s[1], s[2]] for s in steps], dtype=np.int64)
        durs = windows[:, 1] - windows[:, 0]
    if kind != "hang" and step in index and len(steps) > 1:
        k = index[step]
        slow_ns = int(durs[k])
        others = np.delete(durs, k)
        median = float(np.median(others))
        frames = _frame_growth(doc, windows, k, slow_ns, median)
        ranges = _range_growth(db_ranges(job), windows, k)
        delta = slow_ns - median
        res.update(step=step, duration_ms=slow_ns / 1e6, median_ms=median / 1e6,
                   frames=frames[:10], ranges=ranges[:10])
        head = f"step {step}: {slow_ns / 1e6:.0f} ms vs median {median / 1e6:.1f} ms"
        if trig.get("threshold_ns"):
            head += f" (threshold {trig['threshold_ns'] / 1e6:.1f} ms)"
        grown = [f for f in frames if f["growth_ms"] * 1e6 >= 0.5 * delta]
        if grown:
            best = max(grown, key=lambda f: f["depth"])
            res["cause"] = best
            head += (f"; {best['slow_ms']:.0f} ms in {best['function']} ({best['share_slow'] * 100:.0f} % of "
                     f"stack samples in the step, {best['share_median'] * 100:.0f} % in the median steps)")
        lines.append(head)
        for r in ranges[:3]:
            if r["growth_ms"] > 0.1 * delta / 1e6:
                lines.append(f"  range {r['range']!r}: {r['slow_ms']:.1f} ms vs median {r['median_ms']:.1f} ms")
        for f in [f for f in frames if f["growth_ms"] > 0.1 * delta / 1e6][:5]:
            lines.append(f"  frame {f['function']} ({Path(f['file']).name}): {f['slow_ms']:.1f} ms vs "
                         f"{f['median_ms']:.1f} ms ({f['share_slow'] * 100:.0f} % of samples)")
    else:
        last = steps[-1][0] if steps else None
        what = {"hang": "hang", "signal": "signal", "exception": "exception"}.get(str(kind), str(kind))
        head = f"{what}: {trig.get('detail') or ''}".rstrip(": ")
        if last is not None:
            head += f"; last completed step {last}"
            if len(steps) > 1:
                head += f" (median step {float(np.median(durs)) / 1e6:.1f} ms)"
        lines.append(head)
    for t in res["threads"]:
        lines.append(f"  thread {t['thread']} waits in {t['waits_in']}")
    return res


def render_text(res: dict[str, Any]) -> str:
    return "Flight recorder trigger\n" + "\n".join(res["lines"]) + "\n\n"
