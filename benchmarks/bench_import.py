"""Import benchmark: synthesize N raw records into a real job, import, compare with a bare
``sqlite3.executemany`` of the very rows the import wrote (measured in the same run).

    .venv/bin/python benchmarks/bench_import.py [--records 2000000]

Mix: 40 % TASK+TASK_INFO pairs, 30 % API spans, 10 % marks, 10 % PUSH/POP, 10 % counters.
The import runs in a child process so that its peak RSS is its own.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from openmsprof.fileio import fs
from openmsprof.parse import schema
from openmsprof.recorder import jobdir
from openmsprof.recorder.clock import read_pair
from openmsprof.recorder.rawfile import GENERIC_DTYPE, SliceWriter, StringTable
from openmsprof.recorder.records import RECORDS_MAGIC, Kind, Series

CHUNK = 1 << 18


def synthesize(out: Path, n: int) -> Path:
    """A job with ``n`` records (plus config files) written by the raw writers."""
    pair = read_pair()
    job = jobdir.create(out, pair.wall_ns)
    dev = fs.make_dir(job.root / "device_0")
    fs.make_dir(dev / "data")
    info = jobdir.info_json({}, [0])
    jobdir.write_config_files(job.host, "", info, {}, pair, "host_start.log")
    jobdir.write_config_files(dev, ".0", info, {}, pair, "dev_start.log.0")
    hs, ds = StringTable(job.host_data, "host"), StringTable(dev / "data", "0")
    names = [hs.intern(f"aclmdlExecute_{i}") for i in range(50)]
    ops = [ds.intern(f"Conv_{i}") for i in range(200)]
    shapes = [ds.intern(f"1,{i},224,224;1000") for i in range(20)]
    hs.close()
    ds.close()
    writers = {k: SliceWriter(d, k, "records", dv, RECORDS_MAGIC)
               for k, d, dv in [("Api", job.host_data, "host"), ("Mstx", job.host_data, "host"),
                                ("Counter", job.host_data, "host"), ("Task", dev / "data", "0")]}
    rng = np.random.default_rng(1)
    t = pair.mono_ns
    done = 0
    while done < n:
        m = min(CHUNK, n - done) // 10 * 10 or 10
        step = 1000
        base = t + np.arange(m, dtype=np.int64) * step
        # tasks: 0.4 m records = 0.2 m pairs
        npair = m * 2 // 10
        task = np.zeros(npair * 2, dtype=GENERIC_DTYPE)
        tid = np.arange(done, done + npair, dtype=np.uint32)
        task["kind"][0::2], task["kind"][1::2] = Kind.TASK, Kind.TASK_INFO
        task["aux"][0::2] = 0xFFFF
        task["tid"][0::2] = 1
        task["t0"][0::2], task["t1"][0::2] = base[:npair], base[:npair] + 700
        task["a"][0::2] = np.array(ops)[rng.integers(0, len(ops), npair)]
        task["b"][0::2] = tid
        task["tid"][1::2] = tid  # TASKINFO task_id sits where GENERIC has tid
        task["t0"][1::2] = (np.array(shapes)[rng.integers(0, 20, npair)].astype(np.int64) << 32) | ops[0]
        task["t1"][1::2] = ops[1] | (ops[2] << 32)
        task["a"][1::2], task["b"][1::2] = shapes[0], tid + 1
        api = np.zeros(m * 3 // 10, dtype=GENERIC_DTYPE)
        api["kind"], api["tid"] = Kind.API, 4242
        api["t0"], api["t1"] = base[: len(api)], base[: len(api)] + 900
        api["a"] = np.array(names)[rng.integers(0, 50, len(api))]
        api["b"] = tid[0] + 1 + np.arange(len(api), dtype=np.uint32)
        mstx = np.zeros(m * 2 // 10, dtype=GENERIC_DTYPE)
        k = m // 10
        mstx["kind"][:k] = Kind.MARK
        mstx["t0"][:k] = mstx["t1"][:k] = base[:k]
        mstx["kind"][k:][0::2], mstx["kind"][k:][1::2] = Kind.PUSH, Kind.POP
        mstx["t0"][k:] = base[: len(mstx) - k]
        mstx["tid"] = 7
        mstx["a"] = names[0]
        cnt = np.zeros(m - len(task) - len(api) - len(mstx), dtype=GENERIC_DTYPE).view(
            np.dtype([("kind", "u1"), ("flags", "u1"), ("aux", "<u2"), ("tid", "<u4"),
                      ("ts", "<i8"), ("value", "<f8"), ("a", "<u4"), ("b", "<u4")]))
        cnt["kind"], cnt["ts"], cnt["value"] = Kind.COUNTER, base[: len(cnt)], 12.5
        cnt["a"], cnt["b"] = Series.SYS_CPU_PERCENT, np.arange(len(cnt)) % 3
        for name, arr in (("Task", task), ("Api", api), ("Mstx", mstx), ("Counter", cnt)):
            writers[name].write(arr.tobytes())
        done += m
        t += m * step
    for w in writers.values():
        w.close()
    end = read_pair()
    fs.write_file_atomic(job.host / "end_info", jobdir.dump(jobdir.end_info(end)))
    fs.write_file_atomic(dev / "end_info.0", jobdir.dump(jobdir.end_info(end)))
    return job.root


_CHILD = """
import json, resource, sys, time
from pathlib import Path
from openmsprof.parse.importer import import_job
t = time.perf_counter(); c = time.process_time(); r = import_job(Path(sys.argv[1]), progress=False)
print(json.dumps({"seconds": time.perf_counter() - t, "cpu": time.process_time() - c, "records": r.records, "rows": r.rows,
                  "warnings": r.warnings,
                  "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def bare_executemany(db: Path, work: Path) -> tuple[float, float, int]:
    """Seconds to executemany every row of ``db``'s data tables into a fresh DB (rows prefetched
    per 65536-row batch outside the timed region), and the row count."""
    src = sqlite3.connect(db)
    dst_path = work / "bare.db"
    dst_path.unlink(missing_ok=True)
    dst = sqlite3.connect(dst_path, isolation_level=None)
    for p in ("journal_mode=OFF", "synchronous=OFF", "locking_mode=EXCLUSIVE", "cache_size=-32768"):
        dst.execute(f"PRAGMA {p}")
    for stmt in schema.create_statements():
        dst.execute(stmt)
    total, cpu, rows_n = 0.0, 0.0, 0
    for table, cols in schema.TABLES.items():
        n = len(cols.split(","))
        sql = f"INSERT INTO {table} VALUES ({','.join('?' * n)})"
        cur = src.execute(f"SELECT * FROM {table}")
        while batch := cur.fetchmany(65536):
            t0, c0 = time.perf_counter(), time.process_time()
            dst.execute("BEGIN")
            dst.executemany(sql, batch)
            dst.execute("COMMIT")
            total += time.perf_counter() - t0
            cpu += time.process_time() - c0
            rows_n += len(batch)
    dst.close()
    dst_path.unlink()
    return total, cpu, rows_n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--dir", type=Path, default=None, help="work directory (default: a temp dir)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        job = synthesize(work / "out", a.records)
        print(f"synthesized {a.records:,} records in {time.perf_counter() - t0:.1f} s")
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
        proc = subprocess.run([sys.executable, "-c", _CHILD, str(job)], capture_output=True, text=True,
                              env=env, check=True)
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        rows = sum(res["rows"].values())
        rate = res["records"] / res["seconds"]
        bare_s, bare_cpu, bare_rows = bare_executemany(job / "sqlite" / "msprof.db", work)
        bare_rate = bare_rows / bare_s
        print(f"load average now:  {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus (wall times suffer above that)")
        print(f"import:            {res['records']:,} records -> {rows:,} rows in {res['seconds']:.2f} s "
              f"(cpu {res['cpu']:.2f} s) = {rate:,.0f} records/s, {rows / res['seconds']:,.0f} rows/s; "
              f"{res['records'] / res['cpu']:,.0f} records per cpu-second")
        print(f"bare executemany:  {bare_rows:,} rows in {bare_s:.2f} s (cpu {bare_cpu:.2f} s) = "
              f"{bare_rate:,.0f} rows/s")
        print(f"ratio import/bare (rows/s): {rows / res['seconds'] / bare_rate:.2f}  (target >= 0.70)")
        print(f"import peak RSS:   {res['rss_kb'] / 1024:.0f} MB  (target <= 300 MB at 10 M records)")
        print(f"records/s target >= 1,000,000: {'met' if rate >= 1e6 else 'NOT met'}")
        if res["warnings"]:
            print("warnings:", res["warnings"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
