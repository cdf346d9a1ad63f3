"""Raw record kinds and their fixed 32-byte binary layouts.

Every source writes the same few record kinds; parse/export never care which framework
produced them.  A record is 32 bytes, little-endian:

    generic  ``<BBHIqqII``  kind, flags, aux, tid, t0, t1, a, b
    counter  ``<BBHIqdII``  kind, flags, aux, tid, ts, value(float64), a, b
    taskinfo ``<BBHIIIIIII`` kind, flags, aux, task_id, op_type, in_shapes, in_dtypes,
                             out_shapes, out_dtypes, connection_id

``t0``/``t1`` are monotonic nanoseconds (``time.perf_counter_ns``); the job's start/end info maps
them to epoch.  ``a``/``b`` are usually string ids from the data directory's string table (0 =
no string).  The meaning of each field per kind is documented on :class:`Kind`.
"""

from __future__ import annotations

import struct
from enum import IntEnum

RECORD_SIZE = 32
GENERIC = struct.Struct("<BBHIqqII")
COUNTER = struct.Struct("<BBHIqdII")
TASKINFO = struct.Struct("<BBHIIIIIII")
assert GENERIC.size == COUNTER.size == TASKINFO.size == RECORD_SIZE

#: File header: magic, format version, record size, reserved.
RECORDS_MAGIC = b"OMSPREC\0"
STRINGS_MAGIC = b"OMSPSTR\0"
HEADER = struct.Struct("<8sHHI")
FORMAT_VERSION = 1
#: A records file of packed blocks (the native flusher's; recorder/packed_read.py): its header's
#: record size is still 32, the size of each record once decoded.
PACKED_VERSION = 2

#: String table entry header: id, byte length; followed by UTF-8 bytes.
STRING_ENTRY = struct.Struct("<II")


class Kind(IntEnum):
    """Record kinds.  Field use: tid, t0, t1, a, b, aux, flags."""

    #: Instant marker.  t0=t1=ts, a=message, b=domain, aux=MstxEvent.MARKER.
    MARK = 1
    #: Same-thread range open.  t0=t1=ts, a=message, b=domain.
    PUSH = 2
    #: Same-thread range close (pairs with the innermost open PUSH on the thread).  t0=t1=ts.
    POP = 3
    #: Cross-thread range open.  t0=ts, a=message, b=domain, aux unused, flags unused;
    #: the range id is stored in t1 (int64).
    RANGE_START = 4
    #: Cross-thread range close.  t0=ts, t1=range id.
    RANGE_END = 5
    #: API span.  t0=start, t1=end, a=name, b=connection id (0 = none), aux=ApiLevel.
    API = 6
    #: Device/executor task (an operator run).  tid=stream id, t0=start, t1=end, a=op name,
    #: b=task id (unique in the data dir), aux=model id (0xFFFF = none).
    TASK = 7
    #: Extra info for a TASK (TASKINFO layout): task id, string ids of op type, input shapes,
    #: input dtypes, output shapes, output dtypes, and the connection id of the API that
    #: launched it (0 = none).  aux = executor (Executor enum).
    TASK_INFO = 8
    #: Step timestamp (pyACL get_step_timestamp / framework step).  t0=ts, a=step index,
    #: b=model id, aux=StepTag (0 start, 1 end).
    STEP = 9
    #: Counter sample (COUNTER layout).  ts, value, a=Series code, b=sub index (e.g. cpu id).
    COUNTER = 10
    #: Thread name.  tid=native tid, a=name string id.
    THREAD = 11
    #: Step range from a framework (one record per step).  t0=start, t1=end, a=step number.
    STEP_RANGE = 12


class ApiLevel(IntEnum):
    """API levels (msprof ENUM_API_TYPE ids)."""

    ACL = 20000
    MODEL = 15000
    NODE = 10000
    COMMUNICATION = 5500
    RUNTIME = 5000
    OP = 50001
    QUEUE = 50002
    TRACE = 50003
    MSTX = 50004


#: The ``Level`` column text of api_statistic per ApiLevel.
API_LEVEL_NAMES = {
    ApiLevel.ACL: "AscendCL",
    ApiLevel.MODEL: "Model",
    ApiLevel.NODE: "Node",
    ApiLevel.COMMUNICATION: "Communication",
    ApiLevel.RUNTIME: "Runtime",
    ApiLevel.OP: "Op",
    ApiLevel.QUEUE: "Queue",
    ApiLevel.TRACE: "Trace",
    ApiLevel.MSTX: "Mstx",
}

# ApiLevel values do not fit in u16 ``aux``; records store the index in this tuple instead.
API_LEVEL_CODES: tuple[ApiLevel, ...] = tuple(ApiLevel)


class MstxEvent(IntEnum):
    """msprof ENUM_MSTX_EVENT_TYPE."""

    MARKER = 0
    PUSH_POP = 1
    START_END = 2
    MARKER_EX = 3


class StepTag(IntEnum):
    START = 0
    END = 1


class Executor(IntEnum):
    """What really ran a task (FORMATS decision 1)."""

    CPU = 0
    CUDA = 1
    OTHER = 2


EXECUTOR_NAMES = {Executor.CPU: "CPU", Executor.CUDA: "CUDA", Executor.OTHER: "OTHER"}


class Series(IntEnum):
    """Counter series codes (COUNTER ``a``); ``b`` is a sub index such as the cpu id."""

    SYS_CPU_PERCENT = 1  # whole machine, %; b = cpu id + 1, 0 = all
    PROC_CPU_PERCENT = 2  # profiled process, % of one core
    SYS_MEM_TOTAL_KB = 3
    SYS_MEM_USED_KB = 4
    PROC_RSS_KB = 5
    DEVICE_MEM_USED_KB = 6  # b = device id
    DEVICE_UTIL_PERCENT = 7  # b = device id


NO_MODEL = 0xFFFF
