"""Collective / point-to-point operations of a torch.distributed run, from the Kineto trace.

The work events of a process group backend (``gloo:all_reduce``, ``gloo:send``, ``nccl:…`` — the
``COMM_PREFIXES`` of ``framework``) become HCCL-style operations: name
``hcom_{type}__{group hash mod 1000:03d}_{n}_1`` (n counts the operations of that type in the group,
so the same collective has the same name on every rank), start and duration, and the bytes this
rank contributes (product of the ``Input Dims`` × element size of ``Input type``; 0 when shapes
were not recorded).  Each goes to the ``step{N}`` of the ``ProfilerStep#N`` it started in (or the
last step that began before it; operations before the first step are left out), or ``step`` when
there are no steps.

The group is the default process group as ``profiler_metadata.json``'s ``parallel_group_info``
describes it (Kineto does not say which group ran a gloo operation); its name in the files is
HCCL's 64-bit hash of the group id (``double_hash``), as msprof-analyze expects.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import prod
from pathlib import Path
from typing import Any

import numpy as np

from openmsprof.config.errors import ProfilingError
from openmsprof.export.ascend_pt.framework import COMM_PREFIXES, Framework
from openmsprof.fileio.read_guard import read_json
from openmsprof.parse.hccl_hash import double_hash

P2P_TYPES = ("send", "receive", "batchsendrecv")
HCCL_TYPES = {"all_reduce": "allReduce", "allreduce": "allReduce", "broadcast": "broadcast",
              "all_gather": "allGather", "allgather": "allGather", "all_gather_into_tensor": "allGather",
              "reduce_scatter": "reduceScatter", "reducescatter": "reduceScatter",
              "reduce_scatter_tensor": "reduceScatter", "reduce": "reduce", "scatter": "scatter",
              "gather": "gather", "all_to_all": "alltoall", "alltoall": "alltoall", "alltoall_base": "alltoall",
              "all_to_allv": "alltoallv", "barrier": "barrier", "send": "send", "recv": "receive",
              "recv_anysource": "receive"}
ELEMENT_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "long": 8,
                 "int64_t": 8, "int": 4, "short int": 2, "short": 2, "signed char": 1, "unsigned char": 1,
                 "bool": 1, "c10::complex<float>": 8, "c10::complex<double>": 16, "c10::complex<c10::Half>": 4,
                 "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "unsigned int": 4, "unsigned short": 2,
                 "unsigned long": 8}
HCCL_DTYPES = {"float": "FP32", "double": "FP64", "c10::Half": "FP16", "c10::BFloat16": "BFP16", "long int": "INT64",
               "long": "INT64", "int64_t": "INT64", "int": "INT32", "short int": "INT16", "short": "INT16",
               "signed char": "INT8", "unsigned char": "UINT8", "bool": "UINT8"}
#: gloo/mpi/ucc move bytes through host memory and TCP; msprof-analyze has no such link type, so
#: the bytes are booked under LOCAL (HCCL's on-host copy link).  See docs/torch.md.
TRANSPORT = "LOCAL"
DEFAULT_GROUP = "0"


@dataclass
class Group:
    """The process group the operations are booked to."""

    gid: str
    hashed: str
    local_rank: int
    ranks: list[int]


@dataclass
class CommOp:
    name: str           # hcom_allReduce__256_0_1
    op_type: str        # allReduce, send, receive …
    backend: str        # gloo, nccl …
    kind: str           # collective | p2p
    ts: int             # epoch ns
    dur: int            # ns
    size: int           # bytes
    count: int          # elements
    dtype: str          # HCCL spelling when known
    step: str           # step{N} | step
    event: int = -1     # index of the framework operator event


class _LazyGroup(Group):
    """A :class:`Group` read from profiler_metadata.json at its first use: a window without
    communication operations never reads the file."""

    def __init__(self, rank_dir: Path, rank: int | None) -> None:  # the fields come at the first use
        self.__dict__["_source"] = (rank_dir, rank)

    def __getattr__(self, name: str) -> Any:  # only for the fields not read yet
        if name not in ("gid", "hashed", "local_rank", "ranks") or "_source" not in self.__dict__:
            raise AttributeError(name)
        g = _read_group(*self.__dict__.pop("_source"))
        self.__dict__.update(gid=g.gid, hashed=g.hashed, local_rank=g.local_rank, ranks=g.ranks)
        return self.__dict__[name]


def group_of(rank_dir: Path, rank: int | None) -> Group:
    """The default group from profiler_metadata.json (``parallel_group_info`` or
    ``distributed_args``), read when first used."""
    return _LazyGroup(rank_dir, rank)


def _read_group(rank_dir: Path, rank: int | None) -> Group:
    """The default group as profiler_metadata.json gives it (the default one without it)."""
    meta: dict[str, Any] = {}
    path = rank_dir / "profiler_metadata.json"
    try:  # absent, not a regular file, unreadable: the default group
        loaded = read_json(path, "profiler metadata")
        meta = loaded if isinstance(loaded, dict) else {}
    except ProfilingError:
        meta = {}
    me = rank if rank is not None else 0
    groups = meta.get("parallel_group_info")
    if isinstance(groups, dict) and groups:
        gid = DEFAULT_GROUP if DEFAULT_GROUP in groups else next(iter(groups))
        g = groups[gid] if isinstance(groups[gid], dict) else {}
        ranks = [r for r in g.get("global_ranks", []) if isinstance(r, int)] or [me]
        local = g.get("group_rank")
        local = local if isinstance(local, int) else (ranks.index(me) if me in ranks else me)
        return Group(str(gid), str(double_hash(str(gid))), local, sorted(ranks))
    args = meta.get("distributed_args")
    world = args.get("world_size") if isinstance(args, dict) else None
    ranks = list(range(world)) if isinstance(world, int) and world > 0 else [me]
    return Group(DEFAULT_GROUP, str(double_hash(DEFAULT_GROUP)), me, ranks)


def _payload(shapes: str, types: str) -> tuple[int, int, str]:
    """(bytes, elements, dtype) of the tensors in Kineto's Input Dims / Input type texts."""
    size = count = 0
    dtype = ""
    for dims, typ in zip(shapes.split(";"), types.split(";"), strict=False):
        width = ELEMENT_BYTES.get(typ)
        if width is None:
            continue
        try:
            n = prod(int(d) for d in dims.split(",")) if dims else 1
        except ValueError:
            continue
        size, count = size + n * width, count + n
        dtype = dtype or HCCL_DTYPES.get(typ, typ.upper())
    return size, count, dtype


def _steps(fw: Framework, ts: np.ndarray) -> list[str | None]:
    if not fw.steps:
        return ["step"] * len(ts)
    starts = np.asarray([s[1] for s in fw.steps], np.int64)
    pos = np.searchsorted(starts, ts, side="right") - 1
    ids = [f"step{s[0]}" for s in fw.steps]
    return [ids[p] if p >= 0 else None for p in pos.tolist()]


def _named(fw: Framework, group: Group) -> list[tuple[int, str, str, str]]:
    """(event, hcom name, op type, backend) of every communication event in start order."""
    names = fw.names
    is_comm = _comm_names(tuple(names))
    if not is_comm.any():  # no process-group work in the window (the usual one)
        return []
    sel = np.flatnonzero(is_comm[fw.cols.op_name]) if fw.n_ops else np.zeros(0, np.int64)
    sel = sel[np.argsort(fw.op_ts[sel], kind="stable")]
    tag = int(group.hashed) % 1000
    counters: dict[str, int] = {}
    out = []
    for i in sel.tolist():
        backend, _, raw = names[int(fw.cols.op_name[i])].partition(":")
        raw = raw.strip()
        op_type = HCCL_TYPES.get(raw.lower(), raw.replace("_", "") or "unknown")
        n = counters.get(op_type, 0)
        counters[op_type] = n + 1
        out.append((i, f"hcom_{op_type}__{tag:03d}_{n}_1", op_type, backend))
    return out


@lru_cache(maxsize=64)  # the same vocabulary window after window (the analysis worker)
def _comm_names(names: tuple[str, ...]) -> np.ndarray:
    """Per vocabulary entry: whether it names a process-group work event (read-only)."""
    out = np.asarray([n.startswith(COMM_PREFIXES) for n in names] or [False], bool)
    out.flags.writeable = False
    return out


def rename_kernels(fw: Framework, group: Group) -> None:
    """Give the communication kernels their HCCL name (one name per collective in every file)."""
    k = fw.kernels
    if not len(k) or not k.comm.any() or not len(k.event) or int(k.event.min()) < 0:
        return
    by_event = {i: name for i, name, _t, _b in _named(fw, group)}
    names = list(k.names)
    code = k.name.copy()
    for j in np.flatnonzero(k.comm).tolist():
        new = by_event.get(int(k.event[j]))
        if new is not None:
            code[j] = len(names)
            names.append(new)
    k.names, k.name = names, code


def collect(fw: Framework, group: Group) -> list[CommOp]:
    """Every communication operation of the trace in start order (those before the first step dropped)."""
    named = _named(fw, group)
    if not named:
        return []
    sel = np.asarray([e for e, _n, _t, _b in named], np.int64)
    steps = _steps(fw, fw.op_ts[sel])
    shapes = fw.cols.shapes.items
    ops = []
    for (i, name, op_type, backend), step in zip(named, steps, strict=True):
        if step is None:
            continue
        size, count, dtype = _payload(*shapes[int(fw.cols.op_shape[i])])
        ops.append(CommOp(name=name, op_type=op_type, backend=backend,
                          kind="p2p" if op_type.lower() in P2P_TYPES else "collective",
                          ts=int(fw.op_ts[i]), dur=int(fw.op_dur[i]), size=size, count=count,
                          dtype=dtype or "N/A", step=step, event=i))
    return ops


def kernel_ops(fw: Framework, group: Group) -> list[tuple[int, CommOp]]:
    """(kernel index, operation) for every communication kernel, those outside steps included
    (step ``""``): what the db's COMMUNICATION_OP / COMMUNICATION_TASK_INFO hold."""
    k = fw.kernels
    if not len(k) or not k.comm.any() or not len(k.event) or int(k.event.min()) < 0:
        return []
    named = {i: (name, op_type, backend) for i, name, op_type, backend in _named(fw, group)}
    shapes = fw.cols.shapes.items
    out = []
    for j in np.flatnonzero(k.comm).tolist():
        i = int(k.event[j])
        if i not in named:
            continue
        name, op_type, backend = named[i]
        size, count, dtype = _payload(*shapes[int(fw.cols.op_shape[i])])
        out.append((j, CommOp(name=name, op_type=op_type, backend=backend,
                              kind="p2p" if op_type.lower() in P2P_TYPES else "collective", ts=int(k.ts[j]),
                              dur=int(k.dur[j]), size=size, count=count, dtype=dtype or "N/A", step="", event=i)))
    return out
