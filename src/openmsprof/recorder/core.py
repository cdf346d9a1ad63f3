"""The recorder core behind one interface: the native ring buffers or the pure-Python fallback.

``BACKEND`` is ``"native"`` when the C extension ``openmsprof.recorder._ring`` was built and
not switched off (``OPENMSPROF_RECORDER=python``), else ``"python"``.  Markers take their entry
points from here; the session starts and stops the core and writes what it counted:

- native: producers write 32-byte records into per-thread rings (``_ring.c``); a native flusher
  thread moves them to ``host/data/Mstx.records.host.slice_*`` with no GIL; a full ring drops
  and counts per thread and kind.
- python: producers append (timestamp, code) ints to per-thread lists
  (:mod:`~openmsprof.recorder.pymarkers`, :mod:`~openmsprof.recorder.buffers`); a list at its
  cap, or a thread over the session budget, drops and counts per thread and kind the same way.

Both keep session memory under :data:`MEMORY_BYTES` (``OPENMSPROF_RECORDER_MB``, default 64).
"""

from __future__ import annotations

import importlib
import os
import threading
from types import ModuleType

from openmsprof.recorder import buffers

__all__ = ["BACKEND", "KIND_NAMES", "MEMORY_BYTES", "RING_RECORDS", "available", "ring"]

#: Marker kinds by record kind code (the drop report's names).
KIND_NAMES = {0: "invalid", 1: "mark", 2: "push", 3: "pop", 4: "range_start", 5: "range_end", 6: "api", 7: "task",
              9: "step", 10: "counter", 12: "step_range", 15: "task_batch"}


def _env_int(name: str, default: int, low: int, high: int) -> int:
    try:
        value = int(os.environ.get(name, default))
    except ValueError:
        return default
    return min(max(value, low), high)


MEMORY_BYTES = _env_int("OPENMSPROF_RECORDER_MB", 64, 8, 4096) * 1024 * 1024
#: Records per thread ring (native; a power of two, 4 MB by default) and per thread list
#: (python).  ``OPENMSPROF_RING_RECORDS`` changes it (tests force drops with small rings).
RING_RECORDS = _env_int("OPENMSPROF_RING_RECORDS", 1 << 17, 2048, 1 << 24)
#: The pure-Python lists hold a quarter of that per thread for markers (one int, <= 48 bytes a
#: record) and an eighth for other kinds (a tuple, ~160 bytes): a short backlog keeps the newest record on disk young when the
#: GIL-bound flusher falls behind.  All threads together stay inside MEMORY_BYTES.
PY_LIST_RECORDS = max(RING_RECORDS // 8, 2048)
#: Records per native thread ring: sized from the budget, not fixed: a quarter of
#: :data:`MEMORY_BYTES` (a power of two; 512 Ki records = 16 MB at the default 64 MB), so one
#: thread marking flat out (~1.5-12 M records/s) leaves the flusher 40-300 ms after the
#: half-full wake-up before anything drops (4 MB rings left 5-40 ms: 7.6-16.4 % of a 1-second
#: burst dropped on a busy machine).  The next threads get the same while the budget lasts,
#: then halves of it; untouched ring pages are never resident.  ``OPENMSPROF_RING_RECORDS`` sets it.
NATIVE_RING_RECORDS = (RING_RECORDS if "OPENMSPROF_RING_RECORDS" in os.environ
                       else max(2048, 1 << ((MEMORY_BYTES // 4 // 32).bit_length() - 1)))
buffers.configure(max(RING_RECORDS // 4, 2048), PY_LIST_RECORDS, MEMORY_BYTES)
#: Whether the native flusher writes packed blocks (~9 bytes a marker; docs/formats.md "Packed
#: record slices") or fixed 32-byte records (``OPENMSPROF_RECORDER_PACKED=0``).
PACKED = os.environ.get("OPENMSPROF_RECORDER_PACKED", "1").strip() != "0"

ring: ModuleType | None
try:
    ring = importlib.import_module("openmsprof.recorder._ring")
except ImportError:  # no compiler at install time: the pure-Python recorder
    ring = None


def available() -> bool:
    """Whether the native core was built."""
    return ring is not None


def _choose() -> str:
    want = os.environ.get("OPENMSPROF_RECORDER", "auto").strip().lower()
    if want == "python" or ring is None:
        return "python"
    return "native"


BACKEND = _choose()

if ring is not None:
    ring.configure(ring_records=NATIVE_RING_RECORDS, memory_bytes=MEMORY_BYTES,
                   string_bytes=MEMORY_BYTES // 8,
                   thread_name=lambda: threading.current_thread().name, packed=PACKED)


def drops_by_thread_kind(rows: list[tuple[int, int, int]]) -> dict[str, dict[str, int]]:
    """``{"tid": {"mark": n, ...}}`` for the overhead file and end_info."""
    out: dict[str, dict[str, int]] = {}
    for tid, kind, n in rows:
        per = out.setdefault(str(tid), {})
        name = KIND_NAMES.get(kind, str(kind))
        per[name] = per.get(name, 0) + int(n)
    return out


