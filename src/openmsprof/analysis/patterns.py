"""Pattern rules: operator sequences in the executed graph that have a cheaper or fused form.

The rules are data (``openmsprof/data/patterns.json``, or another file of that shape): each
pattern lists op-type sequences; this module finds them in every execute's task order (numpy
over the op-type column, so a 1 M-task job is matched in a fraction of a second), checks that
they are connected (each op's output shape is an input of the next) and prices the fix with the
cost model: the matched ops' measured time minus the modelled time of the replacement (nothing
when it fuses into the op before), and the bytes the replacement saves at the measured
bandwidth.  A job without tensor shapes skips the rules with a note saying what they need.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from openmsprof.config.errors import ConfigError
from openmsprof.export.db import JobDB
from openmsprof.export.msprof import summary_tasks as tasks
from openmsprof.export.msprof.roofline import Ceilings
from openmsprof.parse.costmodel import op_cost, roofline

__all__ = [
    "PATTERNS_FILE",
    "Match",
    "Pattern",
    "TaskColumns",
    "find_matches",
    "load_patterns",
    "task_columns",
]

PATTERNS_FILE = Path(__file__).resolve().parents[1] / "data" / "patterns.json"
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Pattern:
    name: str
    title: str
    variants: tuple[tuple[tuple[str, ...] | int, ...], ...]  # op-type alternatives or a gap
    chain: bool
    replacement: str
    replacement_op: str
    fuses_after: frozenset[str]
    absorbs: frozenset[str]


def _element(e: Any, where: str) -> tuple[str, ...] | int:
    if isinstance(e, dict) and isinstance(e.get("op"), list) and e["op"] and all(
            isinstance(x, str) for x in e["op"]):
        return tuple(e["op"])
    if isinstance(e, dict) and isinstance(e.get("any"), int) and not isinstance(
            e["any"], bool) and e["any"] >= 1:
        return int(e["any"])
    raise ConfigError(f"{where}: a sequence element must be {{\"op\": [types]}} or "
                      f"{{\"any\": N ≥ 1}}, got {e!r}")


@lru_cache(maxsize=8)
def load_patterns(path: Path = PATTERNS_FILE) -> tuple[Pattern, ...]:
    """The pattern rules in ``path``; a malformed file → one-line :class:`ConfigError`."""
    try:
        doc = orjson.loads(Path(path).read_bytes())
        items = doc["patterns"]
        out = []
        for i, p in enumerate(items):
            where = f"pattern file {str(path)!r}, pattern {i} ({p.get('name', '?')})"
            variants = tuple(tuple(_element(e, where) for e in v) for v in p["variants"])
            if not variants or any(not v or isinstance(v[0], int) or isinstance(v[-1], int)
                                   for v in variants):
                raise ConfigError(f"{where}: each variant starts and ends with an op")
            out.append(Pattern(str(p["name"]), str(p["title"]), variants, bool(p.get("chain")),
                               str(p["replacement"]), str(p.get("replacement_op", "")),
                               frozenset(p.get("fuses_after", ())),
                               frozenset(p.get("absorbs", ()))))
        return tuple(out)
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"pattern file {str(path)!r} is unusable: {exc!r}") from None


@dataclass
class TaskColumns:
    """The job's tasks in execution order, one numpy column each (string columns are ids)."""

    gid: I64
    it: I64  # iteration key (connection id, else −1)
    start: I64
    dur: I64
    name: I64
    typ: I64
    ish: I64
    idt: I64
    osh: I64
    odt: I64

    @property
    def iterations(self) -> int:
        return max(1, int(np.unique(self.it).size))


def task_columns(db: JobDB) -> TaskColumns | None:
    """All tasks ordered by (device, iteration, start); None without tasks."""
    if not db.has("TASK"):
        return None
    c = lambda col: f"COALESCE({tasks._c(db, col)}, -1)"  # noqa: E731
    sql = (f"SELECT t.globalTaskId, t.connectionId, t.startNs, MAX(t.endNs - t.startNs, 0),"
           f" {c('name')}, {c('opType')}, {c('inputShapes')}, {c('inputDataTypes')},"
           f" {c('outputShapes')}, {c('outputDataTypes')} FROM {tasks._from(db)}"
           " ORDER BY t.deviceId, t.connectionId, t.startNs")
    arr = np.array(db.query(sql), dtype=np.int64).reshape(-1, 10)
    return TaskColumns(*arr.T)


@dataclass
class Match:
    """The matched ops of one pattern: per variant, task indexes (one row per occurrence, one
    column per op element of that variant)."""

    pattern: Pattern
    groups: list[I64]

    @property
    def count(self) -> int:
        return sum(len(g) for g in self.groups)

    @property
    def first(self) -> I64:
        return np.concatenate([g[:, 0] for g in self.groups])

    @property
    def last(self) -> I64:
        return np.concatenate([g[:, -1] for g in self.groups])

    def durations(self, dur: I64) -> I64:
        """Each occurrence's summed duration."""
        return np.concatenate([dur[g].sum(axis=1) for g in self.groups])

    def occurrences(self) -> list[list[int]]:
        return [r for g in self.groups for r in g.tolist()]


def _type_ids(db: JobDB, names: tuple[str, ...]) -> I64:
    want = set(names)
    return np.array([i for i, v in db.strings.items() if v in want], dtype=np.int64)


def _shape_link(db: JobDB, out_id: int, in_id: int) -> bool:
    out = db.text(out_id, "").split(";")[0]
    return bool(out) and out in db.text(in_id, "").split(";")


def find_matches(db: JobDB, cols: TaskColumns, pattern: Pattern) -> Match:
    """Every occurrence of ``pattern`` inside one iteration (first variant wins per start)."""
    n = cols.typ.size
    found: list[I64] = []
    taken = np.zeros(n, dtype=bool)
    links: dict[tuple[int, int], bool] = {}
    for variant in pattern.variants:
        ops = [e for e in variant if not isinstance(e, int)]
        gaps = [e for e in variant if isinstance(e, int)]
        for offsets in _offsets(variant, gaps):
            last = offsets[-1]
            if last >= n:
                continue
            m = np.ones(n - last, dtype=bool)
            for k, el in enumerate(ops):
                o = offsets[k]
                seg = slice(o, n - last + o)
                m &= ~taken[seg]
                m &= np.isin(cols.typ[seg], _type_ids(db, el))  # type: ignore[arg-type]
                m &= cols.it[seg] == cols.it[: n - last]
            idx = np.flatnonzero(m)
            if idx.size == 0:
                continue
            rows = idx[:, None] + np.asarray(offsets, dtype=np.int64)[None, :]
            if pattern.chain:
                keep = np.ones(len(rows), dtype=bool)
                for k in range(len(offsets) - 1):
                    if offsets[k + 1] != offsets[k] + 1:
                        continue
                    a, b = cols.osh[rows[:, k]], cols.ish[rows[:, k + 1]]
                    for j, (x, y) in enumerate(zip(a.tolist(), b.tolist(), strict=True)):
                        ok = links.get((x, y))
                        if ok is None:
                            ok = links[(x, y)] = _shape_link(db, x, y)
                        keep[j] &= ok
                rows = rows[keep]
            if rows.size:
                taken[rows.ravel()] = True
                found.append(rows)
    return Match(pattern, found)


def _offsets(variant: tuple[tuple[str, ...] | int, ...], gaps: list[int]) -> list[list[int]]:
    """Positions of the op elements for every choice of gap lengths (0..N each)."""
    choices: list[list[int]] = [[]]
    for g in gaps:
        choices = [[*c, k] for c in choices for k in range(g + 1)]
    out = []
    for c in choices:
        pos, offs, gi = 0, [], 0
        for e in variant:
            if isinstance(e, int):
                pos += c[gi]
                gi += 1
            else:
                offs.append(pos)
                pos += 1
        out.append(offs)
    return out


def _median_per_iteration(it: I64, values: npt.NDArray[np.float64], n_it: int) -> float:
    """The median over iterations of the per-iteration sums of ``values``."""
    if n_it == 0:
        return 0.0
    return float(np.median(np.bincount(it, weights=values, minlength=n_it)))


def price(db: JobDB, cols: TaskColumns, match: Match, ceil: Ceilings,
          floor_ns: float) -> dict[str, Any]:
    """Measured time of the matched ops, modelled time of the replacement, bytes saved."""
    p = match.pattern
    occ_dur = match.durations(cols.dur)
    measured = float(occ_dur.sum())
    first, last = match.first, match.last
    # the median iteration's time in the pattern (robust to a few slow iterations, like
    # compare's per-iteration medians)
    _, it_idx = np.unique(cols.it, return_inverse=True)
    n_it = int(it_idx.max()) + 1 if it_idx.size else 0
    per_it = np.bincount(it_idx[first], weights=occ_dur.astype(float), minlength=n_it)
    median_it = float(np.median(per_it)) if per_it.size else 0.0
    occ_abs = np.zeros(len(first))
    before = first - 1
    fused = np.zeros(len(first), dtype=bool)
    if p.fuses_after:
        after_ids = _type_ids(db, tuple(p.fuses_after))
        absorb_ids = _type_ids(db, tuple(p.absorbs))
        prev = before.copy()
        hop = (prev >= 0) & np.isin(cols.typ[np.maximum(prev, 0)], absorb_ids)
        prev = np.where(hop, prev - 1, prev)
        ok = prev >= 0
        same = cols.it[np.maximum(prev, 0)] == cols.it[first]
        fused = ok & same & np.isin(cols.typ[np.maximum(prev, 0)], after_ids)
        nxt = last + 1
        has_next = nxt < cols.typ.size
        nxt_abs = has_next & np.isin(cols.typ[np.minimum(nxt, cols.typ.size - 1)], absorb_ids)
        occ_abs = (np.where(fused & hop, cols.dur[np.maximum(before, 0)], 0)
                   + np.where(fused & nxt_abs, cols.dur[np.minimum(nxt, cols.typ.size - 1)], 0)
                   ).astype(float)
    absorbed = float(occ_abs.sum())
    occ_rep = np.zeros(len(first))
    text = db.text
    rep_ns = 0.0
    bytes_before = 0.0
    bytes_after = 0.0
    sig_cache: dict[tuple[int, ...], tuple[float, float, float]] = {}
    for j, r in enumerate(match.occurrences()):
        key = (int(fused[j]), *(int(cols.typ[i]) * 1_000_003 + int(cols.ish[i]) for i in r),
               int(cols.osh[r[-1]]))
        hit = sig_cache.get(key)
        if hit is None:
            b = sum(op_cost(text(cols.typ[i]), text(cols.ish[i]), text(cols.idt[i]),
                            text(cols.osh[i]), text(cols.odt[i])).bytes for i in r)
            if fused[j] or not p.replacement_op:
                hit = (0.0, b, 0.0)
            else:
                first_in = text(cols.ish[r[0]]).split(";")[0]
                c = op_cost(p.replacement_op, first_in, text(cols.idt[r[0]]).split(";")[0],
                            text(cols.osh[r[-1]]), text(cols.odt[r[-1]]))
                att = roofline(c, ceil.bandwidth, ceil.peak_flops, ceil.special).attainable_ns
                hit = (max(att, floor_ns), b, c.bytes)
            sig_cache[key] = hit
        rep_ns += hit[0]
        occ_rep[j] = hit[0]
        bytes_before += hit[1]
        bytes_after += hit[2]
    saved_bytes = max(0.0, bytes_before - bytes_after)
    return {"measured_ns": measured, "median_iteration_ns": median_it, "absorbed_ns": absorbed, "replacement_ns": rep_ns,
            "gain_ns": max(0.0, measured + absorbed - rep_ns),
            "gain_iteration_ns": max(0.0, _median_per_iteration(
                it_idx[first], occ_dur + occ_abs - occ_rep, per_it.size)), "fused": int(fused.sum()),
            "saved_bytes": saved_bytes,
            "memory_gain_ns": saved_bytes / ceil.bandwidth * 1e9 if ceil.bandwidth else 0.0}
