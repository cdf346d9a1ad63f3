"""The tracks of one rank's trace_view: pids (``Layout``), Perfetto-fitted times (``fit_trace``), metadata events.

``fit_trace`` fits the Python process (operators over Python functions), the kernels per stream and
the Overlap Analysis tracks with ``perfetto_fit.fit_columns`` (docs/formats.md, "Perfetto reads
the Ascend spelling"); CANN reuses the operators' fit, and the overflow lanes it opens get their
own ``thread_name`` metadata.  Only trace_view's copy changes: the CSVs and db keep the measured values.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import orjson

from openmsprof.export.ascend_pt import cann
from openmsprof.export.ascend_pt.framework import Framework
from openmsprof.export.ascend_pt.overlap import Intervals, Overlap
from openmsprof.export.ascend_pt.perfetto_fit import fit_columns

__all__ = ["HOST_DEV", "Layout", "TraceFit", "enc_pid", "fit_trace", "fitted", "metadata"]

HOST_DEV = 31


@dataclass
class TraceFit:
    """trace_view's copies of the operator, Python-function, kernel and overlap-track times."""

    op_dur: np.ndarray
    op_tid: np.ndarray
    py_dur: np.ndarray
    py_dur_us: np.ndarray
    py_tid: np.ndarray
    k_dur: np.ndarray
    k_tid: np.ndarray
    tracks: list[tuple[str, Intervals]]
    python_lanes: dict[int, int]
    stream_lanes: dict[int, int]
    shortened: int
    shortened_ns: int
    moved: int
    #: the tracks' intervals as one set of rows (starts, fitted lengths, track index), as fitted
    track_rows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None


def fit_trace(fw: Framework, ov: Overlap) -> TraceFit:
    """Fit one rank's trace_view tracks: the Python process (operators over Python functions),
    the kernels per stream, the Overlap Analysis tracks (CANN reuses the operators' fit)."""
    cols = fw.cols
    n = fw.n_ops
    if len(cols.py_ts):
        is_op = np.concatenate([np.ones(n, np.int8), np.zeros(len(cols.py_ts), np.int8)])
        py = fit_columns(np.concatenate([cols.op_ts, cols.py_ts]), np.concatenate([cols.op_dur, cols.py_dur]),
                         np.concatenate([cols.op_tid, cols.py_tid]), is_op, stay=is_op.astype(bool))
    else:  # no Python functions (with_stack off): the operators alone
        py = fit_columns(cols.op_ts, cols.op_dur, cols.op_tid, np.ones(n, np.int8), stay=np.ones(n, bool))
    k = fw.kernels
    kf = fit_columns(k.ts, k.dur, k.stream, np.ones(len(k), np.int8))
    shortened, shortened_ns = py.shortened + kf.shortened, py.shortened_ns + kf.shortened_ns
    # the Overlap Analysis tracks in one call: each is its own track id (the fit is per track)
    named = ov.tracks()
    sizes = [len(starts) for _name, (starts, _ends) in named]
    full = [i for i, size in enumerate(sizes) if size]  # (the empty tracks add nothing)
    starts = np.concatenate([named[i][1][0] for i in full] or [np.zeros(0, np.int64)])
    track_id = np.arange(len(named), dtype=np.int64).repeat(sizes)
    tf = fit_columns(starts, np.concatenate([named[i][1][1] - named[i][1][0] for i in full] or [np.zeros(0, np.int64)]),
                     track_id, np.ones(len(starts), np.int8))
    shortened, shortened_ns = shortened + tf.shortened, shortened_ns + tf.shortened_ns
    ends = starts + tf.dur
    bounds = [0, *itertools.accumulate(sizes)]
    tracks: list[tuple[str, Intervals]] = [(name, (iv[0], ends[a:b])) for (name, iv), a, b
                                           in zip(named, bounds[:-1], bounds[1:], strict=True)]
    py_dur = py.dur[n:]
    if len(py_dur):
        py_us = np.where(py_dur != cols.py_dur, py_dur / 1000, cols.py_dur_us)
    else:
        py_us = np.zeros(0, np.float64)
    return TraceFit(py.dur[:n], py.track[:n], py_dur, py_us, py.track[n:], kf.dur, kf.track, tracks,
                    py.lanes, kf.lanes, shortened, shortened_ns, py.moved + kf.moved, (starts, tf.dur, track_id))


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
        self.communication = enc_pid(fw.pid, 16, device_id)
        self.device_id = device_id
        self.comm: list[bytes] = []  # the Communication process, ready-made (comm_views.trace_events)
        self.apis: cann.Apis | None = None  # the CANN process and HostToDevice flows (Level1+)
        self.extra: list[bytes] = []  # further ready-made events (the profiling overhead track)
        self.fit: TraceFit | None = None  # Perfetto-fitted times (perfetto_fit), set by ``fitted``


def fitted(fw: Framework, ov: Overlap, lay: Layout) -> TraceFit:
    """The layout's Perfetto fit, computed once (before a forked writer, so both halves share it)."""
    if lay.fit is None:
        lay.fit = fit_trace(fw, ov)
    return lay.fit


def metadata(fw: Framework, ov: Overlap, lay: Layout) -> list[bytes]:
    """The metadata events' texts: process and thread names and sort indices, lanes included."""
    fit = fitted(fw, ov, lay)
    cann_tids: tuple[int, ...] = ()
    if lay.apis is not None and len(lay.apis):
        cann_tids = tuple(sorted(set(fit.op_tid[lay.apis.event].tolist())))
    streams = tuple(sorted(set(fw.kernels.stream.tolist())))
    return _metadata_texts(lay.python, lay.cann, lay.hardware, lay.overlap, lay.device_id, tuple(fw.tids),
                           tuple(sorted(fit.python_lanes.items())), cann_tids, streams,
                           tuple(sorted(fit.stream_lanes.items())), tuple(name for name, _iv in ov.tracks()))


@lru_cache(maxsize=64)  # the same process and threads window after window (the analysis worker)
def _metadata_texts(python: int, cann_pid: int, hardware: int, overlap: int, dev: int, tids: tuple[int, ...],
                    python_lanes: tuple[tuple[int, int], ...], cann_tids: tuple[int, ...], streams: tuple[int, ...],
                    stream_lanes: tuple[tuple[int, int], ...], tracks: tuple[str, ...]) -> list[bytes]:
    """The metadata events' texts (the caller never changes the list)."""
    evs = _meta(python, "Python", "CPU", 0)
    for t in tids:
        evs += _thread(python, t, f"Thread {t}", t)
    for t, base in python_lanes:
        evs += _thread(python, t, f"Thread {base} (overlapping)", t)
    evs += _meta(cann_pid, "CANN", "CPU", 7)
    for t in cann_tids:
        evs += _thread(cann_pid, t, f"Thread {t}", t)
    evs += _meta(hardware, "Ascend Hardware", f"NPU {dev}", 14)
    for s in streams:
        evs += _thread(hardware, s, f"Stream {s}", s)
    for t, base in stream_lanes:
        evs += _thread(hardware, t, f"Stream {base} (overlapping)", t)
    evs += _meta(overlap, "Overlap Analysis", f"NPU {dev}", 31)
    for i, name in enumerate(tracks):
        evs += _thread(overlap, i, name, i)
    return [orjson.dumps(e) for e in evs]
