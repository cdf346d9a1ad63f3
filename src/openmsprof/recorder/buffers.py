"""Per-thread record buffers of the pure-Python recorder, inside one session memory budget.

Each thread owns two lists, appended to with no lock (``list.append`` is atomic under the GIL):

- ``marks``: the marker hot path (:mod:`~openmsprof.recorder.pymarkers`) appends one int per
  record (a slot of the code table and the time since the slot's base), so the flusher
  converts them with one ``array`` constructor and numpy column ops into a reused record
  array, with no per-record Python work.  The list holds at most :data:`RUN` ints (its length
  stays a cached small int: the producer's cap test allocates nothing); a full one is moved to
  the thread's ``runs`` (oldest first) and the producer starts a new one, up to
  :data:`MARK_CAP` records a thread.  The flusher takes the runs, then the list's prefix.
- ``items``: tuples of the other kinds (first item = :class:`~openmsprof.recorder.records.Kind`)::

    (RANGE_START, ts, message, domain, range_id)    (RANGE_END, ts, range_id)
    (API, t0, t1, name, ApiLevel, connection_id)
    (TASK, device_id, stream, t0, t1, name, task_id, model_id, op_type, in_shapes,
           in_dtypes, out_shapes, out_dtypes, connection_id, Executor)
    (STEP, ts, step_index, model_id, StepTag, device_id)    (STEP_RANGE, t0, t1, step_number)
    (COUNTER, ts, Series, sub_index, value, device_id)
    (TASK_BATCH, device_id, model_id, node strings, node executors, int64 array (6, n))

The flusher drains with ``chunk = lst[:n]; del lst[:n]`` (each atomic under the GIL).

Memory: a thread's lists are allotted from :data:`MEMORY_BYTES` when it first uses them (marks:
:data:`MARK_CAP` records; items: :data:`LIST_CAP` tuples, halved down to 256 when the budget is
short).  A thread that finds the budget spent gets :data:`FULL` (a shared list that is always
"full") and every record it makes is dropped and counted, per thread and kind, until a finished
thread gives its allotment back.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from openmsprof.recorder.wake import Wake

__all__ = ["FULL", "LIST_CAP", "MARK_CAP", "RUN", "TLS", "WAKE", "ThreadBuffer", "after_fork_child", "allot_marks",
           "append", "configure", "drop_rows", "held_marks", "memory_bytes", "register_current_thread", "set_open",
           "snapshot"]

TLS = threading.local()

#: Set by a producer whose list is full: the flusher wakes now instead of at its interval.
WAKE = Wake()
#: The session flusher's ``try_drain`` while a session runs: a producer whose marker list is
#: full drains on its own thread (when no drain is under way) instead of dropping.
HELPER: Callable[[], bool] | None = None
#: False in a forked child that does not follow the fork (``OPENMSPROF_FOLLOW_FORK=0``):
#: :func:`append` keeps nothing.
_open = True
#: Tag of a batch of tasks (``emit.record_tasks``); an in-memory tag, not a record kind.
TASK_BATCH = 100

#: Bytes one buffered marker costs (a list slot and its int, 40-48 bytes) and one tuple of
#: another kind (the tuple, its ints, its list slot); what the budget charges per record.
MARK_BYTES = 48
ITEM_BYTES = 160
#: Records per thread (set by :func:`configure` from ``core``).
MARK_CAP = 1 << 14
#: Ints a thread's current marker list holds before it is moved to ``runs`` (256: the largest
#: length ``len()`` returns without allocating an int).
RUN = 256
LIST_CAP = 1 << 14
MEMORY_BYTES = 64 << 20
#: The list of a thread over budget: always :data:`RUN` long ("full"), never appended to.
FULL: list[Any] = [None] * RUN


def configure(mark_cap: int, list_cap: int, memory_bytes: int) -> None:
    global MARK_CAP, LIST_CAP, MEMORY_BYTES, FULL
    MARK_CAP, LIST_CAP, MEMORY_BYTES = max(mark_cap, 2 * RUN), list_cap, memory_bytes
    FULL = [None] * RUN


class ThreadBuffer:
    __slots__ = ("cap", "drops", "item_bytes", "items", "lock", "mark_bytes", "marks", "name", "runs", "thread",
                 "tid")

    def __init__(self) -> None:
        t = threading.current_thread()
        self.items: list[tuple[Any, ...]] = []
        self.marks: list[int] = FULL
        #: this thread's filled marker lists, oldest first (the flusher takes them, then ``marks``)
        self.runs: list[list[int]] = []
        self.cap = 0
        self.mark_bytes = self.item_bytes = 0
        #: held by whoever takes from ``marks`` (the flusher thread or the producer itself)
        self.lock = threading.Lock()
        #: records dropped by this thread (list full or over budget), by record kind
        self.drops = [0] * 16
        self.thread = t
        self.tid = threading.get_native_id()
        self.name = t.name


_registry: list[ThreadBuffer] = []
_registry_lock = threading.Lock()
_used = 0  # bytes allotted to live threads (under _registry_lock)
_connection_ids = itertools.count(1)
_range_ids = itertools.count(1)


def _allot_marks() -> list[int]:
    """The calling thread's marker list, allotted from the budget if it has none yet
    (:data:`FULL` while the budget is spent: a finished thread may give memory back later)."""
    global _used
    buf = TLS.buf
    if buf.marks is FULL and _used + MARK_CAP * MARK_BYTES > MEMORY_BYTES:
        _reclaim_dead()
    if buf.marks is FULL and _used + MARK_CAP * MARK_BYTES <= MEMORY_BYTES:
        with _registry_lock:
            if _used + MARK_CAP * MARK_BYTES <= MEMORY_BYTES:
                buf.mark_bytes = MARK_CAP * MARK_BYTES
                _used += buf.mark_bytes
                buf.marks = TLS.marks = []
    return buf.marks


def _allot_items(buf: ThreadBuffer) -> None:
    """Give ``buf`` a tuple list of LIST_CAP, or half that down to 256, as the budget allows."""
    global _used
    if _used + LIST_CAP * ITEM_BYTES > MEMORY_BYTES:
        _reclaim_dead()
    with _registry_lock:
        cap = LIST_CAP
        while cap >= 256 and _used + cap * ITEM_BYTES > MEMORY_BYTES:
            cap //= 2
        if cap >= 256:
            buf.cap, buf.item_bytes = cap, cap * ITEM_BYTES
            _used += buf.item_bytes


def _reclaim_dead() -> None:
    """The budget is short: a finished thread's lists can grow no more, so it is charged for
    what they hold now, not for their caps (threads born and dead in quick succession would
    otherwise spend the budget until the flusher's next cycle forgets them)."""
    global _used
    with _registry_lock:
        for b in _registry:
            if b.thread.is_alive():
                continue
            marks = held_marks(b)
            held_m, held_i = marks * MARK_BYTES, len(b.items) * ITEM_BYTES
            if held_m < b.mark_bytes or held_i < b.item_bytes:
                _used -= b.mark_bytes - held_m + b.item_bytes - held_i
                b.mark_bytes, b.item_bytes = held_m, held_i
    WAKE.set()  # and the flusher forgets them soon


def held_marks(b: ThreadBuffer) -> int:
    """Marker records ``b`` holds (its runs counted full)."""
    return (len(b.marks) if b.marks is not FULL else 0) + RUN * len(b.runs)


def register_current_thread() -> ThreadBuffer:
    """Create and register the calling thread's buffer (memory is allotted on first use)."""
    buf = ThreadBuffer()
    with _registry_lock:
        _registry.append(buf)
    TLS.buf = buf
    TLS.items = buf.items
    TLS.marks = buf.marks
    TLS.drops = buf.drops
    return buf


def allot_marks() -> list[int]:
    """The calling thread's marker list (registering the thread and allotting memory first)."""
    try:
        TLS.buf  # noqa: B018 - registered?
    except AttributeError:
        register_current_thread()
    return _allot_marks()


def append(record: tuple[Any, ...]) -> None:
    """Append a tuple of a kind other than the markers: a full list (or a thread over the
    budget) drops the record, counts it for the thread and kind and wakes the flusher."""
    if not _open:
        return
    try:
        buf = TLS.buf
    except AttributeError:
        buf = register_current_thread()
    if len(buf.items) < buf.cap:
        buf.items.append(record)
        return
    if buf.cap == 0:
        _allot_items(buf)
        if buf.cap:
            buf.items.append(record)
            return
    buf.drops[min(record[0], len(buf.drops) - 1)] += 1
    if buf.cap:
        WAKE.set()


def snapshot() -> list[ThreadBuffer]:
    with _registry_lock:
        return list(_registry)


_dead_drops: dict[tuple[int, int], int] = {}


def drop_dead_empty() -> None:
    """Forget buffers of finished threads once drained (bounded registry, their memory back to
    the budget); their drop counts are kept."""
    global _used
    with _registry_lock:
        keep = []
        for b in _registry:
            if b.items or b.runs or (b.marks is not FULL and b.marks) or b.thread.is_alive():
                keep.append(b)
                continue
            _used -= b.mark_bytes + b.item_bytes
            for kind, n in enumerate(b.drops):
                if n:
                    _dead_drops[(b.tid, kind)] = _dead_drops.get((b.tid, kind), 0) + n
        _registry[:] = keep


def memory_bytes() -> int:
    """Bytes allotted to thread buffers now."""
    return _used


def drop_rows() -> list[tuple[int, int, int]]:
    """(tid, kind, records dropped) of every thread since the session began."""
    with _registry_lock:
        counts = dict(_dead_drops)
        for b in _registry:
            for kind, n in enumerate(b.drops):
                if n:
                    counts[(b.tid, kind)] = counts.get((b.tid, kind), 0) + n
    return [(tid, kind, n) for (tid, kind), n in sorted(counts.items())]


def clear_all() -> None:
    """Discard anything left from a previous session (records that raced its stop)."""
    for b in snapshot():
        del b.items[:]
        del b.runs[:]
        if b.marks is not FULL:
            del b.marks[:]
        b.drops[:] = [0] * len(b.drops)
    with _registry_lock:
        _dead_drops.clear()


def next_connection_id() -> int:
    """A process-unique id linking an API call to the tasks it launched (< 2^32)."""
    return next(_connection_ids) & 0xFFFFFFFF or next(_connection_ids)


def next_range_id() -> int:
    return next(_range_ids)


def set_open(on: bool) -> None:
    """Whether :func:`append` keeps records (off in a child that does not follow the fork)."""
    global _open
    _open = bool(on)


def after_fork_child() -> None:
    """In a forked child: the parent's buffered records are the parent's (it writes them): drop
    them without a word, forget the threads that do not exist here, and replace every lock and
    event another thread may have held at the fork."""
    global _registry_lock, _used, WAKE
    _registry_lock = threading.Lock()
    WAKE.close()  # the parent's pipe: a byte from here would wake the parent's flusher
    WAKE = Wake()
    try:
        me: ThreadBuffer | None = TLS.buf
    except AttributeError:
        me = None
    _dead_drops.clear()
    _registry[:] = [me] if me is not None else []
    _used = 0
    if me is not None:
        me.lock = threading.Lock()
        del me.items[:]
        del me.runs[:]
        if me.marks is not FULL:
            del me.marks[:]
        me.drops[:] = [0] * len(me.drops)
        me.tid = threading.get_native_id()
        me.thread = threading.current_thread()
        _used = me.mark_bytes + me.item_bytes
