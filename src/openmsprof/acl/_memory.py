"""Real memory behind pyACL pointers.

``acl.rt.malloc``/``malloc_host`` allocate numpy-backed blocks kept alive here by address;
``acl.util.numpy_to_ptr`` registers the array it was given (weakly: the entry goes when the
array does) and ``bytes_to_ptr`` keeps its last few bytes objects alive.  Every pointer the
facade dereferences (memcpy, execute buffers, get_op_* data) must lie inside a live region —
an unknown pointer is an error code, never a crash.  ``generation`` changes whenever a region
goes away, so cached bindings to user memory are re-checked.
"""

from __future__ import annotations

import bisect
import ctypes
import threading
import weakref
from collections import OrderedDict
from typing import Any

import numpy as np

_lock = threading.Lock()
#: start address → (size, owner): owner is an ndarray (allocation), a weakref (user array)
#: or a bytes object.
_regions: dict[int, tuple[int, Any]] = {}
_starts: list[int] = []
_recent_bytes: OrderedDict[int, bytes] = OrderedDict()
_KEEP_BYTES = 256
generation = 0


def _add(addr: int, size: int, owner: Any) -> None:
    with _lock:
        if addr not in _regions:
            bisect.insort(_starts, addr)
        _regions[addr] = (size, owner)


def _remove(addr: int, owner: Any = None) -> bool:
    global generation
    with _lock:
        entry = _regions.get(addr)
        if entry is None or (owner is not None and entry[1] is not owner):
            return False
        del _regions[addr]
        i = bisect.bisect_left(_starts, addr)
        if i < len(_starts) and _starts[i] == addr:
            del _starts[i]
        generation += 1
        return True


def allocate(size: int) -> int:
    """A zeroed block of ``size`` bytes (64-byte aligned); returns its address."""
    raw = np.zeros(size + 64, dtype=np.uint8)
    base = raw.__array_interface__["data"][0]
    off = (-base) % 64
    block = raw[off:off + size]
    addr = base + off
    _add(addr, size, block)
    return addr


def release(addr: int) -> bool:
    """Free a block from :func:`allocate`; False if ``addr`` is not one."""
    entry = _regions.get(addr)
    if entry is None or not isinstance(entry[1], np.ndarray):
        return False
    return _remove(addr)


def register_array(arr: np.ndarray) -> int:
    """Address of ``arr``'s data, registered while ``arr`` lives."""
    addr: int = arr.__array_interface__["data"][0]
    entry = _regions.get(addr)
    if entry is not None and isinstance(entry[1], weakref.ref) and entry[1]() is arr:
        return addr
    def gone(r: weakref.ref[np.ndarray], a: int = addr) -> None:
        _remove(a, r)

    ref = weakref.ref(arr, gone)
    _add(addr, arr.nbytes, ref)
    return addr


def register_bytes(data: bytes) -> int:
    """Address of an immutable bytes object's buffer (the last 256 are kept alive)."""
    addr = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0
    with _lock:
        _recent_bytes[addr] = data
        _recent_bytes.move_to_end(addr)
        dropped = _recent_bytes.popitem(last=False) if len(_recent_bytes) > _KEEP_BYTES else None
    if dropped is not None:
        _remove(dropped[0], dropped[1])
    _add(addr, len(data), data)
    return addr


def owner_of(addr: int) -> tuple[int, int, Any] | None:
    """(start, size, object) of the live region holding ``addr``."""
    i = bisect.bisect_right(_starts, addr) - 1
    if i < 0:
        return None
    start = _starts[i]
    entry = _regions.get(start)
    if entry is None:
        return None
    size, owner = entry
    if isinstance(owner, weakref.ref):
        owner = owner()
        if owner is None:
            return None
    return start, size, owner


def check(addr: int, size: int) -> bool:
    """True if ``[addr, addr+size)`` lies inside one live region."""
    if not isinstance(addr, int) or isinstance(addr, bool) or addr <= 0 or size < 0:
        return False
    found = owner_of(addr)
    return found is not None and addr + size <= found[0] + found[1]


def dtype_at(addr: int) -> np.dtype[Any] | None:
    """The dtype of a user array that starts exactly at ``addr`` (None for raw memory)."""
    found = owner_of(addr)
    if found is None or found[0] != addr or not isinstance(found[2], np.ndarray):
        return None
    dt: np.dtype[Any] = found[2].dtype
    return None if dt.kind in "SVU" or dt == np.uint8 else dt


def view(addr: int, size: int) -> np.ndarray:
    """A writable uint8 view of checked memory (caller has called :func:`check`)."""
    return np.ctypeslib.as_array((ctypes.c_ubyte * size).from_address(addr))


def read(addr: int, size: int) -> bytes:
    return ctypes.string_at(addr, size)
