"""Per-thread record buffers: the hot path appends a tuple to its own thread's list, no lock.

Producers do::

    try:
        TLS.append(record)          # TLS.append is the bound append of the thread's list
    except AttributeError:
        append_slow(record)

and the flusher drains each list with ``chunk = items[:n]; del items[:n]`` — two single
bytecode operations that are atomic under the GIL, so a concurrent append is never lost.

Hot-path tuples (first item = :class:`~openmsprof.recorder.records.Kind` value)::

    (MARK, ts, message, domain)
    (PUSH, ts, message, domain)
    (POP, ts, None, None)
    (RANGE_START, ts, message, domain, range_id)
    (RANGE_END, ts, range_id)
    (API, t0, t1, name, ApiLevel, connection_id)
    (TASK, device_id, stream, t0, t1, name, task_id, model_id, op_type, in_shapes,
           in_dtypes, out_shapes, out_dtypes, connection_id, Executor)
    (STEP, ts, step_index, model_id, StepTag, device_id)
    (STEP_RANGE, t0, t1, step_number)
    (COUNTER, ts, Series, sub_index, value, device_id)
    (TASK_BATCH, device_id, model_id, node strings, node executors, int64 array (6, n))

Marker tuples (kinds 1-3) all have four items so the flusher can encode them column-wise.
Strings are interned by the flusher, off the hot path.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

TLS = threading.local()
#: Tag of a batch of tasks (``emit.record_tasks``); an in-memory tag, not a record kind.
TASK_BATCH = 100


class ThreadBuffer:
    __slots__ = ("items", "name", "thread", "tid")

    def __init__(self) -> None:
        t = threading.current_thread()
        self.items: list[tuple[Any, ...]] = []
        self.thread = t
        self.tid = threading.get_native_id()
        self.name = t.name


_registry: list[ThreadBuffer] = []
_registry_lock = threading.Lock()
_connection_ids = itertools.count(1)
_range_ids = itertools.count(1)


def register_current_thread() -> list[tuple[Any, ...]]:
    """Create and register the calling thread's buffer; return its list."""
    buf = ThreadBuffer()
    with _registry_lock:
        _registry.append(buf)
    TLS.items = buf.items
    TLS.append = buf.items.append  # one attribute lookup less on the hot path
    return buf.items


def append_slow(record: tuple[Any, ...]) -> None:
    """First append of a thread (its buffer does not exist yet)."""
    register_current_thread().append(record)


def append(record: tuple[Any, ...]) -> None:
    """Append for callers that are not on the hottest path."""
    try:
        TLS.append(record)
    except AttributeError:
        append_slow(record)


def length() -> int:
    """Records the calling thread has buffered and the flusher not yet taken."""
    try:
        return len(TLS.items)
    except AttributeError:
        return 0


def snapshot() -> list[ThreadBuffer]:
    with _registry_lock:
        return list(_registry)


def drop_dead_empty() -> None:
    """Forget buffers of finished threads once drained (bounded registry)."""
    with _registry_lock:
        _registry[:] = [b for b in _registry if b.items or b.thread.is_alive()]


def clear_all() -> None:
    """Discard anything left from a previous session (records that raced its stop)."""
    for b in snapshot():
        del b.items[:]


def next_connection_id() -> int:
    """A process-unique id linking an API call to the tasks it launched (< 2^32)."""
    return next(_connection_ids) & 0xFFFFFFFF or next(_connection_ids)


def next_range_id() -> int:
    return next(_range_ids)
