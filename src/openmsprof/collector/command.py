"""Arguments and top-level flow of ``openmsprof collect`` (``cli/cmd_collect.py`` stays thin)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from openmsprof.collector import argv as collect_argv
from openmsprof.collector import collect_switches as options
from openmsprof.collector import local, program
from openmsprof.config import cli_flags
from openmsprof.config.errors import ProfilingError
from openmsprof.config.model import ProfileConfig
from openmsprof.flight.options import check, parse_spec
from openmsprof.machine import peaks_child
from openmsprof.machine.peaks import PEAKS_FILE

LAYOUTS = ("msprof", "svp")

DESCRIPTION = """Profile a program with no code change (seed 002 "one-step" profiling).
Locally the program runs with an acl.json (OPENMSPROF_ACL_JSON) and a process-level session
started at interpreter start-up; with --config board.ini it is uploaded to a board, run there
over SSH and its job directories are copied back into --output.

  openmsprof collect -m app.py --config board.ini --all
  openmsprof collect -m app.py --output out --interval 2 --all
  openmsprof collect -m app.py --output out --all --layout svp (seed 002's file names)
  openmsprof collect -m app.py --output out -- --epochs 3     (program arguments after --)
  openmsprof collect -m "app.py --epochs 3" --output out       (or inside one quoted -m)

Options may come before or after -m, in any order; an option collect does not know is an
error, never an argument to the program."""

def _add(parser: argparse.ArgumentParser, names: tuple[str, ...], **kwargs: Any) -> None:
    taken = parser._option_string_actions  # argparse has no public query for this
    if not any(n in taken for n in names):
        parser.add_argument(*names, **kwargs)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the collect options: the shared msprof profiling switches, then collect's own."""
    cli_flags.add_arguments(parser)
    _add(parser, ("--all",), dest="all", action="store_true",
         help="import and export timeline + summary of the collected jobs when the program ends")
    _add(parser, ("--layout",), dest="layout", choices=LAYOUTS, default="msprof",
         help="with --all: the export's file set, msprof (default) or svp (seed 002's SVP "
              "msprof.pyc names), as for 'openmsprof export --layout'")
    _add(parser, ("--config",), dest="board", metavar="BOARD_INI",
         help="run on a remote board: ini with [ssh_config] ip, username, pwd or key_file, port")
    _add(parser, ("--accept-new-host-key",), dest="accept_new_host_key", action="store_true",
         help="trust a board whose host key is not yet in known_hosts (and record it there)")
    _add(parser, ("--project",), dest="project", metavar="DIR",
         help="remote: upload this project folder; the -m program is a path inside it")
    _add(parser, ("--keep-remote",), dest="keep_remote", action="store_true",
         help="remote: keep the uploaded program and raw data on the board")
    _add(parser, ("--profile-config",), dest="profile_config", metavar="JSON", help=argparse.SUPPRESS)
    _add(parser, ("--quiet-jobs",), dest="quiet_jobs", action="store_true", help=argparse.SUPPRESS)
    _add(parser, ("--flight-recorder",), dest="flight_recorder", metavar="SPEC",
         help="arm the flight recorder instead of a continuous session, e.g. \"slow_step=3,hang_s=60\" "
              "(keep_s, slow_step, hang_s, on_exception, signal, then_capture, memory_mb, step_range); "
              "a job is written only when a trigger fires")
    _add(parser, ("-m", "--main"), dest="program", metavar="PROGRAM",
         help="the program: a .py runs with this Python, an executable as is, a bare name from PATH; "
              "its arguments follow -- or come inside one quoted value (-m \"app.py --epochs 3\")")


def profile_config(ns: argparse.Namespace) -> ProfileConfig:
    """The ProfileConfig the program runs with: the flags given > --profile-config (the remote
    side) > collect's defaults (:func:`options.build_config`: switch and acl_api on, interval 0,
    host cpu,mem usage, mstx markers)."""
    if getattr(ns, "profile_config", None):
        base = options.load_config_file(ns.profile_config)
    else:
        base = options.build_config()
    given = cli_flags.from_args(ns)
    cfg = cli_flags.merge(base, given)  # also re-checks what this machine cannot honour
    return cfg.replace(source="collect", output=None)


def output_arg(ns: argparse.Namespace) -> str | None:
    value = getattr(ns, "prof_output", None)
    return str(value) if value is not None else None


def run(ns: argparse.Namespace) -> int:
    """Run ``openmsprof collect``; returns the program's exit code."""
    name, args = program.split_program(collect_argv.program_words(ns.program, getattr(ns, collect_argv.REST, [])))
    config = profile_config(ns)
    if ns.board:
        from openmsprof.collector import remote

        result = remote.run_from_cli(ns.board, name, args, config, output_arg(ns),
                                     project=ns.project, accept_new=ns.accept_new_host_key,
                                     keep_remote=ns.keep_remote)
        rc, jobs = result.returncode, result.jobs
        for problem in result.report.problems:
            print(f"openmsprof: error: {problem}", file=sys.stderr)
        if result.report.partial:
            rc = rc or 1
    else:
        if getattr(ns, "flight_recorder", None) is not None and ns.board:
            print("openmsprof: --flight-recorder: not supported here with --config (remote boards)", file=sys.stderr)
        if ns.project:
            raise ProfilingError("--project is for remote runs (with --config board.ini)")
        argv = program.resolve(name, args)
        output = local.prepare_output(output_arg(ns))
        flight = getattr(ns, "flight_recorder", None)
        if flight is not None:
            opts, refused = parse_spec(flight)
            opts.output = str(output)
            refused = refused + check(opts)
            for line in refused:
                print(f"openmsprof: {line}", file=sys.stderr)
            flight = "" if refused else flight
        res = local.run(argv, config, output, flight=flight)
        rc, jobs = res.returncode, res.jobs
    return _finish(ns, rc, jobs, config)


#: how long the board side of a remote run waits for the background peak measurement
BOARD_PEAKS_WAIT_S = 180.0


def _wait_for_peaks(jobs: list[Any]) -> None:
    """On the board: the detached peak measurement a first session starts must end before the
    run does (it would outlive it, and the job would come back without host/peaks.json)."""
    pending = [j for j in jobs if not (Path(j) / "host" / PEAKS_FILE).exists()]
    if pending:
        print(f"openmsprof: waiting for the board's peak measurement (host/{PEAKS_FILE}; at most "
              f"{BOARD_PEAKS_WAIT_S:g} s)", file=sys.stderr)
    peaks_child.wait_for_measurement(BOARD_PEAKS_WAIT_S)  # at once when none runs
    late = [str(j) for j in pending if not (Path(j) / "host" / PEAKS_FILE).exists()]
    if late:
        print(f"openmsprof: the board's peaks were not measured in {BOARD_PEAKS_WAIT_S:g} s; "
              f"{len(late)} job(s) come back without host/{PEAKS_FILE}", file=sys.stderr)


def _finish(ns: argparse.Namespace, rc: int, jobs: list[Any], config: ProfileConfig) -> int:
    if getattr(ns, "quiet_jobs", False):  # the board side of a remote run: the host reports
        _wait_for_peaks(jobs)
        return rc
    if not jobs and getattr(ns, "flight_recorder", None) is not None:
        print("openmsprof: flight recorder: no trigger fired; nothing written", file=sys.stderr)
        return rc
    if not jobs:
        if config.switch:
            print("openmsprof: the program wrote no job (no Python process was profiled)", file=sys.stderr)
        return rc
    if not ns.all:
        if getattr(ns, "layout", "msprof") != "msprof":
            print("openmsprof: --layout applies to the export of --all; the jobs were not exported",
                  file=sys.stderr)
        for job in jobs:
            print(f"openmsprof: job {job}", file=sys.stderr)
        return rc
    from openmsprof.collector import postprocess  # import/export: not needed on a board

    try:
        postprocess.process_all(jobs, layout=getattr(ns, "layout", "msprof"))
    except ProfilingError as exc:
        print(f"openmsprof: error: {exc}", file=sys.stderr)
        return rc or 1
    return rc
