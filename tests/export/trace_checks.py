"""Helpers for timeline tests: load slices and check the Perfetto-safe invariants."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson


def load_events(paths: list[Path]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for p in paths:
        doc = orjson.loads(p.read_bytes())
        events.extend(doc["traceEvents"] if isinstance(doc, dict) else doc)
    return events


def ns(ts: float | str) -> int:
    return round(float(ts) * 1000)


def x_spans(events: list[dict[str, Any]]) -> dict[tuple[int, int], list[tuple[int, int]]]:
    spans: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            s = ns(e["ts"])
            spans[(e["pid"], e["tid"])].append((s, s + ns(e["dur"])))
    return spans


def overlapping_tracks(events: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Tracks where two X events partially overlap (neither nested nor disjoint)."""
    bad = []
    for key, spans in x_spans(events).items():
        stack: list[int] = []
        for s, e in sorted(spans, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1] <= s:
                stack.pop()
            if stack and e > stack[-1]:
                bad.append(key)
                break
            stack.append(e)
    return bad


def flows_outside_x(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flow ends (s and f) that do not lie inside an X on their own track."""
    spans = x_spans(events)
    out = []
    for e in events:
        if e["ph"] in ("s", "f"):
            t = ns(e["ts"])
            if not any(s <= t <= end for s, end in spans.get((e["pid"], e["tid"]), [])):
                out.append(e)
    return out
