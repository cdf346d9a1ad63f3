"""argparse types that validate numbers and paths: a bad value is one usage line, never a
traceback (``nan``, ``inf``, ``1e300``, names over 255 bytes, control characters)."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable

from openmsprof.fileio.read_guard import escape

__all__ = ["bounded_int", "finite_float", "input_dir"]

#: Longest path and path component the file systems we write to accept (bytes).
PATH_MAX = 4096
NAME_MAX = 255


def finite_float(low: float, high: float) -> Callable[[str], float]:
    """A float in ``[low, high]``; ``nan``/``inf`` and out-of-range values are refused."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{escape(text)}' is not a number") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"'{escape(text)}' is not a finite number in {low:g}..{high:g}")
        return value
    parse.__name__ = "number"
    return parse


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An integer in ``[low, high]`` (decimal digits only)."""
    def parse(text: str) -> int:
        t = text.strip()
        if not t.lstrip("+-").isdigit() or len(t) > 20:
            raise argparse.ArgumentTypeError(f"'{escape(text)}' is not an integer")
        value = int(t)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range {low}..{high}")
        return value
    parse.__name__ = "integer"
    return parse


def input_dir(text: str) -> str:
    """A path whose length and component lengths the OS accepts, with no control characters."""
    raw = os.fsencode(text)
    if not text or len(raw) > PATH_MAX:
        raise argparse.ArgumentTypeError(f"path of {len(raw)} bytes: empty or longer than {PATH_MAX}")
    if any(len(part) > NAME_MAX for part in raw.split(b"/")):
        raise argparse.ArgumentTypeError(f"a name in '{escape(text)[:80]}'... is longer than {NAME_MAX} bytes")
    if not text.isprintable():
        raise argparse.ArgumentTypeError(f"'{escape(text)}' holds control characters")
    return text
input_dir.__name__ = "path"
