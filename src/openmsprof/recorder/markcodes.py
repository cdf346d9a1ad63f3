"""The code caches of the pure-Python markers: (kind, message, domain) -> ``c``, so a record is ``c + perf_counter_ns()``.

``c`` packs a slot of :mod:`~openmsprof.recorder.slots` with its base time.  A miss interns
the strings (under the string table's lock) and takes a slot; a record that gets no slot (the
table is full, or the message cannot be a dict key) is appended as one negative int,
``-1 - (ts << 64 | code)`` (the encoder's slow path), and one whose strings exceed the code's
fields is dropped and counted for the thread and kind.  The caches start afresh with each slot
epoch; the hot path of :mod:`~openmsprof.recorder.pymarkers` reads :data:`MARK` and
:data:`PUSH` directly, so they are cleared in place, never rebound.
"""

from __future__ import annotations

import time
from typing import Any

from openmsprof.recorder import slots
from openmsprof.recorder.buffers import TLS

__all__ = ["DOM", "MARK", "PUSH", "append", "code", "forget", "new_epoch"]

_now = time.perf_counter_ns
_tls = TLS
#: message -> c, per kind (domain None); (kind, message, domain) -> c otherwise.  Bounded by
#: the table: once it is full, misses are appended as negative ints and not cached.
MARK: dict[Any, int] = {}
PUSH: dict[Any, int] = {}
DOM: dict[Any, int] = {}


def forget() -> None:
    """Empty the caches (a new epoch, or a forked child: its own string table)."""
    for d in (MARK, PUSH, DOM):
        d.clear()


def new_epoch() -> int | None:
    """Codes are cached afresh, in slots of a new epoch (an old slot stays valid for the
    records that still carry it); returns the ``c`` of a pop (code 3) in this epoch."""
    slots.new_epoch()
    forget()
    return slots.take(3)


def code(ids: Any, kind: int, message: Any, domain: Any) -> int:
    """The code of (kind, message, domain), interning its strings in ``ids`` (the host string
    table's interning dict); -1 when it cannot be made."""
    if ids is None:
        return -1
    try:
        a = ids[message]
    except TypeError:  # unhashable: its text
        a = ids[str(message)]
    try:
        b = ids[domain]
    except TypeError:
        b = ids[str(domain)]
    if a > 0xFFFFFFFF or b >= 1 << 23:  # beyond the code's fields: drop, counted
        return -1
    return kind | a << 8 | b << 40


def append(marks: list[int], kind: int, message: Any, domain: Any, ids: Any, popc: int | None) -> None:
    """Append the record of a miss (or of a domain, or a pop whose epoch got no slot): its
    cached ``c``, else a new slot's, else the negative form.  ``ids``: the session's string
    ids (None once it ended); ``popc``: the ``c`` of a pop in this epoch."""
    if kind == 3:
        c, key, cache = popc, None, MARK
    else:
        cache = DOM if domain is not None else MARK if kind == 1 else PUSH
        key = (kind, message, domain) if domain is not None else message
        try:
            c = cache.get(key)
        except TypeError:  # unhashable: never cached
            c, key = None, None
    if c is None:
        code_ = code(ids, kind, message, domain) if kind != 3 else 3
        if code_ < 0:
            _tls.drops[kind] += 1
            return None
        if key is not None and ids is not None:
            c = slots.take(code_)
        if c is None:  # no slot: the record whole in one negative int
            marks.append(-1 - (_now() << 64 | code_))
            return None
        cache[key] = c
    marks.append(c + _now())
    return None
