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

import itertools
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from openmsprof.config.errors import ConfigError
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof import summary_tasks as tasks

__all__ = [
    "NULL_INT",
    "PATTERNS_FILE",
    "Match",
    "Pattern",
    "TaskColumns",
    "find_matches",
    "int64_rows",
    "load_patterns",
    "task_columns",
]

PATTERNS_FILE = Path(__file__).resolve().parents[1] / "data" / "patterns.json"
I64 = npt.NDArray[np.int64]
#: a NULL integer column in ``int64_rows`` (``COALESCE(col, ?)`` bound to it)
NULL_INT = -(1 << 62)


def int64_rows(db: JobDB, sql: str, width: int, count: int, params: tuple[Any, ...] = ()) -> I64:
    """The ``count`` rows of ``sql``, ``width`` integers each, as one (count, width) int64 array:
    streamed flat into numpy (``JobDB.stream``), no Python tuple kept per row."""
    flat = np.fromiter(itertools.chain.from_iterable(db.stream(sql, params)), dtype=np.int64, count=width * count)
    return flat.reshape(-1, width)


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
    dev: I64  # device id
    tid: I64  # task id (ties of equal start on one device)
    masks: dict[tuple[str, ...], npt.NDArray[np.bool_]] = field(default_factory=dict)

    @property
    def it_index(self) -> I64:
        """Each task's iteration as 0..iterations-1 (cached)."""
        if "_it" not in self.__dict__:
            self.__dict__["_it"] = np.unique(self.it, return_inverse=True)[1].ravel()
        return self.__dict__["_it"]  # type: ignore[no-any-return]

    @property
    def iterations(self) -> int:
        return max(1, int(self.it_index.max(initial=-1)) + 1)


def _ordered(dev: I64, it: I64, start: I64) -> bool:
    """Whether rows are already sorted by (device, iteration, start): the usual case, where
    the sort and its copy of every column can be skipped."""
    if dev.size < 2:
        return True
    d_dev, d_it, d_start = np.diff(dev), np.diff(it), np.diff(start)
    return bool(np.all((d_dev > 0) | ((d_dev == 0) & ((d_it > 0) | ((d_it == 0) & (d_start >= 0))))))


def task_columns(db: JobDB) -> TaskColumns | None:
    """All tasks ordered by (device, iteration, start); None without tasks.  Rows stream
    flat into numpy (no per-row tuples kept) and are sorted there, not in SQLite."""
    if not db.has("TASK"):
        return None
    c = lambda col: f"(COALESCE({tasks._c(db, col)}, -1) + 1)"  # noqa: E731
    # string ids (< 2^31) travel in pairs, packed into one integer: fewer Python objects per row
    pair = lambda a, b: f"(({c(a)} << 32) | {c(b)})"  # noqa: E731
    sql = (f"SELECT ((t.deviceId + 1) << 40) | (COALESCE(t.taskId, 0) & 0xFFFFFFFFFF),"
           f" t.globalTaskId, t.connectionId, t.startNs, MAX(t.endNs - t.startNs, 0), {pair('name', 'opType')},"
           f" {pair('inputShapes', 'outputShapes')}, {pair('inputDataTypes', 'outputDataTypes')}"
           f" FROM {tasks._from(db)}")
    (n,) = db.query("SELECT COUNT(*) FROM TASK")[0]
    arr = int64_rows(db, sql, 8, n)
    dev_key = arr[:, 0] >> 40
    order = None if _ordered(dev_key, arr[:, 2], arr[:, 3]) else np.lexsort(
        (arr[:, 3], arr[:, 2], dev_key))
    col = lambda k: np.ascontiguousarray(arr[:, k]) if order is None else arr[:, k][order]  # noqa: E731
    gid, it, start, dur, names, shapes, dtypes, dt = (col(k) for k in (1, 2, 3, 4, 5, 6, 7, 0))
    low = np.int64(0xFFFFFFFF)
    name, typ = (names >> 32) - 1, (names & low) - 1
    ish, osh = (shapes >> 32) - 1, (shapes & low) - 1
    idt, odt = (dtypes >> 32) - 1, (dtypes & low) - 1
    dev, tid = (dt >> 40) - 1, dt & np.int64(0xFFFFFFFFFF)
    return TaskColumns(gid, it, start, dur, name, typ, ish, idt, osh, odt, dev, tid)


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


def _shape_link(db: JobDB, out_id: int, in_id: int, prev_in_id: int) -> bool:
    """Whether the op's first output shape — its largest input's when no outputs are recorded
    (torch's record_shapes) — is one of the next op's input shapes."""
    out = db.text(out_id, "").split(";")[0]
    if out in ("", "N/A"):
        shapes = [p for p in db.text(prev_in_id, "").split(";") if p and p != "N/A"]
        out = max(shapes, key=_elements, default="")
    return bool(out) and out in db.text(in_id, "").split(";")


def _elements(shape: str) -> int:
    try:
        return int(np.prod([int(d) for d in shape.split(",")]))
    except ValueError:
        return -1


def _mask(db: JobDB, cols: TaskColumns, names: tuple[str, ...]) -> npt.NDArray[np.bool_]:
    """Tasks whose op type is one of ``names`` (a lookup table gather; cached per names)."""
    hit = cols.masks.get(names)
    if hit is None:
        ids = _type_ids(db, names)
        top = int(max(int(cols.typ.max(initial=0)), int(ids.max(initial=0)))) + 2
        lut = np.zeros(top, dtype=bool)
        lut[ids + 1] = True
        hit = cols.masks[names] = lut[cols.typ + 1]
    return hit


def unique_rows(m: I64) -> tuple[I64, I64]:
    """``np.unique(m, axis=0, return_inverse=True)``, fast: rows hashed to one int64 each and
    the result checked exactly (a hash collision falls back to the row-wise unique)."""
    if m.size == 0:
        return m, np.zeros(0, dtype=np.int64)
    mult = np.uint64(0x9E3779B97F4A7C15)
    h = np.zeros(len(m), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(m.shape[1]):
            h = (h ^ m[:, k].astype(np.uint64)) * mult
    _, first, inv = np.unique(h, return_index=True, return_inverse=True)
    inv = inv.ravel()
    uniq = m[first]
    if not np.array_equal(uniq[inv], m):
        u, i = np.unique(m, axis=0, return_inverse=True)
        return u, i.ravel()
    return uniq, inv


def _links(db: JobDB, outs: I64, ins: I64, prev_ins: I64) -> npt.NDArray[np.bool_]:
    """Whether each output shape (id) is one of the paired input shapes (id) — per pair once."""
    uniq, inv = unique_rows(np.stack([outs, ins, prev_ins], axis=1))
    ok = np.array([_shape_link(db, int(x), int(y), int(z)) for x, y, z in uniq.tolist()],
                  dtype=bool)
    return ok[inv]


def find_matches(db: JobDB, cols: TaskColumns, pattern: Pattern) -> Match:
    """Every occurrence of ``pattern`` inside one iteration (first variant wins per start).
    Candidates start where the first op type occurs and are narrowed op by op."""
    n = cols.typ.size
    found: list[I64] = []
    taken = np.zeros(n, dtype=bool)
    for variant in pattern.variants:
        ops = [e for e in variant if not isinstance(e, int)]
        gaps = [e for e in variant if isinstance(e, int)]
        first = np.flatnonzero(_mask(db, cols, ops[0]))  # type: ignore[arg-type]
        for offsets in _offsets(variant, gaps):
            cand = first[first < n - offsets[-1]]
            for k, el in enumerate(ops):
                o = offsets[k]
                at = cand + o
                keep = _mask(db, cols, el)[at] & ~taken[at]  # type: ignore[arg-type]
                if o:
                    keep &= cols.it[at] == cols.it[cand]
                cand = cand[keep]
                if cand.size == 0:
                    break
            if cand.size == 0:
                continue
            rows = cand[:, None] + np.asarray(offsets, dtype=np.int64)[None, :]
            if pattern.chain:
                keep = np.ones(len(rows), dtype=bool)
                for k in range(len(offsets) - 1):
                    if offsets[k + 1] == offsets[k] + 1:
                        keep &= _links(db, cols.osh[rows[:, k]], cols.ish[rows[:, k + 1]],
                                        cols.ish[rows[:, k]])
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
