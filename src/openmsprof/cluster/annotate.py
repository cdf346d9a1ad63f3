"""``openmsprof cluster --annotate``: the measured wait/transfer split of every collective
(:mod:`.waits`) written where msprof-analyze reads per-rank communication times.

A torch rank's ``ASCEND_PROFILER_OUTPUT/communication.json`` (``Wait Time(ms)``, ``Transit
Time(ms)``, ``Wait Time Ratio`` of each op and of ``Total Op Info``) and ``analysis.db``
``CommAnalyzerTime`` (``wait_time``, ``transit_time``) hold 0 wait as exported: one rank alone
cannot tell waiting from transferring (gloo has no notify tasks).  Opt-in, because it rewrites
exported files:

* atomic per file: the JSON is replaced by rename, the db updated in one transaction;
* reversible: the first annotation keeps the exported values in
  ``ASCEND_PROFILER_OUTPUT/.openmsprof_annotate/`` and ``--unannotate`` puts them back (a second
  annotation starts from them, so it never compounds).
PROF_ jobs carry no per-rank communication files and are left as they are.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson

from openmsprof.config.errors import ProfilingError
from openmsprof.fileio import fs
from openmsprof.fileio.read_guard import read_json

__all__ = ["BACKUP", "annotate_ranks", "unannotate_ranks"]

OUT = "ASCEND_PROFILER_OUTPUT"
BACKUP = ".openmsprof_annotate"
COMM = "communication.json"
DB_VALUES = "CommAnalyzerTime.json"
TIME = "Communication Time Info"


def _rank_out(partial: dict[str, Any]) -> Path | None:
    out = Path(partial["path"]) / OUT
    return out if partial.get("kind") == "pt" and not partial.get("failed") and out.is_dir() else None


def _backup(out: Path) -> Path:
    """The exported values, saved once (the first annotation)."""
    keep = out / BACKUP
    if keep.is_dir():
        return keep
    tmp = fs.make_dir(out / f"{BACKUP}.tmp")
    comm = out / COMM
    if comm.is_file() and not comm.is_symlink():
        fs.copy_file_atomic(comm, tmp / COMM)
    db = out / "analysis.db"
    if db.is_file() and not db.is_symlink():
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            rows = con.execute("SELECT rowid, wait_time, transit_time FROM CommAnalyzerTime").fetchall()
        fs.write_file_atomic(tmp / DB_VALUES, orjson.dumps(rows))
    tmp.rename(keep)
    return keep


def _ratio(wait: float, transit: float) -> float:
    return round(wait / (wait + transit), 4) if wait + transit > 0 else 0.0


def _annotate_json(doc: dict[str, Any], split: dict[tuple[str, str], tuple[float, float]]) -> int:
    n = 0
    for step, kinds in doc.items():
        for ops in (kinds or {}).values():
            if not isinstance(ops, dict):
                continue
            total_wait = total_transit = 0.0
            for key, op in ops.items():
                hit = split.get((step, key))
                info = op.get(TIME) if isinstance(op, dict) else None
                if key == "Total Op Info" or not isinstance(info, dict):
                    continue
                if hit is not None:
                    info["Wait Time(ms)"], info["Transit Time(ms)"] = hit
                    info["Wait Time Ratio"] = _ratio(*hit)
                    n += 1
                total_wait += float(info.get("Wait Time(ms)", 0.0))
                total_transit += float(info.get("Transit Time(ms)", 0.0))
            total = ops.get("Total Op Info", {}).get(TIME)
            if isinstance(total, dict):
                total["Wait Time(ms)"], total["Transit Time(ms)"] = round(total_wait, 6), round(total_transit, 6)
                total["Wait Time Ratio"] = _ratio(total_wait, total_transit)
    return n


def annotate_ranks(partials: list[dict[str, Any]], waits: list[tuple[int, str, str, float, float]]) -> list[str]:
    """Write ``waits`` rows (rank, step, op_key, wait_ms, transfer_ms) into each torch rank's
    files; returns one line per rank annotated (or skipped, with why)."""
    by_rank: dict[int, dict[tuple[str, str], tuple[float, float]]] = {}
    for rank, step, key, wait, transfer in waits:
        by_rank.setdefault(int(rank), {})[(str(step), str(key))] = (round(float(wait), 6), round(float(transfer), 6))
    lines = []
    for p in partials:
        out = _rank_out(p)
        split = by_rank.get(int(p["rank"]))
        if out is None or not split:
            continue
        keep = _backup(out)
        n_json = n_db = 0
        if (keep / COMM).is_file():
            try:
                doc = read_json(keep / COMM, "communication.json")
            except ProfilingError as exc:
                lines.append(f"rank {p['rank']}: {exc}")
                continue
            if isinstance(doc, dict):
                n_json = _annotate_json(doc, split)
                fs.write_file_atomic(out / COMM, orjson.dumps(doc))
        if (keep / DB_VALUES).is_file():
            n_db = _annotate_db(out / "analysis.db", split)
        lines.append(f"rank {p['rank']}: wait/transfer of {max(n_json, n_db)} collective(s) written into {out}")
    return lines


def _annotate_db(db: Path, split: dict[tuple[str, str], tuple[float, float]]) -> int:
    con = sqlite3.connect(db)
    try:
        with con:
            rows = con.execute("SELECT rowid, step, hccl_op_name || '@' || group_name FROM CommAnalyzerTime "
                               "WHERE type = 'collective'").fetchall()
            todo = [(*split[(s, k)], rid) for rid, s, k in rows if (s, k) in split]
            con.executemany("UPDATE CommAnalyzerTime SET wait_time = ?, transit_time = ? WHERE rowid = ?", todo)
    finally:
        con.close()
    return len(todo)


def unannotate_ranks(partials: list[dict[str, Any]]) -> list[str]:
    """Put the exported values back where ``annotate_ranks`` changed them."""
    lines = []
    for p in partials:
        out = _rank_out(p)
        if out is None or not (keep := out / BACKUP).is_dir():
            continue
        if (keep / COMM).is_file():
            fs.copy_file_atomic(keep / COMM, out / COMM)
        if (keep / DB_VALUES).is_file():
            rows = read_json(keep / DB_VALUES, "annotation backup")
            con = sqlite3.connect(out / "analysis.db")
            try:
                with con:
                    con.executemany("UPDATE CommAnalyzerTime SET wait_time = ?, transit_time = ? WHERE rowid = ?",
                                    [(w, t, rid) for rid, w, t in rows])
            finally:
                con.close()
        for f in keep.iterdir():
            f.unlink()
        keep.rmdir()
        lines.append(f"rank {p['rank']}: exported communication times restored in {out}")
    return lines
