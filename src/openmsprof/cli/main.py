"""``openmsprof`` entry point: a thin argparse dispatcher.

Each verb lives in its own module ``openmsprof.cli.cmd_<verb>`` exposing
``register(subparsers) -> None`` (adds its parser and sets ``func``) — the parser's ``func``
takes the parsed ``argparse.Namespace`` and returns the exit code.  A verb whose module is missing
or fails to import (an optional dependency) is simply not offered.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from openmsprof._version import __version__
from openmsprof.config.errors import ProfilingError

VERBS = ("collect", "import", "export", "show", "compare", "analyze", "demo", "peaks", "cluster")


def build_parser(verbs: tuple[str, ...] = VERBS) -> argparse.ArgumentParser:
    """The parser offering ``verbs`` (each verb's module is imported to register it)."""
    parser = argparse.ArgumentParser(
        prog="openmsprof",
        description="Profile AI inference and training; msprof-style collect/import/export/show.",
    )
    parser.add_argument("--version", action="version", version=f"openmsprof {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb in verbs:
        try:
            module = importlib.import_module(f"openmsprof.cli.cmd_{verb}")
        except ImportError:
            continue
        module.register(sub)
    return parser


def _chosen(argv: list[str]) -> tuple[str, ...]:
    """The verb named on the command line (its module alone is imported: a verb's start-up does
    not pay for the others' imports), or every verb (help, a typo, no verb)."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return (first,) if first in VERBS else VERBS


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(_chosen(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(message)s")
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except ProfilingError as exc:
        print(f"openmsprof: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("openmsprof: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # a refusal no check foresaw: one line naming what and where
        where = f": {exc.filename!r}" if exc.filename else ""
        print(f"openmsprof: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1
