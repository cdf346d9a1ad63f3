"""ONNX Runtime profile JSON → numpy columns, without building an object per event.

ORT writes one event per line in a fixed layout::

    {"cat" : "Node","pid" :1,"tid" :2,"dur" :3,"ts" :4,"ph" : "X","name" :"n_kernel_time","args" : {...}},

One pass pulls (tid, dur, ts, name) out of every line and skips the args (memory and
thread-pool statistics, most of the bytes): the native scan (``_ort_scan.c``: no object per
event, the GIL released) where it is built, else one C-level regex pass (``_EVENT``, the same
events).  A node's metadata (op type, shapes, dtypes, provider) is parsed once, from its first
line, and cached in the :class:`NodeTable` of its model, so per event only three integers and a
name code remain.  Models with dynamic input shapes key the metadata by (node, shapes) of every
event instead (regex path).  A file in any other layout is parsed in full with orjson (same
result, slower).
"""

from __future__ import annotations

import gc
import mmap
import os
import re
from collections.abc import Callable, Iterator
from typing import Any, Union

import numpy as np
import orjson

from openmsprof.config import native_ext
from openmsprof.sources.ort_columns import NodeMeta, Profile

Buffer = Union[bytes, mmap.mmap]  # noqa: UP007  (a runtime alias)
KERNEL = b"_kernel_time"
CHUNK = 1 << 20  # bytes scanned per regex call
PAUSE_CHUNK = 1 << 18  # ... in a background parse (short GIL holds)
RUN, OTHER, DYNAMIC = -1, -2, -3  # event codes besides a meta index (>= 0)
_EVENT = re.compile(rb'\n\{"cat" : "(Node|Session)","pid" :\d+,"tid" :(\d+),"dur" :(\d+),"ts" :(\d+),'
                    rb'"ph" : "X","name" :"([^"\\]*(?:\\.[^"\\]*)*)"')
_CATS = re.compile(rb'\{"cat" : "(?:Node|Session)"')
_SHAPES = {key: re.compile(rb'"' + key + rb'" : (\[\]|\[.*?\}\])') for key in (b"input_type_shape", b"output_type_shape")}
#: set to 1 to parse with the regex even where the native scan is built
PY_SCAN_ENV = "OPENMSPROF_ORT_SCAN_PYTHON"


#: ``_ort_scan.c`` (None when not built, no compiler at install: the regex pass)
_native: Any = native_ext.load("openmsprof.sources._ort_scan")


class NodeTable:
    """Per-model cache: event name → code, node metadata (stable across ORT sessions of one
    model because every generation loads the same saved graph)."""

    def __init__(self, dynamic: bool = False) -> None:
        self.dynamic = dynamic
        self.metas: list[NodeMeta] = []
        self._codes: dict[bytes, int] = {}
        self._keys: dict[Any, int] = {}
        self._data: Buffer = b""
        self.slow = False  # full orjson parses from now on
        self._checked = False  # the first profile was checked to match the fast layout throughout

    def _meta(self, key: Any, name: str, args: dict[str, Any]) -> int:
        idx = self._keys.get(key)
        if idx is None:
            idx = self._keys[key] = len(self.metas)
            self.metas.append(NodeMeta(name, args))
        return idx

    def _code(self, raw: bytes) -> int:
        code = self._codes.get(raw)
        if code is None:
            code = self._codes[raw] = self._classify(raw)
        return code

    def _classify(self, raw: bytes) -> int:
        if raw == b"model_run":
            return RUN
        if not raw.endswith(KERNEL):
            return OTHER
        if self.dynamic:
            return DYNAMIC
        name = _unescape(raw[: -len(KERNEL)])
        return self._meta(raw, name, _args_of(self._data, raw))

    def parse(self, data: Buffer, start_ns: int, pause: Callable[[], None] | None = None) -> Profile:
        """Columns of ``data`` (bytes or an mmap of the file); ``start_ns`` =
        ``get_profiling_start_time_ns()`` (epoch).  ``pause`` is called between chunks (a
        background parse yields the GIL there, so the application's threads keep running)."""
        gc_was_on = gc.isenabled()
        gc.disable()  # the parse makes ~6 objects per event, all short-lived: no GC passes over the heap
        try:
            return self._parse(data, start_ns, pause)
        finally:
            if gc_was_on:
                gc.enable()

    def _parse(self, data: Buffer, start_ns: int, pause: Callable[[], None] | None) -> Profile:
        if self.slow:
            return self.parse_slow(data, start_ns)
        if not self._checked:
            self._checked = True
            if len(_CATS.findall(data)) != len(_EVENT.findall(data)):
                self.slow = True  # this ORT writes some events in another layout: never miss one
                return self.parse_slow(data, start_ns)
        if self.dynamic:
            return self._parse_dynamic(data, start_ns)
        if _native is not None and not os.environ.get(PY_SCAN_ENV):
            return self._parse_native(data, start_ns)
        cols = []
        self._data = data
        try:
            for found in chunks(data, PAUSE_CHUNK if pause else CHUNK):
                if found:
                    cols.append(self._columns(found))
                if pause is not None:
                    pause()
        finally:
            self._data = b""
        if not cols:
            return self.parse_slow(data, start_ns) if data.find(b'"cat"') >= 0 else _columns_profile(_EMPTY, start_ns)
        if len(cols) == 1:
            return _columns_profile(cols[0], start_ns)
        return _columns_profile(tuple(np.concatenate(c) for c in zip(*cols, strict=True)), start_ns)

    def _parse_native(self, data: Buffer, start_ns: int) -> Profile:
        """The same columns as the regex pass, from ``_ort_scan.scan`` (one row per event)."""
        names, raw, bad = _native.scan(data)
        if bad:  # a line in another layout: never miss an event
            return self.parse_slow(data, start_ns)
        if not raw:
            return self.parse_slow(data, start_ns) if data.find(b'"cat"') >= 0 else _columns_profile(_EMPTY, start_ns)
        rows = np.frombuffer(raw, np.int64).reshape(-1, 4)  # name index, tid, dur, ts
        self._data = data
        try:
            codes = np.array([self._code(nm) for nm in names], np.int64)
        finally:
            self._data = b""
        code = codes[rows[:, 0]]
        keep = code != OTHER
        kept = rows[keep]
        return _columns_profile((code[keep], kept[:, 3], kept[:, 2], kept[:, 1]), start_ns)

    def _columns(self, found: list[tuple[bytes, ...]]) -> tuple[np.ndarray, ...]:
        """(code, ts µs, dur µs, tid) of the events that matter (runs and kernels)."""
        _, tids, durs, tss, names = zip(*found, strict=True)
        codes = list(map(self._codes.get, names))
        if None in codes:
            codes = list(map(self._code, names))
        code = np.array(codes, np.int64)
        keep = code != OTHER
        return (code[keep], np.array(tss, np.int64)[keep], np.array(durs, np.int64)[keep],
                np.array(tids, np.int64)[keep])

    def _parse_dynamic(self, data: Buffer, start_ns: int) -> Profile:
        found = [ev for part in chunks(data, CHUNK) for ev in part]
        if not found:
            return self.parse_slow(data, start_ns) if data.find(b'"cat"') >= 0 else _columns_profile(_EMPTY, start_ns)
        cats, tids, durs, tss, names = zip(*found, strict=True)
        code = np.fromiter(map(self._code, names), np.int64, len(names))
        meta = self._dynamic_metas(data, cats, names, code)
        if meta is None:
            return self.parse_slow(data, start_ns)
        code = np.where(code == DYNAMIC, meta, code)
        return _columns_profile((code, np.array(tss, np.int64), np.array(durs, np.int64),
                                 np.array(tids, np.int64)), start_ns)

    def _dynamic_metas(self, data: Buffer, cats: tuple[bytes, ...], names: tuple[bytes, ...],
                       code: np.ndarray) -> np.ndarray | None:
        """Meta index per event keyed by (node, shapes); None when the shape lists do not line
        up one-to-one with the Node events."""
        ins = _SHAPES[b"input_type_shape"].findall(data)
        outs = _SHAPES[b"output_type_shape"].findall(data)
        node_names = [nm for c, nm in zip(cats, names, strict=True) if c == b"Node"]
        if not (len(ins) == len(outs) == len(node_names)):
            return None
        keys: dict[tuple[bytes, bytes, bytes], int] = {}
        out = np.full(len(names), OTHER, np.int64)
        per_node = []
        for key in zip(node_names, ins, outs, strict=True):
            idx = keys.get(key)
            if idx is None:
                idx = keys[key] = self._meta(key, _unescape(key[0][: -len(KERNEL)]) if key[0].endswith(KERNEL) else "",
                                             {"input_type_shape": orjson.loads(key[1]),
                                              "output_type_shape": orjson.loads(key[2]),
                                              **_args_of(data, key[0], shapes=False)})
            per_node.append(idx)
        out[np.array([c == b"Node" for c in cats], bool)] = per_node
        return np.where(code == DYNAMIC, out, OTHER)

    def parse_slow(self, data: Buffer, start_ns: int) -> Profile:
        """Full orjson parse (any layout)."""
        runs: list[tuple[int, int, int]] = []
        nodes: list[tuple[int, int, int, int]] = []
        for ev in orjson.loads(data[:]):
            name = str(ev.get("name", ""))
            if ev.get("cat") == "Session" and name == "model_run":
                runs.append((int(ev["ts"]), int(ev["dur"]), int(ev.get("tid", 0))))
            elif ev.get("cat") == "Node" and name.endswith("_kernel_time"):
                args = ev.get("args", {})
                key = (name, orjson.dumps(args.get("input_type_shape")), orjson.dumps(args.get("output_type_shape")))
                nodes.append((int(ev["ts"]), int(ev["dur"]), int(ev.get("tid", 0)),
                              self._meta(key, name[: -len("_kernel_time")], args)))
        r = np.array(runs, dtype=np.int64).reshape(-1, 3)
        nd = np.array(nodes, dtype=np.int64).reshape(-1, 4)
        return Profile(r[:, 0] * 1000 + start_ns, r[:, 1] * 1000, r[:, 2],
                       nd[:, 0] * 1000 + start_ns, nd[:, 1] * 1000, nd[:, 2], nd[:, 3])


def chunks(data: Buffer, size: int) -> Iterator[list[tuple[bytes, ...]]]:
    """(category, tid, dur, ts, name) of the events, one list per ~``size`` bytes."""
    pos, n = 0, len(data)
    while pos < n:
        end = data.find(b"\n{", pos + size) if pos + size < n else -1
        end = n if end < 0 else end
        yield _EVENT.findall(data, pos, end)
        pos = end


_EMPTY = tuple(np.zeros(0, np.int64) for _ in range(4))


def _columns_profile(cols: tuple[np.ndarray, ...], start_ns: int) -> Profile:
    code, ts, dur, tid = cols
    ts = ts * 1000 + start_ns
    dur = dur * 1000
    run = code == RUN
    node = code >= 0
    return Profile(ts[run], dur[run], tid[run], ts[node], dur[node], tid[node], code[node])


def _unescape(raw: bytes) -> str:
    return str(orjson.loads(b'"' + raw + b'"')) if b"\\" in raw else raw.decode("utf-8", "replace")


def _args_of(data: Buffer, raw_name: bytes, shapes: bool = True) -> dict[str, Any]:
    """The args of the first event named ``raw_name`` in ``data`` ({} when unreadable)."""
    pos = data.find(b'"name" :"' + raw_name + b'"')
    if pos < 0:
        return {}
    start = data.rfind(b"\n", 0, pos) + 1
    end = data.find(b"\n", pos)
    line = data[start: end if end >= 0 else len(data)].rstrip().rstrip(b",]").rstrip()
    try:
        args = orjson.loads(line).get("args", {})
    except (orjson.JSONDecodeError, AttributeError):
        return {}
    if not isinstance(args, dict):
        return {}
    if not shapes:
        args.pop("input_type_shape", None)
        args.pop("output_type_shape", None)
    return args
