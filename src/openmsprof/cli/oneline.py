"""argparse parsers whose every error is one line on stderr (exit status 2): ``openmsprof
VERB: error: argument -dir/--collection-dir: expected one argument`` — no usage block, and an
unknown argument is named by the verb that got it."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn

__all__ = ["OneLineParser", "add_parser"]


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser that reports errors (and arguments it does not know) in one line."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        ns, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized argument {extras[0]!r}" + (f" (and {len(extras) - 1} more)" if len(extras) > 1 else ""))
        return ns, extras

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def add_parser(subparsers: Any, name: str, parser_class: type[argparse.ArgumentParser] = OneLineParser,
               **kwargs: Any) -> Any:
    """``subparsers.add_parser`` with ``parser_class`` (argparse has no public hook for it; the
    verb's own sub-commands inherit the class)."""
    previous = subparsers._parser_class
    subparsers._parser_class = parser_class
    try:
        return subparsers.add_parser(name, **kwargs)
    finally:
        subparsers._parser_class = previous
