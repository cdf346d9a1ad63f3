"""This machine's measured peaks (``openmsprof peaks``): memory bandwidth and GEMM rate.

* STREAM copy/add/triad on float64 arrays of at least 8× the last-level cache, so they
  measure DRAM, not cache.  Bandwidth counts the bytes really moved (numpy's triad is two
  passes: ``c = s*b`` then ``c += a``, 5 arrays of traffic; torch's ``add(alpha=)`` is one).
* GEMM ``n × n`` (n ≥ 2048) per dtype: numpy/BLAS and torch (when present: ``openmsprof
  peaks`` imports it; collection uses it only when the application already did).  Float32 by
  default; ``dtypes`` adds float64 and bfloat16 (``openmsprof peaks --dtypes``).
* The runtime's own ceilings per op class (:mod:`openmsprof.machine.runtime_peaks`): ONNX
  Runtime's conv rate and its element-wise transcendental kernels, when it is present.
* Special functions: numpy ``exp``/``tanh``/``log1p`` on a cache-resident array (elements/s),
  the ceiling for transcendental element-wise ops.

Each figure is the best and the median of ≥ ``RUNS`` runs with the coefficient of variation
(std/mean); a CV above 10 % flags a loaded machine.  The whole run keeps to ``BUDGET_S``:
a kernel whose runs would not fit is skipped and listed in ``skipped``.  The result is cached
once per machine (``~/.cache/openmsprof/peaks-{host}.json``) and written into each job
(``host/peaks.json``) at the end of collection.  A JSON file of the same shape overrides it for
a target machine that is not this one (:func:`load_peaks`).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from openmsprof.config.errors import ConfigError
from openmsprof.fileio import fs
from openmsprof.fileio.read_guard import read_json
from openmsprof.machine.peaks_cache import cache_path, measuring, wait_for_measurement
from openmsprof.machine.peaks_doc import (
    bandwidth,
    gemm_peak,
    load_peaks,
    runtime_rates,
    special_rate,
    validate,
)
from openmsprof.machine.runtime_peaks import measure_onnxruntime

__all__ = [
    "ALL_DTYPES",
    "BUDGET_S",
    "DTYPES",
    "PEAKS_FILE",
    "RUNS",
    "bandwidth",
    "cache_path",
    "cached",
    "cached_read_only",
    "covers",
    "gemm_peak",
    "load_peaks",
    "measure",
    "runtime_rates",
    "special_rate",
    "validate",
]

RUNS = 5
BUDGET_S = 4.0
#: GEMM dtypes measured by default, and all that can be asked for
DTYPES = ("float32",)
ALL_DTYPES = ("float32", "float64", "bfloat16")
GEMM_N = 2048
CV_LOADED = 0.10
PEAKS_FILE = "peaks.json"
_LLC_FALLBACK = 32 << 20


def llc_bytes() -> int:
    """The largest cache of cpu0 (sysfs), else 32 MiB."""
    best = 0
    for d in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (d / "size").read_text().strip().upper()
        except OSError:
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        try:
            best = max(best, int(text.rstrip("KMG")) * mult)
        except ValueError:
            continue
    return best or _LLC_FALLBACK


def _stat(times: list[float], work: float, unit: str) -> dict[str, Any]:
    """best/median rate (work/time) over the runs and the CV of the times."""
    mean = statistics.fmean(times)
    cv = statistics.pstdev(times) / mean if mean > 0 and len(times) > 1 else 0.0
    return {"best": round(work / min(times), 3), "median": round(work / statistics.median(times), 3),
            "cv": round(cv, 4), "runs": len(times), "unit": unit,
            "loaded": cv > CV_LOADED}


def _runs(fn: Callable[[], object], deadline: float, must: bool = False) -> list[float] | None:
    """Time ``fn`` RUNS times (one warm-up); None if the runs would pass ``deadline`` (never
    when ``must``: the first kernel of each group always runs)."""
    t = time.perf_counter()
    fn()
    first = time.perf_counter() - t
    if not must and time.perf_counter() + first * RUNS > deadline:
        return None
    times = []
    for _ in range(RUNS):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def _stream(out: dict[str, Any], skipped: list[str], deadline: float) -> None:
    n = max(8 * llc_bytes() // 8, 1 << 20)  # float64 elements: each array ≥ 8× LLC
    a = np.full(n, 1.0)
    b = np.full(n, 2.0)
    c = np.full(n, 0.0)  # touched: no page faults in the timed runs
    torch = sys.modules.get("torch")
    nb = n * 8

    def triad() -> None:
        np.multiply(b, 3.0, out=c)
        np.add(c, a, out=c)

    kernels: list[tuple[str, Callable[[], object], int]] = [
        ("copy", lambda: np.copyto(c, a), 2 * nb),
        ("add", lambda: np.add(a, b, out=c), 3 * nb),
        ("triad", triad, 5 * nb)]
    if torch is not None:
        ta, tb, tc = (torch.from_numpy(x) for x in (a, b, c))
        kernels[2] = ("triad", lambda: torch.add(ta, tb, alpha=3.0, out=tc), 3 * nb)
    for k, (name, fn, nbytes) in enumerate(kernels):
        times = _runs(fn, deadline, must=k == 0)
        if times is None:
            skipped.append(f"stream {name}")
            continue
        out[name] = _stat(times, nbytes / 1e9, "GB/s")
    out["array_bytes"] = nb


def _torch(load: bool) -> Any:
    """torch when the process already imported it, or (``load``) when it is installed."""
    torch = sys.modules.get("torch")
    if torch is None and load and importlib.util.find_spec("torch") is not None:
        try:
            import torch
        except Exception:
            return None
    return torch


def _gemm(out: dict[str, Any], skipped: list[str], deadline: float, torch: Any,
          dtypes: tuple[str, ...]) -> None:
    rng = np.random.default_rng(0)
    base = rng.random((GEMM_N, GEMM_N))
    flops = 2.0 * GEMM_N ** 3 / 1e9
    jobs: list[tuple[str, Callable[[], object]]] = []
    for dt in dtypes:  # per dtype: numpy first, then torch
        if dt != "bfloat16":
            m = base.astype(dt)
            jobs.append((f"numpy {dt}", lambda m=m: m @ m))  # type: ignore[misc]
        if torch is not None and dt != "float64":
            t = torch.from_numpy(base).to(getattr(torch, dt))
            jobs.append((f"torch {dt}", lambda t=t: t @ t))  # type: ignore[misc]
    for k, (name, fn) in enumerate(jobs):
        times = _runs(fn, deadline, must=k == 0)
        if times is None:
            skipped.append(f"gemm {name}")
            continue
        out[name] = _stat(times, flops, "GFLOP/s")


def _special(out: dict[str, Any], skipped: list[str], deadline: float) -> None:
    x = np.linspace(0.0, 4.0, 1 << 16, dtype=np.float32)
    y = np.empty_like(x)
    for name in ("exp", "tanh", "log1p"):
        f = getattr(np, name)
        times = _runs(lambda f=f: [f(x, out=y) for _ in range(20)], deadline,  # type: ignore[misc]
                      must=True)
        if times is None:
            skipped.append(f"special {name}")
            continue
        out[name] = _stat(times, 20 * x.size / 1e9, "Gelem/s")


def measure(budget_s: float = BUDGET_S, import_torch: bool = False,
            dtypes: tuple[str, ...] = DTYPES, import_ort: bool = False) -> dict[str, Any]:
    """Measure this machine now (≤ ``budget_s`` plus one warm-up call).  ``import_torch`` /
    ``import_ort``: also time torch / ONNX Runtime when installed but not imported (otherwise
    only a runtime the process already imported is timed).  ``dtypes``: the GEMM dtypes,
    float32 first (the one every rule needs)."""
    bad = [d for d in dtypes if d not in ALL_DTYPES]
    if bad:
        raise ConfigError(f"peaks dtype {bad[0]!r} is not one of {', '.join(ALL_DTYPES)}")
    dtypes = ("float32", *(d for d in dtypes if d != "float32"))
    t0 = time.perf_counter()
    torch = _torch(import_torch)
    deadline = t0 + budget_s
    skipped: list[str] = []
    stream: dict[str, Any] = {}
    gemm: dict[str, Any] = {}
    special: dict[str, Any] = {}
    _special(special, skipped, deadline)  # cheap (tens of ms): always all of it
    _stream(stream, skipped, time.perf_counter() + budget_s * 0.35)
    _gemm(gemm, skipped, t0 + budget_s * 0.65, torch, dtypes[:1])
    runtime: dict[str, Any] = {}
    ort = measure_onnxruntime(_runs, _stat, deadline, skipped, import_ort)
    if ort:
        runtime["onnxruntime"] = ort
    if len(dtypes) > 1:
        _gemm(gemm, skipped, deadline, torch, dtypes[1:])
    groups = (("stream", stream), ("gemm", gemm), ("special", special),
              *((f"{r} {g}", d[g]) for r, d in runtime.items() for g in ("flops", "elements")))
    loaded = [f"{k} {n}" for k, d in groups
              for n, v in d.items() if isinstance(v, dict) and v.get("loaded")]
    return {"host": socket.gethostname(), "source": "measured", "measured_at": time.time(),
            "seconds": round(time.perf_counter() - t0, 3), "cpus": os.cpu_count() or 1,
            "llc_bytes": llc_bytes(), "load_avg": [round(v, 2) for v in os.getloadavg()],
            "stream": stream, "gemm": gemm, "special": special, "runtime": runtime,
            "skipped": skipped, "loaded": loaded}


def covers(doc: dict[str, Any]) -> bool:
    """Whether ``doc`` holds the ceilings of the runtimes this process imported (a cache
    written before ONNX Runtime was used, or by an older version, lacks its class ceilings)."""
    rt = doc.get("runtime")
    return "onnxruntime" not in sys.modules or (
        isinstance(rt, dict) and "onnxruntime" in rt)


def cached(measure_missing: bool = True) -> dict[str, Any] | None:
    """This machine's peaks from the cache; measured and cached when missing (if allowed)."""
    path = cache_path()
    try:
        return validate(read_json(path, "peaks cache", error=ConfigError), str(path))
    except ConfigError:
        pass
    if not measure_missing:
        return None
    wait_for_measurement()  # a background measurement may be finishing
    try:
        return validate(read_json(path, "peaks cache", error=ConfigError), str(path))
    except ConfigError:
        pass
    doc = measure()
    try:
        with measuring():
            fs.write_file_atomic(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    except Exception:
        pass
    return doc


_kept: tuple[tuple[int, ...], dict[str, Any] | None] | None = None


def cached_read_only() -> dict[str, Any] | None:
    """``cached(measure_missing=False)`` for callers that never modify the document (the torch
    analysis of each window): read and validated again only when the cache file's identity,
    size, mode or times changed since the last read (one ``lstat`` otherwise)."""
    global _kept
    try:
        st = os.stat(cache_path(), follow_symlinks=False)
        key: tuple[int, ...] | None = (st.st_dev, st.st_ino, st.st_size, st.st_mode, st.st_mtime_ns, st.st_ctime_ns)
    except OSError:
        key = None  # (missing: cached() fails as fast)
    kept = _kept
    if key is not None and kept is not None and kept[0] == key:
        return kept[1]
    doc = cached(measure_missing=False)
    _kept = (key, doc) if key is not None else None
    return doc
