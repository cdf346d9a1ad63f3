"""``openmsprof cluster -d DIR [-m MODE ...]``: msprof-analyze's cluster views over many ranks,
plus the wait/transfer split of every collective and the slow rank with its cause."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from openmsprof.config.errors import ConfigError
from openmsprof.config.paths import resolve_output
from openmsprof.fileio import fs


def _prof_jobs(root: Path) -> list[Path]:
    """Every PROF_ job and torch rank dir under ``root`` (three levels)."""
    return [p for pat in ("PROF_*", "*/PROF_*", "*/*/PROF_*", "*_ascend_pt", "*/*_ascend_pt")
            for p in root.glob(pat) if p.is_dir()]


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "cluster", help="analyse a multi-rank job (step trace, communication, compute ops, slow rank)",
        description="Analyse every rank under DIR (torch *_ascend_pt dirs, PROF_* jobs). Each rank is "
                    "parsed once into a columnar store (reused while its files are unchanged); results go "
                    "to OUTPUT/cluster_analysis_output/ with msprof-analyze's file names and columns.")
    p.add_argument("-d", "--profiling_path", "--dir", dest="dir", required=True, metavar="DIR")
    p.add_argument("-m", "--mode", dest="modes", action="extend", nargs="+", default=[], metavar="MODE",
                   help="step_trace, communication, compute_op, slow_rank or all (default all); "
                        "several after one -m, repeated, or comma-separated")
    p.add_argument("-o", "--output", "--output_path", dest="output", metavar="DIR",
                   help="where cluster_analysis_output/ goes (default DIR)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS", help="a Dask scheduler (tcp://host:8786)")
    where.add_argument("--scheduler-file", metavar="FILE", help="a Dask scheduler file")
    p.add_argument("--files-on-workers", action="store_true",
                   help="rank files are not shared: run each rank on a Dask worker of the host that holds it "
                        "(the host in its dir name {host}_{pid}_{timestamp}_ascend_pt, or PROF_ info.json)")
    p.add_argument("--workers", type=int, metavar="N", help="local processes (default: by CPUs and free memory)")
    p.add_argument("--memory-limit", metavar="SIZE",
                   help="DuckDB's memory cap for the cross-rank views, e.g. 64MB or 4GB (default: "
                        "$OPENMSPROF_CLUSTER_MEMORY_LIMIT, else a quarter of the available memory); beyond it "
                        "operators spill to OUTPUT/cluster_analysis_output/.openmsprof_spill/")
    p.add_argument("--rank-timeout", metavar="SECONDS",
                   help="how long a local worker may take over one rank before it is killed (the rank is "
                        "retried twice, then reported), or off (default: $OPENMSPROF_CLUSTER_RANK_TIMEOUT, else "
                        "300 s plus 1 s per MB of the rank's files)")
    note = p.add_mutually_exclusive_group()
    note.add_argument("--annotate", dest="annotate", action="store_const", const="on",
                      help="write the measured wait/transfer split of every collective into each torch rank's "
                           "communication.json and analysis.db (where msprof-analyze reads them); the exported "
                           "values are kept and --unannotate restores them")
    note.add_argument("--unannotate", dest="annotate", action="store_const", const="off",
                      help="restore the communication times an earlier --annotate replaced")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:  # here, not at the top: the package pulls in pandas/DuckDB/pyarrow (~120 MB, ~1 s) that
        # every other verb would pay for when main() builds the parsers (issue 26)
        from openmsprof.cluster.analyse import run_cluster
        from openmsprof.cluster.discover import find_flight_jobs
    except ImportError as exc:
        raise ConfigError(f"openmsprof cluster needs {exc.name}: pip install 'openmsprof[cluster]'") from None

    root = resolve_output(args.dir, "cluster input")
    output = resolve_output(args.output, "cluster output") if args.output else None
    modes = [m for spec in args.modes for m in spec.split(",") if m] or ["all"]
    if find_flight_jobs(Path(root)):  # the flight readers (numpy, the importer) only when there are dumps
        from openmsprof.cluster import flight_ranks

        diag = flight_ranks.diagnose(Path(root))
        if diag is not None:
            for line in flight_ranks.render(diag):
                print(line)
            target = fs.make_dir(Path(output or root) / "cluster_analysis_output")
            fs.write_file_atomic(target / "flight_diagnosis.json", orjson.dumps(diag, option=orjson.OPT_INDENT_2))
            print(target / "flight_diagnosis.json")
            if all((p / "host" / "flight.json").is_file() for p in _prof_jobs(Path(root))):
                return 0  # flight dumps only: their history has no tasks or communication for the views
    res = run_cluster(Path(root), modes, output and Path(output), scheduler=args.scheduler,
                      scheduler_file=args.scheduler_file, workers=args.workers, shared=not args.files_on_workers,
                      memory_limit=args.memory_limit, annotate=args.annotate,
                      rank_timeout=args.rank_timeout)
    for line in res.problems:
        print(f"openmsprof: warning: {line}", file=sys.stderr)
    for line in res.notes:
        print(line)
    cached = sum(1 for p in res.partials if p.get("cached"))
    phases = ", ".join(f"{m} {res.seconds[m]:.2f}" for m in ("step_trace", "communication", "compute_op", "slow_rank")
                       if res.seconds.get(m, 0) >= 0.005)
    print(f"{len(res.partials)} ranks ({cached} from cached stores) in {res.seconds['parse']:.1f} s; "
          f"analysis {res.seconds['analyse']:.2f} s ({phases})")
    slow = (res.slow_rank or {}).get("slow_rank")
    if slow:
        cause = slow["cause"]
        why = f"op {cause['op']} (+{cause['excess_ms']:.3f} ms)" if cause.get("op") else cause["phase"]
        print(f"slow rank: {slow['rank']} made the others wait {slow['imposed_wait_ms']:.3f} ms; cause: {why}")
    for f in res.files:
        print(f)
    return 0 if not any(p.get("failed") for p in res.partials) else 1
