"""The pure-Python marker producers: the fallback of the native core's ``_ring`` functions.

``mark``/``push``/``pop`` append two ints to the calling thread's ``marks`` list
(:mod:`~openmsprof.recorder.buffers`): ``perf_counter_ns()`` and a code that packs the kind
and the string ids of message and domain (``kind | a << 8 | b << 40``), looked up in a dict per
kind, so the hot path builds no tuple and the flusher decodes a whole run column-wise.  A miss
interns the strings in the host data directory's string table (under its lock) and caches the
code.  A list at its cap is drained on the producer's own thread (it holds the GIL the flusher thread
would wait for), or, when a drain is under way, the record is dropped and counted for the
thread and kind; a thread over the session budget drops and counts everything.
``range_start``/``range_end`` carry a range id too and stay on the tuple path.
"""

from __future__ import annotations

import time
from typing import Any

from openmsprof.recorder import buffers
from openmsprof.recorder.buffers import TLS, next_range_id

__all__ = ["after_fork_child", "begin", "end", "mark", "pop", "push", "range_end", "range_start", "set_domains",
           "set_enabled"]

_now = time.perf_counter_ns
_on = False
_tls = TLS
_wake = buffers.WAKE
#: List length (two ints a record) at which a thread's marks are full.
_CAP2 = 2 * buffers.MARK_CAP
#: message -> code, per kind (domain None); (kind, message, domain) -> code otherwise.
_MARK: dict[Any, int] = {}
_PUSH: dict[Any, int] = {}
_DOM: dict[Any, int] = {}
_POP = 3
#: Distinct messages cached per dict before it is emptied (a flood of unique messages stays
#: bounded; their codes in flight stay valid, the strings are in the table already).
CODE_CACHE = 1 << 16
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
_POPCAP = 2 * buffers.MARK_CAP
_PUSHCAP = 2 * buffers.MARK_CAP  # the same for push (every push's filter state is stacked)


def begin(string_ids: Any) -> None:
    """A session starts: codes are string ids of its host data directory."""
    global _ids, _CAP2, _POPCAP, _PUSHCAP
    _ids = string_ids
    _CAP2 = 2 * buffers.MARK_CAP
    _POPCAP = _PUSHCAP = 0 if _dom_mode else _CAP2
    for d in (_MARK, _PUSH, _DOM):
        d.clear()
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
    global _on, _ids, _wake
    _on = False
    _ids = None
    _wake = buffers.WAKE
    for d in (_MARK, _PUSH, _DOM):
        d.clear()


def end() -> None:
    global _ids, _on
    _on = False
    _ids = None


def set_enabled(on: bool) -> None:
    global _on
    _on = bool(on) and _ids is not None


def _code(kind: int, message: Any, domain: Any) -> int:
    """The code of (kind, message, domain), interning its strings; -1 when it cannot be made."""
    ids = _ids
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
    code = kind | a << 8 | b << 40
    cache = _DOM if domain is not None else _MARK if kind == 1 else _PUSH
    if len(cache) >= CODE_CACHE:
        cache.clear()
    try:
        cache[(kind, message, domain) if domain is not None else message] = code
    except TypeError:
        pass
    return code


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
    if len(marks) >= _CAP2:  # full, or FULL (over budget: _full tries for memory again)
        return _full(kind, message, domain) if not helped else _count(kind)
    if domain is not None:
        try:
            code = _DOM[(kind, message, domain)]
        except (KeyError, TypeError):
            code = _code(kind, message, domain)
    else:
        code = _code(kind, message, None) if kind != 3 else _POP
    if code < 0:
        _tls.drops[kind] += 1
        return None
    marks.append(_now())
    marks.append(code)
    return None


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
                if len(marks) < _CAP2:
                    code = _MARK[message]
                    marks.append(_now())
                    marks.append(code)
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
                    code = _PUSH[message]
                    marks.append(_now())
                    marks.append(code)
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
                marks.append(_now())
                marks.append(_POP)
                return None
        except AttributeError:
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
