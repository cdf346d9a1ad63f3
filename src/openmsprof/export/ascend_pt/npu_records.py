"""torch_npu's raw framework records in ``FRAMEWORK/`` (docs/formats.md, "torch_npu raw records"),
so that torch_npu's own offline analysis (``torch_npu.profiler.profiler.analyse``) can rebuild
ASCEND_PROFILER_OUTPUT/ from our ``*_ascend_pt`` directory.

``torch.op_range``: one TLV record per operator (``cpu_op`` and ``user_annotation``): type
(uint16, 1 = FileTag.TORCH_OP), length (uint32), value = a 58-byte constant part
``<3q4QB?`` (start, end, sequence number, pid, start tid, end tid, forward-thread id, record
scope, is-async) followed by TLV fields (uint16 type, uint32 length, UTF-8 text): 2 name,
3 input dtypes, 4 input shapes, 8 call stack (frames joined by ``;``).  Times are what torch_npu
reads when ``start_info.syscnt_enable`` is false: monotonic ns, which it turns into wall-clock ns
by adding ``end_info.collectionTimeEnd - end_info.MonotonicTimeEnd`` of profiler_info.json, so
the analysis sees our operators at exactly our timestamps.

``torch.python_tracer_func`` / ``torch.python_tracer_hash`` (with_stack): the Python tracer's
call and return events, fixed 33-byte records ``<4QB`` (time, tid, pid, name key, tag: 0 Python
call, 1 Python return, 2 C call, 3 C return), and the key → name TLV records (constant ``<Q``
key, field 1 the name).  torch_npu replays them per thread with a stack after a stable sort by
time, so each thread's events are written in replay order: a frame's return before any call that
starts at or after its end.

Allocator events (``torch.memory_usage``) are not written: torch_npu keeps only NPU (device type
20) records and ours are the CPU allocator's (docs/formats.md).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np

from openmsprof.export.ascend_pt import text
from openmsprof.export.ascend_pt.framework import Framework
from openmsprof.fileio import fs

__all__ = ["OP_RANGE", "PY_FUNC", "PY_HASH", "local_offset_ns", "op_range_bytes", "python_tracer_bytes",
           "write"]

OP_RANGE = "torch.op_range"
PY_FUNC = "torch.python_tracer_func"
PY_HASH = "torch.python_tracer_hash"
_PY_EVENT = struct.Struct("<4QB")  # 33 bytes
_PY_KEY = struct.Struct("<Q")
_PY_CALL, _PY_RETURN, _C_CALL, _C_RETURN = 0, 1, 2, 3
_TORCH_OP_TAG = 1
_HASH_RECORD = 8  # FileTag.PYTHON_TRACER_HASH
_OP_CONST = struct.Struct("<3q4QB?")  # 58 bytes
_OP_RECORD = struct.Struct("<HI3q4QB?")  # the TLV header, then the constant part
#: _OP_RECORD as a numpy record (packed, little-endian)
_OP_DTYPE = np.dtype([("tag", "<u2"), ("len", "<u4"), ("start", "<i8"), ("end", "<i8"), ("seq", "<i8"),
                      ("pid", "<u8"), ("tid", "<u8"), ("end_tid", "<u8"), ("fwd", "<u8"), ("scope", "u1"),
                      ("async", "?")])
_FIELD = struct.Struct("<HI")
_NAME, _DTYPES, _SHAPES, _STACK = 2, 3, 4, 8
_SCOPE_FUNCTION, _SCOPE_USER = 0, 7  # at::RecordScope


def local_offset_ns(info: dict[str, Any]) -> int:
    """Wall-clock minus monotonic ns, as torch_npu derives it from profiler_info.json."""
    end = info.get("end_info") or {}
    try:
        return int(end.get("collectionTimeEnd", 0)) - int(end.get("MonotonicTimeEnd", 0))
    except (TypeError, ValueError):
        return 0


def _field(kind: int, text: str) -> bytes:
    raw = text.encode("utf-8", "replace")
    return _FIELD.pack(kind, len(raw)) + raw


def _tails(fw: Framework) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """The TLV fields of the names, of the (shapes, dtypes) codes and of the stacks."""
    names = [_field(_NAME, n) for n in fw.names]
    shapes = [(_field(_SHAPES, s) if s else b"") + (_field(_DTYPES, t) if t else b"")
              for s, t in fw.cols.shapes.items]
    stacks = [_field(_STACK, s.replace(";\r\n", ";")) for s in fw.stacks]
    return names, shapes, stacks


def _op_range_native(fw: Framework, offset_ns: int) -> bytes | None:
    """:func:`op_range_bytes` from columns: the records' packed parts as one numpy array, the
    fields per distinct (name, shapes, stack), joined in C (``text.NATIVE.records``); None when
    not built or a value is beyond its field (the loop then packs, or names the error)."""
    cols, n = fw.cols, fw.n_ops
    if text.NATIVE is None or not n:
        return None
    if cols.op_ts.dtype != np.int64 or cols.op_dur.dtype != np.int64 or not 0 <= fw.pid < 1 << 64 \
            or min(int(cols.op_tid.min()), int(cols.op_fwd.min())) < 0:
        return None  # the loop's own arithmetic, or struct's error for a negative unsigned field
    names, shapes, stacks = _tails(fw)
    n_sh, n_st = len(shapes), len(stacks) + 1
    if len(names) * n_sh * n_st >= 1 << 62 or not (
            int(cols.op_name.min()) >= 0 and int(cols.op_name.max()) < len(names)
            and int(cols.op_shape.min()) >= 0 and int(cols.op_shape.max()) < n_sh
            and int(fw.op_stack.min()) >= -1 and int(fw.op_stack.max()) < n_st - 1):
        return None  # codes out of their vocabularies: the loop's IndexError
    key = (cols.op_name.astype(np.int64) * n_sh + cols.op_shape) * n_st + (fw.op_stack + 1)
    uniq, code = np.unique(key, return_inverse=True)
    tails = []
    for k in uniq.tolist():
        nm, rest = divmod(k, n_sh * n_st)
        sh, st = divmod(rest, n_st)
        tails.append(names[nm] + shapes[sh] + (stacks[st - 1] if st else b""))
    code = code.reshape(-1).astype(np.int64)
    sizes = np.asarray([_OP_CONST.size + len(t) for t in tails], np.int64)
    if int(sizes.max()) >= 1 << 32:
        return None
    rec = np.zeros(n, _OP_DTYPE)
    rec["tag"] = _TORCH_OP_TAG
    rec["len"] = sizes[code]
    rec["start"] = cols.op_ts - offset_ns
    rec["end"] = cols.op_ts + cols.op_dur - offset_ns
    rec["seq"] = cols.op_seq
    rec["pid"] = fw.pid
    rec["tid"] = cols.op_tid
    rec["end_tid"] = cols.op_tid
    rec["fwd"] = cols.op_fwd
    rec["scope"] = np.where(cols.op_annot, _SCOPE_USER, _SCOPE_FUNCTION)
    return text.NATIVE.records(rec, _OP_RECORD.size, code, tails)  # type: ignore[no-any-return]


def op_range_bytes(fw: Framework, offset_ns: int) -> bytes:
    """The ``torch.op_range`` file of one rank's operators: per operator one pack of the record
    header and constant part, then its fields (name, shapes, stack), made once per distinct
    (name, shapes, stack).  In C where built (:func:`_op_range_native`); this loop is the
    fallback and the reference."""
    native = _op_range_native(fw, offset_ns)
    if native is not None:
        return native
    cols = fw.cols
    names, shapes, stacks = _tails(fw)
    start = (cols.op_ts - offset_ns).tolist()
    end = (cols.op_ts + cols.op_dur - offset_ns).tolist()
    scope = np.where(cols.op_annot, _SCOPE_USER, _SCOPE_FUNCTION).tolist()
    pid = fw.pid
    pack = _OP_RECORD.pack
    tails: dict[tuple[int, int, int], bytes] = {}
    out: list[bytes] = []
    add = out.append
    for s, e, seq, tid, fwd, sc, key in zip(start, end, cols.op_seq.tolist(), cols.op_tid.tolist(),
                                            cols.op_fwd.tolist(), scope,
                                            zip(cols.op_name.tolist(), cols.op_shape.tolist(),
                                                fw.op_stack.tolist(), strict=True), strict=True):
        tail = tails.get(key)
        if tail is None:
            nm, sh, st = key
            tail = tails[key] = names[nm] + shapes[sh] + (stacks[st] if st >= 0 else b"")
        add(pack(_TORCH_OP_TAG, _OP_CONST.size + len(tail), s, e, seq, pid, tid, tid, fwd, sc, False))
        add(tail)
    return b"".join(out)


def python_tracer_bytes(fw: Framework, offset_ns: int) -> tuple[bytes, bytes]:
    """(``torch.python_tracer_func``, ``torch.python_tracer_hash``) of the Python functions."""
    cols = fw.cols
    names = cols.py_names.items
    builtin = [n.startswith("<built-in") for n in names]
    values = [_PY_KEY.pack(k) + _field(1, n) for k, n in enumerate(names)]
    hashes = [_FIELD.pack(_HASH_RECORD, len(v)) + v for v in values]
    order = np.lexsort((-cols.py_dur, cols.py_ts, cols.py_tid))
    start = (cols.py_ts - offset_ns).tolist()
    end = (cols.py_ts + cols.py_dur - offset_ns).tolist()
    tids, codes, pid = cols.py_tid.tolist(), cols.py_name.tolist(), fw.pid
    out: list[bytes] = []
    stack: list[int] = []
    cur = None

    def ret(j: int) -> None:
        tag = _C_RETURN if builtin[codes[j]] else _PY_RETURN
        out.append(_PY_EVENT.pack(max(end[j], start[j]), tids[j], pid, codes[j], tag))

    for i in order.tolist():
        if tids[i] != cur:
            while stack:
                ret(stack.pop())
            cur = tids[i]
        while stack and end[stack[-1]] <= start[i]:
            ret(stack.pop())
        if stack and end[i] > end[stack[-1]]:  # a frame the tracer saw outlive its caller: end with it
            end[i] = end[stack[-1]]
        out.append(_PY_EVENT.pack(start[i], tids[i], pid, codes[i], _C_CALL if builtin[codes[i]] else _PY_CALL))
        stack.append(i)
    while stack:
        ret(stack.pop())
    return b"".join(out), b"".join(hashes)


def write(rank_dir: Path, fw: Framework, info: dict[str, Any]) -> list[str]:
    """Write the raw records into ``rank_dir/FRAMEWORK`` (next to the Kineto trace); the names."""
    framework_dir = rank_dir / "FRAMEWORK"
    if not framework_dir.is_dir() or framework_dir.is_symlink() or not fw.n_ops:
        return []
    offset = local_offset_ns(info)
    fs.write_file_atomic(framework_dir / OP_RANGE, op_range_bytes(fw, offset))
    if not len(fw.cols.py_ts):
        return [OP_RANGE]
    func, hashes = python_tracer_bytes(fw, offset)
    fs.write_file_atomic(framework_dir / PY_FUNC, func)
    fs.write_file_atomic(framework_dir / PY_HASH, hashes)
    return [OP_RANGE, PY_FUNC, PY_HASH]
