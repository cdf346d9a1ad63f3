"""pyACL subscription records (docs/formats.md §7.1 "Subscription record") and the pipe writer.

One fixed-size 80-byte little-endian record per executed operator::

    u32 signature, u32 model_id, u32 flag, u32 thread_id, u64 op_index, u64 duration_us,
    u64 start_us, u64 end_us, u64 exec_time_us, u64 cube_fops, u64 vector_fops,
    u32 device_id, u32 pad

Operator names and types resolve through ``op_index`` in the process-local :data:`OP_TABLE`.
:class:`PipeWriter` writes whole records only (chunks of at most ``PIPE_BUF`` bytes, which the
kernel writes atomically), never blocks an execute for long on a full pipe and counts what it
had to drop; a closed pipe is tolerated.
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import struct
import threading
from collections.abc import Iterable

import numpy as np

OP_DESC = struct.Struct("<IIIIQQQQQQQII")
OP_DESC_SIZE = OP_DESC.size
assert OP_DESC_SIZE == 80
#: The same record as a numpy dtype (column-wise encoding).
OP_DESC_DTYPE = np.dtype([
    ("signature", "<u4"), ("model_id", "<u4"), ("flag", "<u4"), ("thread_id", "<u4"),
    ("op_index", "<u8"), ("duration_us", "<u8"), ("start_us", "<u8"), ("end_us", "<u8"),
    ("exec_time_us", "<u8"), ("cube_fops", "<u8"), ("vector_fops", "<u8"), ("device_id", "<u4"),
    ("pad", "<u4")])
assert OP_DESC_DTYPE.itemsize == OP_DESC_SIZE
SIGNATURE = 0x4F4D5350  # "PSMO" little-endian: b"PSMO"[::-1] = "OMSP"
FLAG_OP = 0  # aclprofSubscribeOpFlag ACL_SUBSCRIBE_OP
#: Records per pipe write: the largest multiple of 80 not above PIPE_BUF (4096 on Linux).
_CHUNK = (select.PIPE_BUF // OP_DESC_SIZE) * OP_DESC_SIZE


class OpTable:
    """Process-local table: op index ↔ (op name, op type).  Interning takes a lock (harvest
    path, not the execute path); lookups do not."""

    def __init__(self) -> None:
        self._index: dict[tuple[str, str], int] = {}
        self._items: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def intern(self, name: str, op_type: str) -> int:
        key = (name, op_type)
        idx = self._index.get(key)
        if idx is None:
            with self._lock:
                idx = self._index.get(key)
                if idx is None:
                    idx = len(self._items)
                    self._items.append(key)
                    self._index[key] = idx
        return idx

    def lookup(self, index: int) -> tuple[str, str] | None:
        if 0 <= index < len(self._items):
            return self._items[index]
        return None


OP_TABLE = OpTable()


def encode(model_id: int, device_id: int,
           ops: Iterable[tuple[str, str, int, int, int]]) -> bytes:
    """Records for ``ops`` = (name, op_type, thread index, start_us, end_us)."""
    pack = OP_DESC.pack
    intern = OP_TABLE.intern
    out = bytearray()
    for name, op_type, thread, start_us, end_us in ops:
        dur = max(0, end_us - start_us)
        out += pack(SIGNATURE, model_id & 0xFFFFFFFF, FLAG_OP, thread & 0xFFFFFFFF,
                    intern(name, op_type), dur, start_us, end_us, dur, 0, 0,
                    device_id & 0xFFFFFFFF, 0)
    return bytes(out)


def encode_columns(model_id: int, device_id: int, op_index: np.ndarray, thread: np.ndarray,
                   start_us: np.ndarray, end_us: np.ndarray) -> bytes:
    """Records for one value per op in each array (``op_index`` from :data:`OP_TABLE`)."""
    out = np.zeros(len(start_us), OP_DESC_DTYPE)
    out["signature"] = SIGNATURE
    out["model_id"] = model_id & 0xFFFFFFFF
    out["flag"] = FLAG_OP
    out["thread_id"] = thread & 0xFFFFFFFF
    out["op_index"] = op_index
    dur = np.maximum(end_us - start_us, 0)
    out["duration_us"] = dur
    out["start_us"] = start_us
    out["end_us"] = end_us
    out["exec_time_us"] = dur
    out["device_id"] = device_id & 0xFFFFFFFF
    return out.tobytes()


def decode(record: bytes | memoryview) -> tuple[int, ...]:
    """The 13 fields of one record (raises ``ValueError`` on a bad signature)."""
    fields = OP_DESC.unpack(record)
    if fields[0] != SIGNATURE:
        raise ValueError("not an openmsprof subscription record (bad signature)")
    return fields


class PipeWriter:
    """Writes records to a user's pipe fd without blocking an execute for long.

    A full pipe is waited on for at most ``wait_s`` per write while the reader keeps up; once a
    write had to drop records the next ones do not wait (a reader that stopped reading never
    slows the application) until a write goes through whole again."""

    def __init__(self, fd: int, wait_s: float = 0.05) -> None:
        self.fd = fd
        self.wait_s = wait_s
        self.written = 0
        self.dropped = 0
        self.closed = False
        self.error = ""
        self._behind = False
        try:
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
            fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        except OSError as exc:
            self.closed = True
            self.error = f"fd {fd}: {exc.strerror}"

    def write(self, data: bytes) -> int:
        """Write whole records; returns how many were written (the rest count as dropped)."""
        n_total = len(data) // OP_DESC_SIZE
        if self.closed:
            self.dropped += n_total
            return 0
        view = memoryview(data)
        pos = 0
        budget = 0.0 if self._behind else self.wait_s
        while pos < len(data):
            chunk = view[pos:pos + _CHUNK]
            try:
                pos += os.write(self.fd, chunk)
                continue
            except BlockingIOError:
                pass
            except OSError as exc:  # EPIPE (reader closed), EBADF (fd closed) ...
                self.closed = True
                self.error = f"fd {self.fd}: {errno.errorcode.get(exc.errno or 0, exc.strerror)}"
                break
            if budget <= 0:
                break
            step = min(budget, 0.01)
            budget -= step
            try:
                select.select([], [self.fd], [], step)
            except (OSError, ValueError):
                self.closed = True
                break
        done = pos // OP_DESC_SIZE
        self.written += done
        self.dropped += n_total - done
        self._behind = done < n_total
        return done
