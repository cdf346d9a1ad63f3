"""``openmsprof analyze -dir JOB [--rule NAME,...] [--format text|json] [--html FILE]``: the
advisor — rules over one job, each finding with evidence and links to the events behind it.
A folder of several jobs (a trace handler's windows) is analysed job by job, each named."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from openmsprof.analysis import advisor, flight_explain
from openmsprof.analysis.report_html import write_html
from openmsprof.cli.argtypes import input_dir
from openmsprof.config.errors import ConfigError, PathError
from openmsprof.config.paths import resolve_output
from openmsprof.export.jobdb import find_jobs
from openmsprof.fileio import fs


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "analyze", help="advise: rules with evidence-linked findings (and an HTML report)",
        description="Run advisor rules over one job: " + ", ".join(advisor.RULES) + ".")
    p.add_argument("-dir", "--collection-dir", dest="dir", required=True, metavar="JOB", type=input_dir,
                   help="the job directory (imported first when needed)")
    p.add_argument("--rule", "--rules", dest="rules", action="append", default=[],
                   metavar="NAME[,NAME]", help="rules to run (default all: "
                   + ",".join(advisor.RULES) + ")")
    p.add_argument("--format", choices=advisor.FORMATS, default="text",
                   help="findings on stdout as text (default) or JSON")
    p.add_argument("--output", metavar="FILE", help="write the text/JSON to FILE, not stdout")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report")
    p.add_argument("--peaks", metavar="FILE",
                   help="the target machine's peaks (JSON, as `openmsprof peaks --output`) "
                        "instead of those stored in the job")
    p.add_argument("--base", metavar="JOB",
                   help="a base run: the HTML report adds the compare waterfall base → this job")
    p.set_defaults(func=run)


def _target(value: str, flag: str) -> Path:
    path = resolve_output(value, flag)
    if not path.parent.is_dir():
        raise PathError(f"{flag} {value!r}: directory {str(path.parent)!r} does not exist")
    if path.is_dir():
        raise PathError(f"{flag} {value!r} is a directory")
    return path


def _several(jobs: list[Path], docs: list[dict[str, Any]], flights: list[Any], fmt: str) -> str:
    """Several jobs: JSON ``{"jobs": [{"dir": ..., <report>}, ...]}``, or one text block per
    job under a ``== job i of n: DIR`` line."""
    if fmt == "json":
        return advisor.render_json({"jobs": [{"dir": str(j), **d} for j, d in zip(jobs, docs, strict=True)]})
    parts = [f"== job {i} of {len(jobs)}: {j}\n" + (flight_explain.render_text(f) if f is not None else "")
             + advisor.render_text(d) for i, (j, d, f) in enumerate(zip(jobs, docs, flights, strict=True), 1)]
    return "\n".join(parts)


def run(args: argparse.Namespace) -> int:
    rules = advisor.select_rules(args.rules or None)
    if not args.dir:
        raise ConfigError("analyze needs -dir JOB")
    out = _target(args.output, "--output") if args.output else None
    html = _target(args.html, "--html") if args.html else None
    base = Path(args.base) if args.base else None
    if base is not None and not base.exists():
        raise PathError(f"--base {args.base!r} does not exist")
    jobs = find_jobs(Path(args.dir))
    if len(jobs) > 1 and (html is not None or base is not None):
        raise ConfigError(f"-dir {args.dir!r} holds {len(jobs)} jobs ({', '.join(j.name for j in jobs[:4])}"
                          f"{', ...' if len(jobs) > 4 else ''}); --html/--base take one job directory")
    docs, flights = [], []
    for job in jobs:
        d = advisor.report(job, rules, args.peaks)
        flight = flight_explain.explain(Path(args.dir) if len(jobs) == 1 else job)
        if flight is not None:
            d["flight"] = flight
        docs.append(d)
        flights.append(flight)
    if len(docs) == 1:
        doc, flight = docs[0], flights[0]
        text = (advisor.render_json if args.format == "json" else advisor.render_text)(doc)
        if flight is not None and args.format != "json":
            text = flight_explain.render_text(flight) + text
    else:  # a trace handler's folder of windows: each analysed, each said by name
        text = _several(jobs, docs, flights, args.format)
        doc = {"findings": [f for d in docs for f in d["findings"]]}
    if out is None:
        sys.stdout.write(text)
    else:
        fs.write_file_atomic(out, text)
        print(f"openmsprof analyze: {len(doc['findings'])} finding(s) written to {out}")
    if html is not None:
        write_html(Path(args.dir), html, rules, peaks=args.peaks, base=base)
        print(f"openmsprof analyze: HTML report written to {html}",
              file=sys.stderr if out is None and args.format == "json" else sys.stdout)
    return 0
