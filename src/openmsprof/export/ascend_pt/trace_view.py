"""``trace_view.json`` in the Ascend spelling (FORMATS.md §5, decision 2): a bare array, string
epoch-µs ``ts``, bit-packed pids, processes Python / CANN / Ascend Hardware / Overlap Analysis,
``async_npu`` flows whose ``f`` lands exactly on the kernel's pid/tid/ts.  Streamed to disk."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from openmsprof.collect import fs
from openmsprof.export.ascend_pt.framework import Framework, call_stacks, to_ns
from openmsprof.export.ascend_pt.overlap import Overlap

HOST_DEV = 31
ARG_KEYS = ("Input Dims", "Input type", "Sequence number", "Fwd thread id")


def ts_text(ns: int) -> str:
    """µs with exactly 3 decimals by integer formatting (FORMATS.md §1)."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def enc_pid(pid: int, sort: int, dev: int) -> int:
    return ((pid & 0x3FFFFF) << 10) | (sort << 5) | dev


def _meta(pid: int, name: str, labels: str, sort: int) -> list[dict[str, Any]]:
    return [{"name": "process_name", "pid": pid, "tid": 0, "ph": "M", "args": {"name": name}},
            {"name": "process_labels", "pid": pid, "tid": 0, "ph": "M", "args": {"labels": labels}},
            {"name": "process_sort_index", "pid": pid, "tid": 0, "ph": "M", "args": {"sort_index": sort}}]


def _thread(pid: int, tid: int, name: str, sort: int) -> list[dict[str, Any]]:
    return [{"name": "thread_name", "pid": pid, "tid": tid, "ph": "M", "args": {"name": name}},
            {"name": "thread_sort_index", "pid": pid, "tid": tid, "ph": "M", "args": {"sort_index": sort}}]


class Layout:
    """pids of the tracks of one rank."""

    def __init__(self, fw: Framework, device_id: int) -> None:
        self.python = fw.pid
        self.cann = enc_pid(fw.pid, 7, HOST_DEV)
        self.hardware = enc_pid(fw.pid, 14, device_id)
        self.overlap = enc_pid(fw.pid, 31, device_id)
        self.device_id = device_id


def events(fw: Framework, ov: Overlap, lay: Layout) -> Iterator[dict[str, Any]]:
    dev = lay.device_id
    yield from _meta(lay.python, "Python", "CPU", 0)
    for t in fw.tids:
        yield from _thread(lay.python, t, f"Thread {t}", t)
    yield from _meta(lay.cann, "CANN", "CPU", 7)
    yield from _meta(lay.hardware, "Ascend Hardware", f"NPU {dev}", 14)
    k = fw.kernels
    for s in sorted(set(k.stream.tolist())):
        yield from _thread(lay.hardware, s, f"Stream {s}", s)
    yield from _meta(lay.overlap, "Overlap Analysis", f"NPU {dev}", 31)
    for i, (name, _iv) in enumerate(ov.tracks()):
        yield from _thread(lay.overlap, i, name, i)
    stacks = call_stacks(fw)
    ts, dur, tid = fw.op_ts.tolist(), fw.op_dur.tolist(), fw.op_tid.tolist()
    for i, e in enumerate(fw.ops):
        src = e.get("args") or {}
        args = {key: src[key] for key in ARG_KEYS if key in src}
        if i in stacks:
            args["Call stack"] = stacks[i]
        yield {"ph": "X", "name": e.get("name", ""), "pid": lay.python, "tid": tid[i], "ts": ts_text(ts[i]),
               "dur": dur[i] / 1000, "cat": "cpu_op", "args": args}
    if fw.python:
        pts = to_ns([e["ts"] for e in fw.python], fw.offset_ns).tolist()
        for j, e in enumerate(fw.python):
            yield {"ph": "X", "name": e.get("name", ""), "pid": lay.python, "tid": e.get("tid", 0),
                   "ts": ts_text(pts[j]), "dur": float(e.get("dur", 0)), "cat": "python_function", "args": {}}
    if fw.flows:
        fts = to_ns([e["ts"] for e in fw.flows], fw.offset_ns).tolist()
        for j, e in enumerate(fw.flows):
            ev = {"ph": e["ph"], "bp": "e", "name": "fwdbwd", "id": e.get("id", 0), "pid": lay.python,
                  "tid": e.get("tid", 0), "ts": ts_text(fts[j]), "cat": "fwdbwd"}
            yield ev
    kts, kdur, kst, kop = k.ts.tolist(), k.dur.tolist(), k.stream.tolist(), k.op.tolist()
    for j in range(len(k)):
        kt = ts_text(kts[j])
        yield {"name": k.name[j], "pid": lay.hardware, "tid": kst[j], "ts": kt, "dur": kdur[j] / 1000, "ph": "X",
               "args": {"Model Id": 4294967295, "Task Type": k.core[j], "Stream Id": kst[j], "Task Id": j,
                        "Batch Id": 0, "Subtask Id": 4294967295, "connection_id": j}}
        o = kop[j]
        if o >= 0:
            yield {"ph": "s", "bp": "e", "name": "torch_to_npu", "id": kts[j], "pid": lay.python,
                   "tid": tid[o], "ts": ts_text(ts[o]), "cat": "async_npu"}
            yield {"ph": "f", "bp": "e", "name": "torch_to_npu", "id": kts[j], "pid": lay.hardware,
                   "tid": kst[j], "ts": kt, "cat": "async_npu"}
    for i, (name, (starts, ends)) in enumerate(ov.tracks()):
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            yield {"name": name, "pid": lay.overlap, "tid": i, "ts": ts_text(a), "dur": (b - a) / 1000,
                   "ph": "X"}


def write(path: Path, evs: Iterator[dict[str, Any]], chunk: int = 20000) -> int:
    """Stream ``evs`` as a JSON array to ``path`` (temp file + rename, 0640).  Returns the count."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = fs.open_new(tmp, append=False)
    n = 0
    try:
        fs.write_all(fd, b"[")
        buf: list[bytes] = []
        dumps = orjson.dumps
        for ev in evs:
            buf.append(dumps(ev))
            n += 1
            if len(buf) >= chunk:
                fs.write_all(fd, (b"," if n > len(buf) else b"") + b",".join(buf))
                buf = []
        if buf:
            fs.write_all(fd, (b"," if n > len(buf) else b"") + b",".join(buf))
        fs.write_all(fd, b"]")
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)
    return n


def step_of(fw: Framework, ts: np.ndarray) -> list[object]:
    """Step id containing each timestamp, or '' outside every step."""
    if not fw.steps:
        return [""] * len(ts)
    starts = np.asarray([s[1] for s in fw.steps], np.int64)
    ends = np.asarray([s[2] for s in fw.steps], np.int64)
    ids = [s[0] for s in fw.steps]
    pos = np.searchsorted(starts, ts, side="right") - 1
    out: list[object] = []
    for p, t in zip(pos.tolist(), ts.tolist(), strict=False):
        out.append(ids[p] if p >= 0 and t < ends[p] else "")
    return out
