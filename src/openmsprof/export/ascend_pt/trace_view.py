"""``trace_view.json`` in the Ascend spelling (docs/formats.md §5, decision 2): a bare array, string
epoch-µs ``ts``, bit-packed pids, processes Python / CANN / Ascend Hardware / Overlap Analysis,
``async_npu`` flows whose ``f`` lands exactly on the kernel's pid/tid/ts.

Streamed to disk in chunks: each event is one ``%`` template over numpy-prepared columns, byte
for byte what ``orjson.dumps`` gives for the same event dict.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from openmsprof.export.ascend_pt import cann, text
from openmsprof.export.ascend_pt.framework import Framework
from openmsprof.export.ascend_pt.overlap import Overlap
from openmsprof.export.ascend_pt.text import chunks, fill, join, short_ok, ts_text, us_columns
from openmsprof.export.ascend_pt.trace_tracks import Layout, TraceFit, fitted, metadata

__all__ = ["TO_NPU_ID_BASE", "events", "step_of", "ts_text", "write"]

_OP = b'{"ph":"X","name":%b,"pid":{pid},"tid":%d,"ts":"%t","dur":%u,"cat":"cpu_op","args":%b}'
_PY = b'{"ph":"X","name":%b,"pid":{pid},"tid":%d,"ts":"%d.%03d","dur":{dur},"cat":"python_function","args":{}}'
_FLOW = b'{"ph":%b,"bp":"e","name":"fwdbwd","id":%d,"pid":{pid},"tid":%d,"ts":"%t","cat":"fwdbwd"}'
_KERNEL = (b'{"name":%b,"pid":{hw},"tid":%d,"ts":"%t","dur":%u,"ph":"X","args":{"Model Id":4294967295,'
           b'"Task Type":%b,"Stream Id":%d,"Task Id":%d,"Batch Id":0,"Subtask Id":4294967295,"connection_id":%d,'
           b'"Executor":"{executor}"}}')
_TO_NPU = (b',{"ph":"s","bp":"e","name":"torch_to_npu","id":"%d","pid":{pid},"tid":%d,"ts":"%t",'
           b'"cat":"async_npu"},{"ph":"f","bp":"e","name":"torch_to_npu","id":"%d","pid":{hw},"tid":%d,'
           b'"ts":"%t","cat":"async_npu"}')
_TRACK = b'{"name":%b,"pid":{pid},"tid":{tid},"ts":"%d.%03d","dur":{dur},"ph":"X"}'
_TRACKS = b'{"name":%b,"pid":{pid},"tid":%d,"ts":"%t","dur":%u,"ph":"X"}'  # all tracks at once
_CANN = b'{"name":%b,"pid":{pid},"tid":%d,"ts":"%t","dur":%u,"ph":"X","args":{"connection_id":%d}}'
_H2D = (b'{"ph":"s","bp":"e","name":"HostToDevice%b","id":"%b","pid":{pid},"tid":%d,"ts":"%t",'
        b'"cat":"HostToDevice"},{"ph":"f","bp":"e","name":"HostToDevice%b","id":"%b","pid":{hw},"tid":%d,'
        b'"ts":"%t","cat":"HostToDevice"}')


_PH = [b'"f"', b'"s"']  # a fwdbwd flow's ph by flow_start


@lru_cache(maxsize=256)  # the same pids window after window (the analysis worker)
def _template(t: bytes, dur: bytes = b"", executor: str = "CPU", **values: int) -> bytes:
    """Escape the literal braces, then put in the dur piece, the executor and the constant pids."""
    t = t.replace(b"{}", b"\x00")
    ex = orjson.dumps(executor)[1:-1].replace(b"%", b"%%")
    t = text.literal(t, **values).replace(b"{dur}", dur).replace(b"{executor}", ex).replace(b"\x00", b"{}")
    return t




@lru_cache(maxsize=64)  # the same vocabularies window after window (the analysis worker)
def _json_vocab(items: tuple[str, ...]) -> list[bytes]:
    """JSON texts of a vocabulary (the caller never changes the list)."""
    return text.json_texts(items)


def _op_args(fw: Framework) -> tuple[np.ndarray, list[bytes]]:
    """Per op a code into args texts: the kept Kineto args plus ``Call stack`` (with_stack)."""
    cols = fw.cols
    if not fw.stacks:
        return cols.op_args, cols.args.items
    texts = list(cols.args.items)
    pairs: dict[tuple[int, int], int] = {}
    code = cols.op_args.astype(np.int64)
    has = np.flatnonzero(fw.op_stack >= 0)
    stack_json = text.json_texts(fw.stacks)
    for i, a, s in zip(has.tolist(), cols.op_args[has].tolist(), fw.op_stack[has].tolist(), strict=True):
        c = pairs.get((a, s))
        if c is None:
            base = texts[a]
            sep = b"" if base == b"{}" else b","
            c = pairs[(a, s)] = len(texts)
            texts.append(base[:-1] + sep + b'"Call stack":' + stack_json[s] + b"}")
        code[i] = c
    return code, texts


def _ops(fw: Framework, lay: Layout, fit: TraceFit) -> Iterator[list[bytes]]:
    cols = fw.cols
    names = _json_vocab(tuple(fw.names))
    args_code, args = _op_args(fw)
    tmpl = _template(_OP, pid=lay.python)
    for a, b in chunks(fw.n_ops):
        yield [join(tmpl, [(cols.op_name[a:b], names), fit.op_tid[a:b], cols.op_ts[a:b], fit.op_dur[a:b],
                           (args_code[a:b], args)])]


def _python(fw: Framework, lay: Layout, fit: TraceFit) -> Iterator[list[bytes]]:
    cols = fw.cols
    names = _json_vocab(tuple(cols.py_names.items))
    for a, b in chunks(len(cols.py_ts)):
        q, r = us_columns(cols.py_ts[a:b])
        us, ns = fit.py_dur_us[a:b], fit.py_dur[a:b]
        durs: list[text.Column]
        if short_ok(ns) and bool(np.all(ns / 1000 == us)):
            piece, durs = text.dur_columns(ns)
        else:
            piece, durs = b"%b", [[orjson.dumps(v) for v in us.tolist()]]
        yield [join(_template(_PY, piece, pid=lay.python), [(cols.py_name[a:b], names), fit.py_tid[a:b], q, r, *durs])]


def _cross_thread(cols: Any) -> np.ndarray:
    """Indices of the fwdbwd flow events whose pair spans two threads (docs/formats.md §5: a flow only
    when backward runs on another thread; msprof-analyze takes any ``f`` thread as the backward
    thread, so a same-thread pair would mark forward operators as backward)."""
    n = len(cols.flow_ts)
    if not n:
        return np.zeros(0, np.int64)
    ids, start, tid = cols.flow_id, cols.flow_start, cols.flow_tid
    if not (tid != tid[0]).any():  # one thread (the usual window): no pair spans two
        return np.zeros(0, np.int64)
    s_tid: dict[int, int] = dict(zip(ids[start].tolist(), tid[start].tolist(), strict=True))
    f_tid: dict[int, int] = dict(zip(ids[~start].tolist(), tid[~start].tolist(), strict=True))
    cross = {i for i, t in s_tid.items() if i in f_tid and f_tid[i] != t}
    return np.asarray([j for j, i in enumerate(ids.tolist()) if i in cross], np.int64)


def _flows(fw: Framework, lay: Layout) -> Iterator[list[bytes]]:
    cols = fw.cols
    tmpl = _template(_FLOW, pid=lay.python)
    keep = _cross_thread(cols)
    for a, b in chunks(len(keep)):
        j = keep[a:b]
        yield [join(tmpl, [(cols.flow_start[j].astype(np.int64), _PH), cols.flow_id[j], cols.flow_tid[j],
                           cols.flow_ts[j]])]


#: torch_to_npu flow ids start here: exact as a double (< 2^53) and apart from the HostToDevice
#: ids ``connectionId << 32 | n`` (below 2^52 while there are fewer than 2^20 APIs)
TO_NPU_ID_BASE = 1 << 52


def flow_ids(ts: np.ndarray) -> list[bytes]:
    """torch_to_npu flow ids: ``TO_NPU_ID_BASE`` + the kernel's index in the rank, as a string.
    torch_npu spells the kernel's start in ns (19 digits); readers pair ``s`` and ``f`` by the
    text, but Perfetto reads the id as a double, so starts closer than 256 ns collided there
    (``flow_duplicate_id``).  msprof-analyze's advisor keys every flow by id alone, hence the
    base (docs/formats.md, "Perfetto reads the Ascend spelling")."""
    return [b"%d" % (TO_NPU_ID_BASE + i) for i in range(len(ts))]


def _pick(col: text.Column, rows: np.ndarray) -> text.Column:
    """The rows ``rows`` of a column."""
    if isinstance(col, np.ndarray):
        return col[rows]
    if isinstance(col, tuple):
        return col[0][rows], col[1]
    return [col[i] for i in rows.tolist()]


def _kernels(fw: Framework, lay: Layout, fit: TraceFit) -> Iterator[list[bytes]]:
    """Kernel events; a kernel with a source op carries its two torch_to_npu flows in its text."""
    k = fw.kernels
    names = _json_vocab(tuple(k.names))
    cores = _json_vocab(tuple(k.cores))
    plain = _template(_KERNEL, b"", k.executor, hw=lay.hardware)
    with_flow = _template(_KERNEL + _TO_NPU, b"", k.executor, hw=lay.hardware, pid=lay.python)
    for a, b in chunks(len(k)):
        ts, tid, idx = k.ts[a:b], fit.k_tid[a:b], np.arange(a, b, dtype=np.int64)
        base: list[text.Column] = [(k.name[a:b], names), tid, ts, fit.k_dur[a:b], (k.core[a:b], cores),
                                   k.stream[a:b], idx, idx]
        ops = k.op[a:b]
        has = ops >= 0
        if has.all():  # every kernel has its operator (the usual window)
            ids = idx + TO_NPU_ID_BASE  # flow_ids' ids
            yield [join(with_flow, [*base, ids, fit.op_tid[ops], fw.op_ts[ops], ids, tid, ts])]
            continue
        w = np.flatnonzero(has)
        if not len(w):
            yield [join(plain, base)]
            continue
        src = ops[w]
        ids = w + (TO_NPU_ID_BASE + a)  # flow_ids' ids
        flow: list[text.Column] = [ids, fit.op_tid[src], fw.op_ts[src]]
        pick = [_pick(col, w) for col in base]
        out = np.empty(b - a, object)
        out[w] = fill(with_flow, [*pick, *flow, ids, pick[1], pick[2]])
        rest = np.flatnonzero(ops < 0)
        out[rest] = fill(plain, [_pick(col, rest) for col in base])
        yield out.tolist()


def _tracks(lay: Layout, fit: TraceFit) -> Iterator[list[bytes]]:
    """The Overlap Analysis tracks: one formatting call for all of them when they fit one chunk
    (the usual window), else one per track and chunk."""
    tracks = fit.tracks
    n = sum(len(starts) for _name, (starts, _ends) in tracks)
    if 0 < n <= text.CHUNK:
        if fit.track_rows is not None:  # (fit_trace's rows: the same intervals in the same order)
            starts, lengths, tid = fit.track_rows
        else:
            starts = np.concatenate([iv[0] for _name, iv in tracks])
            lengths = np.concatenate([iv[1] - iv[0] for _name, iv in tracks])
            tid = np.arange(len(tracks), dtype=np.int64).repeat([len(iv[0]) for _name, iv in tracks])
        names = _json_vocab(tuple(name for name, _iv in tracks))
        yield [join(_template(_TRACKS, pid=lay.overlap), [(tid, names), tid, starts, lengths])]
        return
    for i, (name, (starts, ends)) in enumerate(tracks):
        nm = orjson.dumps(name).replace(b"%", b"%%")
        for a, b in chunks(len(starts)):
            q, r = us_columns(starts[a:b])
            piece, durs = text.dur_columns(ends[a:b] - starts[a:b])
            tmpl = _template(_TRACK.replace(b"%b", nm, 1), piece, pid=lay.overlap, tid=i)
            yield [join(tmpl, [q, r, *durs])]


def _cann(fw: Framework, lay: Layout, fit: TraceFit) -> Iterator[list[bytes]]:
    """CANN process: one ``{Level}@{api}`` X event per API, and one HostToDevice flow per kernel
    from its API to the kernel (id: string of ``connectionId << 32``, plus a counter when one API
    launched several kernels, so ids stay unique)."""
    apis = lay.apis
    if apis is None or not len(apis):
        return
    names = fw.names
    label = [orjson.dumps(f"{lv}@{n}") for lv, _t in cann.LEVELS for n in names]  # level * len(names) + name
    ev = apis.event
    for a, b in chunks(len(ev)):
        e = ev[a:b]
        code = apis.level[a:b].astype(np.int64) * len(names) + fw.cols.op_name[e]
        yield [join(_template(_CANN, pid=lay.cann), [(code, label), fit.op_tid[e], fw.op_ts[e], fit.op_dur[e], e])]
    k = fw.kernels
    has = np.flatnonzero(apis.conn >= 0)
    seen: dict[int, int] = {}
    ids = []
    for c in apis.conn[has].tolist():
        n = seen.get(c, 0)
        seen[c] = n + 1
        ids.append(b"%d" % ((c << 32) | n))
    tmpl = _template(_H2D, hw=lay.hardware, pid=lay.cann)
    for a, b in chunks(len(has)):
        j, src = has[a:b], apis.conn[has[a:b]]
        idl = ids[a:b]
        yield [join(tmpl, [idl, idl, fit.op_tid[src], fw.op_ts[src], idl, idl, fit.k_tid[j], k.ts[j]])]


def head(fw: Framework, ov: Overlap, lay: Layout) -> Iterator[list[bytes]]:
    """First half: metadata (never empty), operators, Python functions, fwdbwd flows, Communication."""
    fit = fitted(fw, ov, lay)
    yield metadata(fw, ov, lay)
    yield from _ops(fw, lay, fit)
    yield from _python(fw, lay, fit)
    yield from _flows(fw, lay)
    yield from _cann(fw, lay, fit)
    yield lay.comm
    yield lay.extra


def tail(fw: Framework, ov: Overlap, lay: Layout) -> Iterator[list[bytes]]:
    """Second half: kernels with their torch_to_npu flows, then the Overlap Analysis tracks."""
    fit = fitted(fw, ov, lay)
    yield from _kernels(fw, lay, fit)
    yield from _tracks(lay, fit)


def events(fw: Framework, ov: Overlap, lay: Layout) -> Iterator[list[bytes]]:
    """The trace_view events in order, as lists of JSON texts (a kernel with a source op carries
    its two ``torch_to_npu`` flow events in the same text)."""
    yield from head(fw, ov, lay)
    yield from tail(fw, ov, lay)


def write(path: Path, groups: Iterator[list[bytes]]) -> int:
    """Stream the events to ``path`` as one JSON array (temp file + rename, 0640); returns the
    number of JSON texts written."""
    return text.write_json_array(path, groups)


def step_of(fw: Framework, ts: np.ndarray) -> np.ndarray:
    """Step id containing each timestamp, or -1 outside every step."""
    if not fw.steps:
        return np.full(len(ts), -1, np.int64)
    starts = np.asarray([s[1] for s in fw.steps], np.int64)
    ends = np.asarray([s[2] for s in fw.steps], np.int64)
    ids = np.asarray([s[0] for s in fw.steps], np.int64)
    pos = np.searchsorted(starts, ts, side="right") - 1
    ok = (pos >= 0) & (ts < ends[np.maximum(pos, 0)])
    return np.where(ok, ids[np.maximum(pos, 0)], -1)
