"""Text pieces for the streamed exports: µs numbers from ns columns, JSON / CSV encodings of
vocabulary entries, and a chunked atomic file writer (temp file + rename, 0640).

Numbers are formatted with ``%`` templates over columns prepared by numpy, so each output row costs
one formatting call: ``"%d.%03d" % divmod(ns, 1000)`` is docs/formats.md §1's µs text, and
``"%d.%b" % (q, FRAC[r])`` equals orjson's shortest form of ``ns / 1000`` for 0 ≤ ns < 10**12.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from openmsprof.fileio import fs

#: ``FRAC[r]`` = the fraction digits of ``r / 1000`` without trailing zeros (``"0"`` for 0).
FRAC = [(b"%03d" % r).rstrip(b"0") or b"0" for r in range(1000)]
SHORT_LIMIT = 10**12
CHUNK = 4096  # rows per formatted group: bigger groups cost page faults (fresh pages per join), not less CPU


def ts_text(ns: int) -> str:
    """µs with exactly 3 decimals by integer formatting (docs/formats.md §1)."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def split_us(ns: np.ndarray) -> tuple[list[int], list[int]]:
    """(whole µs, ns remainder) lists for ``%d.%03d`` templates."""
    q, r = np.divmod(ns, 1000)
    return q.tolist(), r.tolist()


def short_ok(ns: np.ndarray) -> bool:
    """True when every value can use the ``%d.%b`` (q, FRAC[r]) form of ``ns / 1000``."""
    return not len(ns) or (int(ns.min()) >= 0 and int(ns.max()) < SHORT_LIMIT)


def short_parts(ns: np.ndarray) -> tuple[list[int], list[bytes]]:
    """(whole µs, FRAC text) for ``"%d.%b"``: the JSON float ``ns / 1000`` (needs ``short_ok``)."""
    q, r = np.divmod(ns, 1000)
    return q.tolist(), [FRAC[x] for x in r.tolist()]


def dur_columns(ns: np.ndarray) -> tuple[bytes, list[Sequence[Any]]]:
    """(template piece, columns) that render the JSON float ``ns / 1000`` inside a row template."""
    if short_ok(ns):
        q, f = short_parts(ns)
        return b"%d.%b", [q, f]
    return b"%b", [float_texts(ns)]


def fill(template: bytes, columns: Sequence[Sequence[Any]]) -> list[bytes]:
    """One ``template % row`` per row of ``columns``."""
    return [template % row for row in zip(*columns, strict=True)]


def literal(template: bytes, **values: int) -> bytes:
    """Bake integer constants into a template: ``{name}`` → the number."""
    for k, v in values.items():
        template = template.replace(b"{" + k.encode() + b"}", b"%d" % v)
    return template


def float_texts(ns: np.ndarray) -> list[bytes]:
    """JSON text of ``ns / 1000`` for each value (general form, any range)."""
    return [orjson.dumps(v / 1000) for v in ns.tolist()]


def json_texts(items: Sequence[str]) -> list[bytes]:
    return [orjson.dumps(s) for s in items]


@lru_cache(maxsize=1 << 16)  # the same names and shapes window after window (the analysis worker)
def csv_field(value: str) -> str:
    """The CSV writer's encoding of one field (quoted when it holds a comma, quote or newline)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([value, ""])
    return buf.getvalue()[:-2]


def csv_texts(items: Sequence[str]) -> list[bytes]:
    return [csv_field(s).encode() for s in items]


def csv_line(fields: Sequence[object]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(fields)
    return buf.getvalue().encode()


def csv_lines(rows: Iterable[Sequence[object]]) -> bytes:
    """``csv_line`` of each row, joined (one writer for the table)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def chunks(n: int, size: int = CHUNK) -> Iterable[tuple[int, int]]:
    for a in range(0, n, size):
        yield a, min(a + size, n)


def write_stream(path: Path, parts: Iterable[bytes]) -> None:
    """Write ``parts`` to ``path`` through a temp file renamed into place (0640, no symlinks)."""
    fs.write_stream_atomic(path, parts)


def write_json_array(path: Path, groups: Iterable[list[bytes]]) -> int:
    """Stream lists of JSON values as one JSON array; returns the number of values."""
    count = 0

    def parts() -> Iterable[bytes]:
        nonlocal count
        yield b"["
        for g in groups:
            if g:
                yield (b"," if count else b"") + b",".join(g)
                count += len(g)
        yield b"]"

    write_stream(path, parts())
    return count
