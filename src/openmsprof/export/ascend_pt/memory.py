"""profile_memory outputs: ``memory_record.csv`` and ``operator_memory.csv`` (docs/formats.md §4) and the
MEMORY_RECORD / OP_MEMORY rows of the DB export (bytes, ns), from Kineto's ``[memory]`` events.

Each allocator event is a row of memory_record (component ``PTA``, as torch_npu names the framework
allocator), followed, as torch_npu writes it, by a ``PTA+GE`` row: the PTA totals plus the latest GE
(graph engine) totals, and there is no GE on a CPU, so the same numbers (the TensorBoard Ascend
plugin draws its total curve from these rows).  ``npu_module_mem.csv`` holds the reserved memory of
each component over time (the plugin's "Component Peak Memory"): here the one component, ``PTA``.  An allocation (Bytes > 0) paired with the next free (Bytes < 0) of the same address on
the same device is a row of operator_memory, named after the innermost operator running on the
allocating thread at that moment (torch_npu's rule); an allocation never freed in the window has
empty release cells; a free whose allocation precedes the window is not a row.

On the CPU (PyTorch's default allocator) there is no caching and no stream-ordered release: Total
Active = Total Allocated, the Active Release Time is the Release Time, Total Reserved = Total
Allocated (Kineto reports 0 reserved because the CPU allocator holds nothing beyond what is
allocated), and Stream Ptr is ``N/A``.  Device Type is ``CPU``, or ``{TYPE}:{index}`` for a device.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from openmsprof.export.ascend_pt import text
from openmsprof.export.ascend_pt.framework import Framework

MEMORY_RECORD = ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)",
                 "Stream Ptr", "Device Type"]
OPERATOR_MEMORY = ["Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
                   "Duration(us)", "Active Duration(us)", "Allocation Total Allocated(MB)",
                   "Allocation Total Reserved(MB)", "Allocation Total Active(MB)", "Release Total Allocated(MB)",
                   "Release Total Reserved(MB)", "Release Total Active(MB)", "Stream Ptr", "Device Type"]
COMPONENT = "PTA"
COMBINED = "PTA+GE"
MODULE_MEM = ["Device_id", "Component", "Timestamp(us)", "Total Reserved(MB)", "Device"]
NA = "N/A"
_MB = 1024.0 * 1024.0
#: c10::DeviceType values Kineto writes as "Device Type".
DEVICE_TYPES = {0: "CPU", 1: "CUDA", 2: "MKLDNN", 3: "OPENGL", 4: "OPENCL", 5: "IDEEP", 6: "HIP", 7: "FPGA",
                8: "MAIA", 9: "XLA", 10: "Vulkan", 11: "Metal", 12: "XPU", 13: "MPS", 14: "Meta", 15: "HPU",
                16: "VE", 17: "Lazy", 18: "IPU", 19: "MTIA", 20: "NPU"}


def device_tag(dev_type: int, dev_id: int) -> str:
    name = DEVICE_TYPES.get(dev_type, f"DEVICE{dev_type}")
    return "CPU" if dev_type == 0 else f"{name}:{max(dev_id, 0)}"


@dataclass
class Memory:
    """Allocator events in time order (``ts`` epoch ns, totals in bytes) and the allocation pairs."""

    ts: np.ndarray
    alloc: np.ndarray
    reserved: np.ndarray
    active: np.ndarray
    dev_type: np.ndarray
    dev_id: np.ndarray
    a: np.ndarray          # event index of each allocation, in allocation order
    f: np.ndarray          # event index of its free (-1: not freed in the window)
    size: np.ndarray       # bytes
    owner: np.ndarray      # name text of the allocating operator ("" none)

    def __len__(self) -> int:
        return len(self.ts)


def _innermost(fw: Framework, ts: np.ndarray, tid: np.ndarray, annotation: bool) -> np.ndarray:
    """Per event the innermost operator (annotation=False: cpu_op, else user_annotation) on the same
    thread whose [start, end] holds the event; -1 if none."""
    sel = np.flatnonzero(fw.op_annotation == annotation)
    out = np.full(len(ts), -1, np.int64)
    if not len(sel) or not len(ts):
        return out
    o_ts, o_end, o_tid = fw.op_ts[sel], fw.op_ts[sel] + fw.op_dur[sel], fw.op_tid[sel]
    order = np.lexsort((-fw.op_dur[sel], o_ts, o_tid))
    sel, o_ts, o_end, o_tid = sel[order], o_ts[order], o_end[order], o_tid[order]
    index = np.full(len(fw.op_ts), -1, np.int64)
    index[sel] = np.arange(len(sel))
    for t in np.unique(tid).tolist():
        lo, hi = np.searchsorted(o_tid, t, "left"), np.searchsorted(o_tid, t, "right")
        ev = np.flatnonzero(tid == t)
        if hi == lo:
            continue
        pos = lo + np.searchsorted(o_ts[lo:hi], ts[ev], "right") - 1
        cand = np.where(pos >= lo, pos, -1)
        for step in range(64):  # walk outwards while the candidate ended before the event
            bad = (cand >= 0) & (o_end[np.maximum(cand, 0)] < ts[ev])
            if not bad.any():
                break
            if annotation:  # no parent links between annotations: try the previous one on the thread
                prev = cand[bad] - 1
                cand[bad] = np.where((prev >= lo) & (step < 8), prev, -1)
            else:
                parent = fw.op_parent[sel[cand[bad]]]
                cand[bad] = np.where(parent >= 0, index[np.maximum(parent, 0)], -1)
        out[ev] = np.where(cand >= 0, sel[np.maximum(cand, 0)], -1)
    return out


def load(fw: Framework) -> Memory | None:
    """The memory view of ``fw`` or None when the trace has no allocator events."""
    c = fw.cols
    if not len(c.mem_ts):
        return None
    order = np.argsort(c.mem_ts, kind="stable")
    ts, tid, addr, nbytes = c.mem_ts[order], c.mem_tid[order], c.mem_addr[order], c.mem_bytes[order]
    alloc, dev_type, dev_id = c.mem_alloc[order], c.mem_dev_type[order], c.mem_dev_id[order]
    reserved = c.mem_reserved[order]
    cpu = dev_type == 0
    reserved = np.where(cpu, np.maximum(reserved, alloc), reserved)
    # pairs: sort by (device, address, time); an allocation followed by a free of the same block
    by = np.lexsort((np.arange(len(ts)), ts, addr, dev_id, dev_type))
    same = np.zeros(len(ts), bool)
    same[:-1] = (addr[by][1:] == addr[by][:-1]) & (dev_type[by][1:] == dev_type[by][:-1]) & \
        (dev_id[by][1:] == dev_id[by][:-1])
    is_alloc = nbytes[by] > 0
    freed = np.zeros(len(ts), bool)
    freed[:-1] = same[:-1] & is_alloc[:-1] & (nbytes[by][1:] < 0)
    a_sorted = np.flatnonzero(is_alloc)
    a = by[a_sorted]
    f = np.where(freed[a_sorted], by[np.minimum(a_sorted + 1, len(by) - 1)], -1)
    keep = np.argsort(a, kind="stable")
    a, f = a[keep], f[keep]
    owner_op = _innermost(fw, ts[a], tid[a], annotation=False)
    missing = np.flatnonzero(owner_op < 0)
    if len(missing):
        owner_op[missing] = _innermost(fw, ts[a][missing], tid[a][missing], annotation=True)
    names = np.asarray([*fw.names, ""], dtype=object)
    code = np.where(owner_op >= 0, fw.cols.op_name[np.maximum(owner_op, 0)], len(fw.names))
    return Memory(ts=ts, alloc=alloc, reserved=reserved, active=alloc, dev_type=dev_type, dev_id=dev_id, a=a,
                  f=f, size=nbytes[a], owner=names[code])


def _us(ns: int) -> str:
    """µs text without the Excel-guard TAB: no CSV field of the memory views ends in whitespace."""
    return text.ts_text(ns)


def _tags(m: Memory) -> list[str]:
    cache: dict[tuple[int, int], str] = {}
    out = []
    for t, d in zip(m.dev_type.tolist(), m.dev_id.tolist(), strict=True):
        tag = cache.get((t, d))
        if tag is None:
            tag = cache[(t, d)] = device_tag(t, d)
        out.append(tag)
    return out


def _csv(header: list[str], rows: list[list[object]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue().encode()


def write_csvs(out: Path, m: Memory) -> list[str]:
    """memory_record.csv (every allocator event: a PTA row and its PTA+GE row), npu_module_mem.csv
    (the PTA component's reserved memory) and operator_memory.csv (one row per allocation)."""
    tags = _tags(m)
    mb = [(m.alloc / _MB).tolist(), (m.reserved / _MB).tolist(), (m.active / _MB).tolist()]
    ts = [_us(t) for t in m.ts.tolist()]
    records: list[list[object]] = []
    for t, x, y, z, g in zip(ts, *mb, tags, strict=True):
        records += [[COMPONENT, t, x, y, z, NA, g], [COMBINED, t, x, y, z, NA, g]]
    text.write_stream(out / "memory_record.csv", [_csv(MEMORY_RECORD, records)])
    # fixed 6 decimals (1 byte ≈ 1e-6 MB), no exponent: the plugin finds the peak by comparing
    # the cells as strings, which agrees with the numbers while they have as many integer digits
    module = [[max(d, 0), COMPONENT, t, f"{y:.6f}", g]
              for d, t, y, g in zip(m.dev_id.tolist(), ts, mb[1], tags, strict=True)]
    text.write_stream(out / "npu_module_mem.csv", [_csv(MODULE_MEM, module)])
    raw = m.ts.tolist()
    rows: list[list[object]] = []
    for name, size, a, f in zip(m.owner.tolist(), m.size.tolist(), m.a.tolist(), m.f.tolist(), strict=True):
        alloc = [mb[0][a], mb[1][a], mb[2][a]]
        if f >= 0:
            dur = _us(raw[f] - raw[a])
            rows.append([name, size / 1024, ts[a], ts[f], ts[f], dur, dur, *alloc, mb[0][f], mb[1][f], mb[2][f], NA,
                         tags[a]])
        else:
            rows.append([name, size / 1024, ts[a], "", "", "", "", *alloc, "", "", "", NA, tags[a]])
    text.write_stream(out / "operator_memory.csv", [_csv(OPERATOR_MEMORY, rows)])
    return ["memory_record.csv", "npu_module_mem.csv", "operator_memory.csv"]


def db_rows(m: Memory, intern: dict[str, int]) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """MEMORY_RECORD and OP_MEMORY rows (bytes, ns; Stream Ptr NULL; deviceId -1 for the CPU)."""
    comp = intern[COMPONENT]
    ts, al, rs, ac = m.ts.tolist(), m.alloc.tolist(), m.reserved.tolist(), m.active.tolist()
    dev = np.where(m.dev_type == 0, -1, m.dev_id).tolist()
    records: list[tuple[object, ...]] = [(comp, t, x, y, z, None, d)
                                         for t, x, y, z, d in zip(ts, al, rs, ac, dev, strict=True)]
    ops: list[tuple[object, ...]] = []
    for name, size, a, f in zip(m.owner.tolist(), m.size.tolist(), m.a.tolist(), m.f.tolist(), strict=True):
        if f >= 0:
            ops.append((intern[name], size, ts[a], ts[f], ts[f], ts[f] - ts[a], ts[f] - ts[a], al[a], rs[a], ac[a],
                        al[f], rs[f], ac[f], None, dev[a]))
        else:
            ops.append((intern[name], size, ts[a], None, None, None, None, al[a], rs[a], ac[a], None, None, None,
                        None, dev[a]))
    return records, ops
