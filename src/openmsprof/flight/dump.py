"""A trigger's dump: the kept history written as a normal PROF job (docs/formats.md §2).

Markers go to ``host/data/Mstx.records.host.slice_0``, step spans to ``Step`` (STEP_RANGE), host
samples to ``HostSampler`` (COUNTER), thread names to ``Thread``; ``info.json`` carries
``flight`` (the trigger: kind, step, duration, running median, threshold) and
``host/flight.json`` the stack samples, the step list and every thread's stack at the trigger
(times there are epoch ns).  Import, export, show, analyze and cluster read the job as any other.
"""

from __future__ import annotations

import os
import time
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from openmsprof.config.errors import StorageError
from openmsprof.config.model import ProfileConfig
from openmsprof.fileio import fs
from openmsprof.fileio.read_guard import read_regular
from openmsprof.flight.history import Frame
from openmsprof.recorder import jobdir
from openmsprof.recorder.clock import ClockPair, read_pair
from openmsprof.recorder.rawfile import SliceWriter, StringTable
from openmsprof.recorder.records import GENERIC, RECORDS_MAGIC, Kind
from openmsprof.recorder.session import Session

__all__ = ["FLIGHT_FILE", "TORCH_FR_FILE", "finish_capture", "write_into_session", "write_job"]

#: ``JOB/host/`` file with the flight recorder's stacks, steps and trigger.
FLIGHT_FILE = "flight.json"
#: ``JOB/host/`` file with PyTorch's flight recorder dump taken at our trigger.
TORCH_FR_FILE = "torch_fr.json"


_GENERIC_DTYPE = np.dtype([("kind", "u1"), ("flags", "u1"), ("aux", "<u2"), ("tid", "<u4"), ("t0", "<i8"),
                           ("t1", "<i8"), ("a", "<u4"), ("b", "<u4")])


def _mstx(marks: list[Any], intern: Any) -> tuple[bytes, set[int]]:
    """MARK/PUSH/POP/RANGE_START/RANGE_END records, column-wise (one C pass per column)."""
    if not marks:
        return b"", set()
    n = len(marks)

    def col(i: int, dtype: Any) -> np.ndarray:
        return np.fromiter(map(itemgetter(i), marks), dtype=dtype, count=n)

    msg, dom = list(map(itemgetter(3), marks)), list(map(itemgetter(4), marks))
    ids = {m: intern(m) for m in set(msg) | set(dom)}
    kinds = col(1, np.uint8)
    rec = np.zeros(n, dtype=_GENERIC_DTYPE)
    rec["kind"] = kinds
    tids = col(2, np.int64) & 0xFFFFFFFF
    rec["tid"] = tids
    rec["t0"] = col(0, np.int64)
    rec["t1"] = np.where(kinds >= 4, col(5, np.int64), rec["t0"])
    rec["a"] = np.fromiter(map(ids.__getitem__, msg), dtype=np.uint32, count=n)
    rec["b"] = np.fromiter(map(ids.__getitem__, dom), dtype=np.uint32, count=n)
    return rec.tobytes(), {int(t) for t in np.unique(tids)}


def _records(snap: dict[str, list[Any]], intern: Any, main_tid: int,
             names: dict[int, str]) -> dict[str, bytearray]:
    pack = GENERIC.pack
    mask = 0xFFFFFFFF
    data, tids = _mstx(snap["marks"], intern)
    out: dict[str, bytearray] = {"Mstx": bytearray(data), "Step": bytearray(), "HostSampler": bytearray(),
                                 "Thread": bytearray()}
    for index, t0, t1 in snap["steps"]:
        out["Step"] += pack(Kind.STEP_RANGE, 0, 0, main_tid & mask, t0, t1, index & mask, 0)
    out["HostSampler"] = bytearray(b"".join(p for _ts, p in snap["host"]))
    for tid in sorted(tids | {main_tid & mask} | {t & mask for t in names}):
        name = names.get(tid)
        if name:
            out["Thread"] += pack(Kind.THREAD, 0, 0, tid, 0, 0, intern(name), 0)
    return out


def _stacks(snap: dict[str, list[Any]], offset: int) -> dict[str, Any]:
    index: dict[Frame, int] = {}
    samples = []
    for ts, tid, frames in snap["stacks"]:
        ids = []
        for fr in frames:
            i = index.get(fr)
            if i is None:
                i = index[fr] = len(index)
            ids.append(i)
        samples.append([ts + offset, tid, ids])
    return {"frames": [list(f) for f in index], "samples": samples}


def _pairs(snap: dict[str, list[Any]], trigger_ns: int, keep_ns: int) -> tuple[ClockPair, ClockPair]:
    now = read_pair()
    offset = now.offset_ns
    first = max(min([trigger_ns] + [s[1] for s in snap["steps"][:1]] + [m[0] for m in snap["marks"][:1]]),
                trigger_ns - keep_ns)
    last = max(trigger_ns, now.mono_ns)
    return ClockPair(first, first + offset), ClockPair(last, last + offset)


def _flight_doc(snap: dict[str, list[Any]], flight: dict[str, Any], offset: int, keep_ns: int,
                main_tid: int, names: dict[int, str], rank: int) -> bytes:
    doc = {**flight, "keep_s": keep_ns / 1e9, "rank": rank, "pid": os.getpid(),
           "threads": {str(t): n for t, n in names.items()}, "main_tid": main_tid,
           "steps": [[i, t0 + offset, t1 + offset] for i, t0, t1 in snap["steps"]],
           "stacks": _stacks(snap, offset)}
    return orjson.dumps(doc)


def _write_records(data_dir: Path, recs: dict[str, bytearray], prefix: str) -> int:
    count = 0
    for source, data in recs.items():
        if data:
            w = SliceWriter(data_dir, prefix + source, "records", "host", RECORDS_MAGIC)
            w.write(data)
            w.close()
            count += len(data) // GENERIC.size
    return count


def write_job(output: Path, snap: dict[str, list[Any]], flight: dict[str, Any], trigger_ns: int,
              keep_ns: int, main_tid: int, names: dict[int, str], rank: int) -> Path:
    """Write one dump under ``output``; returns the job directory."""
    start, end = _pairs(snap, trigger_ns, keep_ns)
    offset = start.offset_ns
    job = jobdir.create(output, start.wall_ns)
    config = ProfileConfig()
    cfg = config.to_dict()
    info = jobdir.info_json(cfg, list(config.devices), rank)
    info["flight"] = flight
    sample = {"llc_profiling": "read", "ai_core_profiling_mode": "task-based", "openmsprof": cfg}
    jobdir.write_config_files(job.host, "", info, sample, start, "host_start.log")
    strings = StringTable(job.host_data, "host")
    recs = _records(snap, strings.intern, main_tid, names)
    strings.close()
    count = _write_records(job.host_data, recs, "")
    fs.write_file_atomic(job.host / FLIGHT_FILE, _flight_doc(snap, flight, offset, keep_ns, main_tid, names, rank))
    dropped = sum(flight.get("evicted", {}).values())
    fs.write_file_atomic(job.host / "end_info", jobdir.dump({**jobdir.end_info(end),
                                                                 "openmsprofDropped": str(dropped)}))
    overhead = {"records_written": count, "bytes_written": count * GENERIC.size,
                "records_dropped": dropped, "drops_by_thread_kind": {}, "flusher_cpu_ns": 0,
                "backend": "flight"}
    fs.write_file_atomic(job.host / "openmsprof_overhead.json", jobdir.dump(overhead))
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    trig = flight.get("trigger", {})
    fs.write_file_atomic(job.host / "collection.log",
                         f"[{stamp}] flight recorder dump: trigger {trig.get('kind')} "
                         f"(step {trig.get('step')}); {count} records, "
                         f"{len(snap['stacks'])} stack samples; evicted {flight.get('evicted')}\n".encode())
    return job.root


def write_into_session(s: Session, snap: dict[str, list[Any]], flight: dict[str, Any], trigger_ns: int,
                       keep_ns: int, main_tid: int, names: dict[int, str], rank: int) -> ClockPair:
    """``then_capture``: the history goes into the running session's job (``Flight*`` sources,
    the session's string table); returns the start pair :func:`finish_capture` writes."""
    start, _end = _pairs(snap, trigger_ns, keep_ns)
    recs = _records(snap, s.stream.host_dir.strings.intern, main_tid, names)
    _write_records(s.job.host_data, recs, "Flight")
    fs.write_file_atomic(s.job.host / FLIGHT_FILE,
                         _flight_doc(snap, flight, start.offset_ns, keep_ns, main_tid, names, rank))
    return start


def finish_capture(root: Path, start: ClockPair, flight: dict[str, Any]) -> None:
    """After the capture session stopped: its info.json gains ``flight``, start_info the
    history's first instant (same clock offset, earlier start)."""
    host = root / "host"
    info = orjson.loads(read_regular(host / "info.json", "info.json", 16 << 20, StorageError))
    info["flight"] = flight
    fs.write_file_atomic(host / "info.json", jobdir.dump(info))
    fs.write_file_atomic(host / "start_info", jobdir.dump(jobdir.start_info(start)))
    fs.write_file_atomic(host / "host_start.log", jobdir.start_log(start))
