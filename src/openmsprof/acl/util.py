"""``acl.util``: numpy/bytes ↔ pointer helpers and user threads (pyACL names)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from openmsprof.acl import _memory
from openmsprof.acl._codes import ACL_ERROR_INVALID_PARAM, ACL_SUCCESS, NPY_TYPES
from openmsprof.acl._guard import guard_module
from openmsprof.acl._state import fail, new_handle
from openmsprof.config.errors import from_signal_handler

__all__ = ["bytes_to_ptr", "numpy_to_ptr", "ptr_to_bytes", "ptr_to_numpy", "start_thread",
           "stop_thread"]

_threads: dict[int, threading.Thread] = {}


def numpy_to_ptr(arr: np.ndarray) -> int:
    """Address of a C-contiguous array's data (valid while the array lives)."""
    if not isinstance(arr, np.ndarray) or not arr.flags.c_contiguous:
        raise ValueError("acl.util.numpy_to_ptr: needs a C-contiguous numpy array")
    return _memory.register_array(arr)


def bytes_to_ptr(data: bytes) -> int:
    """Address of a bytes object's buffer (read-only memory)."""
    if not isinstance(data, bytes):
        raise ValueError("acl.util.bytes_to_ptr: needs a bytes object")
    return _memory.register_bytes(data)


def ptr_to_bytes(ptr: int, size: int) -> bytes:
    """A copy of ``size`` bytes of known memory at ``ptr``."""
    if not _memory.check(ptr, size):
        raise ValueError(f"acl.util.ptr_to_bytes: {ptr!r} (+{size}) is not known memory")
    return _memory.read(ptr, size)


def ptr_to_numpy(ptr: int, shape: Sequence[int] | int, npy_type: int | str | np.dtype[Any]) -> np.ndarray:
    """A numpy array viewing known memory at ``ptr`` (``npy_type``: NPY_TYPES number or dtype)."""
    try:
        spec: Any = NPY_TYPES[npy_type] if isinstance(npy_type, int) and npy_type in NPY_TYPES else npy_type
        dtype = np.dtype(spec)
        dims = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
        size = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    except (TypeError, ValueError, OverflowError) as exc:
        if from_signal_handler(exc):  # (a user's signal handler's, raised inside: theirs as it is)
            raise
        raise ValueError(f"acl.util.ptr_to_numpy: shape {shape!r} / type {npy_type!r} not understood "
                         f"({type(exc).__name__})") from None
    if not _memory.check(ptr, size):
        raise ValueError(f"acl.util.ptr_to_numpy: {ptr!r} (+{size} bytes) is not known memory")
    return _memory.view(ptr, size).view(dtype).reshape(dims)


def start_thread(func: Callable[[Any], Any], args: Any) -> tuple[int, int]:
    """Run ``func(args)`` in a new daemon thread; returns (thread id, ret)."""
    if not callable(func):
        return 0, fail(ACL_ERROR_INVALID_PARAM, "acl.util.start_thread: func is not callable")

    def body() -> None:
        try:
            func(args)
        except Exception as exc:  # a failing user thread is reported, never fatal
            fail(ACL_ERROR_INVALID_PARAM, f"acl.util.start_thread: thread raised {exc!r}")

    t = threading.Thread(target=body, name="acl-user-thread", daemon=True)
    t.start()
    h = new_handle()
    _threads[h] = t
    return h, ACL_SUCCESS


def stop_thread(thread_id: int, timeout: float | None = 30.0) -> int:
    """Wait for the thread to finish (pyACL joins it)."""
    t = _threads.pop(thread_id, None) if isinstance(thread_id, int) else None
    if t is None:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.util.stop_thread: unknown thread {thread_id!r}")
    t.join(timeout)
    return ACL_SUCCESS


guard_module(globals())  # every entry point answers bad arguments with a code (acl/_guard.py)
