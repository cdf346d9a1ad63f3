"""The code table of the pure-Python markers: a slot per marker code and epoch, so a record is one int.

A record of :mod:`~openmsprof.recorder.pymarkers` is ``slot << SLOT_SHIFT | (ts - base)``, and
its slot holds the record's code
(``kind | a << 8 | b << 40``: the string ids of message and domain) and the base time of the
epoch it was taken in.  Producers cache ``c = slot << SLOT_SHIFT - base`` per message and append
``c + perf_counter_ns()``; the encoder (:mod:`~openmsprof.recorder.encode`) reads the slot's code
and base back column-wise.  Slots are taken with ``itertools.count`` (no lock: a signal handler
may take one inside another take) and never given back within a session; once they are spent,
producers append the negative form ``-1 - (ts << 64 | code)`` instead.
"""

from __future__ import annotations

import itertools
import time

import numpy as np

__all__ = ["EPOCH_NS", "SLOTS", "SLOT_SHIFT", "TABLE_BASE", "TABLE_CODE", "new_epoch", "old", "reset", "take"]

_now = time.perf_counter_ns
#: A record's int: ``slot << SLOT_SHIFT | (ts - base)``; slots fill the 16 bits above.
SLOT_SHIFT = 48
SLOTS = 1 << 16
#: The code and the base time (ns) of each slot; a slot's code is 0 until it is taken (the
#: encoder counts a record of such a slot as invalid).  Filled per session.
TABLE_CODE = np.zeros(SLOTS, dtype=np.int64)
TABLE_BASE = np.zeros(SLOTS, dtype=np.int64)
#: A new epoch (base time now, codes cached afresh in new slots) once the base is this old: a
#: cached ``c`` used within 2**48 ns (78 h) of its base packs exactly, so one still in a
#: producer's hands when the epoch changes has 58 h to be appended.
EPOCH_NS = 1 << 46
_counter = itertools.count()
#: The current epoch's base time (ns, ``perf_counter_ns``).
base = 0


def reset() -> None:
    """A session starts: every slot free."""
    global _counter
    TABLE_CODE[:] = 0
    _counter = itertools.count()


def new_epoch() -> None:
    """Slots taken from now on get the base time now (those taken before stay valid)."""
    global base
    base = _now()


def old() -> bool:
    """Whether the epoch's base is :data:`EPOCH_NS` old."""
    return _now() - base > EPOCH_NS


def take(code: int) -> int | None:
    """``c`` of a new slot holding ``code`` in this epoch; None when the table is full."""
    i = next(_counter)
    if i >= SLOTS:
        return None
    b = base
    TABLE_BASE[i] = b
    TABLE_CODE[i] = code  # last: a slot is valid once its code is set
    return (i << SLOT_SHIFT) - b
