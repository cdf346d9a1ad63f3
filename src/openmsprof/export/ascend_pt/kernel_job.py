"""A torch rank dir (``…_ascend_pt``) as a job database, so ``analyze``, ``compare`` and
``openmsprof.load`` read torch runs as they read ``PROF_`` jobs.

The source is ``ASCEND_PROFILER_OUTPUT/kernel_details.csv`` (the text export): one TASK and
one COMPUTE_TASK_INFO row per kernel (the leaf aten ops on the CPU), with the kernel's ``Type``,
shapes and dtypes; ``TASK.connectionId`` is the kernel's ``Step Id`` (so one profiler step is
one iteration) and STEP_TIME spans each step's kernels.  A db-only export
(``ascend_pytorch_profiler*.db``) gives the same rows from its TASK / COMPUTE_TASK_INFO, each
task's step found in its STEP_TIME.  The database is built once into
``RANK_DIR/.openmsprof/kernels.db`` and rebuilt when its source is newer.  Where the rank dir
cannot be written (a read-only mount, another user's run) it goes to the user's cache,
``~/.cache/openmsprof/kernels/<key>.db`` keyed by the source's path, size and mtime, and where
that fails too, to a temporary file removed at exit: a read-only rank dir is analysed all
the same.
"""

from __future__ import annotations

import atexit
import csv
import hashlib
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from openmsprof.config.errors import PathError, RawDataError
from openmsprof.export.ascend_pt import kernel_csv
from openmsprof.fileio import fs
from openmsprof.fileio.read_guard import open_regular
from openmsprof.parse import schema

__all__ = ["EAGER_MIN_KERNELS", "KERNEL_DB", "ensure_kernel_db", "is_rank_dir", "rank_dirs_under", "user_cache_db", "write_kernel_db"]

OUTPUT = "ASCEND_PROFILER_OUTPUT"
KERNELS = "kernel_details.csv"
KERNEL_DB = Path(".openmsprof") / "kernels.db"
#: Windows of at least this many kernels get their kernel database written by the analysis
#: itself (a 1 M-kernel build from the CSV costs seconds at the first ``analyze``; below this,
#: under half a second, and the rank dir keeps seed 004's layout until someone runs ``analyze``).
EAGER_MIN_KERNELS = 100_000
_LIMIT = 1 << 40  # sources are streamed: only FIFOs, devices and links are refused
#: kernel_details columns this view needs (the rest are optional)
_NEEDED = ("Device_id", "Name", "Type", "Start Time(us)", "Duration(us)")
#: the COMPUTE_TASK_INFO texts, in its column order (taskType, then the tensor columns)
_INFO = ("Accelerator Core", "Input Formats", "Input Data Types", "Input Shapes", "Output Formats",
         "Output Data Types", "Output Shapes")


def _source(rank_dir: Path) -> Path | None:
    """kernel_details.csv, else the torch db, else None."""
    out = Path(rank_dir) / OUTPUT
    if (out / KERNELS).is_file():
        return out / KERNELS
    dbs = sorted(out.glob("ascend_pytorch_profiler*.db")) if out.is_dir() else []
    return dbs[0] if dbs else None


def is_rank_dir(path: Path) -> bool:
    """Whether ``path`` is an analysed torch rank dir (kernel_details.csv or the torch db)."""
    return _source(path) is not None


def rank_dirs_under(path: Path) -> list[Path]:
    """``path`` if it is a rank dir, else its rank-dir children (sorted)."""
    path = Path(path)
    if is_rank_dir(path):
        return [path]
    if not path.is_dir():
        return []
    return sorted(p for p in path.iterdir() if p.is_dir() and is_rank_dir(p))


def _ns(text: str) -> int:
    """``"1795503649863373.676\\t"`` (µs) → ns, exactly (no float rounding); ValueError if bad."""
    whole, _, frac = text.strip().partition(".")
    return int(whole) * 1000 + (int((frac + "00")[:3]) if frac else 0)


class _Strings(dict[str, int]):
    def __missing__(self, key: str) -> int:
        self[key] = len(self)
        return self[key]


def _rows(path: Path) -> Iterator[tuple[dict[str, int], list[str]]]:
    """(column index by name, row) per line; a missing needed column → RawDataError."""
    fd, _size = open_regular(path, "kernel_details", _LIMIT, RawDataError)  # no FIFO, no link
    with open(fd, newline="", encoding="utf-8", errors="replace") as f:
        r = csv.reader(f)
        header = next(r, [])
        missing = [c for c in _NEEDED if c not in header]
        if missing:
            raise RawDataError(f"{str(path)!r} lacks column {missing[0]!r}")
        col = {c: i for i, c in enumerate(header)}
        for row in r:
            yield col, row


def _from_db(rank_dir: Path, src: Path, con: sqlite3.Connection) -> None:
    """The same tables from a torch db: its tasks, their info, each task's step."""
    os.close(open_regular(src, "torch db", _LIMIT, RawDataError)[0])  # no FIFO, no link
    con.execute("ATTACH DATABASE ? AS s", (f"file:{src}?mode=ro",))
    try:
        for t in ("TASK", "COMPUTE_TASK_INFO", "STEP_TIME", "STRING_IDS"):
            if not con.execute("SELECT 1 FROM s.sqlite_master WHERE name = ?", (t,)).fetchone():
                raise RawDataError(f"{str(src)!r} has no {t} table")
        con.execute("INSERT INTO STRING_IDS SELECT id, value FROM s.STRING_IDS")
        con.execute(f"INSERT INTO STEP_TIME SELECT id, startNs, endNs, {schema.INVALID}, 0"
                    " FROM s.STEP_TIME")
        con.execute("INSERT INTO TASK SELECT t.startNs, t.endNs, t.deviceId, COALESCE((SELECT"
                    " st.id FROM s.STEP_TIME st WHERE t.startNs BETWEEN st.startNs AND st.endNs"
                    " ORDER BY st.startNs LIMIT 1), -1), t.globalTaskId, t.globalPid, t.taskType,"
                    " t.contextId, t.streamId, t.taskId, t.modelId FROM s.TASK t")
        con.execute("INSERT INTO COMPUTE_TASK_INFO SELECT * FROM s.COMPUTE_TASK_INFO")
        first, last = con.execute("SELECT MIN(startNs), MAX(endNs) FROM TASK").fetchone()
        _meta(con, rank_dir, src, first or 0, last or 0)
        con.commit()  # DETACH needs no open transaction
    except sqlite3.DatabaseError as exc:
        raise RawDataError(f"{str(src)!r} is unreadable: {exc}") from None
    finally:
        con.execute("DETACH DATABASE s")


def _meta(con: sqlite3.Connection, rank_dir: Path, src: Path, first: int, last: int) -> None:
    meta = {"SCHEMA_VERSION": schema.SCHEMA_VERSION, "OPENMSPROF_SCHEMA":
            str(schema.OPENMSPROF_SCHEMA), "JOB_NAME": rank_dir.name, "SOURCE": src.name,
            "BASE_NS": str(first // 1_000_000_000 * 1_000_000_000)}
    con.executemany("INSERT INTO META_DATA VALUES (?, ?)", meta.items())
    con.execute("INSERT INTO SESSION_TIME_INFO VALUES (?, ?)", (first, last))


def _from_csv(rank_dir: Path, src: Path, con: sqlite3.Connection) -> None:
    """One TASK + COMPUTE_TASK_INFO row per kernel_details row; STEP_TIME spans each step.
    Column-wise (:mod:`.kernel_csv`) when it can; else line by line here."""
    fd = open_regular(src, "kernel_details", _LIMIT, RawDataError)[0]  # no FIFO, no link
    if kernel_csv.load(fd, src, con, _NEEDED, ("Name", "Type", "Executor", *_INFO), {},
                       lambda first, last: _meta(con, rank_dir, src, first, last),
                       schema.INVALID):
        return
    s = _Strings()
    tasks: list[tuple[int, ...]] = []
    infos: list[tuple[int | None, ...]] = []
    steps: dict[tuple[int, int], list[int]] = {}
    na = s["N/A"]
    idx: dict[str, int] = {}
    for j, (col, row) in enumerate(_rows(src)):
        if not idx:
            idx = col
            at = [col.get(c, -1) for c in ("Name", "Type", "Executor", *_INFO)]
            i_start, i_dur, i_dev = col["Start Time(us)"], col["Duration(us)"], col["Device_id"]
            i_step = col.get("Step Id", -1)
        if len(row) != len(col):
            raise RawDataError(f"{str(src)!r} line {j + 2}: {len(row)} fields, the header has "
                               f"{len(col)}")
        txt = [s[row[i] or "N/A"] if i >= 0 else na for i in at]
        try:
            start = _ns(row[i_start])
            end = start + _ns(row[i_dur])
            dev = int(row[i_dev])
            step = int(row[i_step]) if i_step >= 0 and row[i_step].strip() else -1
        except ValueError:
            raise RawDataError(f"{str(src)!r} line {j + 2}: Device_id, Step Id, Start Time(us) "
                               f"or Duration(us) is not a number") from None
        tasks.append((start, end, dev, step, j, 0, txt[2] if at[2] >= 0 else s["CPU"], 0, 0, j,
                      schema.INVALID))
        infos.append((txt[0], j, None, None, txt[3], txt[1], *txt[4:], na, na, na))
        if step >= 0:
            span = steps.get((step, dev))
            if span is None:
                steps[(step, dev)] = [start, end]
            else:
                span[0], span[1] = min(span[0], start), max(span[1], end)
    con.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", ((i, v) for v, i in s.items()))
    _meta(con, rank_dir, src, min((t[0] for t in tasks), default=0),
          max((t[1] for t in tasks), default=0))
    con.executemany(f"INSERT INTO TASK VALUES ({','.join('?' * 11)})", tasks)
    con.executemany(f"INSERT INTO COMPUTE_TASK_INFO VALUES ({','.join('?' * 15)})", infos)
    con.executemany("INSERT INTO STEP_TIME VALUES (?, ?, ?, ?, ?)",
                    ((k[0], v[0], v[1], schema.INVALID, k[1]) for k, v in sorted(steps.items())))


def _build(dst: Path, fill: Callable[[sqlite3.Connection], None]) -> None:
    con = sqlite3.connect(dst)
    try:
        # a private temp file renamed into place when complete: no journal, no fsync per
        # commit, the staging table in memory
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.execute("PRAGMA temp_store=MEMORY")
        for stmt in schema.create_statements():
            con.execute(stmt)
        fill(con)
        for stmt in schema.INDEXES:
            con.execute(stmt)
        con.commit()
    finally:
        con.close()


def _fresh(db: Path, src: Path) -> bool:
    try:
        return db.is_file() and db.stat().st_mtime_ns >= src.stat().st_mtime_ns
    except OSError:
        return False


def user_cache_db(src: Path) -> Path:
    """The user-cache location of ``src``'s kernel database (path + size + mtime key)."""
    st = src.stat()
    key = hashlib.sha256(f"{src.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return fs.cache_root() / "kernels" / f"{key.hexdigest()[:32]}.db"


def _filler(rank_dir: Path, src: Path) -> Callable[[sqlite3.Connection], None]:
    return lambda con: (_from_csv if src.name == KERNELS else _from_db)(rank_dir, src, con)


def _build_at(db: Path, fill: Callable[[sqlite3.Connection], None]) -> Path:
    """Build into ``db`` (temp file + rename); OSError/PathError/sqlite3.Error when the
    place cannot be written."""
    fs.make_dir(db.parent)
    tmp = db.with_name(f".{db.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    os.close(fs.open_new(tmp, append=False))
    try:
        _build(tmp, fill)
        os.replace(tmp, db)
    finally:
        tmp.unlink(missing_ok=True)
    return db


def _build_temporary(rank_dir: Path, src: Path) -> Path:
    fd, name = tempfile.mkstemp(prefix="openmsprof-kernels-", suffix=".db")
    os.close(fd)
    tmp = Path(name)
    atexit.register(tmp.unlink, missing_ok=True)
    _build(tmp, _filler(rank_dir, src))  # into the empty 0600 file mkstemp made (no name reused)
    return tmp


def ensure_kernel_db(rank_dir: Path) -> Path:
    """The rank dir's kernel database, built when missing or stale: in the rank dir, else
    (not writable) in the user's cache, else in a temporary file."""
    rank_dir = Path(rank_dir)
    src = _source(rank_dir)
    if src is None:
        raise PathError(f"{str(rank_dir)!r} has no {OUTPUT}/{KERNELS} or torch db; analyse it "
                        "first")
    own = rank_dir / KERNEL_DB
    if _fresh(own, src):
        return own
    cache = user_cache_db(src)
    if _fresh(cache, src):
        return cache
    for place in (own, cache):
        try:
            return _build_at(place, _filler(rank_dir, src))
        except (PathError, OSError, sqlite3.OperationalError):
            continue  # read-only or full: the next place
    return _build_temporary(rank_dir, src)


def write_kernel_db(rank_dir: Path, start: np.ndarray[Any, Any], end: np.ndarray[Any, Any],
                    dev: np.ndarray[Any, Any], step: np.ndarray[Any, Any],
                    cols: list[tuple[np.ndarray[Any, Any], list[str]] | None]) -> Path | None:
    """The torch analysis' side: write ``RANK_DIR/.openmsprof/kernels.db`` from the columns
    that ``kernel_details.csv`` was just written from (no CSV re-read), after the CSV, so that
    :func:`ensure_kernel_db` finds it fresh.  Columns as :func:`kernel_csv.store` takes them.
    None when it cannot be written (``analyze`` then builds it from the CSV)."""
    rank_dir = Path(rank_dir)
    src = rank_dir / OUTPUT / KERNELS

    def fill(con: sqlite3.Connection) -> None:
        kernel_csv.store(con, start, end, dev, step, cols, {},
                         lambda first, last: _meta(con, rank_dir, src, first, last),
                         schema.INVALID)

    try:
        return _build_at(rank_dir / KERNEL_DB, fill)
    except (PathError, OSError, sqlite3.Error, ValueError):
        return None
