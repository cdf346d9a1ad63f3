"""Number formatting shared by every export: integer ns → µs text with exactly three decimals.

docs/formats.md §1: made by integer string formatting ``f"{ns//1000}.{ns%1000:03d}"``, never via float.
"""

from __future__ import annotations

NA = "N/A"
#: The invalid-value sentinel of the msprof schema (docs/formats.md §6).
INVALID = 4294967295


def us(ns: int) -> str:
    """``ns`` as µs with exactly three decimals (negative values keep their sign)."""
    if ns < 0:
        return "-" + us(-ns)
    return f"{ns // 1000}.{ns % 1000:03d}"


def us_avg(total_ns: int, count: int) -> str:
    """Mean of ``count`` values summing to ``total_ns``, rounded to whole ns, as µs text."""
    if count <= 0:
        return NA
    return us((2 * int(total_ns) + count) // (2 * count))


def ratio(part: float, whole: float) -> str:
    """Percentage with three decimals; ``0.000`` when ``whole`` is zero."""
    return f"{(100.0 * part / whole) if whole else 0.0:.3f}"


def id_or_na(value: int | None) -> int | str:
    """An integer id, or ``N/A`` for NULL and the 4294967295 sentinel."""
    if value is None or value == INVALID or value < 0:
        return NA
    return int(value)
