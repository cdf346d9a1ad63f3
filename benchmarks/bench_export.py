"""Export benchmark: timeline events/s, bytes/event and peak RSS, and op/api statistics time,
against a naive ``json.dumps(list_of_dicts)`` export measured in the same run.

    .venv/bin/python benchmarks/bench_export.py [--tasks 1000000] [--naive-tasks 250000]
        [--summary-records 1750000] [--only-summary] [--repeat 2] [--corunner {off,on,both}]

First ``export summary`` as users run it (``openmsprof export summary -dir JOB`` in a fresh process,
cold and on the imported job) of a 1.75 M-record job synthesized like bench_import's.

The database holds ``--tasks`` tasks, one launching API per task (so api_statistic also runs over
that many rows) and the API→task flows: events = tasks + APIs + 2 × flows.  Our export runs in
three modes: the device pass forked onto the second core (the default on this machine), all in
one process, and one process walking rows with the stdlib ``sqlite3`` instead of ``apsw``.
Each export runs in a child process so its peak RSS is its own (the larger of the exporter and
its fork).  CPU seconds (exporter + fork) are reported besides wall seconds because the CI
machine is shared.  ``--corunner both`` runs every figure without and with one busy process per
core (benchmarks/corunner.py), conditions interleaved round by round; each figure is the median
(min-max) of ``--repeat`` rounds, with the load average.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]


def _rss_mb() -> float:
    """Peak RSS of this process or of any forked helper, whichever is larger."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


def _cpu() -> float:
    """CPU seconds of this process plus its reaped children (the forked device pass)."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


def _counts(db_path: Path, limit: int | None = None) -> tuple[int, int, int]:
    import sqlite3

    c = sqlite3.connect(db_path)
    tasks = c.execute("SELECT COUNT(*) FROM TASK").fetchone()[0]
    apis = c.execute("SELECT COUNT(*) FROM CANN_API").fetchone()[0]
    flows = c.execute("SELECT COUNT(*) FROM TASK t JOIN CANN_API a"
                      " ON a.connectionId = t.connectionId").fetchone()[0]
    c.close()
    if limit is not None:
        f = min(1.0, limit / tasks)
        return round(tasks * f), round(apis * f), round(flows * f)
    return tasks, apis, flows


def child_ours(db_path: Path, out: Path, mode: str) -> dict[str, float]:
    """``mode``: "2" the device pass forked, "1" one process, "s" one process without apsw."""
    from openmsprof.export import jobdb as dbmod
    from openmsprof.export.jobdb import JobDB
    from openmsprof.export.msprof.timeline import write_timeline

    if mode == "s":
        dbmod._apsw = None  # the stdlib sqlite3 path, as without apsw installed
    parallel = mode == "2"

    tasks, apis, flows = _counts(db_path)
    with JobDB(db_path) as db:
        w0, c0 = time.perf_counter(), _cpu()
        paths = write_timeline(db, out, parallel=parallel)
        wall, cpu = time.perf_counter() - w0, _cpu() - c0
    size = sum(p.stat().st_size for p in paths)
    for p in paths:
        p.unlink()
    return {"events": tasks + apis + 2 * flows, "wall": wall, "cpu": cpu, "bytes": size,
            "rss_mb": _rss_mb()}


def child_naive(db_path: Path, out: Path, limit: int) -> dict[str, float]:
    """Fetch the rows, build one dict per event, ``json.dumps`` the list, write it."""
    import sqlite3

    w0, c0 = time.perf_counter(), time.process_time()
    c = sqlite3.connect(db_path)
    names = dict(c.execute("SELECT id, value FROM STRING_IDS"))
    base = int(c.execute("SELECT value FROM META_DATA WHERE name = 'BASE_NS'").fetchone()[0])
    events: list[dict[str, object]] = []
    (t_end,) = c.execute("SELECT MAX(startNs) FROM (SELECT startNs FROM TASK ORDER BY startNs"
                         " LIMIT ?)", (limit,)).fetchone()
    for s, e, _typ, g, name in c.execute("SELECT startNs, endNs, type, globalTid, name FROM"
                                        " CANN_API WHERE startNs <= ?", (t_end,)):
        events.append({"name": f"AscendCL@{names[name]}", "pid": 7, "tid": g & 0xFFFFFFFF,
                       "ts": (s - base) / 1000, "dur": (e - s) / 1000, "ph": "X"})
    fid = 0
    for s, e, stream, name, task_id, a_s, a_g in c.execute(
            "SELECT t.startNs, t.endNs, t.streamId, c.name, t.taskId, a.startNs, a.globalTid"
            " FROM TASK t LEFT JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId"
            " LEFT JOIN CANN_API a ON a.connectionId = t.connectionId ORDER BY t.startNs LIMIT ?",
            (limit,)):
        events.append({"name": names[name], "pid": 14, "tid": stream, "ts": (s - base) / 1000,
                       "dur": (e - s) / 1000, "ph": "X", "args": {"Task Id": task_id}})
        if a_s is not None:
            fid += 1
            events.append({"name": "HostToDevice", "pid": 7, "tid": a_g & 0xFFFFFFFF, "ph": "s",
                           "cat": "HostToDevice", "id": fid, "ts": (a_s - base) / 1000})
            events.append({"name": "HostToDevice", "pid": 14, "tid": stream, "ph": "f",
                           "cat": "HostToDevice", "id": fid, "ts": (s - base) / 1000, "bp": "e"})
    data = json.dumps({"traceEvents": events})
    path = out / "naive.json"
    path.write_text(data)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    size = path.stat().st_size
    path.unlink()
    return {"events": len(events), "wall": wall, "cpu": cpu, "bytes": size, "rss_mb": _rss_mb()}


def child_stats(db_path: Path) -> dict[str, float]:
    from openmsprof.export.jobdb import JobDB
    from openmsprof.export.msprof.summary_host import api_statistic_rows
    from openmsprof.export.msprof.summary_tasks import op_statistic_rows

    out: dict[str, float] = {}
    with JobDB(db_path) as db:
        for name, fn in (("op_statistic", op_statistic_rows), ("api_statistic",
                                                                api_statistic_rows)):
            w0, c0 = time.perf_counter(), time.process_time()
            fn(db)  # type: ignore[operator]
            out[f"{name}_wall"] = time.perf_counter() - w0
            out[f"{name}_cpu"] = time.process_time() - c0
    return out


def _spawn(*args: str) -> dict[str, float]:
    r = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True,
                       text=True, timeout=600, check=False)
    if r.returncode != 0:
        raise SystemExit(f"child {args[0]} failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def summary_job(records: int, repeat: int, modes: list[bool]) -> None:
    """``openmsprof export summary -dir JOB`` as users run it, in a fresh process on a fresh copy of
    a raw job of ``records`` records (bench_import's mix): cold (the import into sqlite/msprof.db
    included) and again on the imported job; wall, CPU (with the forked child's) and peak RSS,
    per co-runner condition (``modes``, interleaved round by round)."""
    import os
    import shutil

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_import
    from corunner import CoRunner, loadavg

    code = ("import resource, sys, time; t0 = time.perf_counter(); c0 = time.process_time(); "
            "from openmsprof.cli.main import main; rc = main(['export', 'summary', '-dir', sys.argv[1]]); "
            "k = resource.getrusage(resource.RUSAGE_CHILDREN); "
            "print(rc, time.perf_counter() - t0, time.process_time() - c0 + k.ru_utime + k.ru_stime, "
            "max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, k.ru_maxrss) / 1024)")
    res: dict[tuple[bool, str], list[tuple[float, float, float]]] = {
        (on, kind): [] for on in modes for kind in ("cold", "imported")}
    loads: dict[bool, list[float]] = {on: [] for on in modes}
    with tempfile.TemporaryDirectory(prefix="bench_summary_") as tmp:
        pristine = bench_import.synthesize(Path(tmp) / "raw", records)
        for i in range(repeat):
            for on in (modes if i % 2 == 0 else modes[::-1]):
                job = Path(tmp) / f"run{i}"
                shutil.copytree(pristine, job)
                with CoRunner(enabled=on):
                    loads[on].append(loadavg())
                    for kind in ("cold", "imported"):
                        r = subprocess.run([sys.executable, "-c", code, str(job)], capture_output=True, text=True,
                                           check=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
                        rc, wall, cpu, rss = r.stdout.split()[-4:]
                        assert rc == "0", r.stderr
                        res[(on, kind)].append((float(wall), float(cpu), float(rss)))
                    loads[on].append(loadavg())
                shutil.rmtree(job)
    print(f"export summary of a {records:,}-record job, {repeat} fresh copies per condition, median (min-max) "
          "(goal <= 2 s):")
    for (on, kind), v in res.items():
        w, c, m = ([x[k] for x in v] for k in range(3))
        print(f"  co-runner {'on ' if on else 'off'} {kind:<9} wall {_med(w)} s  CPU {_med(c)} s  "
              f"peak RSS {max(m):.0f} MB  load {min(loads[on]):.1f}-{max(loads[on]):.1f}")


def _med(v: list[float], fmt: str = ".2f") -> str:
    return f"{statistics.median(v):{fmt}} ({min(v):{fmt}}-{max(v):{fmt}})"


def main() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from corunner import CoRunner, corunner_modes, loadavg

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--naive-tasks", type=int, default=250_000,
                    help="tasks the naive export handles (it holds every event in memory)")
    ap.add_argument("--repeat", type=int, default=2, help="rounds of each export per condition")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    ap.add_argument("--summary-records", type=int, default=1_750_000,
                    help="records of the job for the export summary figure (0: skip)")
    ap.add_argument("--only-summary", action="store_true", help="only the export summary figure")
    ap.add_argument("--corunner", choices=["off", "on", "both"], default="both",
                    help="without / with one busy process per core (default both)")
    a = ap.parse_args()
    if a.child:
        kind, db = a.child[0], Path(a.child[1])
        res = (child_ours(db, Path(a.child[2]), a.child[3]) if kind == "ours" else
               child_naive(db, Path(a.child[2]), int(a.child[3])) if kind == "naive" else
               child_stats(db))
        print(json.dumps(res))
        return
    modes = corunner_modes(a.corunner)
    if a.summary_records:
        summary_job(a.summary_records, max(a.repeat, 3), modes)
    if a.only_summary:
        return
    from tests.export.dbfactory import make_big_db

    runs: dict[tuple[bool, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_export_") as tmp:
        db = Path(tmp) / "sqlite" / "msprof.db"
        t0 = time.perf_counter()
        make_big_db(db, a.tasks, ops_per_api=1)
        print(f"database: {a.tasks:,} tasks + {a.tasks:,} APIs built in "
              f"{time.perf_counter() - t0:.1f} s ({db.stat().st_size / 1e6:.0f} MB)")
        out = Path(tmp) / "out"
        out.mkdir()
        for i in range(a.repeat):  # conditions and sides interleaved round by round
            for on in (modes if i % 2 == 0 else modes[::-1]):
                with CoRunner(enabled=on):
                    for mode in ("2", "1", "s", "naive", "stats"):
                        l0 = loadavg()
                        r = (_spawn("naive", str(db), str(out), str(a.naive_tasks)) if mode == "naive" else
                             _spawn("stats", str(db)) if mode == "stats" else _spawn("ours", str(db), str(out), mode))
                        r["load"] = max(l0, loadavg())
                        runs.setdefault((on, mode), []).append(r)
    for on in modes:
        _print_condition(on, {m: v for (o, m), v in runs.items() if o == on}, a.tasks)


def _print_condition(on: bool, runs: dict[str, list[dict[str, float]]], tasks: int) -> None:
    """The timeline and statistics figures of one co-runner condition, median (min-max) over rounds."""
    loads = [r["load"] for v in runs.values() for r in v]
    print(f"\nco-runner {'on' if on else 'off'} ({len(runs['2'])} round(s), load {min(loads):.1f}-{max(loads):.1f})")
    print(f"{'timeline export':<28}{'events':>11}{'ev/s wall':>26}{'ev/s CPU':>26}{'B/event':>9}{'peak RSS':>10}")
    for label, mode in (("openmsprof (2 processes)", "2"), ("openmsprof (1 process)", "1"),
                        ("openmsprof (1, sqlite3)", "s"), ("naive json.dumps(list)", "naive")):
        v = runs[mode]
        ev = v[0]["events"]
        print(f"{label:<28}{int(ev):>11,}{_med([ev / r['wall'] for r in v], ',.0f'):>26}"
              f"{_med([ev / r['cpu'] for r in v], ',.0f'):>26}{v[0]['bytes'] / ev:>9.1f}"
              f"{max(r['rss_mb'] for r in v):>8.0f}MB")
    ours, single, stdlib, naive = (runs[m] for m in ("2", "1", "s", "naive"))
    ratio = [(o["events"] / o["cpu"]) / (n["events"] / n["cpu"]) for o, n in zip(ours, naive, strict=True)]
    print(f"ratio openmsprof/naive events per CPU-second: {_med(ratio)}; RSS per million events "
          f"{max(r['rss_mb'] for r in ours) / ours[0]['events'] * 1e6:.0f} MB vs "
          f"{max(r['rss_mb'] for r in naive) / naive[0]['events'] * 1e6:.0f} MB")
    print(f"ratio 1 process/2 processes: wall {_med([s['wall'] / o['wall'] for s, o in zip(single, ours, strict=True)])}, "
          f"CPU {_med([s['cpu'] / o['cpu'] for s, o in zip(single, ours, strict=True)])}; sqlite3/apsw CPU (1 process) "
          f"{_med([t['cpu'] / s['cpu'] for t, s in zip(stdlib, single, strict=True)])}")
    print("targets: >= 1,000,000 events/s, <= 110 bytes/event")
    for name in ("op_statistic", "api_statistic"):
        st = runs["stats"]
        print(f"{name} over {tasks:,} rows: wall {_med([r[name + '_wall'] for r in st], '.3f')} s, "
              f"CPU {_med([r[name + '_cpu'] for r in st], '.3f')} s (target <= 1 s)")


if __name__ == "__main__":
    main()
