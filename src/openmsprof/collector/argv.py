"""The collect command line as seed 002 writes it: ``collect -m <main> --config <config> --all``.

``-m/--main`` takes one value, the program; collect's own options may come before or after it,
in any order.  The program's arguments follow ``--`` (``collect -m app.py --output out --
--epochs 3``) or come inside one quoted ``-m "app.py --epochs 3"``; plain words (not starting
with ``-``) left over are program arguments too, in order.  An option collect does not know is a
one-line error naming it — never a silent argument to the program.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from openmsprof.cli import oneline
from openmsprof.cli.oneline import OneLineParser
from openmsprof.config.errors import PathError

__all__ = ["CollectParser", "program_words"]

#: namespace attribute holding the program's arguments that are not inside ``-m``
REST = "program_rest"

HINT = "the program's own arguments go after -- (collect -m app.py --output out -- --epochs 3)"


class CollectParser(OneLineParser):
    """An ArgumentParser that splits at the first ``--``, keeps leftover plain words as program
    arguments and turns every other problem into one line on stderr (exit status 2)."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        words = list(sys.argv[1:] if args is None else args)
        tail: list[str] = []
        if "--" in words:
            cut = words.index("--")
            words, tail = words[:cut], words[cut + 1:]
        ns, extras = argparse.ArgumentParser.parse_known_args(self, words, namespace)
        for word in extras:
            if word.startswith("-") and word != "-":
                name = word.split("=", 1)[0]
                self.error(f"unknown option {name!r}; {HINT}")
        setattr(ns, REST, [*extras, *tail])
        return ns, []


def program_words(main: str | None, rest: list[str]) -> list[str]:
    """``-m`` value (split like a shell does when it holds spaces) + the remaining arguments."""
    if not main:
        return []
    try:
        head = shlex.split(main) if any(c.isspace() for c in main) else [main]
    except ValueError as exc:
        raise PathError(f"-m {main!r} cannot be split into program and arguments: {exc}") from None
    return [*head, *rest]


def add_parser(subparsers: Any, name: str, **kwargs: Any) -> CollectParser:
    """``subparsers.add_parser`` with :class:`CollectParser`."""
    parser: CollectParser = oneline.add_parser(subparsers, name, CollectParser, **kwargs)
    return parser
