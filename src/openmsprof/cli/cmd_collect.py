"""``openmsprof collect``: profile a program with no code change, here or on a board over SSH.

The logic lives in :mod:`openmsprof.collector`; this module only wires the parser.
"""

from __future__ import annotations

import argparse
from typing import Any

from openmsprof.collector import argv, command


def register(subparsers: Any) -> None:
    parser = argv.add_parser(
        subparsers, "collect", help="profile a program (locally or on a board over SSH) with no code change",
        description=command.DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    command.add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return command.run(args)
