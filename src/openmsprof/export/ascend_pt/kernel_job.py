"""A torch rank dir (``…_ascend_pt``) as a job database, so ``analyze``, ``compare`` and
``openmsprof.load`` read torch runs as they read ``PROF_`` jobs.

The source is ``ASCEND_PROFILER_OUTPUT/kernel_details.csv`` (every export writes it): one TASK
and one COMPUTE_TASK_INFO row per kernel (the leaf aten ops on the CPU), with the kernel's
``Type``, shapes and dtypes; ``TASK.connectionId`` is the kernel's ``Step Id`` (so one profiler
step is one iteration) and STEP_TIME spans each step's kernels.  The database is built once into
``RANK_DIR/.openmsprof/kernels.db`` and rebuilt when kernel_details.csv is newer.
"""

from __future__ import annotations

import csv
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from openmsprof.config.errors import PathError, RawDataError
from openmsprof.parse import schema
from openmsprof.recorder import fs

__all__ = ["KERNEL_DB", "ensure_kernel_db", "is_rank_dir", "rank_dirs_under"]

OUTPUT = "ASCEND_PROFILER_OUTPUT"
KERNELS = "kernel_details.csv"
KERNEL_DB = Path(".openmsprof") / "kernels.db"
#: kernel_details columns this view needs (the rest are optional)
_NEEDED = ("Device_id", "Name", "Type", "Start Time(us)", "Duration(us)")
#: the COMPUTE_TASK_INFO texts, in its column order (taskType, then the tensor columns)
_INFO = ("Accelerator Core", "Input Formats", "Input Data Types", "Input Shapes", "Output Formats",
         "Output Data Types", "Output Shapes")


def is_rank_dir(path: Path) -> bool:
    """Whether ``path`` is a torch rank dir with an exported kernel_details.csv."""
    return (Path(path) / OUTPUT / KERNELS).is_file()


def rank_dirs_under(path: Path) -> list[Path]:
    """``path`` if it is a rank dir, else its rank-dir children (sorted)."""
    path = Path(path)
    if is_rank_dir(path):
        return [path]
    if not path.is_dir():
        return []
    return sorted(p for p in path.iterdir() if p.is_dir() and is_rank_dir(p))


def _ns(text: str, where: str) -> int:
    """``"1795503649863373.676\\t"`` (µs) → ns, exactly (no float rounding)."""
    t = text.strip()
    whole, _, frac = t.partition(".")
    try:
        return int(whole) * 1000 + int((frac + "000")[:3] or 0)
    except ValueError:
        raise RawDataError(f"{where}: {t!r} is not a time in microseconds") from None


class _Strings(dict[str, int]):
    def __missing__(self, key: str) -> int:
        self[key] = len(self)
        return self[key]


def _rows(path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as f:
        r = csv.DictReader(f)
        missing = [c for c in _NEEDED if c not in (r.fieldnames or [])]
        if missing:
            raise RawDataError(f"{str(path)!r} lacks column {missing[0]!r}")
        yield from enumerate(r, 2)


def _build(rank_dir: Path, dst: Path) -> None:
    src = rank_dir / OUTPUT / KERNELS
    s = _Strings()
    tasks: list[tuple[int, ...]] = []
    infos: list[tuple[int | None, ...]] = []
    steps: dict[tuple[int, int], list[int]] = {}
    for j, (line, row) in enumerate(_rows(src)):
        where = f"{str(src)!r} line {line}"
        start = _ns(row["Start Time(us)"], where)
        end = start + _ns(row["Duration(us)"], where)
        try:
            dev = int(row["Device_id"])
            step = int(row["Step Id"]) if (row.get("Step Id") or "").strip() else -1
        except ValueError:
            raise RawDataError(f"{where}: Device_id/Step Id is not an integer") from None
        tasks.append((start, end, dev, step, j, 0, s[row.get("Executor") or "CPU"], 0, 0, j,
                      schema.INVALID))
        g = [s[row.get(c) or "N/A"] for c in _INFO]
        infos.append((s[row["Name"]], j, None, None, g[0], s[row["Type"]], *g[1:],
                      s["N/A"], s["N/A"], s["N/A"]))
        if step >= 0:
            span = steps.setdefault((step, dev), [start, end])
            span[0], span[1] = min(span[0], start), max(span[1], end)
    con = sqlite3.connect(dst)
    try:
        for stmt in schema.create_statements():
            con.execute(stmt)
        con.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", ((i, v) for v, i in s.items()))
        first = min((t[0] for t in tasks), default=0)
        last = max((t[1] for t in tasks), default=0)
        meta = {"SCHEMA_VERSION": schema.SCHEMA_VERSION, "OPENMSPROF_SCHEMA":
                str(schema.OPENMSPROF_SCHEMA), "JOB_NAME": rank_dir.name, "SOURCE": KERNELS,
                "BASE_NS": str(first // 1_000_000_000 * 1_000_000_000)}
        con.executemany("INSERT INTO META_DATA VALUES (?, ?)", meta.items())
        con.execute("INSERT INTO SESSION_TIME_INFO VALUES (?, ?)", (first, last))
        con.executemany(f"INSERT INTO TASK VALUES ({','.join('?' * 11)})", tasks)
        con.executemany(f"INSERT INTO COMPUTE_TASK_INFO VALUES ({','.join('?' * 15)})", infos)
        con.executemany("INSERT INTO STEP_TIME VALUES (?, ?, ?, ?, ?)",
                        ((k[0], v[0], v[1], schema.INVALID, k[1]) for k, v in sorted(steps.items())))
        for stmt in schema.INDEXES:
            con.execute(stmt)
        con.commit()
    finally:
        con.close()


def ensure_kernel_db(rank_dir: Path) -> Path:
    """The rank dir's kernel database, built (temp file + rename) when missing or stale."""
    rank_dir = Path(rank_dir)
    src = rank_dir / OUTPUT / KERNELS
    if not src.is_file():
        raise PathError(f"{str(rank_dir)!r} has no {OUTPUT}/{KERNELS}; analyse it first")
    db = rank_dir / KERNEL_DB
    if db.is_file() and db.stat().st_mtime_ns >= src.stat().st_mtime_ns:
        return db
    fs.make_dir(db.parent)
    tmp = db.with_name(f".{db.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    os.close(fs.open_new(tmp, append=False))
    try:
        _build(rank_dir, tmp)
        os.replace(tmp, db)
    finally:
        tmp.unlink(missing_ok=True)
    return db
