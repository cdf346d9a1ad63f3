"""The pure-Python marker producers: the fallback of the native core's ``_ring`` functions.

``mark``/``push``/``pop`` append one int a record to the calling thread's ``marks`` list
(:mod:`~openmsprof.recorder.buffers`): ``c + perf_counter_ns()``, where ``c`` is cached per
(kind, message, domain) by :mod:`~openmsprof.recorder.markcodes` and packs a slot of
:mod:`~openmsprof.recorder.slots` with its base time: the int is the record,
``slot << 48 | (ts - base)``, so the hot path pays one add and one append, and the encoder
converts one int a record (a miss, or a record with no slot, is markcodes' slow path).
The list holds at most ``buffers.RUN`` ints, then moves to the thread's
runs (:func:`_rotate`).  A list at its cap is drained on the producer's own thread (it holds the GIL the
flusher thread would wait for), or, when a drain is under way, the record is dropped and counted
for the thread and kind; a thread over the session budget drops and counts everything.
``range_start``/``range_end`` carry a range id too and stay on the tuple path.
"""

from __future__ import annotations

import time
from typing import Any

from openmsprof.recorder import buffers, markcodes, slots
from openmsprof.recorder.buffers import TLS, next_range_id

__all__ = ["after_fork_child", "begin", "end", "mark", "pop", "push", "range_end", "range_start", "refresh",
           "set_domains", "set_enabled"]

_now = time.perf_counter_ns
_on = False
_tls = TLS
_wake = buffers.WAKE
#: Length (one int a record) at which a thread's current list moves to its runs; and the most
#: runs a thread holds before its marks are full (MARK_CAP records in all).
_RUN = buffers.RUN
_RUNS = buffers.MARK_CAP // buffers.RUN - 1
#: The code caches of :mod:`~openmsprof.recorder.markcodes`, under the hot path's own names
#: (never rebound: cleared in place at each epoch).
_MARK = markcodes.MARK
_PUSH = markcodes.PUSH
_POPC: int | None = None  # c of a pop (code 3) in this epoch
_ids: Any = None  # the host string table's interning dict (StringTable.ids)
#: Domain filter (the session's mstx_domain_include / _exclude): 0 none, 1 include, 2 exclude.
_dom_mode = 0
_dom_names: frozenset[str] = frozenset()
#: Whether the filter skips markers given no domain (the "default" domain).
_skip_default = False
#: Explicit domains whose markers are skipped (tested first on the domain path: a skipped
#: marker costs an identity test against the last one skipped, else a set lookup); only filled
#: while the filter is on.
_SKIP: set[Any] = set()
_LAST_SKIP: Any = object()
#: ``len(marks) < _POPCAP`` is pop's fast path: 0 while a filter is on, so that every pop goes
#: to :func:`_slow`, which skips the pop of a skipped push.
_POPCAP = buffers.RUN
_PUSHCAP = buffers.RUN  # the same for push (every push's filter state is stacked)


def _new_epoch() -> None:
    """Codes are cached afresh, in slots of a new epoch (:func:`markcodes.new_epoch`)."""
    global _POPC
    _POPC = markcodes.new_epoch()


def refresh() -> None:
    """Called by the flusher each cycle: a new epoch once the base is ``slots.EPOCH_NS`` old."""
    if _ids is not None and slots.old():
        _new_epoch()


def begin(string_ids: Any) -> None:
    """A session starts: codes are string ids of its host data directory."""
    global _ids, _RUNS, _POPCAP, _PUSHCAP
    _RUNS = buffers.MARK_CAP // buffers.RUN - 1
    _POPCAP = _PUSHCAP = 0 if _dom_mode else _RUN
    slots.reset()
    _new_epoch()
    _ids = string_ids
    _tls.skips = []


def set_domains(mode: int, names: Any) -> None:
    """The marker domain filter: 0 none, 1 record only ``names``, 2 all but ``names``
    (``"default"`` names the domain of a marker given none).  Set before :func:`begin`."""
    global _dom_mode, _dom_names, _skip_default, _LAST_SKIP
    _dom_mode = mode
    _dom_names = frozenset(str(n) for n in names)
    _skip_default = mode != 0 and (("default" in _dom_names) == (mode == 2))
    _SKIP.clear()
    _LAST_SKIP = object()


def _skipped(domain: Any) -> bool:
    """Whether the filter skips markers of ``domain`` (None: "default"); remembered in _SKIP
    (and as _LAST_SKIP)."""
    global _LAST_SKIP
    if domain is None:
        return _skip_default
    name = domain if isinstance(domain, str) else str(domain)
    inside = name in _dom_names
    skip = not inside if _dom_mode == 1 else inside
    if skip and domain is not None:
        try:
            _SKIP.add(domain)
        except TypeError:
            pass
        else:
            _LAST_SKIP = domain
    return skip


def _skip_stack() -> list[bool]:
    try:
        return _tls.skips  # type: ignore[no-any-return]
    except AttributeError:
        _tls.skips = []
        return _tls.skips  # type: ignore[no-any-return]


def after_fork_child() -> None:
    """In a forked child: off, no codes (the child gets its own string table), the new wake event."""
    global _on, _ids, _wake, _POPC
    _on = False
    _ids = None
    _wake = buffers.WAKE
    _POPC = None
    markcodes.forget()


def end() -> None:
    global _ids, _on
    _on = False
    _ids = None


def set_enabled(on: bool) -> None:
    global _on
    _on = bool(on) and _ids is not None


def _slow(kind: int, message: Any, domain: Any, helped: bool = False) -> None:
    """Miss, domain, first record of a thread, or a full list (tested first: flat out, the
    drop path is as hot as the record path)."""
    if _dom_mode and not helped:  # every push and pop comes here while a filter is on
        try:
            _tls.buf  # noqa: B018 - registered? (else every skipped call's fast path raises)
        except AttributeError:
            buffers.register_current_thread()  # no memory yet: its marks list is FULL
        if kind == 3:
            stack = _skip_stack()
            if stack and stack.pop():
                return None
        else:
            skip = _skipped(domain)
            if kind == 2:
                _skip_stack().append(skip)
            if skip:
                return None
    try:
        marks = _tls.marks
    except AttributeError:
        marks = buffers.allot_marks()
    if len(marks) >= _RUN:
        marks = _rotate(marks)
        if marks is None:  # full, or FULL (over budget: _full tries for memory again)
            return _full(kind, message, domain) if not helped else _count(kind)
    return markcodes.append(marks, kind, message, domain, _ids, _POPC)


def _rotate(marks: list[int]) -> list[int] | None:
    """The thread's current list is at :data:`_RUN`: move it to the thread's runs and return a
    new one (None when the thread holds its cap, or has no memory: FULL).  A signal handler
    that marks in between may rotate too: the stores below follow the test with no call
    between them (Python runs handlers and switches threads only at calls and loops), so the
    list it started is kept, and a list in the runs twice is taken once (the flusher takes
    prefixes)."""
    if marks is buffers.FULL:
        return None
    buf = _tls.buf
    runs = buf.runs
    if len(runs) >= _RUNS:
        return None
    new: list[int] = []
    runs.append(marks)
    if _tls.marks is marks:
        _tls.marks = buf.marks = new
        return new
    return _tls.marks  # type: ignore[no-any-return]


def _full(kind: int, message: Any, domain: Any) -> None:
    """The calling thread's list is full, or it is over budget.  Full: drain on this thread
    unless a drain is under way, then record (a drain under way: count the drop, wake the
    flusher).  Over budget: count, and try for memory again."""
    marks = _tls.marks
    if marks is buffers.FULL:  # none allotted yet, or the budget was spent: try (again)
        if buffers.allot_marks() is not buffers.FULL:
            return _slow(kind, message, domain, helped=True)
        _tls.drops[kind] += 1
        return None
    helper = buffers.HELPER
    if helper is not None and helper():
        return _slow(kind, message, domain, helped=True)
    _count(kind)
    return None


def _count(kind: int) -> None:
    _tls.drops[kind] += 1
    if not _wake.is_set():
        _wake.set()


def mark(message: str, domain: str | None = None) -> None:
    """Instant marker."""
    if _on:
        # one try around the whole hot path (free in 3.11 until something raises): no thread
        # buffer yet, a full list, an uncached or unhashable message or domain all go to _slow;
        # the default domain skipped costs a flag test (before the thread's list is looked up),
        # a domain the filter skipped an identity test (the last one skipped) or a set lookup
        try:
            if domain is None:
                if _skip_default:
                    return None
                marks = _tls.marks
                if len(marks) < _RUN:
                    marks.append(_MARK[message] + _now())
                    return None
            elif domain is _LAST_SKIP or domain in _SKIP:
                return None
        except (AttributeError, KeyError, TypeError):
            pass
        return _slow(1, message, domain)
    return None


def push(message: str, domain: str | None = None) -> None:
    """Open a same-thread range."""
    if _on:
        try:
            if domain is None:
                marks = _tls.marks
                if len(marks) < _PUSHCAP:
                    marks.append(_PUSH[message] + _now())
                    return None
            elif domain is _LAST_SKIP or domain in _SKIP:
                _tls.skips.append(True)  # its pop is skipped too
                return None
        except (AttributeError, KeyError, TypeError):
            pass
        return _slow(2, message, domain)
    return None


def pop() -> None:
    """Close the innermost same-thread range."""
    if _on:
        try:
            marks = _tls.marks
            if len(marks) < _POPCAP:
                marks.append(_POPC + _now())  # type: ignore[operator]
                return None
        except (AttributeError, TypeError):  # no list yet, or no slot for pops this epoch
            pass
        return _slow(3, None, None)
    return None


def range_start(message: str, domain: str | None = None) -> int:
    """Open a range that may end on another thread; returns its id (0 when off)."""
    if not _on or (_dom_mode and (domain is _LAST_SKIP or domain in _SKIP or _skipped(domain))):
        return 0
    rid = next_range_id()
    buffers.append((4, _now(), message, domain, rid))
    return rid


def range_end(range_id: int) -> None:
    """Close a range opened by :func:`range_start`."""
    if _on and isinstance(range_id, int) and range_id > 0:
        buffers.append((5, _now(), range_id))
