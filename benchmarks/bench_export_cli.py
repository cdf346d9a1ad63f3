"""Export as users type it (issues 14 and 10): ``openmsprof export summary|timeline -dir JOB`` in a
fresh process, with the default tool-facing layout, on a fresh copy of a job each run.

    .venv/bin/python benchmarks/bench_export_cli.py [--rounds 3] [--records 1750000] [--ops 1000000]

Jobs (built once, outside the timer):

* ``acl 1.75M``: a raw job of 1,750,000 records synthesized like ``bench_import.py``'s (350 k tasks,
  262 k markers, API spans, counters) — issue 14's job;
* ``tf 1M``: a real TensorFlow trace of 1,000,000 ops (2,000 calls of a 500-op ``tf.function``)
  profiled by the TF2 facade, as ``bench_tf.py`` makes it — issue 10's job (skipped without
  TensorFlow).

Cases, interleaved round by round (the order rotates each round), each on its own fresh copy:

* ``summary cold``: the raw job, so the command imports first (what a user's first command does);
* ``summary imported`` / ``timeline imported``: a copy of the job after ``openmsprof import``;
* ``summary+timeline``: both verbs one after the other on an imported copy (the second reuses the
  tool-facing db the first made).

Printed per case: wall median (min–max), CPU (the process and its forked children) median, peak
RSS, and the load average over the case's runs.  ``--base DIR`` (a checkout of another commit, e.g.
``git worktree add /tmp/base <commit>``) adds that tree's run of every case, interleaved with ours.

Size sweep (issue 26, "export at every size")::

    .venv/bin/python benchmarks/bench_export_cli.py --sizes 1,2,10 [--rounds 2] [--corunner both] [--no-timeline] [--analyze]

For each size (million records, a job synthesized like ``bench_import.py``'s, once, outside the
timers), each round: a fresh copy of the raw job, ``openmsprof import -dir`` in its own process (as
users do), then ``openmsprof export summary -dir`` and ``openmsprof export timeline -dir`` each in a
fresh process, on that imported copy.  Each child reports its own process-tree CPU (its own plus
its waited-for children's, ``RUSAGE_CHILDREN``: the forked export workers) and peak RSS (the
largest ``ru_maxrss`` of it and its children).  Printed per size and co-runner condition: export
summary CPU ÷ import CPU (goal ≤ 1.5), export timeline peak RSS (goal ≤ 150 MB at 10 M, flat in
size), each median (min–max) over rounds, with the load average.  Conditions interleave round by
round.  ``--analyze`` adds ``openmsprof analyze -dir`` (all rules) after the exports: its CPU and
peak RSS per size.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "benchmarks")]

VERB = ("import resource, sys, time; t0 = time.perf_counter(); c0 = time.process_time(); "
        "from openmsprof.cli.main import main\n"
        "rc = main(sys.argv[1:])\n"
        "k = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print('RESULT', rc, time.perf_counter() - t0, time.process_time() - c0 + k.ru_utime + k.ru_stime, "
        "max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, k.ru_maxrss) / 1024)")
RUN = ("import resource, sys, time; t0 = time.perf_counter(); c0 = time.process_time(); "
       "from openmsprof.cli.main import main; rc = 0\n"
       "for verb in sys.argv[2:]:\n"
       "    rc = rc or main(['export', verb, '-dir', sys.argv[1]])\n"
       "k = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
       "print('RESULT', rc, time.perf_counter() - t0, time.process_time() - c0 + k.ru_utime + k.ru_stime, "
       "max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, k.ru_maxrss) / 1024)")
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TF_CPP_MIN_LOG_LEVEL": "2"}


def _env(src: Path) -> dict[str, str]:
    return {**ENV, "PYTHONPATH": str(src)}


def _job_in(parent: Path) -> Path:
    (job,) = [p for p in parent.iterdir() if p.name.startswith("PROF_")]
    return job


def make_acl(tmp: Path, records: int) -> Path:
    import bench_import

    return bench_import.synthesize(tmp / "acl_raw", records)


def make_tf(tmp: Path, ops: int) -> Path | None:
    import importlib.util

    import bench_tf

    if importlib.util.find_spec("tensorflow") is None:  # not imported here: RSS survives exec
        print("tf 1M: skipped (TensorFlow is not installed)")
        return None
    out = tmp / "tf_raw"
    out.mkdir()
    r = subprocess.run([sys.executable, "-c", bench_tf.BIG, str(ops), str(out)], capture_output=True,
                       text=True, env=ENV, timeout=1200)
    if r.returncode != 0:
        raise SystemExit(f"the TF trace failed: {r.stderr[-2000:]}")
    return _job_in(out)


def imported(tmp: Path, raw: Path, tag: str) -> Path:
    job = tmp / f"{tag}_imported" / raw.name
    shutil.copytree(raw, job)
    subprocess.run([sys.executable, "-m", "openmsprof", "import", "-dir", str(job)], check=True,
                   capture_output=True, env=ENV)
    return job


def run_case(source: Path, verbs: list[str], work: Path, src: Path) -> tuple[float, float, float]:
    job = work / source.name
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, job)
    r = subprocess.run([sys.executable, "-c", RUN, str(job), *verbs], capture_output=True, text=True,
                       env=_env(src), timeout=1200)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")]
    if r.returncode != 0 or not line or line[-1].split()[1] != "0":
        raise SystemExit(f"export {verbs} failed on {job}:\n{r.stdout[-1000:]}\n{r.stderr[-2000:]}")
    shutil.rmtree(work, ignore_errors=True)
    _, _, wall, cpu, rss = line[-1].split()
    return float(wall), float(cpu), float(rss)


def run_verb(argv: list[str], src: Path) -> tuple[float, float, float]:
    """``openmsprof ARGV`` (the tree at ``src``) in a fresh process: its wall, process-tree CPU
    and peak RSS (MB)."""
    r = subprocess.run([sys.executable, "-c", VERB, *argv], capture_output=True, text=True, env=_env(src),
                       timeout=3600)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")]
    if r.returncode != 0 or not line or line[-1].split()[1] != "0":
        raise SystemExit(f"openmsprof {argv} failed:\n{r.stdout[-1000:]}\n{r.stderr[-2000:]}")
    _, _, wall, cpu, rss = line[-1].split()
    return float(wall), float(cpu), float(rss)


def sweep(sizes: list[float], rounds: int, corunner: str, sides: dict[str, Path], timeline: bool = True,
          analyze: bool = False) -> None:
    """The size sweep (module docstring): summary CPU ÷ import CPU and timeline peak RSS
    (``timeline`` False: summary only; ``analyze``: ``openmsprof analyze`` too, its CPU and peak RSS)."""
    import signal

    from corunner import CoRunner, corunner_modes, loadavg, summary

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a killed run stops its co-runner too
    conds = [(side, on) for on in corunner_modes(corunner) for side in sides]
    names = ("import", "summary", "timeline") if timeline else ("import", "summary")
    names += ("analyze",) if analyze else ()
    with tempfile.TemporaryDirectory(prefix="bench_export_sizes_") as tmp_s:
        tmp = Path(tmp_s)
        # bytecode cached as in an install (PYTHONDONTWRITEBYTECODE would make every process compile
        # the modules it imports, ~0.3 s of CPU on each side of the ratio): compiled once, up front
        pycache = tmp / "pycache"
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        ENV["PYTHONPYCACHEPREFIX"] = str(pycache)
        warm = make_acl(tmp / "warm", 10_000)  # and the dependencies' bytecode: one small run a side
        for src in sides.values():
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], env=_env(src), check=True,
                           capture_output=True)
            for argv in (["import"], ["export", "summary"], ["export", "timeline"]):
                run_verb([*argv, "-dir", str(warm)], src)
        shutil.rmtree(warm.parent)
        res: dict[tuple[float, str, bool], list[dict[str, float]]] = {
            (m, side, on): [] for m in sizes for side, on in conds}
        for m in sizes:
            raw = make_acl(tmp / f"{m:g}M", int(m * 1e6))
            print(f"{m:g} M records synthesized", flush=True)
            for r in range(rounds):
                for side, on in (conds if r % 2 == 0 else conds[::-1]):
                    job = tmp / "work" / raw.name
                    verbs = [(v, [v, "-dir", str(job)] if v in ("import", "analyze") else ["export", v, "-dir", str(job)])
                             for v in names]
                    shutil.rmtree(tmp / "work", ignore_errors=True)
                    shutil.copytree(raw, job)
                    row: dict[str, float] = {}
                    with CoRunner(enabled=on):
                        l0 = loadavg()
                        for verb, argv in verbs:
                            wall, cpu, rss = run_verb(argv, sides[side])
                            row |= {f"{verb}_wall": wall, f"{verb}_cpu": cpu, f"{verb}_rss": rss}
                        row["load0"], row["load1"] = l0, loadavg()
                    shutil.rmtree(tmp / "work", ignore_errors=True)
                    res[(m, side, on)].append(row)
                    print(f"  {m:g} M round {r + 1} [{side}] co-runner {'on' if on else 'off'}: "
                          + ", ".join(f"{v} {row[v + '_cpu']:.1f} s CPU / {row[v + '_wall']:.1f} s wall / "
                                      f"{row[v + '_rss']:.0f} MB" for v in names)
                          + f"; load {row['load0']:.1f}-{row['load1']:.1f}", flush=True)
    print(f"\nexport at every size, {rounds} round(s), median (min-max); goals: summary/import CPU <= 1.5, "
          "timeline peak RSS <= 150 MB at 10 M")
    for (m, side, on), rows in res.items():
        def med(key: str, rows: list[dict[str, float]] = rows) -> str:
            return summary([x[key] for x in rows], ".1f")
        loads = [x[k] for x in rows for k in ("load0", "load1")]
        print(f"  {m:>4g} M [{side}] co-runner {'on ' if on else 'off'}: summary/import CPU "
              f"{summary([x['summary_cpu'] / x['import_cpu'] for x in rows])}, wall "
              f"{summary([x['summary_wall'] / x['import_wall'] for x in rows])}; import CPU {med('import_cpu')} s, "
              f"summary CPU {med('summary_cpu')} s"
              + (f", timeline CPU {med('timeline_cpu')} s; timeline peak RSS {med('timeline_rss')} MB"
                 if timeline else "")
              + f" (import {med('import_rss')}, summary {med('summary_rss')})"
              + (f"; analyze CPU {med('analyze_cpu')} s, peak RSS {med('analyze_rss')} MB" if analyze else "")
              + f"; load {min(loads):.1f}-{max(loads):.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=1_750_000)
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--only", choices=["acl", "tf"], help="one job only")
    ap.add_argument("--base", type=Path, help="a checkout of another commit: its runs interleaved with ours")
    ap.add_argument("--sizes", help="size sweep instead: comma-separated million records, e.g. 1,2,10")
    ap.add_argument("--corunner", choices=["off", "on", "both"], default="both",
                    help="size sweep: without / with one busy process per core (default both)")
    ap.add_argument("--no-timeline", action="store_true", help="size sweep: import and export summary only")
    ap.add_argument("--analyze", action="store_true", help="size sweep: openmsprof analyze as well (CPU, peak RSS)")
    a = ap.parse_args()
    sides = {"ours": ROOT / "src", **({"base": a.base.resolve() / "src"} if a.base else {})}
    if a.sizes:
        sweep([float(x) for x in a.sizes.split(",")], a.rounds, a.corunner, sides, timeline=not a.no_timeline,
              analyze=a.analyze)
        return
    with tempfile.TemporaryDirectory(prefix="bench_export_cli_") as tmp_s:
        tmp = Path(tmp_s)
        jobs: dict[str, Path] = {}
        if a.only != "tf":
            jobs[f"acl {a.records / 1e6:g}M"] = make_acl(tmp, a.records)
        if a.only != "acl":
            tf_job = make_tf(tmp, a.ops)
            if tf_job is not None:
                jobs[f"tf {a.ops / 1e6:g}M"] = tf_job
        cases: list[tuple[str, Path, list[str]]] = []
        for tag, raw in jobs.items():
            done = imported(tmp, raw, tag.split()[0])
            cases += [(f"{tag} summary cold", raw, ["summary"]),
                      (f"{tag} summary imported", done, ["summary"]),
                      (f"{tag} timeline imported", done, ["timeline"]),
                      (f"{tag} summary+timeline", done, ["summary", "timeline"])]
        runs = [(f"{name} [{side}]", source, verbs, src) for name, source, verbs in cases
                for side, src in sides.items()]
        res: dict[str, list[tuple[float, float, float, float]]] = {c[0]: [] for c in runs}
        for r in range(a.rounds):
            k = r % len(runs)
            for name, source, verbs, src in runs[k:] + runs[:k]:
                wall, cpu, rss = run_case(source, verbs, tmp / "work", src)
                res[name].append((wall, cpu, rss, os.getloadavg()[0]))
                print(f"  round {r + 1} {name}: {wall:.2f} s wall, {cpu:.2f} s CPU, "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)
    print(f"\nexport as users type it, default tool-facing layout, fresh process and copy; {a.rounds} "
          "interleaved rounds (goals: acl summary <= 2 s, tf export <= 10 s)")
    for name, v in res.items():
        w, c, m, ld = ([x[i] for x in v] for i in range(4))
        print(f"  {name:<35} wall {statistics.median(w):6.2f} s ({min(w):.2f}-{max(w):.2f})  "
              f"CPU {statistics.median(c):6.2f} s  peak RSS {max(m):5.0f} MB  load {min(ld):.1f}-{max(ld):.1f}")


if __name__ == "__main__":
    main()
