"""``communication.json`` / ``communication_matrix.json`` (docs/formats.md §4, clients/msprof-analyze.md
§7.3), the trace_view ``Communication`` process and the analysis.db CommAnalyzer* rows, from the
operations of ``communication.collect``.

Per operation: Elapse = its duration; Transit = Elapse (Kineto shows no Notify/wait tasks, so the
time spent waiting for peers cannot be told apart and Wait/Synchronization/Idle are 0); the bytes
are the rank's own payload on one ``LOCAL`` link; each operation is one packet in the Size
Distribution; Large Packet Ratio = share of packets over ``LARGE_PACKET_MB``.  The matrix has the
self link ``{localRank}-{localRank}`` per operation (how msprof-analyze maps local to global ranks);
per-peer traffic of a collective is not in the trace.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

from openmsprof.export.ascend_pt.communication import TRANSPORT, CommOp, Group
from openmsprof.export.ascend_pt.text import ts_text
from openmsprof.fileio import fs

LARGE_PACKET_MB = 1.0
_MB = 1024.0 * 1024.0
TIME_KEYS = ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)", "Idle Time(ms)")
COMM_SORT = 16


def ratio(a: float, b: float) -> float:
    return 0.0 if abs(b) < 1e-15 else round(a / b, 4)


def _time_info(op: CommOp) -> dict[str, float]:
    ms = op.dur / 1e6
    return {"Start Timestamp(us)": op.ts / 1000, "Elapse Time(ms)": ms, "Transit Time(ms)": ms, "Wait Time(ms)": 0.0,
            "Synchronization Time(ms)": 0.0, "Idle Time(ms)": 0.0, "Wait Time Ratio": 0.0,
            "Synchronization Time Ratio": 0.0}


def _link(size_mb: float, ms: float, dist: dict[str, list[float]]) -> dict[str, Any]:
    packets = sum(v[0] for v in dist.values())
    large = sum(v[0] for k, v in dist.items() if float(k) > LARGE_PACKET_MB)
    return {"Transit Size(MB)": size_mb, "Transit Time(ms)": ms, "Bandwidth(GB/s)": ratio(size_mb, ms),
            "Large Packet Ratio": ratio(large, packets), "Size Distribution": dist}


def _bandwidth(op: CommOp) -> dict[str, Any]:
    mb, ms = op.size / _MB, op.dur / 1e6
    return {TRANSPORT: _link(mb, ms, {repr(mb): [1, ms]})}


def _total(ops: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """torch_npu's ``Total Op Info``: times summed, ratios recomputed, links summed per transport."""
    times = dict.fromkeys(TIME_KEYS, 0.0)
    links: dict[str, dict[str, Any]] = {}
    for info in ops.values():
        for k in TIME_KEYS:
            times[k] += info["Communication Time Info"][k]
        for transport, ln in info["Communication Bandwidth Info"].items():
            t = links.setdefault(transport, {"size": 0.0, "ms": 0.0, "dist": defaultdict(lambda: [0, 0.0])})
            t["size"] += ln["Transit Size(MB)"]
            t["ms"] += ln["Transit Time(ms)"]
            for key, (count, ms) in ln["Size Distribution"].items():
                t["dist"][key][0] += count
                t["dist"][key][1] += ms
    times["Wait Time Ratio"] = ratio(times["Wait Time(ms)"], times["Wait Time(ms)"] + times["Transit Time(ms)"])
    times["Synchronization Time Ratio"] = ratio(times["Synchronization Time(ms)"],
                                                times["Synchronization Time(ms)"] + times["Transit Time(ms)"])
    return {"Communication Time Info": times,
            "Communication Bandwidth Info": {k: _link(v["size"], v["ms"], dict(v["dist"])) for k, v in links.items()}}


def communication(ops: list[CommOp], group: Group) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for op in ops:
        step = doc.setdefault(op.step, {"collective": {}, "p2p": {}})
        step[op.kind][f"{op.name}@{group.hashed}"] = {"Communication Time Info": _time_info(op),
                                                      "Communication Bandwidth Info": _bandwidth(op)}
    for step in doc.values():
        for kind in ("collective", "p2p"):
            if step[kind]:
                step[kind]["Total Op Info"] = _total(step[kind])
    return doc


def _integrate(ops: list[CommOp], group: Group) -> dict[str, Any]:
    """torch_npu's matrix view: per (type, link) the top1 / middle / bottom1-3 operations by
    bandwidth and their total."""
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    self_link = f"{group.local_rank}-{group.local_rank}"
    for op in ops:
        mb, ms = op.size / _MB, op.dur / 1e6
        by_key[(op.op_type.lower(), self_link)].append(
            {"Transport Type": TRANSPORT, "Transit Size(MB)": mb, "Transit Time(ms)": ms,
             "Bandwidth(GB/s)": ratio(mb, ms), "Op Name": op.name})
    out: dict[str, Any] = defaultdict(dict)
    for (op_type, link), data in by_key.items():
        data.sort(key=lambda d: d["Bandwidth(GB/s)"], reverse=True)
        size = sum(d["Transit Size(MB)"] for d in data)
        ms = sum(d["Transit Time(ms)"] for d in data)
        name = f"{op_type}-{{}}@{group.hashed}"
        out[name.format("top1")][link] = data[0]
        out[name.format("middle")][link] = data[len(data) // 2]
        out[name.format("bottom1")][link] = data[-1]
        if len(data) >= 2:
            out[name.format("bottom2")][link] = data[-2]
        if len(data) >= 3:
            out[name.format("bottom3")][link] = data[-3]
        out[name.format("total")][link] = {"Transport Type": TRANSPORT, "Transit Size(MB)": size,
                                           "Transit Time(ms)": ms, "Bandwidth(GB/s)": ratio(size, ms), "Op Name": ""}
    return dict(out)


def matrix(ops: list[CommOp], group: Group) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    steps: dict[str, list[CommOp]] = defaultdict(list)
    for op in ops:
        steps[op.step].append(op)
    for step, step_ops in steps.items():
        doc[step] = {kind: _integrate([o for o in step_ops if o.kind == kind], group)
                     for kind in ("collective", "p2p")}
    return doc


def write_json(out: Path, ops: list[CommOp], group: Group) -> list[str]:
    """Both files, or none when the run had no communication (decision 8)."""
    if not ops:
        return []
    fs.write_file_atomic(out / "communication.json", orjson.dumps(communication(ops, group)))
    fs.write_file_atomic(out / "communication_matrix.json", orjson.dumps(matrix(ops, group)))
    return ["communication.json", "communication_matrix.json"]


def trace_events(ops: list[CommOp], group: Group, pid: int, device_id: int,
                 conn: dict[int, int] | None = None) -> list[bytes]:
    """The ``Communication`` process: one ``Group {id} Communication`` thread with the operations;
    ``conn`` maps an operation's event to the connection id of its launching API (``cann``)."""
    if not ops:
        return []
    evs: list[dict[str, Any]] = [
        {"name": "process_name", "pid": pid, "tid": 0, "ph": "M", "args": {"name": "Communication"}},
        {"name": "process_labels", "pid": pid, "tid": 0, "ph": "M", "args": {"labels": f"NPU {device_id}"}},
        {"name": "process_sort_index", "pid": pid, "tid": 0, "ph": "M", "args": {"sort_index": COMM_SORT}},
        {"name": "thread_name", "pid": pid, "tid": 0, "ph": "M", "args": {"name": f"Group {group.gid} Communication"}},
        {"name": "thread_sort_index", "pid": pid, "tid": 0, "ph": "M", "args": {"sort_index": 0}}]
    for op in ops:
        evs.append({"name": op.name, "pid": pid, "tid": 0, "ts": ts_text(op.ts), "dur": op.dur / 1000, "ph": "X",
                    "args": {"connection_id": (conn or {}).get(op.event, -1), "model id": 4294967295, "data_type": op.dtype, "count": op.count,
                             "size(Byte)": op.size, "backend": op.backend, "group_name": group.hashed}})
    return [orjson.dumps(e) for e in evs]


def analysis_rows(ops: list[CommOp], group: Group) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]],
                                                             list[tuple[Any, ...]]]:
    """CommAnalyzerTime, CommAnalyzerBandwidth and CommAnalyzerMatrix rows (µs start, ms, MB, GB/s)."""
    times, bands, links = [], [], []
    for op in ops:
        t = _time_info(op)
        times.append((op.name, group.hashed, t["Start Timestamp(us)"], t["Elapse Time(ms)"], t["Transit Time(ms)"],
                      0.0, 0.0, 0.0, op.step, op.kind))
        for transport, ln in _bandwidth(op).items():
            for package, (count, ms) in ln["Size Distribution"].items():
                bands.append((op.name, group.hashed, transport, ln["Transit Size(MB)"], ln["Transit Time(ms)"],
                              ln["Bandwidth(GB/s)"], ln["Large Packet Ratio"], float(package), count, ms, op.step,
                              op.kind))
    for step, kinds in matrix(ops, group).items():
        for kind, entries in kinds.items():
            for key, link_map in entries.items():
                name, _, gname = key.partition("@")
                for link, d in link_map.items():
                    src, _, dst = link.partition("-")
                    links.append((name, gname, src, dst, d["Transport Type"], d["Transit Size(MB)"],
                                  d["Transit Time(ms)"], d["Bandwidth(GB/s)"], step, kind, d["Op Name"]))
    return times, bands, links
