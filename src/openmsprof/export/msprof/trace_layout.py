"""Timeline layout: process tracks, pid/tid encoding, metadata events, overlap lanes (docs/formats.md §5).

Perfetto-safe mode (default): small pids (the track's sort index), numeric ts, and compact tids
``k * 100 + sort_index`` (k-th thread of the track, 0 for process-level events; the real tid
stays in the thread name and sort index) so that no tid appears under two processes (Perfetto's
JSON importer keys threads by tid) and tids cost few bytes.  Ascend mode: real tids and
``pid = (real_pid << 10) | (sort_index << 5) | device_id`` (31 = host).

Ascend mode's absolute string ``ts`` reaches Perfetto as a double (a 0.25 µs grid near 1.8e15 µs,
``image``), so its lanes judge nesting where Perfetto sees each slice (``Lanes.draw``): a slice
truly nested in its parent but ending after the parent's rounded end is shortened to that end
(< 0.5 µs), and one that truly starts after the previous ended but overlaps it once rounded goes
to an overflow lane (the previous slice is already written).  Perfetto-safe mode's small numeric
``ts`` is read exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from openmsprof.export.msprof.trace_writer import TraceWriter

SORT_APP, SORT_CANN, SORT_CPU, SORT_MEM, SORT_DEVICE = 6, 7, 9, 10, 14
HOST_DEV = 31
#: Perfetto-safe tids of a track are ``k * TID_STRIDE + sort_index`` (sort indexes are < 32).
TID_STRIDE = 100
#: Overflow lanes per thread before the last one is shared.
MAX_LANE = 64
#: Raw (Ascend-mode) thread id of the step track inside the device process.
STEP_TID = (1 << 22) - 1
#: Overflow-lane tids are allocated upwards from here (per file) in Ascend mode; the device
#: track's from ``DEVICE_FIRST_LANE_TID`` (its pass may run in another process).
FIRST_LANE_TID = 1 << 30
DEVICE_FIRST_LANE_TID = (1 << 30) + (1 << 29)


@dataclass(frozen=True)
class Style:
    """How ids and times are spelled: Perfetto-safe or Ascend-compatible."""

    safe: bool
    base_ns: int
    real_pid: int

    def pid(self, sort_index: int, dev: int = HOST_DEV) -> int:
        if self.safe:
            return sort_index
        rp = self.real_pid if self.real_pid < (1 << 22) else self.real_pid % ((1 << 22) - 1) + 1
        return (rp << 10) | (sort_index << 5) | (dev & 31)

    def tid(self, sort_index: int, k: int, raw: int) -> int:
        """The drawn tid of the ``k``-th thread (k ≥ 1) of a track whose real id is ``raw``."""
        return k * TID_STRIDE + sort_index if self.safe else raw

    @property
    def ts_base(self) -> int:
        """Subtracted from epoch ns before formatting ts (0 in Ascend mode: absolute)."""
        return self.base_ns if self.safe else 0

    @property
    def ts_fmt(self) -> str:
        """printf spelling of ``ts`` from (µs, ns remainder)."""
        return "%d.%03d" if self.safe else '"%d.%03d"'


def process_meta(w: TraceWriter, style: Style, sort_index: int, name: str, labels: str,
                 dev: int = HOST_DEV) -> int:
    """Emit process_name/labels/sort_index for a track; returns its pid."""
    pid = style.pid(sort_index, dev)
    tid = style.tid(sort_index, 0, 0)  # process-level: a tid no thread of another process has
    args: dict[str, object] = {"name": name}
    if style.safe:
        args["pid"] = style.real_pid
    w.add_meta({"name": "process_name", "pid": pid, "tid": tid, "ph": "M", "args": args})
    w.add_meta({"name": "process_labels", "pid": pid, "tid": tid, "ph": "M",
                "args": {"labels": labels}})
    w.add_meta({"name": "process_sort_index", "pid": pid, "tid": tid, "ph": "M",
                "args": {"sort_index": sort_index}})
    return pid


def thread_meta(w: TraceWriter, pid: int, tid: int, name: str, sort_index: int) -> None:
    w.add_meta({"name": "thread_name", "pid": pid, "tid": tid, "ph": "M", "args": {"name": name}})
    w.add_meta({"name": "thread_sort_index", "pid": pid, "tid": tid, "ph": "M",
                "args": {"sort_index": sort_index}})


def image(ns: int) -> int:
    """Perfetto's ns for the ``"%d.%03d"`` µs text of epoch ``ns``: the correctly rounded double
    (as ``ns / 1000``), ``× 1000`` in doubles, truncated (an integral double scaled exactly);
    export/ascend_pt/perfetto_fit.image_ns for arrays."""
    us = ns / 1000
    whole = int(us)
    return whole * 1000 if us == whole else int(us * 1000)


class Lanes:
    """Keeps X events on each thread nested or disjoint; an overlapping one goes to an overflow
    lane (a new thread with a fresh tid) instead of being dropped.  Events must arrive sorted by
    start (and end descending for equal starts) per thread.  Perfetto-safe lanes take the track's
    thread numbers ``k`` from the shared counter ``ks`` (``ks[0]`` = the last ``k`` taken;
    default: the named threads are 1…n)."""

    __slots__ = ("drawn", "ks", "lane0", "lane_tids", "names", "next_raw", "pid", "safe", "tracks",
                 "writer")

    def __init__(self, writer: TraceWriter, pid: int, names: dict[int, str],
                 style: Style | None = None, ks: list[int] | None = None,
                 first_raw: int = 0) -> None:
        self.tracks: dict[int, list[list[int]]] = {}
        #: Ascend mode (``draw``): thread → per lane a stack of (Perfetto's end, measured end)
        self.drawn: dict[int, list[list[tuple[int, int]]]] = {}
        #: thread → its first lane's stack of open ends, for the callers' inline fast path:
        #: ``len(st) == 1 and st[0] <= s`` → the span goes on the thread itself (``st[0] = e``).
        self.lane0: dict[int, list[int]] = {}
        self.lane_tids: dict[int, list[int]] = {}
        self.writer = writer
        self.pid = pid
        self.names = names
        # Perfetto-safe: lanes are further threads of the track (pid == sort index there)
        self.ks = [len(names)] if ks is None else ks
        self.safe = style is not None and style.safe
        self.next_raw = first_raw  # Ascend mode: 0 = the writer's file-wide counter

    def place(self, tid: int, s: int, e: int) -> int:
        """The tid to draw the span [s, e] of thread ``tid`` on."""
        lanes = self.tracks.get(tid)
        if lanes is None:
            st0 = self.lane0[tid] = [e]
            self.tracks[tid] = [st0]
            return tid
        for k, st in enumerate(lanes):
            while st and st[-1] <= s:
                st.pop()
            if not st or e <= st[-1]:
                st.append(e)
                return self.lane_tids[tid][k - 1] if k else tid
        if len(lanes) > MAX_LANE:
            lanes[-1].append(e)
            return self.lane_tids[tid][-1]
        lanes.append([e])
        return self._new_lane(tid, len(lanes))

    def draw(self, tid: int, s: int, e: int) -> tuple[int, int]:
        """The tid and duration (ns) to draw the span [s, e] (epoch ns) of thread ``tid`` with,
        in Perfetto's reading of the string ``ts`` (Ascend mode; Perfetto-safe: ``place``)."""
        if self.safe:
            return self.place(tid, s, e), e - s
        im, d = image(s), e - s
        lanes = self.drawn.get(tid)
        if lanes is None:
            self.drawn[tid] = [[(im + d, e)]]
            return tid, d
        for k, st in enumerate(lanes):
            while st and st[-1][0] <= im:
                st.pop()
            if st and im + d > st[-1][0]:
                top_im, top_true = st[-1]
                if e > top_true and k < MAX_LANE:
                    continue  # truly after it, or truly overlapping: the next lane
                d = top_im - im  # truly nested (or no lane left): end at the parent's end
            st.append((im + d, e))
            return (self.lane_tids[tid][k - 1] if k else tid), d
        lanes.append([(im + d, e)])
        return self._new_lane(tid, len(lanes)), d

    def _new_lane(self, tid: int, n: int) -> int:
        """Allocate, name and return the tid of thread ``tid``'s ``n - 1``-th overflow lane."""
        if self.safe:
            self.ks[0] += 1
            lane_tid = self.ks[0] * TID_STRIDE + self.pid
        elif self.next_raw:
            self.next_raw += 1
            lane_tid = self.next_raw
        else:
            lane_tid = self.writer.new_tid()
        self.lane_tids.setdefault(tid, []).append(lane_tid)
        base = self.names.get(tid, f"Thread {tid}")
        thread_meta(self.writer, self.pid, lane_tid, f"{base} (overlap {n - 1})", lane_tid)
        return lane_tid


def templates(style: Style) -> tuple[str, str]:
    """printf templates (without the closing brace) of X and instant events."""
    ts = style.ts_fmt
    x = '{"name":%s,"pid":%d,"tid":%d,"ts":' + ts + ',"dur":%d.%03d,"ph":"X"'
    i = '{"name":%s,"pid":%d,"tid":%d,"ts":' + ts + ',"ph":"i","s":"t"'
    return x, i
