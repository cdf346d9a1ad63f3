"""Test helper: build job databases with exactly the schema of docs/internals.md ("Database").

Used until (and besides) real imported jobs: small realistic jobs for unit tests and a fast
bulk builder for benchmarks.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

SCHEMA = """
CREATE TABLE STRING_IDS(id INTEGER PRIMARY KEY, value TEXT);
CREATE TABLE META_DATA(name TEXT, value TEXT);
CREATE TABLE SESSION_TIME_INFO(startTimeNs INTEGER, endTimeNs INTEGER);
CREATE TABLE ENUM_API_TYPE(id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE ENUM_MSTX_EVENT_TYPE(id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE HOST_INFO(hostUid TEXT, hostName TEXT);
CREATE TABLE NPU_INFO(id INTEGER, name TEXT);
CREATE TABLE RANK_DEVICE_MAP(rankId INTEGER, deviceId INTEGER);
CREATE TABLE THREAD_INFO(globalTid INTEGER, name INTEGER);
CREATE TABLE CANN_API(startNs INTEGER, endNs INTEGER, type INTEGER, globalTid INTEGER,
  connectionId INTEGER, name INTEGER);
CREATE TABLE TASK(startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER,
  globalTaskId INTEGER, globalPid INTEGER, taskType INTEGER, contextId INTEGER,
  streamId INTEGER, taskId INTEGER, modelId INTEGER);
CREATE TABLE COMPUTE_TASK_INFO(name INTEGER, globalTaskId INTEGER PRIMARY KEY, blockNum INTEGER,
  mixBlockNum INTEGER, taskType INTEGER, opType INTEGER, inputFormats INTEGER,
  inputDataTypes INTEGER, inputShapes INTEGER, outputFormats INTEGER, outputDataTypes INTEGER,
  outputShapes INTEGER, attrInfo INTEGER, opState INTEGER, hf32Eligible INTEGER);
CREATE TABLE MSTX_EVENTS(startNs INTEGER, endNs INTEGER, eventType INTEGER, rangeId INTEGER,
  category INTEGER, message INTEGER, globalTid INTEGER, endGlobalTid INTEGER, domainId INTEGER,
  connectionId INTEGER);
CREATE TABLE STEP_TIME(id INTEGER, startNs INTEGER, endNs INTEGER, modelId INTEGER,
  deviceId INTEGER);
CREATE TABLE CPU_USAGE(timestampNs INTEGER, cpuId INTEGER, usage NUMERIC);
CREATE TABLE HOST_MEM_USAGE(timestampNs INTEGER, usage NUMERIC);
CREATE TABLE OMSP_COUNTER(timestampNs INTEGER, deviceId INTEGER, series INTEGER,
  subIndex INTEGER, value NUMERIC);
"""
INDEXES = """
CREATE INDEX TaskIndex ON TASK(startNs, globalTaskId);
CREATE INDEX CannApiConnection ON CANN_API(connectionId);
CREATE INDEX MstxStart ON MSTX_EVENTS(startNs);
"""
try:  # the importer's own DDL is the contract when it exists
    from openmsprof.parse import schema as _schema

    SCHEMA = ";\n".join(_schema.create_statements()) + ";"
    INDEXES = ";\n".join(_schema.INDEXES) + ";"
except ImportError:  # pragma: no cover - before the importer lands
    pass
API_TYPES = {20000: "acl", 15000: "model", 10000: "node", 5500: "communication",
             5000: "runtime", 50001: "op", 50002: "queue", 50003: "trace", 50004: "mstx"}
MSTX_TYPES = {0: "marker", 1: "push/pop", 2: "start/end", 3: "marker_ex"}
NONE_MODEL = 4294967295
PID = 4242
BASE_NS = 1_700_000_000_000_000_000
START_NS = BASE_NS + 123_456_789


def gtid(tid: int, pid: int = PID) -> int:
    return (pid << 32) | tid


class Builder:
    """Insert helper that interns strings like the importer does."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        self.conn = sqlite3.connect(path)
        self.conn.executescript(SCHEMA)
        self.ids: dict[str, int] = {}
        self.s("N/A")
        self.conn.executemany("INSERT INTO ENUM_API_TYPE VALUES (?,?)", API_TYPES.items())
        self.conn.executemany("INSERT INTO ENUM_MSTX_EVENT_TYPE VALUES (?,?)", MSTX_TYPES.items())

    def s(self, text: str) -> int:
        sid = self.ids.get(text)
        if sid is None:
            sid = self.ids[text] = len(self.ids) + 1
            self.conn.execute("INSERT INTO STRING_IDS VALUES (?,?)", (sid, text))
        return sid

    def meta(self, start_ns: int, end_ns: int | None, pid: int = PID) -> None:
        rows = [("SCHEMA_VERSION", "1.2.0"), ("SCHEMA_VERSION_MAJOR", "1"),
                ("SCHEMA_VERSION_MINOR", "2"), ("SCHEMA_VERSION_MICRO", "0"),
                ("OPENMSPROF_SCHEMA", "1"), ("JOB_NAME", "PROF_test"), ("PID", str(pid)),
                ("HOSTNAME", "testhost"), ("BASE_NS", str(start_ns // 10**9 * 10**9)),
                ("CLOCK_OFFSET_NS", "0"), ("UNSUPPORTED", "[]")]
        self.conn.executemany("INSERT INTO META_DATA VALUES (?,?)", rows)
        self.conn.execute("INSERT INTO SESSION_TIME_INFO VALUES (?,?)", (start_ns, end_ns))

    def thread(self, tid: int, name: str) -> None:
        self.conn.execute("INSERT INTO THREAD_INFO VALUES (?,?)", (gtid(tid), self.s(name)))

    def api(self, t0: int, t1: int, level: int, tid: int, conn: int, name: str) -> None:
        self.conn.execute("INSERT INTO CANN_API VALUES (?,?,?,?,?,?)",
                          (t0, t1, level, gtid(tid), conn, self.s(name)))

    def task(self, t0: int, t1: int, gid: int, name: str, op_type: str, *, dev: int = 0,
             stream: int = 0, conn: int = -1, model: int = NONE_MODEL,
             shapes: str = "1,3,8,8", dtypes: str = "FLOAT", executor: str = "CPU") -> None:
        na = self.s("N/A")
        self.conn.execute("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                          (t0, t1, dev, conn, gid, PID, self.s(executor), NONE_MODEL,
                           stream, gid, model))
        self.conn.execute(
            "INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (self.s(name), gid, NONE_MODEL, NONE_MODEL, self.s(executor), self.s(op_type),
             na, self.s(dtypes), self.s(shapes), na, self.s(dtypes), self.s(shapes), na, na, na))

    def mstx(self, t0: int, t1: int, kind: int, msg: str, tid: int, *, range_id: int = 0,
             end_tid: int | None = None, domain: str = "default") -> None:
        self.conn.execute("INSERT INTO MSTX_EVENTS VALUES (?,?,?,?,?,?,?,?,?,?)",
                          (t0, t1, kind, range_id, self.s("N/A"), self.s(msg), gtid(tid),
                           gtid(end_tid if end_tid is not None else tid), self.s(domain), -1))

    def close(self) -> None:
        self.conn.executescript(INDEXES)
        self.conn.commit()
        self.conn.close()


def write_info(job: Path, pid: int = PID) -> None:
    """host/info.json and an (empty) host/data/ so that the job is recognised as one."""
    (job / "host" / "data").mkdir(parents=True, exist_ok=True)
    info = {"pid": pid, "pid_name": "infer.py", "hostname": "testhost", "cpuNums": 2,
            "memoryTotal": 8_000_000, "devices": "0"}
    (job / "host" / "info.json").write_bytes(orjson.dumps(info))


def make_job(root: Path, iterations: int = 3) -> Path:
    """A small realistic job (2 threads, APIs with nested runtime calls launching tasks,
    markers incl. overlapping cross-thread ranges, steps, CPU/memory samples)."""
    job = root / "PROF_000001_20240101000000000_00004242ABCDEFGH"
    write_info(job)
    b = Builder(job / "sqlite" / "msprof.db")
    end = START_NS + 10_000_000 + iterations * 1_000_000
    b.meta(START_NS, end)
    main, worker = PID, PID + 8
    b.thread(main, "MainThread")
    b.thread(worker, "worker-1")
    conn, gid = 1, 1
    t = START_NS + 1_000_000
    for i in range(iterations):
        b.mstx(t, t + 900_000, 1, f"iteration {i}", main)
        b.api(t + 10_000, t + 800_000, 20000, main, conn, "aclmdlExecute")
        b.api(t + 20_000, t + 30_500, 5000, main, conn + 1, "rtKernelLaunch")
        ts = t + 40_000
        for name, op in (("conv1", "Conv"), ("relu1", "Relu"), ("fc", "Gemm")):
            b.task(ts, ts + 200_000, gid, name, op, conn=conn, model=1, stream=0)
            ts += 210_000
            gid += 1
        b.conn.execute("INSERT INTO STEP_TIME VALUES (?,?,?,?,?)", (i, t, t + 950_000, 1, 0))
        b.mstx(t + 5_000, t + 5_000, 0, f"mark {i}", main)
        conn += 2
        t += 1_000_000
    # an API with no task, two overlapping cross-thread ranges, two overlapping tasks
    b.api(t, t + 50_000, 5000, worker, conn, "aclrtMalloc")
    b.mstx(t, t + 50_000, 2, "load A", worker, range_id=1, end_tid=main)
    b.mstx(t + 20_000, t + 80_000, 2, "load B", worker, range_id=2)
    b.task(t + 100_000, t + 300_000, gid, "side_a", "MatMul", stream=1)
    b.task(t + 200_000, t + 400_000, gid + 1, "side_b", "Add", stream=1)
    for k in range(10):
        ts = START_NS + k * 1_000_000
        b.conn.execute("INSERT INTO CPU_USAGE VALUES (?,?,?)", (ts, -1, 25.0 + k))
        b.conn.execute("INSERT INTO CPU_USAGE VALUES (?,?,?)", (ts, 0, 40.0 + k))
        b.conn.execute("INSERT INTO CPU_USAGE VALUES (?,?,?)", (ts, 1, 10.0))
        b.conn.execute("INSERT INTO HOST_MEM_USAGE VALUES (?,?)", (ts, 50.0 + k / 2))
        b.conn.execute("INSERT INTO OMSP_COUNTER VALUES (?,?,?,?,?)", (ts, -1, 3, 0, 8_000_000))
        b.conn.execute("INSERT INTO OMSP_COUNTER VALUES (?,?,?,?,?)",
                       (ts, -1, 4, 0, 4_000_000 + k * 10_000))
    b.close()
    return job


def make_big_db(path: Path, n_tasks: int, *, ops_per_api: int = 10) -> None:
    """A database with ``n_tasks`` tasks, ``n_tasks/ops_per_api`` launching APIs and as many
    markers (bulk ``executemany``; for benchmarks)."""
    b = Builder(path)
    b.meta(START_NS, START_NS + n_tasks * 2_000)
    b.thread(PID, "MainThread")
    op_types = ["Conv", "Relu", "Gemm", "Add", "MatMul", "Softmax", "LayerNorm", "Gelu"]
    names = [b.s(f"/model/layer{i // 8}/{op_types[i % 8]}_{i}") for i in range(400)]
    types = [b.s(o) for o in op_types]
    cpu, na, shp, dt = b.s("CPU"), b.s("N/A"), b.s("1,128,768;768,768"), b.s("FLOAT;FLOAT")
    api_names = [b.s("aclmdlExecute"), b.s("aclrtSynchronizeStream")]

    def tasks() -> object:
        for i in range(n_tasks):
            t0 = START_NS + 1_000 + i * 2_000
            yield (t0, t0 + 1_500, 0, i // ops_per_api + 1, i + 1, PID, cpu, NONE_MODEL,
                   0, i + 1, 1)

    def infos() -> object:
        for i in range(n_tasks):
            yield (names[i % 400], i + 1, NONE_MODEL, NONE_MODEL, cpu, types[i % 400 % 8],
                   na, dt, shp, na, dt, shp, na, na, na)

    def apis() -> object:
        span = ops_per_api * 2_000
        for k in range(n_tasks // ops_per_api):
            t0 = START_NS + k * span
            yield (t0, t0 + span - 100, 20000, gtid(PID), k + 1, api_names[k % 2])

    b.conn.executemany("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)", tasks())  # type: ignore[arg-type]
    b.conn.executemany("INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                       infos())  # type: ignore[arg-type]
    b.conn.executemany("INSERT INTO CANN_API VALUES (?,?,?,?,?,?)", apis())  # type: ignore[arg-type]
    b.close()
