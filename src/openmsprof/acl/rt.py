"""``acl.rt``: devices, contexts, streams and memory (pyACL names and return conventions).

The CPU is device 0.  A stream is a real FIFO worker thread: ``acl.mdl.execute_async`` queues
work on it and :func:`synchronize_stream` waits until everything queued so far has run,
returning the first error.  Memory is real (numpy-backed, see ``_memory``).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from openmsprof.acl import _memory
from openmsprof.acl._codes import (
    ACL_ERROR_BAD_ALLOC,
    ACL_ERROR_INVALID_DEVICE,
    ACL_ERROR_INVALID_PARAM,
    ACL_HOST,
    ACL_SUCCESS,
)
from openmsprof.acl._guard import guard_module
from openmsprof.acl._state import fail, new_handle, traced
from openmsprof.config.capabilities import DEVICE_COUNT  # the CPU, device 0
from openmsprof.recorder.records import ApiLevel

__all__ = [
    "create_context", "create_stream", "destroy_context", "destroy_stream", "free", "free_host",
    "get_context", "get_device", "get_device_count", "get_run_mode", "malloc", "malloc_host",
    "memcpy", "memset", "reset_device", "set_context", "set_device", "synchronize_device",
    "synchronize_stream",
]

RT = ApiLevel.RUNTIME
_tls = threading.local()
_contexts: dict[int, int] = {}  # context → device
_streams: dict[int, Stream] = {}
_MAX_ALLOC = 1 << 40


class Stream:
    """An ordered work queue run by its own daemon thread (started on first use)."""

    def __init__(self, handle: int) -> None:
        self.handle = handle
        self.errors: list[int] = []
        self._q: queue.SimpleQueue[tuple[Callable[[], int], threading.Event | None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, work: Callable[[], int]) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"acl-stream-{self.handle:#x}",
                                            daemon=True)
            self._thread.start()
        self._q.put((work, None))

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            work, done = item
            if done is not None:
                done.set()
                continue
            try:
                ret = work()
            except Exception as exc:  # the application keeps running
                ret = fail(ACL_ERROR_INVALID_PARAM, f"async task failed: {exc}")
            if ret != ACL_SUCCESS:
                self.errors.append(ret)

    def synchronize(self, timeout: float | None = None) -> int:
        if self._thread is not None:
            done = threading.Event()
            self._q.put((lambda: ACL_SUCCESS, done))
            done.wait(timeout)
        if self.errors:
            first = self.errors[0]
            self.errors.clear()
            return first
        return ACL_SUCCESS

    def close(self) -> None:
        if self._thread is not None:
            self.synchronize()
            self._q.put(None)


def stream_of(handle: Any) -> Stream | None:
    return _streams.get(handle) if isinstance(handle, int) else None


@traced("aclrtSetDevice", RT)
def set_device(device_id: int) -> int:
    if not isinstance(device_id, int) or not 0 <= device_id < DEVICE_COUNT:
        return fail(ACL_ERROR_INVALID_DEVICE, f"acl.rt.set_device: device {device_id!r} does not exist "
                    f"(devices 0..{DEVICE_COUNT - 1}: the CPU)")
    _tls.device = device_id
    return ACL_SUCCESS


@traced("aclrtResetDevice", RT)
def reset_device(device_id: int) -> int:
    if not isinstance(device_id, int) or not 0 <= device_id < DEVICE_COUNT:
        return fail(ACL_ERROR_INVALID_DEVICE, f"acl.rt.reset_device: device {device_id!r} does not exist")
    return ACL_SUCCESS


def get_device() -> tuple[int, int]:
    return getattr(_tls, "device", 0), ACL_SUCCESS


def get_device_count() -> tuple[int, int]:
    return DEVICE_COUNT, ACL_SUCCESS


def get_run_mode() -> tuple[int, int]:
    """The host runs everything here: ``ACL_HOST``."""
    return ACL_HOST, ACL_SUCCESS


@traced("aclrtSynchronizeDevice", RT)
def synchronize_device() -> int:
    ret = ACL_SUCCESS
    for s in list(_streams.values()):
        r = s.synchronize()
        ret = ret or r
    return ret


@traced("aclrtCreateContext", RT)
def create_context(device_id: int) -> tuple[int, int]:
    if not isinstance(device_id, int) or not 0 <= device_id < DEVICE_COUNT:
        return 0, fail(ACL_ERROR_INVALID_DEVICE, f"acl.rt.create_context: device {device_id!r} does not exist")
    ctx = new_handle()
    _contexts[ctx] = device_id
    _tls.context = ctx
    return ctx, ACL_SUCCESS


@traced("aclrtSetCurrentContext", RT)
def set_context(context: int) -> int:
    if context not in _contexts:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.rt.set_context: unknown context {context!r}")
    _tls.context = context
    return ACL_SUCCESS


def get_context() -> tuple[int, int]:
    ctx = getattr(_tls, "context", 0)
    if ctx not in _contexts:
        return 0, fail(ACL_ERROR_INVALID_PARAM, "acl.rt.get_context: no current context on this thread")
    return ctx, ACL_SUCCESS


@traced("aclrtDestroyContext", RT)
def destroy_context(context: int) -> int:
    if _contexts.pop(context, None) is None:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.rt.destroy_context: unknown context {context!r}")
    return ACL_SUCCESS


@traced("aclrtCreateStream", RT)
def create_stream() -> tuple[int, int]:
    h = new_handle()
    _streams[h] = Stream(h)
    return h, ACL_SUCCESS


@traced("aclrtDestroyStream", RT)
def destroy_stream(stream: int) -> int:
    s = _streams.pop(stream, None) if isinstance(stream, int) else None
    if s is None:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.rt.destroy_stream: unknown stream {stream!r}")
    s.close()
    return ACL_SUCCESS


@traced("aclrtSynchronizeStream", RT)
def synchronize_stream(stream: int) -> int:
    s = stream_of(stream)
    if s is None:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.rt.synchronize_stream: unknown stream {stream!r}")
    return s.synchronize()


def _alloc(what: str, size: int) -> tuple[int, int]:
    if not isinstance(size, int) or isinstance(size, bool) or not 0 < size <= _MAX_ALLOC:
        return 0, fail(ACL_ERROR_INVALID_PARAM, f"{what}: size {size!r} must be an int in 1..2^40")
    try:
        return _memory.allocate(size), ACL_SUCCESS
    except MemoryError:
        return 0, fail(ACL_ERROR_BAD_ALLOC, f"{what}: cannot allocate {size} bytes")


@traced("aclrtMalloc", RT)
def malloc(size: int, policy: int = 0) -> tuple[int, int]:
    return _alloc("acl.rt.malloc", size)


@traced("aclrtMallocHost", RT)
def malloc_host(size: int) -> tuple[int, int]:
    return _alloc("acl.rt.malloc_host", size)


@traced("aclrtFree", RT)
def free(ptr: int) -> int:
    if not _memory.release(ptr):
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.rt.free: {ptr!r} is not memory from acl.rt.malloc")
    return ACL_SUCCESS


@traced("aclrtFreeHost", RT)
def free_host(ptr: int) -> int:
    if not _memory.release(ptr):
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.rt.free_host: {ptr!r} is not memory from acl.rt.malloc_host")
    return ACL_SUCCESS


@traced("aclrtMemcpy", RT)
def memcpy(dst: int, dest_max: int, src: int, count: int, kind: int = 0) -> int:
    if not isinstance(count, int) or count < 0 or not isinstance(dest_max, int) or count > dest_max:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.rt.memcpy: count {count!r} exceeds dest_max {dest_max!r}")
    if not _memory.check(dst, count):
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.rt.memcpy: destination {dst!r} (+{count}) is not known memory")
    if not _memory.check(src, count):
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.rt.memcpy: source {src!r} (+{count}) is not known memory")
    if kind not in (0, 1, 2, 3):
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.rt.memcpy: kind {kind!r} is not an aclrtMemcpyKind (0..3)")
    _memory.view(dst, count)[:] = _memory.view(src, count)
    return ACL_SUCCESS


@traced("aclrtMemset", RT)
def memset(dev_ptr: int, max_count: int, value: int, count: int) -> int:
    if not isinstance(count, int) or count < 0 or count > max_count or not _memory.check(dev_ptr, count):
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.rt.memset: {dev_ptr!r} (+{count}) is not known memory")
    _memory.view(dev_ptr, count)[:] = value & 0xFF
    return ACL_SUCCESS


guard_module(globals())  # every entry point answers bad arguments with a code (acl/_guard.py)
