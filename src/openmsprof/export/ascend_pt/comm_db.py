"""COMMUNICATION_OP and COMMUNICATION_TASK_INFO rows of the torch db (clients doc §7.5).

Every communication kernel is one operation and one task: the backend shows no Notify/wait tasks,
so the task is the whole transfer — HCCL task name ``Memcpy`` (a copy through host memory) on
plane 0, ``LOCAL`` transport from this rank to itself (per-peer traffic is not in the trace, as in
communication_matrix.json), its payload bytes and bandwidth.  ``opId`` is the operation's index;
``connectionId`` the launching API's (``cann``), so CANN_API joins both ways.  dataType,
transportType, linkType and rdmaType are ids into the ENUM_HCCL_* tables; names and types are
STRING_IDS ids.  ``groupName`` is the group id itself (the ``parallel_group_info`` key), as in
msprof's db: msprof-analyze derives the hashed name of the text files from it (hccl_sum's GroupId,
computational_op_masking's join); analysis.db keeps the hashed name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from openmsprof.export.ascend_pt.communication import TRANSPORT, CommOp, Group
from openmsprof.export.hccl_enums import ENUMS, enum_id

__all__ = ["ENUMS", "op_rows", "task_rows"]

TASK_NAME = "Memcpy"
LINK = "ON_CHIP"


def op_rows(ops: list[tuple[int, CommOp]], group: Group, conn: np.ndarray, device_id: int,
            s: Callable[[str], int]) -> Iterator[tuple[object, ...]]:
    """COMMUNICATION_OP(opName, startNs, endNs, connectionId, groupName, opId, relay, retry, dataType,
    algType, count, opType, deviceId)."""
    for n, (j, op) in enumerate(ops):
        yield (s(op.name), op.ts, op.ts + op.dur, int(conn[j]), s(group.gid), n, 0, 0,
               enum_id("ENUM_HCCL_DATA_TYPE", op.dtype), s("N/A"),
               op.count, s(op.name.split("__", 1)[0] + "_"), device_id)


def task_rows(ops: list[tuple[int, CommOp]], group: Group,
              s: Callable[[str], int]) -> Iterator[tuple[object, ...]]:
    """COMMUNICATION_TASK_INFO(name, globalTaskId, taskType, planeId, groupName, notifyId, rdmaType,
    srcRank, dstRank, transportType, size, dataType, linkType, opId, isMaster, bandwidth)."""
    me = group.local_rank
    for n, (j, op) in enumerate(ops):
        bw = op.size / op.dur if op.dur > 0 else 0.0  # bytes/ns = GB/s
        yield (s(op.name), j, s(TASK_NAME), 0, s(group.gid), 4294967295, enum_id("ENUM_HCCL_RDMA_TYPE", "N/A"),
               me, me, enum_id("ENUM_HCCL_TRANSPORT_TYPE", TRANSPORT), op.size,
               enum_id("ENUM_HCCL_DATA_TYPE", op.dtype), enum_id("ENUM_HCCL_LINK_TYPE", LINK), n, 1, bw)
