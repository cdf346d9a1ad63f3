"""``acl.prof``'s stamp API (msproftx): stamps made, given a message, and put on the collection
core's markers as marks, push/pop and ranges (re-exported by ``acl.prof``, where pyACL has them).

Stamps are recorded only between ``acl.prof.start`` and ``stop`` (else ACL_ERROR_PROF_NOT_RUN);
while ACL_PROF_MSPROFTX is off they are ignored, as CANN does, and the job log says so once.
"""

from __future__ import annotations

from openmsprof.acl._codes import ACL_ERROR_INVALID_PARAM, ACL_ERROR_PROF_NOT_RUN, ACL_SUCCESS
from openmsprof.acl._guard import guard_module
from openmsprof.acl._state import fail, new_handle
from openmsprof.recorder import session
from openmsprof.sources import markers

_stamps: dict[int, str] = {}


def create_stamp() -> int:
    h = new_handle()
    _stamps[h] = ""
    return h


def set_stamp_trace_message(stamp: int, msg: str, msg_len: int) -> int:
    if stamp not in _stamps or not isinstance(msg, str) or not isinstance(msg_len, int) \
            or not 0 <= msg_len <= 128:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.set_stamp_trace_message: bad stamp {stamp!r}, "
                    f"message or length {msg_len!r} (0..128)")
    _stamps[stamp] = msg[:msg_len][:127]
    return ACL_SUCCESS


def _tx(stamp: int, what: str) -> tuple[str | None, int]:
    msg = _stamps.get(stamp) if isinstance(stamp, int) else None
    if msg is None:
        return None, fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.{what}: unknown stamp {stamp!r}")
    cur = session.current()
    if cur is None:
        return None, fail(ACL_ERROR_PROF_NOT_RUN, f"acl.prof.{what}: only between acl.prof.start and stop")
    if not markers.is_on():
        _note_tx_off(cur, what)
    return msg, ACL_SUCCESS


_tx_off_noted: set[int] = set()


def _note_tx_off(cur: session.Session, what: str) -> None:
    """CANN ignores stamps while ACL_PROF_MSPROFTX is off; so do we, but the job log says so
    (once per session)."""
    if id(cur) in _tx_off_noted:
        return
    _tx_off_noted.add(id(cur))
    cur.note(f"acl.prof.{what}: stamps are ignored because ACL_PROF_MSPROFTX (msproftx) is off "
             "in this session's config; add it to acl.prof.create_config's data types to record them",
             warn=True)


def mark(stamp: int) -> int:
    msg, ret = _tx(stamp, "mark")
    if msg is not None:
        markers.mark(msg)
    return ret


def push(stamp: int) -> int:
    msg, ret = _tx(stamp, "push")
    if msg is not None:
        markers.push(msg)
    return ret


def pop() -> int:
    cur = session.current()
    if cur is None:
        return fail(ACL_ERROR_PROF_NOT_RUN, "acl.prof.pop: only between acl.prof.start and stop")
    if not markers.is_on():
        _note_tx_off(cur, "pop")
    markers.pop()
    return ACL_SUCCESS


def range_start(stamp: int) -> tuple[int, int]:
    msg, ret = _tx(stamp, "range_start")
    return (markers.range_start(msg), ret) if msg is not None else (0, ret)


def range_stop(range_id: int) -> int:
    if not isinstance(range_id, int) or range_id < 0:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.range_stop: bad range id {range_id!r}")
    markers.range_end(range_id)
    return ACL_SUCCESS


def destroy_stamp(stamp: int) -> None:
    _stamps.pop(stamp, None)


guard_module(globals())  # every entry point answers bad arguments with a code (acl/_guard.py)
