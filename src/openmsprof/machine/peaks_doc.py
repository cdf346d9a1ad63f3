"""A peaks document read back: checked (:func:`validate`, :func:`load_peaks` for override
files) and turned into the roofline's ceilings (:func:`bandwidth`, :func:`gemm_peak`,
:func:`special_rate`, :func:`runtime_rates`).  The shape is :func:`openmsprof.machine.peaks.
measure`'s; in an override file a figure may be a bare number."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from openmsprof.config.errors import ConfigError
from openmsprof.fileio.read_guard import read_json

__all__ = ["bandwidth", "gemm_peak", "load_peaks", "runtime_rates", "special_rate", "validate"]


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


def validate(doc: Any, where: str) -> dict[str, Any]:
    """Check a peaks document; wrong types → one-line :class:`ConfigError` naming the key."""
    if not isinstance(doc, dict):
        raise ConfigError(f"peaks file {where!r}: expected a JSON object, got {type(doc).__name__}")
    for group in ("stream", "gemm", "special"):
        sec = doc.get(group, {})
        if not isinstance(sec, dict):
            raise ConfigError(f"peaks file {where!r}: {group!r} must be an object")
        for name, v in sec.items():
            if name == "array_bytes":
                continue
            if isinstance(v, dict):
                bad = [k for k in ("best", "median") if k in v and not _num(v[k])]
                if bad or "best" not in v:
                    raise ConfigError(f"peaks file {where!r}: {group}.{name}.best must be a "
                                      f"positive number")
            elif not _num(v):
                raise ConfigError(f"peaks file {where!r}: {group}.{name} must be a positive "
                                  f"number or {{\"best\": number}}, got {v!r}")
    rt = doc.get("runtime", {})
    if not isinstance(rt, dict) or any(
            not isinstance(r, dict) or any(not isinstance(r.get(k, {}), dict)
                                           for k in ("flops", "elements")) for r in rt.values()):
        raise ConfigError(f"peaks file {where!r}: 'runtime' must map runtimes to "
                          f"{{\"flops\": {{}}, \"elements\": {{}}}}")
    for name, r in rt.items():
        for k in ("flops", "elements"):
            for op, v in r.get(k, {}).items():
                if not (_num(v) or (isinstance(v, dict) and _num(v.get("best")))):
                    raise ConfigError(f"peaks file {where!r}: runtime.{name}.{k}.{op} must be "
                                      f"a positive number or {{\"best\": number}}")
    if not any(k != "array_bytes" for k in doc.get("stream", {})) or not doc.get("gemm"):
        raise ConfigError(f"peaks file {where!r}: needs 'stream' and 'gemm' figures")
    return doc


def load_peaks(path: str | os.PathLike[str]) -> dict[str, Any]:
    """An override file (same shape as :func:`measure`; a figure may be a bare number)."""
    p = Path(path)
    doc = read_json(p, "peaks file", error=ConfigError)
    out = validate(doc, str(p))
    out.setdefault("source", f"override {p.name}")
    return out


def _best(sec: Any, names: tuple[str, ...]) -> float:
    vals = []
    for n in names:
        v = sec.get(n) if isinstance(sec, dict) else None
        vals.append(v.get("best", 0.0) if isinstance(v, dict) else (v or 0.0))
    return float(max(vals, default=0.0))


def bandwidth(doc: dict[str, Any]) -> float:
    """Memory bandwidth, bytes/s: the best STREAM figure (copy, add, triad)."""
    return _best(doc.get("stream", {}), ("copy", "add", "triad")) * 1e9


def gemm_peak(doc: dict[str, Any], dtype: str = "float32") -> float:
    """GEMM FLOP/s for ``dtype`` (numpy or torch, the best); float32's when missing."""
    sec = doc.get("gemm", {})
    key = dtype.lower()
    names = tuple(n for n in sec if n.split()[-1] == key) or tuple(
        n for n in sec if n.split()[-1] == "float32") or tuple(sec)
    return _best(sec, names) * 1e9


def special_rate(doc: dict[str, Any]) -> float:
    """Transcendental evaluations per second (the median of exp/tanh/log1p bests), else 0."""
    sec = doc.get("special", {})
    vals = sorted(_best(sec, (n,)) for n in sec)
    return float(vals[len(vals) // 2]) * 1e9 if vals else 0.0


def runtime_rates(doc: dict[str, Any]) -> tuple[dict[str, float], dict[str, float]]:
    """The runtimes' measured class ceilings by op type: (FLOP/s of conv-like kernels,
    output elements/s of element-wise kernels); the best runtime's where several measured."""
    flops: dict[str, float] = {}
    elems: dict[str, float] = {}
    rt = doc.get("runtime")
    for r in (rt.values() if isinstance(rt, dict) else ()):
        if not isinstance(r, dict):
            continue
        for key, into in (("flops", flops), ("elements", elems)):
            sec = r.get(key)
            for op in (sec if isinstance(sec, dict) else ()):
                rate = _best(sec, (op,)) * 1e9
                if rate > 0:
                    into[op] = max(into.get(op, 0.0), rate)
    return flops, elems
