"""Benchmark of ``openmsprof cluster -m all`` over many ranks, beside msprof-analyze ``cluster``.

    python benchmarks/bench_cluster.py [--ranks 64] [--events 1000000] [--data DIR] [--rounds 2]
    python benchmarks/bench_cluster.py --sweep 1,8,16,64 --events 20000 [--corunner both] [--memory-limit 64MB]
    python benchmarks/bench_cluster.py --sweep 16,64 --events 1000000 --same-work [--inputs DIR]

Generates the ranks with ``gen_cluster.py`` (our torch formats, planted slow rank; kept in
``--data`` for reuse), then interleaves: ours cold (fresh output: every rank parsed into its
store), ours on the cached stores, msprof-analyze ``cluster -m all`` (text mode: it reads
step_trace_time.csv and the communication JSONs, not kernel_details.csv), and ours cold with
``-m step_trace -m communication`` (the same work as msprof-analyze's ``all``).  Each side is a
fresh process; wall time, CPU time (user + system of the whole tree: what a quiet machine
would need, divided by its cores) and the peak RSS of the whole process tree (sampled every
20 ms) are printed with the load average.  Then a cross-rank query on the cached stores (p99 all_reduce
wait per rank, from a new connection: the wait/transfer table is built by the query) and the
store format comparison (Parquet vs a DuckDB file, one rank).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from corunner import CoRunner, corunner_modes, summary

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


def tree_run(cmd: list[str], cwd: Path) -> tuple[float, float, float]:
    """(wall s, peak MiB RSS of the process and all its children, their CPU s: user + system)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    root = psutil.Process(p.pid)
    while p.poll() is None:
        try:
            procs = [root, *root.children(recursive=True)]
            peak = max(peak, sum(q.memory_info().rss for q in procs if q.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode() if p.stderr else ""
    if p.returncode != 0 or "[ERROR]" in err:
        print(f"  ! {cmd[0]} rc={p.returncode}: {err.strip()[-400:]}")
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, peak / 2**20, cpu


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def query_time(data: Path, out: Path) -> tuple[float, int]:
    from openmsprof.cluster import sqlviews, waits
    from openmsprof.cluster.analyse import OUTPUT, STORE

    t0 = time.perf_counter()
    con = sqlviews.connect(out / OUTPUT / STORE)
    waits.build_waits(con)
    df = con.execute("SELECT rank, quantile_cont(wait_ms, 0.99) AS p99 FROM waits "
                     "WHERE op_name LIKE 'hcom_allReduce%' GROUP BY rank ORDER BY rank").df()
    dt = time.perf_counter() - t0
    con.close()
    return dt, len(df)


def store_formats(rank_dir: Path, tmp: Path) -> None:
    import duckdb
    import pyarrow.parquet as pq

    from openmsprof.cluster.rank_pt import KERNEL_SCHEMA, stream_kernels

    kd = rank_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    t0 = time.perf_counter()
    w = pq.ParquetWriter(tmp / "k.parquet", KERNEL_SCHEMA, compression="zstd")
    n = stream_kernels(0, kd, w.write_table)
    w.close()
    t_pq = time.perf_counter() - t0
    t0 = time.perf_counter()
    con = duckdb.connect(str(tmp / "k.duckdb"))
    con.execute("CREATE TABLE kernels AS SELECT * FROM read_parquet(?)", [str(tmp / "k.parquet")])
    con.close()
    t_db = time.perf_counter() - t0 + t_pq  # CSV → Arrow → DuckDB file: the same parse plus the copy
    q = "SELECT op_type, sum(dur_us), quantile_cont(dur_us, 0.5) FROM {} GROUP BY op_type"
    con = duckdb.connect()
    t0 = time.perf_counter()
    con.execute(q.format(f"read_parquet('{tmp / 'k.parquet'}')")).fetchall()
    q_pq = time.perf_counter() - t0
    con.execute(f"ATTACH '{tmp / 'k.duckdb'}' AS r (READ_ONLY)")
    t0 = time.perf_counter()
    con.execute(q.format("r.kernels")).fetchall()
    q_db = time.perf_counter() - t0
    print(f"store, one rank of {n} kernels: Parquet write {t_pq:.2f} s, {(tmp / 'k.parquet').stat().st_size / 2**20:.1f} MiB, "
          f"query {q_pq * 1000:.0f} ms | DuckDB file {t_db:.2f} s, {(tmp / 'k.duckdb').stat().st_size / 2**20:.1f} MiB, "
          f"query {q_db * 1000:.0f} ms  ({load()})")


def sweep(sizes: list[int], events: int, conditions: list[bool], rounds: int, memory_limit: str | None,
          same_work: bool = False, inputs: Path | None = None) -> None:
    """Every size of the sweep, ours cold ``-m all`` (every rank parsed; ``same_work``: ``-m
    step_trace communication``, what msprof-analyze's text-mode ``all`` computes) and msprof-analyze's
    ``cluster -m all``, without and with the co-runner (interleaved): wall, process-tree CPU and
    RSS, and whether the run completed (the issue-26 question: no size may fail).  ``inputs``:
    ``{inputs}/in{n}`` made by gen_cluster.py are kept there and reused (1 M kernels a rank take minutes)."""
    work = Path(tempfile.mkdtemp(prefix="bench_cluster_sweep_"))
    extra = ["--memory-limit", memory_limit] if memory_limit else []
    modes = ["step_trace", "communication"] if same_work else ["all"]
    print(f"sweep: ranks {sizes} x {events} kernels, ours -m {' '.join(modes)}, memory limit "
          f"{memory_limit or 'default (machine)'}")
    try:
        for n in sizes:
            data = (inputs or work) / f"in{n}"
            if not (inputs and data.is_dir()):
                subprocess.run([sys.executable, str(HERE / "gen_cluster.py"), str(data), "--ranks", str(n),
                                "--events", str(events), "--segments", "10", "--slow-rank", str(n // 3)],
                               check=True, stdout=subprocess.DEVNULL)
            res: dict[tuple[bool, str], list[tuple[float, float, float, float]]] = {}
            fails = 0
            for r in range(rounds):
                for cond in (conditions if r % 2 == 0 else conditions[::-1]):
                    with CoRunner(cond):
                        for name, cmd in (("ours", [str(BIN / "openmsprof"), "cluster", "-d", str(data), "-o",
                                                    str(work / f"o{n}_{r}_{cond:d}"), "-m", *modes, *extra]),
                                          ("msprof-analyze", [str(BIN / "msprof-analyze"), "cluster", "-d", str(data),
                                                              "-o", str(work / f"m{n}_{r}_{cond:d}"), "-m", "all"])):
                            wall, rss, cpu = tree_run(cmd, work)
                            ok = name != "ours" or (work / f"o{n}_{r}_{cond:d}" / "cluster_analysis_output"
                                                    / "cluster_step_trace_time.csv").exists()
                            fails += not ok
                            res.setdefault((cond, name), []).append((wall, rss, cpu, os.getloadavg()[0]))
            for cond in conditions:
                o, m = res[(cond, "ours")], res[(cond, "msprof-analyze")]
                print(f"  {n:3d} ranks, co-runner {'on ' if cond else 'off'} (load {min(x[3] for x in o + m):.1f}-"
                      f"{max(x[3] for x in o + m):.1f}): ours {statistics.median(x[0] for x in o):.2f} s wall, "
                      f"{statistics.median(x[2] for x in o):.1f} s CPU, {max(x[1] for x in o):.0f} MiB; msprof-analyze "
                      f"{statistics.median(x[0] for x in m):.2f} s, {statistics.median(x[2] for x in m):.1f} s CPU; "
                      f"ours/theirs CPU {summary([a[2] / b[2] for a, b in zip(o, m, strict=True)])}, wall "
                      f"{summary([a[0] / b[0] for a, b in zip(o, m, strict=True)])}", flush=True)
            print(f"  {n:3d} ranks: {fails} failed run(s) of ours")
            if not inputs:
                shutil.rmtree(data, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", default="", help="comma-separated rank counts (e.g. 1,8,16,64): the size sweep")
    ap.add_argument("--corunner", choices=("off", "on", "both"), default="both", help="(the sweep)")
    ap.add_argument("--memory-limit", default=None, help="passed to ours (the sweep)")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--same-work", action="store_true",
                    help="(the sweep) ours -m step_trace communication: what msprof-analyze's text-mode all computes")
    ap.add_argument("--inputs", type=Path, default=None,
                    help="(the sweep) keep and reuse the generated inputs as DIR/in{ranks}")
    a = ap.parse_args()
    if a.sweep:
        sweep([int(x) for x in a.sweep.split(",")], a.events, corunner_modes(a.corunner), a.rounds, a.memory_limit,
              a.same_work, a.inputs)
        return
    data = a.data or Path(tempfile.gettempdir()) / f"bench_cluster_{a.ranks}x{a.events}"
    marker = data / ".complete"
    if not marker.exists():
        shutil.rmtree(data, ignore_errors=True)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(HERE / "gen_cluster.py"), str(data), "--ranks", str(a.ranks),
                        "--events", str(a.events), "--segments", "50", "--slow-rank", str(a.ranks // 3)], check=True)
        marker.write_text("ok")
        print(f"generated {a.ranks} ranks x {a.events} kernels in {time.perf_counter() - t0:.0f} s")
    size = sum(p.stat().st_size for p in data.rglob("*") if p.is_file()) / 2**30
    print(f"input: {a.ranks} ranks x {a.events} kernels, {size:.1f} GiB")
    work = Path(tempfile.mkdtemp(prefix="bench_cluster_out_"))
    ours = [str(BIN / "openmsprof"), "cluster", "-d", str(data), "-o"]
    res: dict[str, list[tuple[float, float, float]]] = {}
    try:
        for r in range(a.rounds):
            cold = work / f"cold{r}"
            for name, cmd in (("ours cold -m all", [*ours, str(cold), "-m", "all"]),
                              ("ours cached -m all", [*ours, str(cold), "-m", "all"]),
                              ("msprof-analyze cluster -m all", [str(BIN / "msprof-analyze"), "cluster", "-d", str(data),
                                                                 "-o", str(work / f"ma{r}"), "-m", "all"]),
                              ("ours cold -m step_trace,communication",
                               [*ours, str(work / f"sc{r}"), "-m", "step_trace", "-m", "communication"])):
                wall, rss, cpu = tree_run(cmd, work)
                res.setdefault(name, []).append((wall, rss, cpu))
                print(f"  round {r}: {name}: {wall:.2f} s wall, {cpu:.1f} s CPU, peak tree RSS {rss:.0f} MiB "
                      f"({load()})", flush=True)
        for name, xs in res.items():
            walls = [x[0] for x in xs]
            print(f"{name}: median {statistics.median(walls):.2f} s (min {min(walls):.2f}, max {max(walls):.2f}), "
                  f"peak RSS max {max(x[1] for x in xs):.0f} MiB, CPU median {statistics.median(x[2] for x in xs):.1f} s")
        theirs = statistics.median(x[0] for x in res["msprof-analyze cluster -m all"])
        for name in ("ours cold -m all", "ours cached -m all", "ours cold -m step_trace,communication"):
            print(f"msprof-analyze / {name} = {theirs / statistics.median(x[0] for x in res[name]):.2f}x")
        qs = [query_time(data, work / "cold0") for _ in range(3)]
        print(f"cross-rank query (p99 all_reduce wait per rank, {qs[0][1]} ranks, fresh connection): "
              f"median {statistics.median(q[0] for q in qs) * 1000:.0f} ms ({load()})")
        store_formats(next(data.glob("*_ascend_pt")), work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
