"""``-m PROGRAM ARGS...`` → the argv to run: a ``.py`` file runs with the current interpreter,
an executable file runs as is, a bare name is looked up on PATH."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from openmsprof.config.errors import PathError


def split_program(words: list[str] | None) -> tuple[str, list[str]]:
    """The program and its arguments from the words after ``-m``."""
    if not words:
        raise PathError("no program given; use: openmsprof collect -m PROGRAM [options] [-- ARGS ...]")
    return words[0], list(words[1:])


def is_python(program: str) -> bool:
    return program.endswith(".py")


def resolve(program: str, args: list[str], python: str | None = None) -> list[str]:
    """The argv for ``program``; a one-line :class:`PathError` when it cannot be run."""
    path = Path(program)
    try:
        exists, is_file = path.exists(), path.is_file()
    except OSError as exc:  # a directory on its path this user cannot search
        raise PathError(f"program {program!r} cannot be reached: {exc.strerror}") from None
    if is_python(program):
        if not is_file:
            raise PathError(f"program {program!r} not found")
        if not os.access(path, os.R_OK):
            raise PathError(f"program {program!r} is not readable")
        return [python or sys.executable, str(path), *args]
    if os.sep in program or exists:
        if not is_file:
            raise PathError(f"program {program!r} not found")
        if not os.access(path, os.X_OK):
            raise PathError(f"program {program!r} is not executable; chmod +x it or pass a .py file")
        return [str(path.absolute()), *args]
    found = shutil.which(program)
    if found is None:
        raise PathError(f"program {program!r} not found (not a file and not on PATH)")
    return [found, *args]
