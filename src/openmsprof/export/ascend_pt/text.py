"""Text for the streamed exports: µs from ns columns, JSON / CSV texts, a chunked atomic writer.

Numbers are formatted with ``%`` templates over columns prepared by numpy, so each output row costs
one formatting call: ``"%d.%03d" % divmod(ns, 1000)`` is docs/formats.md §1's µs text, and
``"%d.%b" % (q, FRAC[r])`` equals orjson's shortest form of ``ns / 1000`` for 0 ≤ ns < 10**12.

:func:`join` and :func:`fill` take whole columns (int64 arrays for ``%d`` / ``%03d``; for ``%b`` a
list of bytes or ``(codes, vocabulary)``; int64 ns for ``%t``, the µs text ``%d.%03d``, and ``%u``,
the JSON float ``ns / 1000`` as :func:`dur_columns` spells it) and fill the template in C
(``_row_text.c``, one pass: no µs columns prepared by numpy); the ``template % row`` loop over
the columns' Python values is the fallback and the reference (``OPENMSPROF_ROW_TEXT_PYTHON=1``,
or ``NATIVE = None``, forces it; without the extension it is the only path).
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from openmsprof.config import native_ext
from openmsprof.fileio import fs

#: ``FRAC[r]`` = the fraction digits of ``r / 1000`` without trailing zeros (``"0"`` for 0).
FRAC = [(b"%03d" % r).rstrip(b"0") or b"0" for r in range(1000)]
SHORT_LIMIT = 10**12
CHUNK = 4096  # rows per formatted group: bigger groups cost page faults (fresh pages per join), not less CPU


#: a column of :func:`join` / :func:`fill`: int64 values, bytes per row, or (codes, vocabulary)
Column = np.ndarray | list[bytes] | tuple[np.ndarray, Sequence[bytes]]


#: the C row formatter (``_row_text.c``), None when not built or forced off
NATIVE: Any = native_ext.load("openmsprof.export.ascend_pt._row_text", "OPENMSPROF_ROW_TEXT_PYTHON")


def ts_text(ns: int) -> str:
    """µs with exactly 3 decimals by integer formatting (docs/formats.md §1)."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def us_columns(ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(whole µs, ns remainder) columns for ``%d.%03d`` in :func:`join` / :func:`fill`."""
    q, r = np.divmod(ns, 1000)  # the column's own dtype: an integer one takes the C path
    return q, r


def short_ok(ns: np.ndarray) -> bool:
    """True when every value can use the ``%d.%b`` (q, FRAC[r]) form of ``ns / 1000``."""
    return not len(ns) or (int(ns.min()) >= 0 and int(ns.max()) < SHORT_LIMIT)


def dur_columns(ns: np.ndarray) -> tuple[bytes, list[Column]]:
    """(template piece, columns) that render the JSON float ``ns / 1000`` inside a row template."""
    if short_ok(ns):
        q, r = np.divmod(ns, 1000)
        return b"%d.%b", [q, (r, FRAC)]
    return b"%b", [float_texts(ns)]


def _values(col: Column) -> Sequence[Any]:
    """The Python values of a column (the fallback's rows)."""
    if isinstance(col, np.ndarray):
        return col.tolist()  # type: ignore[no-any-return]
    if isinstance(col, tuple):
        codes = np.asarray(col[0])
        if len(codes) and int(codes.min()) < 0:  # as the C path: a code never counts from the end
            raise IndexError(f"row column: code {int(codes.min())} not in the vocabulary")
        return [col[1][c] for c in codes.tolist()]
    return col


_I64 = np.dtype(np.int64)


def _int64(a: Any) -> np.ndarray | None:
    """``a`` as a contiguous int64 array when its values fit unchanged, else None."""
    if type(a) is np.ndarray and a.dtype == _I64 and a.flags.c_contiguous:
        return a
    a = np.asarray(a)
    if a.dtype.kind == "i" or (a.dtype.kind == "u" and a.dtype.itemsize < 8):
        return np.ascontiguousarray(a, np.int64)
    return None


def _prepared(columns: Sequence[Column]) -> tuple[Any, ...] | None:
    """The columns as the C formatter takes them; None when one is not of its kinds."""
    out: list[Any] = []
    for col in columns:
        if type(col) is list:
            out.append(col)
        elif isinstance(col, np.ndarray):
            a = _int64(col)
            if a is None:
                return None
            out.append(a)
        elif isinstance(col, tuple):
            codes, vocab = col
            c = _int64(codes)
            if c is None:
                return None
            out.append((c, vocab if type(vocab) is list or type(vocab) is tuple else list(vocab)))
        else:
            out.append(list(col))
    return tuple(out)


_CONVERSION = re.compile(rb"%(%|03d|d|b|t|u)")


def _has_ns(template: bytes) -> bool:
    return b"%t" in template or b"%u" in template


def _expand(template: bytes, columns: Sequence[Column]) -> tuple[bytes, list[Column]]:
    """The template and columns with each ``%t`` / ``%u`` and its ns column as the ``%d.%03d`` /
    :func:`dur_columns` conversions and columns (what ``%`` formats; ``%u`` outside its short
    range takes the general float text)."""
    out: list[bytes] = []
    cols: list[Column] = []
    pos = j = 0
    for m in _CONVERSION.finditer(template):
        kind = m.group(1)
        if kind == b"%":
            continue
        if j >= len(columns):
            raise ValueError(f"row template: more conversions than the {len(columns)} columns")
        col = columns[j]
        j += 1
        if kind in (b"t", b"u"):
            ns = np.asarray(col)
            more: list[Column]
            if kind == b"t":
                piece, more = b"%d.%03d", list(us_columns(ns))
            else:
                piece, more = dur_columns(ns)
            out.append(template[pos:m.start()] + piece)
            cols += more
        else:
            out.append(template[pos:m.end()])
            cols.append(col)
        pos = m.end()
    if j != len(columns):
        raise ValueError(f"row template: {j} conversions, {len(columns)} columns")
    return b"".join(out) + template[pos:], cols


def join(template: bytes, columns: Sequence[Column], sep: bytes = b",") -> bytes:
    """``sep.join(template % row for each row of columns)``, in C where built."""
    if NATIVE is not None and columns and (cols := _prepared(columns)) is not None:
        try:
            return NATIVE.join(template, cols, sep)  # type: ignore[no-any-return]
        except ValueError:
            if not _has_ns(template) or (wide := _expand(template, columns))[0] == template:
                raise
            return join(*wide, sep)  # a %u value outside the short form
    if _has_ns(template):
        template, columns = _expand(template, columns)
    return sep.join([template % row for row in zip(*map(_values, columns), strict=True)])


def fill(template: bytes, columns: Sequence[Column]) -> list[bytes]:
    """One ``template % row`` per row of ``columns``, in C where built."""
    if NATIVE is not None and columns and (cols := _prepared(columns)) is not None:
        try:
            return NATIVE.rows(template, cols)  # type: ignore[no-any-return]
        except ValueError:
            if not _has_ns(template) or (wide := _expand(template, columns))[0] == template:
                raise
            return fill(*wide)  # a %u value outside the short form
    if _has_ns(template):
        template, columns = _expand(template, columns)
    return [template % row for row in zip(*map(_values, columns), strict=True)]


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


#: csv_texts' answers by their items: the same vocabularies window after window (the analysis
#: worker).  Bounded by their bytes: a vocabulary over _CSV_ONE is not kept, and all are dropped
#: when the kept ones would pass _CSV_ALL (call stacks can be long, and new in every window).
_csv_kept: dict[tuple[str, ...], list[bytes]] = {}
_csv_bytes = [0]
_CSV_ONE = 1 << 20
_CSV_ALL = 1 << 24


def csv_texts(items: Sequence[str]) -> list[bytes]:
    """``csv_field(s).encode()`` of each item (a new list)."""
    key = tuple(items)
    hit = _csv_kept.get(key)
    if hit is None:
        hit = [csv_field(s).encode() for s in key]
        size = sum(map(len, hit)) + 64 * len(hit)
        if size <= _CSV_ONE:
            if _csv_bytes[0] + size > _CSV_ALL:
                _csv_kept.clear()
                _csv_bytes[0] = 0
            _csv_kept[key] = hit
            _csv_bytes[0] += size
    return list(hit)


def csv_line(fields: Sequence[object]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(fields)
    return buf.getvalue().encode()


@lru_cache(maxsize=256)
def header_line(fields: tuple[str, ...]) -> bytes:
    """``csv_line`` of a header (texts only: kept, the views' headers are few)."""
    return csv_line(fields)


def csv_lines(rows: Iterable[Sequence[object]]) -> bytes:
    """``csv_line`` of each row, joined (one writer for the table)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def chunks(n: int, size: int | None = None) -> Iterable[tuple[int, int]]:
    size = size or CHUNK
    for a in range(0, n, size):
        yield a, min(a + size, n)


_in_place: list[str] = []  # (the dirs ``in_place`` names, innermost last)


@contextmanager
def in_place(out: Path) -> Iterator[None]:
    """Within it, ``write_stream`` creates the files of ``out`` in place (no temp file and rename):
    a private copy's fresh output dir, published whole (``rank_analyse.export(private=True)``)."""
    _in_place.append(os.fspath(out))
    try:
        yield
    finally:  # (the only place it is changed: a stack)
        _in_place.pop()


def placed_in(path: Path) -> bool:  # (a file of the dir ``in_place`` names now)
    return bool(_in_place) and os.path.dirname(os.fspath(path)) == _in_place[-1]


def write_stream(path: Path, parts: Iterable[bytes]) -> None:
    """``parts`` into ``path`` by a temp file renamed into place (0640, no links; ``in_place``: direct)."""
    if placed_in(path):
        fs.write_stream_new(path, parts)
    else:
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
