"""Columnar form of the Kineto events that the exports use, filled one block of events at a time.

Operators (``cpu_op`` / ``user_annotation`` X events, in file order) become numpy columns; their
texts become codes into vocabularies: names, the trace_view ``args`` object (already serialised,
only the keys trace_view keeps), input shapes/dtypes text.  ``python_function`` events and
``fwdbwd`` flows and ``[memory]`` instant events (profile_memory) get their own columns; GPU events
are kept as dicts (CUDA machines only).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from openmsprof.export.ascend_pt.vocab import ArgCodes, Vocab
from openmsprof.sources import kineto_trace

GPU_CATS = frozenset(("kernel", "gpu_memcpy", "gpu_memset"))
NO_EXT = -(2**62)
OP_CATS = frozenset(("cpu_op", "user_annotation"))
_EMPTY: dict[str, Any] = {}
_I64 = 2**63
MEMORY = "[memory]"


def _int(v: Any) -> int:
    """An int64 from a JSON value (anything else, or out of range, is 0)."""
    return v if isinstance(v, int) and -_I64 <= v < _I64 else 0


# the attributes ``finish`` makes of each group's columns (every block's part has the dtype)
_D64, _D32 = np.dtype(np.int64), np.dtype(np.int32)
_Names = tuple[tuple[str, np.dtype[Any]], ...]
_OP_NAMES: _Names = (("op_ts", _D64), ("op_dur", _D64), ("op_tid", _D64), ("op_name", _D32),
                     ("op_annot", np.dtype(bool)), ("op_args", _D32), ("op_shape", _D32), ("op_seq", _D64),
                     ("op_fwd", _D64), ("op_ext", _D64))
_PY_NAMES: _Names = (("py_ts", _D64), ("py_dur_us", np.dtype(np.float64)), ("py_dur", _D64), ("py_tid", _D64),
                     ("py_name", _D32))
_FL_NAMES: _Names = (("flow_ts", _D64), ("flow_start", np.dtype(bool)), ("flow_id", _D64), ("flow_tid", _D64))
_MEM_NAMES: _Names = tuple((f"mem_{n}", _D64) for n in ("ts", "tid", "addr", "bytes", "alloc", "reserved",
                                                         "dev_type", "dev_id"))


def _cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    """The blocks' parts as one array of ``dtype`` (one part: itself, no copy)."""
    if len(parts) == 1:
        return parts[0].astype(dtype, copy=False)
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)


def _ns(us: np.ndarray) -> np.ndarray:
    """µs (float) → integer ns; a null, non-finite or out-of-range time (``"dur": null``, a ts
    past int64 ns) is 0, never the undefined value such a cast to int64 gives."""
    if not len(us):
        return np.zeros(0, np.int64)
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(us) < 9.2e15)  # NaN compares false
    if bad.any():
        us = np.where(bad, 0.0, us)
    return np.rint(us * 1000.0).astype(np.int64)


class Columns(ArgCodes):
    """Accumulates events (``add``) then turns them into arrays in epoch ns (``finish``)."""

    # made by ``finish`` (see _OP_NAMES … _MEM_NAMES)
    op_ts: np.ndarray
    op_dur: np.ndarray
    op_tid: np.ndarray
    op_name: np.ndarray
    op_annot: np.ndarray
    op_args: np.ndarray
    op_shape: np.ndarray
    op_seq: np.ndarray
    op_fwd: np.ndarray
    op_ext: np.ndarray
    py_ts: np.ndarray
    py_dur_us: np.ndarray
    py_dur: np.ndarray
    py_tid: np.ndarray
    py_name: np.ndarray
    flow_ts: np.ndarray
    flow_start: np.ndarray
    flow_id: np.ndarray
    flow_tid: np.ndarray
    mem_ts: np.ndarray
    mem_tid: np.ndarray
    mem_addr: np.ndarray
    mem_bytes: np.ndarray
    mem_alloc: np.ndarray
    mem_reserved: np.ndarray
    mem_dev_type: np.ndarray
    mem_dev_id: np.ndarray

    def __init__(self) -> None:
        self.pid = 0
        self._pid_set = False
        self.names: Vocab[str] = Vocab()
        super().__init__()  # the args and shapes vocabularies and their memos (ArgCodes)
        self.py_names: Vocab[str] = Vocab()
        self.gpu: list[dict[str, Any]] = []
        # per block: op ts ns, dur ns, tid, name, annot, args, shape, seq, fwd, ext; python_function
        # ts ns, dur µs, dur ns, tid, name; flow ts ns, start, id, tid; memory ts ns, then ints
        self._op: list[list[np.ndarray]] = [[] for _ in range(10)]
        self._py: list[list[np.ndarray]] = [[] for _ in range(5)]
        self._fl: list[list[np.ndarray]] = [[] for _ in range(4)]
        self._mem: list[list[np.ndarray]] = [[] for _ in range(8)]

    def add_block(self, block: bytes) -> None:
        """One unparsed block (``TraceReader.blocks``): the native scan's columns when it takes
        the block, else orjson's events through ``add`` (the same columns either way)."""
        scan = kineto_trace.scan
        res = scan(block) if scan is not None else None
        if res is None:
            self.add(kineto_trace.TraceReader.events(block))
            return
        self._add_scan(res)

    def add_span(self, buf: bytes, start: int, stop: int) -> None:
        """One block as ``TraceReader.spans`` gives it (``buf[start:stop]``, the array's inside):
        scanned in place, else joined into its array for ``add_block``'s orjson path."""
        scan = kineto_trace.scan
        res = scan(buf, start, stop) if scan is not None else None
        if res is None:
            self.add(kineto_trace.TraceReader.events(b"".join((b"[", memoryview(buf)[start:stop], b"]"))))
            return
        self._add_scan(res)

    def _add_scan(self, res: tuple[Any, ...]) -> None:
        """The native scan's columns of one block (``kineto_trace.scan``)."""
        pid, names, name_code, keys, key_code, op_i, annot, fl_i, fstart, pnames, pcode, py_i, pdur_us = res
        n = len(annot)
        if n:
            if not self._pid_set and pid is not None:
                self.pid, self._pid_set = pid, True
            i64 = np.frombuffer(op_i, np.int64).reshape(6, n)
            name_map = np.asarray(self.names.codes(names), np.int32)
            shape_map, args_map = self._raw_codes(keys)
            kc = np.frombuffer(key_code, np.int32)
            op = self._op
            for at, arr in ((0, i64[0]), (1, i64[1]), (2, i64[2]), (3, name_map[np.frombuffer(name_code, np.int32)]),
                            (4, np.frombuffer(annot, bool)), (5, args_map[kc]), (6, shape_map[kc]), (7, i64[4]),
                            (8, i64[5]), (9, i64[3])):
                op[at].append(arr)
        k = len(pdur_us) // 8
        if k:
            p = np.frombuffer(py_i, np.int64).reshape(3, k)
            for col, arr in zip(self._py, (p[0], np.frombuffer(pdur_us, np.float64), p[1], p[2],
                                           np.asarray(self.py_names.codes(pnames), np.int32)[
                                               np.frombuffer(pcode, np.int32)]), strict=True):
                col.append(arr)
        m = len(fstart)
        if m:
            f = np.frombuffer(fl_i, np.int64).reshape(3, m)
            for col, arr in zip(self._fl, (f[0], np.frombuffer(fstart, bool), f[1], f[2]), strict=True):
                col.append(arr)

    def add(self, events: list[Any]) -> None:
        """Take one block of raw events (dicts straight from the JSON)."""
        xs = [e for e in events if e.get("ph") == "X"]
        ops = [e for e in xs if e.get("cat") in OP_CATS]
        if ops:
            self._add_ops(ops)
        if len(ops) < len(xs):
            py = [e for e in xs if e.get("cat") == "python_function"]
            if py:
                self._add_python(py)
            self.gpu += [e for e in xs if e.get("cat") in GPU_CATS]
        if len(xs) < len(events):
            rest = [e for e in events if e.get("ph") != "X"]
            flows = [e for e in rest if e.get("cat") == "fwdbwd" and e.get("ph") in ("s", "f")]
            if flows:
                self._add_flows(flows)
            mem = [e for e in rest if e.get("name") == MEMORY and e.get("ph") == "i"]
            if mem:
                self._add_memory(mem)

    def _add_ops(self, ops: list[dict[str, Any]]) -> None:
        if not self._pid_set:
            for e in ops:
                if isinstance(e.get("pid"), int):
                    self.pid, self._pid_set = e["pid"], True
                    break
        codes = self.names.codes([e.get("name", "") for e in ops])
        tid = [t if isinstance(t := e.get("tid", 0), int) else 0 for e in ops]
        args = [e.get("args") or _EMPTY for e in ops]
        ext = [x if isinstance(x := a.get("External id"), int) else NO_EXT for a in args]
        annot = [e.get("cat") == "user_annotation" for e in ops]
        if any(annot):
            ext = [NO_EXT if u else x for x, u in zip(ext, annot, strict=True)]
        seq = [x if isinstance(x := a.get("Sequence number", -1), int) else -1 for a in args]
        fwd = [x if isinstance(x := a.get("Fwd thread id", 0), int) else 0 for a in args]
        arg = None if any("Input Dims" in a or "Input type" in a for a in args) else self._seq_codes(args)
        if arg is None:
            shape, arg = self._shape_codes(args)
        else:
            shape = [0] * len(ops)
        self._op[0].append(_ns(np.asarray([e["ts"] for e in ops], np.float64)))
        self._op[1].append(_ns(np.asarray([e.get("dur", 0) for e in ops], np.float64)))
        for col, vals, dt in zip(self._op[2:], (tid, codes, annot, arg, shape, seq, fwd, ext),
                                 (np.int64, np.int32, bool, np.int32, np.int32, np.int64, np.int64, np.int64),
                                 strict=True):
            col.append(np.asarray(vals, dt))


    def _add_python(self, py: list[dict[str, Any]]) -> None:
        dur_us = np.asarray([e.get("dur", 0) for e in py], np.float64)
        self._py[0].append(_ns(np.asarray([e["ts"] for e in py], np.float64)))
        self._py[1].append(dur_us)
        self._py[2].append(_ns(dur_us))
        self._py[3].append(np.asarray([t if isinstance(t := e.get("tid", 0), int) else 0 for e in py], np.int64))
        self._py[4].append(np.asarray(self.py_names.codes([e.get("name", "") for e in py]), np.int32))

    def _add_flows(self, flows: list[dict[str, Any]]) -> None:
        self._fl[0].append(_ns(np.asarray([e["ts"] for e in flows], np.float64)))
        self._fl[1].append(np.asarray([e["ph"] == "s" for e in flows], bool))
        self._fl[2].append(np.asarray([i if isinstance(i := e.get("id", 0), int) else 0 for e in flows], np.int64))
        self._fl[3].append(np.asarray([t if isinstance(t := e.get("tid", 0), int) else 0 for e in flows], np.int64))

    def _add_memory(self, mem: list[dict[str, Any]]) -> None:
        """Allocator events: ts, tid, Addr, Bytes (< 0 = free), Total Allocated/Reserved, Device Type/Id."""
        args = [e.get("args") or _EMPTY for e in mem]
        m = self._mem
        m[0].append(_ns(np.asarray([e["ts"] for e in mem], np.float64)))
        m[1].append(np.asarray([_int(e.get("tid", 0)) for e in mem], np.int64))
        for col, key in zip(m[2:], ("Addr", "Bytes", "Total Allocated", "Total Reserved", "Device Type",
                                    "Device Id"), strict=True):
            col.append(np.asarray([_int(a.get(key, 0)) for a in args], np.int64))

    def state(self) -> tuple[Any, ...]:
        """What ``merge`` needs of this (unfinished) instance; picklable."""
        return (self.pid, self._pid_set, self.names.items, self.args.items, self.shapes.items,
                self.py_names.items, self.gpu, self._op, self._py, self._fl, self._mem)

    def merge(self, state: tuple[Any, ...]) -> None:
        """Append the events of a later part of the trace (another instance's ``state()``): its
        vocabulary codes are mapped into ours, so the result is what one instance would hold."""
        pid, pid_set, names, args, shapes, py_names, gpu, op, py, fl, mem = state
        if not self._pid_set and pid_set:
            self.pid, self._pid_set = pid, True
        for col, vocab, items in ((3, self.names, names), (5, self.args, args), (6, self.shapes, shapes)):
            m = np.asarray([vocab.code(v) for v in items] or [0], np.int32)
            op[col] = [m[a] for a in op[col]]
        m = np.asarray([self.py_names.code(v) for v in py_names] or [0], np.int32)
        py[4] = [m[a] for a in py[4]]
        self.gpu += gpu
        for mine, theirs in zip((*self._op, *self._py, *self._fl, *self._mem), (*op, *py, *fl, *mem), strict=True):
            mine += theirs

    def finish(self, offset_ns: int) -> None:
        """Concatenate the blocks; times become epoch ns (``rint(µs × 1000) + offset``)."""
        d = self.__dict__
        for group, names in ((self._op, _OP_NAMES), (self._py, _PY_NAMES), (self._fl, _FL_NAMES),
                             (self._mem, _MEM_NAMES)):
            if not group[0]:  # no event of the kind
                for name, dtype in names:
                    d[name] = np.zeros(0, dtype)
                continue
            for parts, (name, dtype) in zip(group, names, strict=True):
                d[name] = parts[0] if len(parts) == 1 else _cat(parts, dtype)
            first = names[0][0]
            d[first] = d[first] + offset_ns  # the times: epoch ns
        self._op, self._py, self._fl, self._mem = [], [], [], []
