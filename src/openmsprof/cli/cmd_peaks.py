"""``openmsprof peaks``: measure this machine's memory bandwidth and GEMM/special-function rates
(best and median of ≥ 5 runs with the CV, ≤ 5 s), cache them, and print or write them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table

from openmsprof.config.paths import resolve_output
from openmsprof.fileio import fs
from openmsprof.machine import peaks


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "peaks", help="measure this machine's peaks (bandwidth, GEMM) for the roofline",
        description="Measure STREAM copy/add/triad (arrays ≥ 8x the last-level cache), GEMM "
                    "n=2048 per dtype (numpy; torch with --torch), special functions and "
                    "ONNX Runtime's conv and element-wise kernels when installed; best "
                    "and median of 5 runs with the coefficient of variation.  The result is "
                    "cached once per machine and stored in each job at collection.")
    p.add_argument("--cached", action="store_true",
                   help="print the cached figures (measure only when there are none)")
    p.add_argument("--check", metavar="FILE", help="validate a peaks override file and print it")
    p.add_argument("--torch", action="store_true",
                   help="also time torch's GEMM (imports torch: about a second more)")
    p.add_argument("--dtypes", default=",".join(peaks.DTYPES), metavar="D[,D]",
                   help="GEMM dtypes (default float32; also float64, bfloat16)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--output", metavar="FILE",
                   help="also write the JSON to FILE (an override file for analyze --peaks)")
    p.set_defaults(func=run)


def _table(doc: dict[str, Any]) -> Table:
    t = Table(title=f"peaks of {doc.get('host', '?')} ({doc.get('source', '')}, "
                    f"{doc.get('seconds', '?')} s, load {doc.get('load_avg', '?')})")
    for col in ("Kernel", "Best", "Median", "CV", "Unit", "Runs"):
        t.add_column(col, justify="left" if col in ("Kernel", "Unit") else "right")
    groups = [(g, doc.get(g)) for g in ("stream", "gemm", "special")] + [
        (r, sec.get(k)) for r, sec in (doc.get("runtime") or {}).items()
        if isinstance(sec, dict) for k in ("flops", "elements")]
    for group, items in groups:
        for name, v in (items if isinstance(items, dict) else {}).items():
            if not isinstance(v, dict):
                if name != "array_bytes":
                    t.add_row(f"{group} {name}", str(v), "", "", "", "")
                continue
            cv = v.get("cv")
            flag = " (loaded)" if isinstance(cv, (int, float)) and cv > peaks.CV_LOADED else ""
            t.add_row(f"{group} {name}", f"{v.get('best')}", f"{v.get('median', '')}",
                      f"{cv if cv is not None else ''}{flag}", str(v.get("unit", "")),
                      str(v.get("runs", "")))
    return t


def run(args: argparse.Namespace) -> int:
    out = resolve_output(args.output, "--output") if args.output else None
    if args.check:
        doc = peaks.load_peaks(args.check)
    elif args.cached:
        doc = peaks.cached(measure_missing=True) or {}
    else:
        doc = peaks.measure(import_torch=args.torch, import_ort=True,
                            dtypes=tuple(d.strip() for d in args.dtypes.split(",") if d.strip()))
        path = peaks.cache_path()
        fs.make_dir(path.parent)
        fs.write_file_atomic(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    data = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
    if out is not None:
        fs.write_file_atomic(Path(out), data + b"\n")
    if args.format == "json":
        sys.stdout.write(data.decode() + "\n")
    else:
        Console().print(_table(doc))
        if doc.get("loaded"):
            print(f"warning: CV above {peaks.CV_LOADED:.0%} (a loaded machine?): "
                  f"{', '.join(doc['loaded'])}")
        if doc.get("skipped"):
            print(f"skipped to stay within {peaks.BUDGET_S} s: {', '.join(doc['skipped'])}")
    return 0
