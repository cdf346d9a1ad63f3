"""Import of real jobs made by the real session: counts and values against what was issued."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from openmsprof.parse import schema
from openmsprof.parse.importer import ensure_imported, import_job
from openmsprof.recorder.records import ApiLevel
from tests.parse.conftest import LOOPS, TASKS, THREADS, dump_db, q


def _s(db: Path) -> dict[int, str]:
    return dict(q(db, "SELECT id, value FROM STRING_IDS"))


def test_counts_and_values(real_job: tuple[Path, dict[str, Any]]) -> None:
    job, issued = real_job
    r = import_job(job, progress=False)
    db = r.db_path
    assert db == job / "sqlite" / "msprof.db"
    s = _s(db)
    # markers: per thread LOOPS marks + 2*LOOPS push/pop ranges + 1 range; + cross + left open
    ev = q(db, "SELECT eventType, COUNT(*) FROM MSTX_EVENTS GROUP BY eventType ORDER BY eventType")
    assert ev == [(0, THREADS * LOOPS), (1, THREADS * 2 * LOOPS + 1), (2, THREADS + 1)]
    pid = int(q(db, "SELECT value FROM META_DATA WHERE name='PID'")[0][0])
    for k, tid in issued["threads"].items():
        gtid = (pid << 32) | tid
        rows = q(db, "SELECT message, startNs, endNs, endGlobalTid FROM MSTX_EVENTS "
                     "WHERE globalTid=? AND eventType=1", (gtid,))
        names = sorted(s[m] for m, *_ in rows)
        assert names == sorted([f"outer{k}"] * LOOPS + ["inner"] * LOOPS)
        assert all(a <= b and g == gtid for _m, a, b, g in rows)
        # every "inner" lies inside an "outer" of the same thread
        outer = sorted((a, b) for m, a, b, _g in rows if s[m] == f"outer{k}")
        inner = sorted((a, b) for m, a, b, _g in rows if s[m] == "inner")
        assert all(o[0] <= i[0] and i[1] <= o[1] for o, i in zip(outer, inner, strict=True))
        marks = q(db, "SELECT message, domainId, startNs = endNs FROM MSTX_EVENTS WHERE globalTid=? "
                      "AND eventType=0", (gtid,))
        assert {(s[m], s[d], same) for m, d, same in marks} == {(f"mark{k}", "dom", 1)}
    cross = q(db, "SELECT globalTid != endGlobalTid, domainId FROM MSTX_EVENTS WHERE message=?",
              (next(i for i, v in s.items() if v == "cross"),))
    assert len(cross) == 1 and cross[0][0] == 1 and s[cross[0][1]] == "default"
    # open range closed at the session end and reported
    end = q(db, "SELECT endTimeNs FROM SESSION_TIME_INFO")[0][0]
    left = q(db, "SELECT endNs FROM MSTX_EVENTS WHERE message=?", (next(i for i, v in s.items() if v == "left open"),))
    assert left and abs(left[0][0] - end) < 2_000_000
    assert any("unclosed" in w for w in r.warnings)
    # API rows: times epoch = mono + offset, connection ids kept, fresh ones >= 2^32
    api = q(db, "SELECT startNs, endNs, type, connectionId FROM CANN_API WHERE type=? ORDER BY startNs",
            (int(ApiLevel.ACL),))
    info = orjson.loads((job / "host" / "start_info").read_bytes())
    offset = int(info["collectionTimeBegin"]) * 1000 - int(info["clockMonotonicRaw"])
    assert abs(offset - issued["offset"]) < 1000  # start_info keeps µs
    assert [(a - offset, c) for a, _b, _t, c in api] == issued["api"]
    assert all(b - a == 5000 for a, b, _t, _c in api)
    rt = q(db, "SELECT connectionId FROM CANN_API WHERE type=?", (int(ApiLevel.RUNTIME),))
    assert len(rt) == 1 and rt[0][0] >= schema.FRESH_CONNECTION_BASE
    # tasks joined with their API by connection id, task info resolved
    tasks = q(db, "SELECT t.startNs - a.startNs, t.endNs - t.startNs, t.streamId, t.deviceId, t.modelId, "
                  "t.taskType, c.opType, c.inputShapes, c.inputDataTypes, c.outputShapes, "
                  "c.outputDataTypes, c.inputFormats, c.name FROM TASK t JOIN CANN_API a "
                  "ON a.connectionId = t.connectionId JOIN COMPUTE_TASK_INFO c "
                  "ON c.globalTaskId = t.globalTaskId")
    assert len(tasks) == TASKS
    for row in tasks:
        d0, dur, stream, dev, model, ttype, *text = row
        assert (d0, dur, stream, dev, model) == (1000, 3000, 3, 0, schema.INVALID)
        assert [s[ttype], *(s[x] for x in text[:6])] == ["CPU", "Conv2D", "1,3,224,224", "FLOAT", "1,64",
                                                        "FLOAT16", "N/A"]
        assert s[text[6]].startswith("Conv_")
    steps = q(db, "SELECT id, endNs - startNs, modelId, deviceId FROM STEP_TIME ORDER BY id")
    assert steps == [(3, 2000, schema.INVALID, -1), (7, 1000, 2, 0)]
    # host sampler: cpu and memory usage rows, counters kept raw
    assert q(db, "SELECT COUNT(*) FROM CPU_USAGE WHERE cpuId = -1")[0][0] >= 2
    mem = q(db, "SELECT usage FROM HOST_MEM_USAGE")
    assert mem and all(0 < m[0] < 100 for m in mem)
    assert q(db, "SELECT COUNT(*) FROM OMSP_COUNTER")[0][0] >= len(mem) * 3
    names = {s[n] for (n,) in q(db, "SELECT name FROM THREAD_INFO")}
    assert {f"worker{k}" for k in range(THREADS)} <= names
    meta = dict(q(db, "SELECT name, value FROM META_DATA"))
    assert meta["SCHEMA_VERSION"] == "1.2.0" and meta["OPENMSPROF_SCHEMA"] == str(schema.OPENMSPROF_SCHEMA)
    assert meta["JOB_NAME"] == job.name and int(meta["BASE_NS"]) % 10**9 == 0
    assert q(db, "SELECT name FROM sqlite_master WHERE type='index' AND name='TaskIndex'")
    assert oct(db.stat().st_mode & 0o777) == oct(0o640)
    assert sorted(p.name for p in (job / "sqlite").iterdir()) == [".import.lock", "msprof.db"]


def test_reimport_is_identical_and_ensure_skips(real_job: tuple[Path, dict[str, Any]]) -> None:
    job, _ = real_job
    first = dump_db(import_job(job, progress=False).db_path)
    db = ensure_imported(job)
    mtime = db.stat().st_mtime_ns
    assert ensure_imported(job) == db and db.stat().st_mtime_ns == mtime  # up to date: not rebuilt
    second = dump_db(import_job(job, progress=False).db_path)
    assert first == second
