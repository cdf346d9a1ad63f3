"""Columnar form of the Kineto events that the exports use, filled one block of events at a time.

Operators (``cpu_op`` / ``user_annotation`` X events, in file order) become numpy columns; their
texts become codes into vocabularies: names, the trace_view ``args`` object (already serialised,
only the keys trace_view keeps), input shapes/dtypes text.  ``python_function`` events and
``fwdbwd`` flows and ``[memory]`` instant events (profile_memory) get their own columns; GPU events
are kept as dicts (CUDA machines only).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Generic, TypeVar

import numpy as np
import orjson

from openmsprof.sources import kineto_trace

T = TypeVar("T")
ARG_KEYS = ("Input Dims", "Input type", "Sequence number", "Fwd thread id")
GPU_CATS = frozenset(("kernel", "gpu_memcpy", "gpu_memset"))
NO_EXT = -(2**62)
OP_CATS = frozenset(("cpu_op", "user_annotation"))
_EMPTY: dict[str, Any] = {}
_EMPTY_KEY = ("absent",)
_I64 = 2**63
_PARTS = re.compile(rb"([\x01\x02])([^\x01\x02]*)")
MEMORY = "[memory]"


def _int(v: Any) -> int:
    """An int64 from a JSON value (anything else, or out of range, is 0)."""
    return v if isinstance(v, int) and -_I64 <= v < _I64 else 0


class Vocab(Generic[T]):
    """Distinct values in first-seen order; ``code(v)`` is the index of ``v``."""

    def __init__(self, *first: T) -> None:
        self.index: dict[T, int] = {}
        self.items: list[T] = []
        for v in first:
            self.code(v)

    def code(self, v: T) -> int:
        c = self.index.get(v)
        if c is None:
            c = self.index[v] = len(self.items)
            self.items.append(v)
        return c

    def codes(self, values: list[T]) -> list[int]:
        """``code`` of each value: the new ones coded first, in first-seen order (as one pass
        would), then every value looked up at C speed."""
        index = self.index
        for v in dict.fromkeys(values):
            if v not in index:
                index[v] = len(self.items)
                self.items.append(v)
        return list(map(index.__getitem__, values))

    def __len__(self) -> int:
        return len(self.items)

    def copy(self) -> Vocab[T]:
        out: Vocab[T] = Vocab()
        out.index, out.items = dict(self.index), list(self.items)
        return out


def _shapes(args: dict[str, Any]) -> tuple[str, str]:
    dims = args.get("Input Dims")
    types = args.get("Input type")
    s = ";".join(",".join(str(x) for x in d) if isinstance(d, list) else "" for d in dims) if dims else ""
    t = ";".join(str(x) for x in types) if types else ""
    return s, t


@lru_cache(maxsize=1 << 12)  # the same operators' shapes window after window (the analysis worker)
def _shape_part(dims: bytes, types: bytes) -> tuple[tuple[str, str], bytes]:
    """(``_shapes`` texts, the args object's members so far: ``{`` and its Input Dims / Input type
    members, comma-separated) of a key's first two parts (each its mark byte and raw value)."""
    sub = {name: orjson.loads(part[1:]) for name, part in zip(ARG_KEYS[:2], (dims, types), strict=True)
           if part[:1] == b"\x01"}
    head = b"{" + b",".join(orjson.dumps(name) + b":" + orjson.dumps(v) for name, v in sub.items())
    return (_shapes(sub) if sub else ("", "")), head


_PLAIN = rb"(?:0|-?[1-9][0-9]{0,17})"  # a raw JSON integer orjson writes back byte for byte
#: a key whose Sequence number and Fwd thread id are absent or plain integers (the usual one)
_PLAIN_KEY = re.compile(rb"(\x01[^\x01\x02]*|\x02)(\x01[^\x01\x02]*|\x02)(?:\x01(" + _PLAIN + rb")|\x02)(?:\x01("
                        + _PLAIN + rb")|\x02)")
_SEQ, _FWD = b'"Sequence number":', b'"Fwd thread id":'


def _key_texts(key: bytes) -> tuple[tuple[str, str], bytes]:
    """(``_shapes`` texts, serialised kept args) of one scan key (see ``Columns._raw_codes``): its
    shape part kept from window to window (``_shape_part``), its Sequence number and Fwd thread
    id (new in every window) spliced in as written where they are plain integers."""
    m = _PLAIN_KEY.fullmatch(key)
    if m is not None:
        dims, types, seq, fwd = m.groups()
        shapes, head = _shape_part(dims, types)
        if seq is not None:
            head += (_SEQ if len(head) == 1 else b"," + _SEQ) + seq
        if fwd is not None:
            head += (_FWD if len(head) == 1 else b"," + _FWD) + fwd
        return shapes, head + b"}"
    parts = _PARTS.findall(key)
    if len(parts) != len(ARG_KEYS):
        raise ValueError(f"a scan key has {len(parts)} parts, not {len(ARG_KEYS)}")
    shapes, head = _shape_part(parts[0][0] + parts[0][1], parts[1][0] + parts[1][1])
    for name, (mark, raw) in zip((_SEQ, _FWD), parts[2:], strict=True):
        if mark == b"\x01":
            head += (name if len(head) == 1 else b"," + name) + orjson.dumps(orjson.loads(raw))
    return shapes, head + b"}"


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


class Columns:
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
        self.args: Vocab[bytes] = Vocab(b"{}")
        self.shapes: Vocab[tuple[str, str]] = Vocab(("", ""))
        self.py_names: Vocab[str] = Vocab()
        self.gpu: list[dict[str, Any]] = []
        # per block: op ts ns, dur ns, tid, name, annot, args, shape, seq, fwd, ext; python_function
        # ts ns, dur µs, dur ns, tid, name; flow ts ns, start, id, tid; memory ts ns, then ints
        self._op: list[list[np.ndarray]] = [[] for _ in range(10)]
        self._py: list[list[np.ndarray]] = [[] for _ in range(5)]
        self._fl: list[list[np.ndarray]] = [[] for _ in range(4)]
        self._mem: list[list[np.ndarray]] = [[] for _ in range(8)]
        self._seq_args: dict[tuple[Any, Any], int] = {}
        self._shape_args: dict[str, tuple[int, int]] = {}
        self._raw_args: dict[bytes, int] = {}  # scan key -> index into _raw_pairs
        self._raw_pairs: list[tuple[int, int]] = []  # (shape code, args code)

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

    def _raw_codes(self, keys: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """(shape codes, args codes) of the scan's distinct keys (the kept args' raw JSON bytes):
        the texts of each new key (``_key_texts``, kept from window to window) coded in
        first-seen order."""
        memo, pairs = self._raw_args, self._raw_pairs
        for k in keys:
            if k not in memo:
                s, a = _key_texts(k)
                memo[k] = len(pairs)
                pairs.append((self.shapes.code(s), self.args.code(a)))
        table = np.asarray([pairs[memo[k]] for k in keys] or [(0, 0)], np.int32).reshape(-1, 2)
        return np.ascontiguousarray(table[:, 0]), np.ascontiguousarray(table[:, 1])

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

    def _shape_codes(self, args: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
        """(shape codes, args codes) of ops that recorded shapes: one ``_shapes`` text and one
        serialisation per distinct kept-args value (``repr`` of the four kept values is the key:
        equal reprs of JSON values are equal values), codes assigned in first-seen order as
        ``Vocab.codes`` would.  Values ``repr`` cannot key (nested too deep) take the plain path."""
        try:
            return self._memo_codes(args)
        except RecursionError:
            dumps, none = orjson.dumps, ("", "")
            return (self.shapes.codes([_shapes(a) if "Input Dims" in a or "Input type" in a else none for a in args]),
                    self.args.codes([dumps({k: a[k] for k in ARG_KEYS if k in a}) for a in args]))

    def _memo_codes(self, args: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
        memo = self._shape_args
        keys = [repr((a.get("Input Dims", ...), a.get("Input type", ...), a.get("Sequence number", ...),
                      a.get("Fwd thread id", ...))) for a in args]
        new = set(keys).difference(memo)
        if not new:
            pairs = [memo[k] for k in keys]
        else:
            dumps, none, shapes, vocab = orjson.dumps, ("", ""), self.shapes, self.args
            pairs = []
            for k, a in zip(keys, args, strict=True):
                pair = memo.get(k)
                if pair is None:
                    s = _shapes(a) if "Input Dims" in a or "Input type" in a else none
                    pair = memo[k] = (shapes.code(s), vocab.code(dumps({n: a[n] for n in ARG_KEYS if n in a})))
                pairs.append(pair)
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def _seq_codes(self, args: list[dict[str, Any]]) -> list[int] | None:
        """Args codes when the kept args are at most Sequence number / Fwd thread id (no shapes):
        one serialisation per distinct pair.  None when a value is not hashable."""
        keyed = self._seq_args
        try:
            keys = [(a.get("Sequence number", _EMPTY_KEY), a.get("Fwd thread id", _EMPTY_KEY)) for a in args]
            new = set(keys).difference(keyed)
        except TypeError:
            return None
        if new:
            for key, a in zip(keys, args, strict=True):
                if key in new:
                    sub = {k: a[k] for k in ARG_KEYS if k in a}
                    keyed[key] = self.args.code(orjson.dumps(sub)) if sub else 0
                    new.discard(key)
        return [keyed[k] for k in keys]

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
