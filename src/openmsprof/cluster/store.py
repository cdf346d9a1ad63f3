"""Parse one rank once into its store under ``STORE/rank{N}/``: the kernels (and what the
worker derives from them) as Parquet, the small tables (step trace, communication, links) in
one ``small.json`` that DuckDB reads with a fixed schema (:mod:`.rank_small`).

The store is keyed by the source files' size and mtime: a second run over unchanged input reuses
it without reading the sources.  What goes back to the caller is a small ``partial`` dict (counts,
problems, the clock pair, and small.json's bytes so that a parent on another host can rebuild
it); the kernel table stays in the store.  Only the kernel path imports pyarrow: a
``step_trace``/``communication`` run parses its ranks without it (and without the pandas its
array constructors import).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import os
import time
from pathlib import Path
from typing import Any

import orjson

from openmsprof.cluster.discover import RankSource
from openmsprof.cluster.rank_small import (
    OUT,
    SMALL_FILE,
    STEP_COLUMNS_KEY,
    comm_tables,
    read_step_trace,
)
from openmsprof.config.errors import ProfilingError
from openmsprof.fileio import fs
from openmsprof.fileio.read_guard import read_json

__all__ = ["cached_partial", "parse_rank", "rank_store", "restore_small", "source_bytes", "source_key"]

STORE_VERSION = 6
_PT_FILES = ("step_trace_time.csv", "communication.json", "communication_matrix.json", "kernel_details.csv")


def rank_store(store_root: Path, rank: int) -> Path:
    return store_root / f"rank{rank:05d}"


def _sources(src: RankSource) -> list[Path]:
    if src.kind == "pt":
        return [src.path / OUT / f for f in _PT_FILES] + sorted(src.path.glob("profiler_info_*.json"))
    db = src.path / "sqlite" / "msprof.db"
    return [db] if db.exists() else sorted(p for p in src.path.rglob("*") if p.is_file())


def source_bytes(src: RankSource) -> int:
    """Bytes of the files a parse of ``src`` reads (those present)."""
    total = 0
    for p in _sources(src):
        with contextlib.suppress(OSError):
            total += p.stat().st_size
    return total


def source_key(src: RankSource) -> str:
    h = hashlib.sha1(f"v{STORE_VERSION}:{src.kind}:{src.path}".encode())
    for p in _sources(src):
        try:
            st = p.stat()
            h.update(f"{p.name}:{st.st_size}:{st.st_mtime_ns};".encode())
        except OSError:
            h.update(f"{p.name}:absent;".encode())
    return h.hexdigest()


def _write(path: Path, table: Any) -> None:
    import pyarrow.parquet as pq

    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.chmod(tmp, fs.FILE_MODE)
    os.replace(tmp, path)


def _clock(src: RankSource) -> dict[str, Any]:
    info_path = next(iter(sorted(src.path.glob("profiler_info_*.json"))), None)
    if info_path is None:
        return {}
    try:
        info = read_json(info_path, info_path.name)
    except ProfilingError:
        return {}
    end = (info.get("end_info") if isinstance(info, dict) else None) or {}
    if not isinstance(end, dict):
        return {}
    return {"epoch_ns": end.get("collectionTimeEnd"), "mono_ns": end.get("MonotonicTimeEnd")}


def _parse_pt_small(src: RankSource, problems: list[str], counts: dict[str, int]) -> dict[str, Any]:
    """The rank's small tables for small.json (those with rows; their row counts into ``counts``)."""
    tables: dict[str, Any] = {}
    files = src.path / OUT
    try:
        names, steps = read_step_trace(src.rank, files / "step_trace_time.csv")
        tables.update({"step_trace": steps, STEP_COLUMNS_KEY: names[2:]})
        counts["step_trace"] = len(steps)
    except ProfilingError as exc:  # the read guard's refusal: one line naming the file
        problems.append(f"rank {src.rank}: step_trace_time.csv unreadable ({exc})")
    except (OSError, ValueError, csv.Error) as exc:
        problems.append(f"rank {src.rank}: step_trace_time.csv unreadable ({str(exc).splitlines()[0][:160]})")
    try:
        errors: list[str] = []
        rows = comm_tables(src.rank, files / "communication.json", files / "communication_matrix.json", errors)
        problems += [f"rank {src.rank}: communication json unreadable ({e})" for e in errors]
        for name, data in rows.items():
            if data:
                tables[name] = data
                counts[name] = len(data)
    except OSError as exc:
        problems.append(f"rank {src.rank}: communication json unreadable ({str(exc)[:300]})")
    return tables


def _write_small(out: Path, tables: dict[str, Any]) -> None:
    """Write the store's small.json (every small table's rows)."""
    fs.write_file_atomic(out / SMALL_FILE, orjson.dumps(tables))


def _system_pool() -> None:
    """pyarrow on the system allocator, which returns freed blocks: a worker's peak stays that of
    one CSV block (mimalloc kept ~250 MiB per worker after a 1 M-row rank)."""
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def _parse_pt_kernels(src: RankSource, out: Path, problems: list[str]) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from openmsprof.cluster.opstats import rank_gaps, rank_op_stats
    from openmsprof.cluster.rank_pt import KERNEL_SCHEMA, stream_kernels

    _system_pool()
    kernels = 0
    path = src.path / OUT / "kernel_details.csv"
    if not os.path.lexists(path):
        problems.append(f"rank {src.rank}: no kernel_details.csv")
        return {"kernels": 0}
    tmp = out / "kernels.parquet.tmp"
    writer = pq.ParquetWriter(tmp, KERNEL_SCHEMA, compression="zstd")
    try:
        kernels = stream_kernels(src.rank, path, writer.write_table)
    except ProfilingError as exc:  # refused by the read guard (a FIFO, a device, a link, too large)
        problems.append(f"rank {src.rank}: {exc}")
    except (OSError, pa.ArrowInvalid) as exc:
        problems.append(f"rank {src.rank}: kernel_details.csv torn after {kernels} rows "
                        f"({str(exc).splitlines()[0][:160]})")
    finally:
        writer.close()
    os.chmod(tmp, fs.FILE_MODE)
    os.replace(tmp, out / "kernels.parquet")
    rank_op_stats(out)
    rank_gaps(out)
    return {"kernels": kernels}


def _parse_prof(src: RankSource, out: Path) -> dict[str, Any]:
    from openmsprof.cluster.opstats import rank_op_stats
    from openmsprof.cluster.rank_prof import read_prof

    _system_pool()
    kernels, (names, steps) = read_prof(src.rank, src.path)
    _write(out / "kernels.parquet", kernels)
    _write_small(out, {"step_trace": [dict(zip(names, r, strict=True)) for r in steps], STEP_COLUMNS_KEY: names[2:]})
    rank_op_stats(out)
    return {"kernels": kernels.num_rows, "step_trace": len(steps)}


def _manifest(path: Path, key: str) -> dict[str, Any]:
    try:
        old = read_json(path, "the store's manifest.json") if os.path.lexists(path) else {}
    except ProfilingError:
        return {}
    return old if isinstance(old, dict) and old.get("key") == key else {}


def cached_partial(src: RankSource, store_root: Path, *, kernels: bool = True) -> dict[str, Any] | None:
    """The rank's partial when its store is complete and current (no parse needed), else None."""
    out = rank_store(store_root, src.rank)
    partial = _manifest(out / "manifest.json", source_key(src))
    if not ({"small", "kernels"} if kernels else {"small"}) <= set(partial.get("done", [])):
        return None
    partial.update(cached=True, seconds=0.0, small={})
    return partial


def parse_rank(src: RankSource, store_root: Path, *, kernels: bool = True, host: str = "") -> dict[str, Any]:
    """Parse (or reuse) one rank's store; returns the small partial.  ``kernels=False`` leaves
    kernel_details.csv for a later run that needs it (step_trace and communication do not)."""
    t0 = time.perf_counter()
    out = rank_store(store_root, src.rank)
    key = source_key(src)
    manifest = out / "manifest.json"
    partial = _manifest(manifest, key)
    done = set(partial.get("done", []))
    todo = ({"small", "kernels"} if kernels else {"small"}) - done
    if not todo:
        partial.update(cached=True, seconds=time.perf_counter() - t0, small=_small(out))
        return partial
    fs.make_dir(out)
    if not done:
        for stale in [*out.glob("*.parquet"), out / SMALL_FILE]:
            stale.unlink(missing_ok=True)
        partial = {"rank": src.rank, "path": str(src.path), "kind": src.kind, "host": src.host, "key": key,
                   "counts": {}, "problems": [], "clock": _clock(src) if src.kind == "pt" else {}}
    problems: list[str] = partial["problems"]
    try:
        if src.kind != "pt":
            partial["counts"].update(_parse_prof(src, out))
            todo = {"small", "kernels"}
        else:
            if "small" in todo:
                _write_small(out, _parse_pt_small(src, problems, partial["counts"]))
            if "kernels" in todo:
                partial["counts"].update(_parse_pt_kernels(src, out, problems))
    except Exception as exc:  # one bad rank is reported, the others still analysed
        problems.append(f"rank {src.rank}: {src.path.name} unreadable ({type(exc).__name__}: {str(exc)[:160]})")
    partial.update(done=sorted(done | todo), worker_host=host or os.uname().nodename, pid=os.getpid())
    fs.write_file_atomic(manifest, orjson.dumps(partial))
    partial.update(cached=False, seconds=time.perf_counter() - t0, small=_small(out))
    return partial


def _small(out: Path) -> bytes:
    path = out / SMALL_FILE
    return path.read_bytes() if path.exists() else b""


def restore_small(store_root: Path, partial: dict[str, Any]) -> None:
    """Write a partial's small tables into the parent's store when the worker's is not visible here."""
    data = partial.get("small") or b""
    path = rank_store(store_root, int(partial["rank"])) / SMALL_FILE
    try:
        if not data or path.stat().st_size == len(data):  # (the local workers' stores are the parent's)
            return
    except FileNotFoundError:
        pass
    fs.write_file_atomic(fs.make_dir(path.parent) / SMALL_FILE, data)
