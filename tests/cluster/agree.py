"""Number-by-number comparison of our cluster outputs with msprof-analyze's (within 1 %)."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import orjson

REL = 0.01


def close(a: float, b: float, abs_tol: float = 1e-6) -> bool:
    return math.isclose(a, b, rel_tol=REL, abs_tol=abs_tol)


def _rows(path: Path) -> dict[tuple[str, str, str], dict[str, str]]:
    with open(path, newline="") as f:
        return {(r["Step"], r["Type"], r["Index"].replace(" ", "")): r for r in csv.DictReader(f)}


def step_trace_diffs(ours: Path, theirs: Path) -> tuple[int, list[str]]:
    """(numbers compared, differences) between two cluster_step_trace_time.csv files."""
    a, b = _rows(ours), _rows(theirs)
    diffs = [f"row {k} only in one" for k in set(a) ^ set(b)]
    n = 0
    for key in set(a) & set(b):
        for col, v in b[key].items():
            if col in ("Step", "Type", "Index"):
                continue
            n += 1
            mine = a[key].get(col)
            try:
                ok = mine is not None and close(float(mine), float(v))
            except ValueError:
                ok = mine == v
            if not ok:
                diffs.append(f"{key} {col}: ours {mine} theirs {v}")
    return n, diffs


def _walk(a: Any, b: Any, where: str, out: list[str]) -> int:
    if isinstance(b, dict):
        if not isinstance(a, dict) or set(a) != set(b):
            out.append(f"{where}: keys {sorted(a) if isinstance(a, dict) else a} vs {sorted(b)}")
            return 0
        return sum(_walk(a[k], b[k], f"{where}/{k}", out) for k in b)
    if isinstance(b, list):
        if not isinstance(a, list) or len(a) != len(b):
            out.append(f"{where}: {a} vs {b}")
            return 0
        return sum(_walk(x, y, f"{where}[{i}]", out) for i, (x, y) in enumerate(zip(a, b, strict=False)))
    if isinstance(b, (int, float)):
        if not isinstance(a, (int, float)) or not close(float(a), float(b)):
            out.append(f"{where}: ours {a} theirs {b}")
        return 1
    if a != b:
        out.append(f"{where}: ours {a!r} theirs {b!r}")
    return 1


def json_diffs(ours: Path, theirs: Path) -> tuple[int, list[str]]:
    """(leaves compared, differences) between two JSON documents (numbers within 1 %)."""
    out: list[str] = []
    n = _walk(orjson.loads(ours.read_bytes()), orjson.loads(theirs.read_bytes()), "", out)
    return n, out
