"""Load a rank dir's FRAMEWORK/ Kineto trace into columns (epoch ns) ready for every export.

On a CPU-only machine the device "kernels" are the innermost ``cpu_op`` events that computed
(operators with no working operator below them; allocation/view children count as part of them);
with CUDA they are Kineto's GPU kernels.  ``gloo:``/``nccl:`` annotations are communication work;
``c10d::`` operators only launch it, so they are not kernels.

The trace is read one block of events at a time (``sources.kineto_trace``) and kept as numpy columns
plus small vocabularies (names, argument texts, shapes, call stacks): memory stays a fraction of
the trace file, and every export works on arrays.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from openmsprof.config.errors import RawDataError
from openmsprof.export import classify
from openmsprof.export.ascend_pt import footprint, nesting, split_read
from openmsprof.export.ascend_pt.columns import NO_EXT, Columns
from openmsprof.export.ascend_pt.vocab import Vocab
from openmsprof.sources.kineto_trace import Restart, TraceReader

FRAMEWORK_TRACE = "torch.kineto_trace.json"
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
COMM_PREFIXES = classify.COMM_PREFIXES
LAUNCH_PREFIXES = ("c10d::",)
MAX_JSON_BYTES = 10 * 1024**3
TRIVIAL = nesting.TRIVIAL


def to_ns(ts: Any, offset_ns: int) -> np.ndarray:
    """Kineto µs floats → epoch ns (int64)."""
    return np.rint(np.asarray(ts, dtype=np.float64) * 1000.0).astype(np.int64) + offset_ns


@dataclass
class Kernels:
    """Device tasks in start order: name (code into ``names``), ts/dur ns, stream, kind (code into
    ``cores``, ``classify.Kind``), source op index (-1 none), communication flag, the operator event
    the task is (-1: a GPU kernel).  ``executor`` is the real hardware (``CPU``, ``CUDA``)."""

    names: list[str] = field(default_factory=list)
    name: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    ts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    dur: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    stream: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    core: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    op: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    comm: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    event: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    executor: str = "CPU"

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def cores(self) -> list[str]:
        """The ``Task Type`` / ``Accelerator Core`` text of each kind (``classify.core_names``)."""
        return classify.core_names(self.executor)

    def name_of(self, j: int) -> str:
        return self.names[int(self.name[j])]


@dataclass
class Framework:
    """Columns of one rank's framework trace.  ``op_*`` arrays describe the cpu_op and
    user_annotation X events in file order; vocabularies hold their texts."""

    pid: int
    offset_ns: int
    cols: Columns
    op_leaf: np.ndarray                 # bool: a cpu_op that is a CPU kernel (see nesting.kernel_mask)
    op_parent: np.ndarray               # enclosing cpu_op (-1 none); annotations are not nested
    op_depth: np.ndarray
    op_stack: np.ndarray                # code into ``stacks`` (-1: no Python stack)
    stacks: list[str]
    steps: list[tuple[int, int, int]]   # (step id, start ns, end ns)
    kernels: Kernels
    backend: str
    tids: list[int]
    _times: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    # convenient views ---------------------------------------------------------------------
    @property
    def n_ops(self) -> int:
        return len(self.cols.op_ts)

    @property
    def names(self) -> list[str]:
        return self.cols.names.items

    @property
    def op_ts(self) -> np.ndarray:
        return self.cols.op_ts

    @property
    def op_dur(self) -> np.ndarray:
        return self.cols.op_dur

    @property
    def op_tid(self) -> np.ndarray:
        return self.cols.op_tid

    @property
    def op_annotation(self) -> np.ndarray:
        return self.cols.op_annot

    def op_name(self, i: int) -> str:
        return self.cols.names.items[int(self.cols.op_name[i])]

    def op_times(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per op: time of direct child ops, own kernel time, kernel time of its subtree (ns)."""
        if self._times is None:
            self._times = nesting.op_times(self.op_parent, self.op_depth, self.op_dur, ~self.op_annotation,
                                           self.kernels.op, self.kernels.dur)
        return self._times

    def op_states(self) -> list[str]:
        """``OP State`` per kernel name code (docs/formats.md decision 14): ``static`` when every
        call of that name had the same input shapes, ``dynamic`` when they varied, ``N/A`` when no
        call recorded shapes (record_shapes off, or a GPU kernel)."""
        k = self.kernels
        states = ["N/A"] * len(k.names)
        if not len(k):
            return states
        shape = np.where(k.op >= 0, self.cols.op_shape[np.maximum(k.op, 0)], -1)
        items = self.cols.shapes.items
        recorded = np.asarray([bool(s) for s, _t in items] or [False], bool)
        texts: dict[str, int] = {}  # a code is a (shapes, dtypes) pair: compare the shapes only
        by_text = np.asarray([texts.setdefault(s, len(texts)) for s, _t in items] or [0], np.int64)
        keep = (shape >= 0) & recorded[np.maximum(shape, 0)]
        pairs = (np.unique(np.stack([k.name[keep], by_text[shape[keep]]], axis=1), axis=0) if keep.any()
                 else np.zeros((0, 2)))
        names, counts = np.unique(pairs[:, 0].astype(np.int64), return_counts=True)
        for n, c in zip(names.tolist(), counts.tolist(), strict=True):
            states[n] = "static" if c == 1 else "dynamic"
        return states


def clock_offset(info: dict[str, Any]) -> int:
    """Epoch ns − monotonic ns from profiler_info's end_info (when Kineto gives no base time)."""
    end = info.get("end_info") or {}
    try:
        return int(end["collectionTimeEnd"]) - int(end["MonotonicTimeEnd"])
    except (KeyError, TypeError, ValueError):
        raise RawDataError("profiler_info end_info lacks collectionTimeEnd/MonotonicTimeEnd") from None


def _read(path: str | Path, parallel: bool = False, size: int | None = None) -> tuple[Columns, int | None]:
    if parallel and (done := split_read.read(Path(path), size)) is not None:
        return done
    reader = TraceReader(path)
    cols = Columns()
    try:
        for buf, start, stop in reader.spans():
            cols.add_span(buf, start, stop)
    except Restart:
        cols = Columns()
        events = reader.whole()
        for i in range(0, len(events), 50_000):
            cols.add(events[i:i + 50_000])
    except (KeyError, TypeError, ValueError) as exc:
        raise RawDataError(f"{str(path)!r}: malformed trace event ({type(exc).__name__}: {exc})") from None
    return cols, reader.base_ns


def load(rank_dir: Path, info: dict[str, Any], parallel: bool = False) -> Framework:
    """``parallel``: a large trace may be read by two processes (``split_read``; forks)."""
    path = os.path.join(rank_dir, "FRAMEWORK", FRAMEWORK_TRACE)  # (a str: pathlib's joins cost more)
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is None or not stat.S_ISREG(st.st_mode):
        raise RawDataError(f"no framework data in {str(rank_dir)!r} (missing FRAMEWORK/{FRAMEWORK_TRACE})")
    if st.st_size > MAX_JSON_BYTES:
        raise RawDataError(f"{str(path)!r} is larger than 10 GiB; refused")
    cols, base = _read(path, parallel, st.st_size)
    offset = base if base is not None else clock_offset(info)
    cols.finish(offset)
    footprint.drop_own(cols)
    ts, dur, tid, annot = cols.op_ts, cols.op_dur, cols.op_tid, cols.op_annot
    names = cols.names.items
    prefix_of, trivial_of, kind_of, is_step, step_ids = _name_facts(tuple(names))
    code = cols.op_name
    prefix = prefix_of[code]
    ops = ~annot
    parent, depth, leaf = nesting.tree(ts, dur, tid, ops, trivial_of[code])
    stack_code, stacks = nesting.call_stacks(cols, ops)
    at = np.flatnonzero(annot & is_step[code])
    steps = sorted(zip([step_ids[c] for c in code[at].tolist()], ts[at].tolist(), (ts[at] + dur[at]).tolist(),
                       strict=True), key=lambda s: s[1])
    tids = [int(tid[0])] if len(tid) and bool((tid == tid[0]).all()) else np.unique(tid).tolist()  # sorted
    if cols.gpu:
        kernels, backend = _gpu_kernels(cols, offset), "CUDA"
    else:
        sel = nesting.kernel_order(leaf, prefix, ts)
        k_ts = ts[sel]
        stream = np.searchsorted(np.asarray(tids, np.int64), tid[sel]) if len(tids) > 1 else np.zeros(len(sel), np.int64)
        name = code[sel].astype(np.int64)
        k_comm = prefix[sel] == 2
        kernels = Kernels(names=names, name=name, ts=k_ts, dur=dur[sel], stream=stream.astype(np.int64),
                          core=kind_of[name], op=np.where(k_comm, -1, sel), comm=k_comm, event=sel)
        backend = "CPU"
    return Framework(pid=cols.pid, offset_ns=offset, cols=cols, op_leaf=leaf, op_parent=parent, op_depth=depth,
                     op_stack=stack_code, stacks=stacks, steps=steps, kernels=kernels, backend=backend, tids=tids)


#: per name (kept from window to window, cleared when it outgrows ``_FACTS_KEPT``): prefix, trivial,
#: kind, step N (-1: not a ``ProfilerStep#N``).  Kept per name, not per vocabulary: every window
#: of a job has new ``ProfilerStep#N`` names, so a whole vocabulary never repeats.
_facts: dict[str, tuple[int, bool, int, int]] = {}
_FACTS_KEPT = 1 << 14


def _fact(n: str) -> tuple[int, bool, int, int]:
    m = _STEP_RE.match(n)
    f = (2 if n.startswith(COMM_PREFIXES) else 1 if n.startswith(LAUNCH_PREFIXES) else 0, n in TRIVIAL,
         int(classify.classify(n)), int(m.group(1)) if m else -1)
    if len(_facts) >= _FACTS_KEPT:
        _facts.clear()
    _facts[n] = f
    return f


def _name_facts(names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                 tuple[int, ...]]:
    """Per name code: 2 communication / 1 launch / 0 other (prefix), trivial (``TRIVIAL``), kind
    (``classify.classify``), a ``ProfilerStep#N`` name; and each one's N (-1)."""
    get = _facts.get
    facts = [get(n) or _fact(n) for n in names] or [(0, False, 0, -1)]
    prefix, trivial, kind, step = zip(*facts, strict=True)
    return (np.asarray(prefix, np.int8), np.asarray(trivial, bool), np.asarray(kind, np.int64),
            np.asarray(step, np.int64) >= 0, step if names else ())


def _gpu_kernels(cols: Columns, offset: int) -> Kernels:
    """CUDA kernels/memcpy from Kineto; the source op is the first cpu_op with the same External id."""
    has = np.flatnonzero(cols.op_ext != NO_EXT)
    ext, first = np.unique(cols.op_ext[has], return_index=True)
    src = has[first]
    gpu = sorted(cols.gpu, key=lambda e: e["ts"])
    names: Vocab[str] = Vocab()
    ts = to_ns([e["ts"] for e in gpu], offset)
    dur = np.rint(np.asarray([e.get("dur", 0) for e in gpu], np.float64) * 1000).astype(np.int64)
    want = np.asarray([x if isinstance(x := (e.get("args") or {}).get("External id"), int) else NO_EXT
                       for e in gpu], np.int64)
    pos = np.minimum(np.searchsorted(ext, want), max(len(ext) - 1, 0))
    found = (ext[pos] == want) & (want != NO_EXT) if len(ext) else np.zeros(len(gpu), bool)
    op = np.where(found, src[pos] if len(ext) else -1, -1).astype(np.int64)
    comm = np.asarray(["nccl" in e.get("name", "").lower() for e in gpu], bool)
    op_names = cols.names.items
    kind = [classify.Kind.COMMUNICATION if c else
            classify.classify(op_names[int(cols.op_name[o])] if o >= 0 else e.get("name", ""))
            for e, o, c in zip(gpu, op.tolist(), comm.tolist(), strict=True)]
    return Kernels(names=names.items, name=np.asarray([names.code(e.get("name", "")) for e in gpu], np.int64),
                   ts=ts, dur=dur,
                   stream=np.asarray([int(e.get("tid", 0)) if isinstance(e.get("tid"), int) else 0
                                      for e in gpu], np.int64),
                   core=np.asarray(kind, np.int64).reshape(-1), op=op, comm=comm,
                   event=np.full(len(gpu), -1, np.int64), executor="CUDA")
