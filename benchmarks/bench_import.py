"""Import benchmark: synthesize N raw records into a real job, import, compare with a bare
``sqlite3.executemany`` of the very rows the import wrote (measured in the same run).

    .venv/bin/python benchmarks/bench_import.py [--records 2000000] [--rounds 2] [--corunner {off,on,both}]

Mix: 40 % TASK+TASK_INFO pairs, 30 % API spans, 10 % marks, 10 % PUSH/POP, 10 % counters.
The import runs in a child process so that its peak RSS is its own, each round on a fresh copy of
the raw job; ``--corunner both`` interleaves rounds without and with one busy process per core
(benchmarks/corunner.py) and prints each condition's median (min-max) with the load average.
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
from typing import Any

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


def _import_child(job: Path) -> dict[str, Any]:
    """``import_job`` of ``job`` in a fresh process: wall, CPU, records, rows, peak RSS."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(job)], capture_output=True, text=True,
                          env=env, check=True)
    res: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return res


def main() -> int:
    import shutil

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from corunner import CoRunner, corunner_modes, loadavg, summary

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=2, help="rounds; conditions interleave within each")
    ap.add_argument("--corunner", choices=["off", "on", "both"], default="both",
                    help="without / with one busy process per core (default both)")
    ap.add_argument("--dir", type=Path, default=None, help="work directory (default: a temp dir)")
    a = ap.parse_args()
    modes = corunner_modes(a.corunner)
    res: dict[bool, list[dict[str, float]]] = {on: [] for on in modes}
    warnings: object = None
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        raw = synthesize(work / "raw", a.records)
        print(f"synthesized {a.records:,} records in {time.perf_counter() - t0:.1f} s", flush=True)
        for r in range(a.rounds):
            for on in (modes if r % 2 == 0 else modes[::-1]):
                job = work / "run" / raw.name
                shutil.rmtree(work / "run", ignore_errors=True)
                shutil.copytree(raw, job)
                with CoRunner(enabled=on):
                    l0 = loadavg()
                    imp = _import_child(job)
                    bare_s, bare_cpu, bare_rows = bare_executemany(job / "sqlite" / "msprof.db", work)
                    l1 = loadavg()
                row = {"records": float(imp["records"]), "rows": float(sum(imp["rows"].values())),
                       "wall": float(imp["seconds"]), "cpu": float(imp["cpu"]), "rss": imp["rss_kb"] / 1024,
                       "bare_wall": bare_s, "bare_cpu": bare_cpu, "bare_rows": float(bare_rows),
                       "load0": l0, "load1": l1}
                warnings = imp["warnings"]
                res[on].append(row)
                print(f"  round {r + 1} co-runner {'on' if on else 'off'}: import {row['wall']:.2f} s wall / "
                      f"{row['cpu']:.2f} s CPU, bare {bare_s:.2f} s wall / {bare_cpu:.2f} s CPU; "
                      f"load {l0:.1f}-{l1:.1f}", flush=True)
                shutil.rmtree(work / "run", ignore_errors=True)
    print(f"\nimport of {a.records:,} records, {a.rounds} round(s), median (min-max), {os.cpu_count()} cpus; "
          "targets: >= 1,000,000 records/s, import/bare rows/s >= 0.70, peak RSS <= 300 MB at 10 M")
    for on, v in res.items():
        def med(vals: list[float]) -> str:
            return summary(vals, ",.0f")
        loads = [x[k] for x in v for k in ("load0", "load1")]
        print(f"  co-runner {'on ' if on else 'off'}: records/s wall {med([x['records'] / x['wall'] for x in v])}, "
              f"per CPU-second {med([x['records'] / x['cpu'] for x in v])}; "
              f"import/bare rows/s wall {summary([(x['rows'] / x['wall']) / (x['bare_rows'] / x['bare_wall']) for x in v])}, "
              f"CPU {summary([(x['rows'] / x['cpu']) / (x['bare_rows'] / x['bare_cpu']) for x in v])}; "
              f"peak RSS {max(x['rss'] for x in v):.0f} MB; load {min(loads):.1f}-{max(loads):.1f}")
    if warnings:
        print("warnings:", warnings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
