"""``export_type=db``: ``ascend_pytorch_profiler_{rank}.db`` (msprof-style tables, ns, string ids;
MEMORY_RECORD / OP_MEMORY with profile_memory; our OMSP_OP_COST: the cost model per kernel) and
``analysis.db`` (StepTraceTime, CommAnalyzer* rows for the collectives at Level1+), clients doc §7.5."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from openmsprof.config.errors import RawDataError
from openmsprof.export import classify, hostinfo, overhead
from openmsprof.export.ascend_pt import cann, comm_db, communication, mfu_inputs, mstx_rows
from openmsprof.export.ascend_pt.framework import Framework
from openmsprof.export.ascend_pt.overlap import Overlap, step_rows
from openmsprof.export.msprof.op_cost_columns import cost_values
from openmsprof.fileio import fs
from openmsprof.fileio.read_guard import read_json
from openmsprof.machine import peaks as P

if TYPE_CHECKING:
    from openmsprof.export.ascend_pt.rank_extras import Extras

NA = "N/A"
NO_MODEL = 4294967295
API_TYPES = [(20000, "acl"), (15000, "model"), (10000, "node"), (5500, "communication"), (5000, "runtime"),
             (50001, "op"), (50002, "queue"), (50003, "trace"), (50004, "mstx")]
MSTX_TYPES = [(0, "marker"), (1, "push/pop"), (2, "start/end"), (3, "marker_ex")]
SCHEMA = """
CREATE TABLE STRING_IDS(id INTEGER PRIMARY KEY, value TEXT);
CREATE TABLE META_DATA(name TEXT, value TEXT);
CREATE TABLE ENUM_API_TYPE(id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE ENUM_MSTX_EVENT_TYPE(id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE ENUM_HCCL_DATA_TYPE(id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE ENUM_HCCL_LINK_TYPE(id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE ENUM_HCCL_TRANSPORT_TYPE(id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE ENUM_HCCL_RDMA_TYPE(id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE HOST_INFO(hostUid TEXT, hostName TEXT);
CREATE TABLE RANK_DEVICE_MAP(rankId INTEGER, deviceId INTEGER);
CREATE TABLE NPU_INFO(id INTEGER, name TEXT);
CREATE TABLE SESSION_TIME_INFO(startTimeNs INTEGER, endTimeNs INTEGER);
CREATE TABLE TASK(startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER,
  globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER, modelId INTEGER);
CREATE TABLE COMPUTE_TASK_INFO(name INTEGER, globalTaskId INTEGER PRIMARY KEY, blockNum INTEGER,
  mixBlockNum INTEGER, taskType INTEGER, opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER,
  inputShapes INTEGER, outputFormats INTEGER, outputDataTypes INTEGER, outputShapes INTEGER, attrInfo INTEGER,
  opState INTEGER, hf32Eligible INTEGER);
CREATE TABLE TASK_PMU_INFO(globalTaskId INTEGER, name INTEGER, value NUMERIC);
CREATE TABLE COMMUNICATION_OP(opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER,
  groupName INTEGER, opId INTEGER, relay INTEGER, retry INTEGER, dataType INTEGER, algType INTEGER,
  count NUMERIC, opType INTEGER, deviceId INTEGER);
CREATE TABLE COMMUNICATION_TASK_INFO(name INTEGER, globalTaskId INTEGER, taskType INTEGER, planeId INTEGER,
  groupName INTEGER, notifyId INTEGER, rdmaType INTEGER, srcRank INTEGER, dstRank INTEGER,
  transportType INTEGER, size INTEGER, dataType INTEGER, linkType INTEGER, opId INTEGER, isMaster INTEGER,
  bandwidth NUMERIC);
CREATE TABLE CANN_API(startNs INTEGER, endNs INTEGER, type INTEGER, globalTid INTEGER,
  connectionId INTEGER PRIMARY KEY, name INTEGER);
CREATE TABLE PYTORCH_API(startNs TEXT, endNs TEXT, globalTid INTEGER, connectionId INTEGER, name INTEGER,
  sequenceNumber INTEGER, fwdThreadId INTEGER, inputDtypes INTEGER, inputShapes INTEGER, callchainId INTEGER,
  type INTEGER);
CREATE TABLE CONNECTION_IDS(id INTEGER, connectionId INTEGER);
CREATE TABLE PYTORCH_CALLCHAINS(id INTEGER, stack INTEGER, stackDepth INTEGER);
CREATE TABLE STEP_TIME(id INTEGER, startNs INTEGER, endNs INTEGER);
CREATE TABLE MSTX_EVENTS(startNs INTEGER, endNs INTEGER, eventType INTEGER, rangeId INTEGER, category INTEGER,
  message INTEGER, globalTid INTEGER, endGlobalTid INTEGER, domainId INTEGER, connectionId INTEGER);
CREATE TABLE MEMORY_RECORD(component INTEGER, timestamp INTEGER, totalAllocated INTEGER, totalReserved INTEGER,
  totalActive INTEGER, streamPtr INTEGER, deviceId INTEGER);
CREATE TABLE OP_MEMORY(name INTEGER, size INTEGER, allocationTime INTEGER, releaseTime INTEGER,
  activeReleaseTime INTEGER, duration INTEGER, activeDuration INTEGER, allocationTotalAllocated INTEGER,
  allocationTotalReserved INTEGER, allocationTotalActive INTEGER, releaseTotalAllocated INTEGER,
  releaseTotalReserved INTEGER, releaseTotalActive INTEGER, streamPtr INTEGER, deviceId INTEGER);
CREATE TABLE AICORE_FREQ(deviceId INTEGER, timestampNs INTEGER, freq INTEGER);
CREATE TABLE OMSP_OP_COST(globalTaskId INTEGER PRIMARY KEY, flops NUMERIC, bytes NUMERIC,
  memoryBoundRatio NUMERIC);
"""
ANALYSIS_SCHEMA = """
CREATE TABLE StepTraceTime(deviceId INTEGER, step TEXT, computing NUMERIC, communication_not_overlapped NUMERIC,
  overlapped NUMERIC, communication NUMERIC, free NUMERIC, stage NUMERIC, bubble NUMERIC,
  communication_not_overlapped_and_exclude_receive NUMERIC, preparing NUMERIC);
CREATE TABLE CommAnalyzerTime(hccl_op_name TEXT, group_name TEXT, start_timestamp NUMERIC, elapse_time NUMERIC,
  transit_time NUMERIC, wait_time NUMERIC, synchronization_time NUMERIC, idle_time NUMERIC, step TEXT, type TEXT);
CREATE TABLE CommAnalyzerBandwidth(hccl_op_name TEXT, group_name TEXT, transport_type TEXT, transit_size NUMERIC,
  transit_time NUMERIC, bandwidth NUMERIC, large_packet_ratio NUMERIC, package_size NUMERIC, count NUMERIC,
  total_duration NUMERIC, step TEXT, type TEXT);
CREATE TABLE CommAnalyzerMatrix(hccl_op_name TEXT, group_name TEXT, src_rank TEXT, dst_rank TEXT,
  transport_type TEXT, transit_size NUMERIC, transit_time NUMERIC, bandwidth NUMERIC, step TEXT, type TEXT,
  op_name TEXT);
"""


class _Strings(dict[str, int]):
    def __missing__(self, key: str) -> int:
        v = self[key] = len(self) + 1
        return v


def _new_db(path: Path) -> tuple[sqlite3.Connection, Path]:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    os.close(fs.open_new(tmp, append=False))
    return sqlite3.connect(tmp), tmp


def _tasks(fw: Framework, device_id: int, s: _Strings, conn: np.ndarray) -> Iterator[tuple[int, ...]]:
    k = fw.kernels
    cores = k.cores
    for j, (ts, end, c, st, core) in enumerate(zip(k.ts.tolist(), (k.ts + k.dur).tolist(), conn.tolist(),
                                                   k.stream.tolist(), k.core.tolist(), strict=True)):
        yield ts, end, device_id, c, j, fw.pid, s[cores[core]], 0, st, j, NO_MODEL


def _intern(fw: Framework, s: _Strings) -> None:
    """Give every text its STRING_IDS id in first-use order: per kernel its TASK then its
    COMPUTE_TASK_INFO texts, then per operator its call stack, name, dtypes and shapes."""
    k = fw.kernels
    shapes, op_shape = fw.cols.shapes.items, fw.cols.op_shape
    for name, core, o in zip(k.name.tolist(), k.core.tolist(), k.op.tolist(), strict=True):
        shp, typ = shapes[int(op_shape[o])] if o >= 0 else ("", "")
        s[k.cores[core]], s[k.names[name]], s[NA], s[typ or NA], s[shp or NA]
    for name, shape, stack in zip(fw.cols.op_name.tolist(), op_shape.tolist(), fw.op_stack.tolist(), strict=True):
        shp, typ = shapes[shape]
        if stack >= 0:
            s[fw.stacks[stack]]
        s[fw.names[name]], s[typ or NA], s[shp or NA]


def _infos(fw: Framework, s: _Strings) -> Iterator[tuple[int | None, ...]]:
    """COMPUTE_TASK_INFO rows of the computing kernels (not communication, not memory copies: those
    are runtime tasks, as in torch_npu's dbs, and compare leaves them out on text too); string ids
    are taken in the order the columns are listed.  Block Num / Mix Block Num have no CPU analogue
    and the output tensors are not recorded (Kineto gives input shapes only): NULL."""
    k = fw.kernels
    shapes = fw.cols.shapes.items
    op_shape = fw.cols.op_shape
    states = fw.op_states()
    for j, (name, core, o) in enumerate(zip(k.name.tolist(), k.core.tolist(), k.op.tolist(), strict=True)):
        if core in (classify.Kind.COMMUNICATION, classify.Kind.MEMCPY):
            continue
        shp, typ = shapes[int(op_shape[o])] if o >= 0 else ("", "")
        nm, cr = k.names[name], k.cores[core]
        yield (s[nm], j, None, None, s[cr], s[classify.op_type(nm)], s[NA], s[typ or NA], s[shp or NA], None,
               None, None, s[NA], s[states[name]], s[NA])


def _pmu(fw: Framework, s: _Strings) -> Iterator[tuple[int, int, int]]:
    """TASK_PMU_INFO rows: the executor time of each computing task booked as ``aic_total_time``
    (matrix-class work) or ``aiv_vec_time`` (the rest), ns — kernel_details' ``aicore_time(us)`` /
    ``aiv_vec_time(us)``, so msprof-analyze's compare splits Cube/Vector on db as on text
    (docs/formats.md "Task classification").  Not a hardware counter."""
    k = fw.kernels
    cube_k, vec_k = int(classify.Kind.CUBE), int(classify.Kind.VECTOR)
    cube, vec = s["aic_total_time"], s["aiv_vec_time"]
    for j, (core, dur) in enumerate(zip(k.core.tolist(), k.dur.tolist(), strict=True)):
        if core == cube_k:
            yield j, cube, dur
        elif core == vec_k:
            yield j, vec, dur


def _costs(fw: Framework, doc: dict[str, Any] | None) -> Iterator[tuple[int, float | None, float | None, float | None]]:
    """OMSP_OP_COST rows (ours; msprof-analyze reads no such table): the cost model's FLOPs, bytes
    and memory-bound ratio of each computing kernel from its type and input shapes (NULL where
    unmodelled; the ratio with this machine's cached peaks, else NULL) — kernel_details' columns."""
    k = fw.kernels
    values = cost_values(doc)
    shapes, op_shape = fw.cols.shapes.items, fw.cols.op_shape
    for j, (name, core, o) in enumerate(zip(k.name.tolist(), k.core.tolist(), k.op.tolist(), strict=True)):
        if core == classify.Kind.COMMUNICATION:
            continue
        shp, typ = shapes[int(op_shape[o])] if o >= 0 else ("", "")
        yield (j, *values(classify.op_type(k.names[name]), shp, typ, None, None))


def _cann_api(fw: Framework, apis: cann.Apis, s: _Strings) -> Iterator[tuple[int, ...]]:
    """CANN_API rows: the dispatch layer (``cann``), connectionId = the API's operator event."""
    types = [t for _lv, t in cann.LEVELS]
    for e, lv in zip(apis.event.tolist(), apis.level.tolist(), strict=True):
        ts = int(fw.op_ts[e])
        yield (ts, ts + int(fw.op_dur[e]), types[lv], (fw.pid << 32) | int(fw.op_tid[e]), e,
               s[fw.names[int(fw.cols.op_name[e])]])


def _api(fw: Framework, s: _Strings, chains: list[tuple[int, int, int]]) -> Iterator[tuple[Any, ...]]:
    """PYTORCH_API rows (and their PYTORCH_CALLCHAINS entries appended to ``chains``)."""
    cols = fw.cols
    shapes, names, stacks = cols.shapes.items, fw.names, fw.stacks
    depth = [t.count(";\r\n") + 1 for t in stacks]
    end = (fw.op_ts + fw.op_dur).tolist()
    for i, (ts, tid, name, shape, seq, fwd, stack) in enumerate(zip(
            fw.op_ts.tolist(), fw.op_tid.tolist(), cols.op_name.tolist(), cols.op_shape.tolist(),
            cols.op_seq.tolist(), cols.op_fwd.tolist(), fw.op_stack.tolist(), strict=True)):
        shp, typ = shapes[shape]
        chain = None
        if stack >= 0:
            chain = len(chains)
            chains.append((chain, s[stacks[stack]], depth[stack]))
        yield (str(ts), str(end[i]), (fw.pid << 32) | tid, i, s[names[name]], seq, fwd, s[typ or NA],
               s[shp or NA], chain, 50001)


def write(out: Path, fw: Framework, ov: Overlap, info: dict[str, Any], rank: int | None, device_id: int,
          rank_dir: Path, extra: Extras | None = None) -> list[str]:
    name = f"ascend_pytorch_profiler_{rank}.db" if rank is not None else "ascend_pytorch_profiler.db"
    con, tmp = _new_db(out / name)
    s = _Strings()
    with con:
        con.executescript(SCHEMA)
        con.executemany("INSERT INTO ENUM_API_TYPE VALUES (?,?)", API_TYPES)
        con.executemany("INSERT INTO ENUM_MSTX_EVENT_TYPE VALUES (?,?)", MSTX_TYPES)
        meta = [("SCHEMA_VERSION", "1.2.0"), ("SCHEMA_VERSION_MAJOR", "1"), ("SCHEMA_VERSION_MINOR", "2"),
                ("SCHEMA_VERSION_MICRO", "0"), ("EXECUTOR", fw.kernels.executor)]
        md = rank_dir / "profiler_metadata.json"
        if md.is_file():
            doc = read_json(md, "profiler metadata", error=RawDataError)
            if isinstance(doc, dict):
                meta += [(k, orjson.dumps(v).decode()) for k, v in doc.items()]
        if extra is not None and extra.overhead:
            meta.append((overhead.KEY, orjson.dumps(extra.overhead).decode()))
        con.executemany("INSERT INTO META_DATA VALUES (?,?)", meta)
        con.execute("INSERT INTO RANK_DEVICE_MAP VALUES (?,?)", (rank if rank is not None else -1, device_id))
        con.execute("INSERT INTO NPU_INFO VALUES (?,?)", (device_id, fw.kernels.executor))
        con.execute("INSERT INTO HOST_INFO VALUES (?,?)", (hostinfo.host_uid(info), hostinfo.host_name(info)))
        for table, enum_rows in comm_db.ENUMS.items():
            con.executemany(f"INSERT INTO {table} VALUES (?,?)", enum_rows)
        span = (int(fw.op_ts.min()), int((fw.op_ts + fw.op_dur).max())) if fw.n_ops else (0, 0)
        con.execute("INSERT INTO SESSION_TIME_INFO VALUES (?,?)", span)
        # AICORE_FREQ stays empty: no AI Core clock was measured (docs/formats.md decision 13)
        apis = extra.apis if extra is not None else cann.build(fw)
        group = extra.group if extra is not None else communication.group_of(rank_dir, rank)
        _intern(fw, s)
        con.executemany("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)", _tasks(fw, device_id, s, apis.conn))
        con.executemany("INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", _infos(fw, s))
        con.executemany("INSERT INTO TASK_PMU_INFO VALUES (?,?,?)", _pmu(fw, s))
        costs = list(_costs(fw, peaks := P.cached(measure_missing=False)))
        con.executemany("INSERT INTO OMSP_OP_COST VALUES (?,?,?,?)", costs)
        chains: list[tuple[int, int, int]] = []
        con.executemany("INSERT INTO PYTORCH_API VALUES (?,?,?,?,?,?,?,?,?,?,?)", _api(fw, s, chains))
        con.executemany("INSERT INTO PYTORCH_CALLCHAINS VALUES (?,?,?)", chains)
        con.executemany("INSERT INTO CANN_API VALUES (?,?,?,?,?,?)", _cann_api(fw, apis, s))
        con.executemany("INSERT INTO CONNECTION_IDS VALUES (?,?)", [(c, c) for c in apis.event.tolist()])
        con.executemany("INSERT INTO MSTX_EVENTS VALUES (?,?,?,?,?,?,?,?,?,?)",
                        mstx_rows.marker_rows(rank_dir, s.__getitem__))
        con.executemany("INSERT INTO MSTX_EVENTS VALUES (?,?,?,?,?,?,?,?,?,?)", mstx_rows.module_rows(fw, s.__getitem__))
        if mfu_inputs.write_device_info(rank_dir, device_id, fw.kernels.executor, peaks) is not None:
            flops = {j: f for j, f, _b, _r in costs if f}
            con.executemany("INSERT INTO MSTX_EVENTS VALUES (?,?,?,?,?,?,?,?,?,?)", mfu_inputs.flops_ranges(
                fw, apis.conn, flops, s.__getitem__, lambda e: (fw.pid << 32) | int(fw.op_tid[e])))
        ops = communication.kernel_ops(fw, group)
        con.executemany("INSERT INTO COMMUNICATION_OP VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        comm_db.op_rows(ops, group, apis.conn, device_id, s.__getitem__))
        con.executemany("INSERT INTO COMMUNICATION_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        comm_db.task_rows(ops, group, s.__getitem__))
        con.executemany("INSERT INTO STEP_TIME VALUES (?,?,?)", fw.steps)
        if extra is not None and extra.memory is not None:
            from openmsprof.export.ascend_pt.memory import db_rows

            records, op_mem = db_rows(extra.memory, s)
            con.executemany("INSERT INTO MEMORY_RECORD VALUES (?,?,?,?,?,?,?)", records)
            con.executemany("INSERT INTO OP_MEMORY VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", op_mem)
        for table in ("MEMORY_RECORD", "OP_MEMORY"):  # an empty MEMORY_RECORD crashes msprof-analyze compare
            if con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0:
                con.execute(f"DROP TABLE {table}")
        con.executemany("INSERT INTO STRING_IDS VALUES (?,?)", [(v, key) for key, v in s.items()])
        con.execute("CREATE INDEX TaskIndex ON TASK(startNs, globalTaskId)")
    con.close()
    os.replace(tmp, out / name)
    acon, atmp = _new_db(out / "analysis.db")
    with acon:
        acon.executescript(ANALYSIS_SCHEMA)
        rows = [tuple(r) for r in step_rows(fw, ov, device_id)]
        acon.executemany("INSERT INTO StepTraceTime VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
        if extra is not None and extra.comm_views:
            from openmsprof.export.ascend_pt.comm_views import analysis_rows

            times, bands, links = analysis_rows(extra.comm, extra.group)
            acon.executemany("INSERT INTO CommAnalyzerTime VALUES (?,?,?,?,?,?,?,?,?,?)", times)
            acon.executemany("INSERT INTO CommAnalyzerBandwidth VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", bands)
            acon.executemany("INSERT INTO CommAnalyzerMatrix VALUES (?,?,?,?,?,?,?,?,?,?,?)", links)
    acon.close()
    os.replace(atmp, out / "analysis.db")
    return [name, "analysis.db"]
