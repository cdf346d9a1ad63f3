"""``export_type=db``: ``ascend_pytorch_profiler_{rank}.db`` (msprof-style tables, ns, string ids)
and ``analysis.db`` (StepTraceTime + empty CommAnalyzer* tables), clients doc §7.5."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import orjson

from openmsprof.collect import fs
from openmsprof.export.ascend_pt.framework import Framework, call_stacks, shapes_text
from openmsprof.export.ascend_pt.overlap import Overlap, step_rows

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
CREATE TABLE AICORE_FREQ(deviceId INTEGER, timestampNs INTEGER, freq INTEGER);
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


def write(out: Path, fw: Framework, ov: Overlap, info: dict[str, Any], rank: int | None, device_id: int,
          rank_dir: Path) -> list[str]:
    name = f"ascend_pytorch_profiler_{rank}.db" if rank is not None else "ascend_pytorch_profiler.db"
    con, tmp = _new_db(out / name)
    s = _Strings()
    with con:
        con.executescript(SCHEMA)
        con.executemany("INSERT INTO ENUM_API_TYPE VALUES (?,?)", API_TYPES)
        con.executemany("INSERT INTO ENUM_MSTX_EVENT_TYPE VALUES (?,?)", MSTX_TYPES)
        meta = [("SCHEMA_VERSION", "1.2.0"), ("SCHEMA_VERSION_MAJOR", "1"), ("SCHEMA_VERSION_MINOR", "2"),
                ("SCHEMA_VERSION_MICRO", "0")]
        md = rank_dir / "profiler_metadata.json"
        if md.is_file():
            meta += [(k, orjson.dumps(v).decode()) for k, v in orjson.loads(md.read_bytes()).items()]
        con.executemany("INSERT INTO META_DATA VALUES (?,?)", meta)
        con.execute("INSERT INTO RANK_DEVICE_MAP VALUES (?,?)", (rank if rank is not None else -1, device_id))
        con.execute("INSERT INTO NPU_INFO VALUES (?,?)", (device_id, fw.backend))
        k = fw.kernels
        end = k.ts + k.dur
        span = (int(fw.op_ts.min()), int((fw.op_ts + fw.op_dur).max())) if len(fw.ops) else (0, 0)
        con.execute("INSERT INTO SESSION_TIME_INFO VALUES (?,?)", span)
        tasks, infos = [], []
        for j in range(len(k)):
            o = int(k.op[j])
            shp, typ = shapes_text(fw.ops[o].get("args") or {}) if o >= 0 else ("", "")
            tasks.append((int(k.ts[j]), int(end[j]), device_id, o, j, fw.pid, s[k.core[j]], 0, int(k.stream[j]), j,
                          NO_MODEL))
            infos.append((s[k.name[j]], j, s[NA], s[NA], s[k.core[j]], s[k.name[j]], s[NA], s[typ or NA],
                          s[shp or NA], s[NA], s[NA], s[NA], s[NA], s[NA], s[NA]))
        con.executemany("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)", tasks)
        con.executemany("INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", infos)
        stacks = call_stacks(fw)
        api: list[tuple[Any, ...]] = []
        chains: list[tuple[int, int, int]] = []
        for i, e in enumerate(fw.ops):
            args = e.get("args") or {}
            shp, typ = shapes_text(args)
            chain = None
            if i in stacks:
                chain = len(chains)
                chains.append((chain, s[stacks[i]], stacks[i].count(";\r\n") + 1))
            api.append((str(int(fw.op_ts[i])), str(int(fw.op_ts[i] + fw.op_dur[i])),
                        (fw.pid << 32) | int(fw.op_tid[i]), i, s[e.get("name", "")],
                        args.get("Sequence number", -1), args.get("Fwd thread id", 0), s[typ or NA], s[shp or NA],
                        chain, 50001))
        con.executemany("INSERT INTO PYTORCH_API VALUES (?,?,?,?,?,?,?,?,?,?,?)", api)
        con.executemany("INSERT INTO PYTORCH_CALLCHAINS VALUES (?,?,?)", chains)
        valid = [(int(o), int(o)) for o in k.op.tolist() if o >= 0]
        con.executemany("INSERT INTO CONNECTION_IDS VALUES (?,?)", valid)
        con.executemany("INSERT INTO STEP_TIME VALUES (?,?,?)", fw.steps)
        con.executemany("INSERT INTO STRING_IDS VALUES (?,?)", [(v, key) for key, v in s.items()])
        con.execute("CREATE INDEX TaskIndex ON TASK(startNs, globalTaskId)")
    con.close()
    os.replace(tmp, out / name)
    acon, atmp = _new_db(out / "analysis.db")
    with acon:
        acon.executescript(ANALYSIS_SCHEMA)
        rows = [tuple(r) for r in step_rows(fw, ov, device_id)]
        acon.executemany("INSERT INTO StepTraceTime VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
    acon.close()
    os.replace(atmp, out / "analysis.db")
    return [name, "analysis.db"]
