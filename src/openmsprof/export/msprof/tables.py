"""Summary table writers: CSV (split above 1,000,000 data rows) and JSON, streamed, atomic.

A table is ``header`` plus an iterator of rows; values are ``str`` (numeric text made with
:class:`Num`), ``int`` or ``float``.  No rows → no file (the seed's rule).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from openmsprof.export.msprof.naming import remove_stale, summary_file
from openmsprof.export.outfile import OutFile

MAX_CSV_ROWS = 1_000_000
_CHUNK = 10_000


class Num(str):
    """Numeric text such as ``"12.345"``: written bare in JSON.  Absolute epoch timestamps stay
    plain ``str`` so JSON readers keep every digit (they exceed float64 precision)."""

    __slots__ = ()


@dataclass
class Table:
    """One summary file's content: ``{name}_{dev}`` with ``header`` and lazily produced rows."""

    name: str
    dev: int | str
    header: list[str]
    rows: Iterable[Sequence[Any]]
    #: the same rows as ready CSV lines (``\n``-terminated), for the large per-row tables
    lines: Callable[[], Iterator[str]] | None = None


def csv_fields(fields: Sequence[Any]) -> str:
    """``fields`` as CSV text without the line end, quoted exactly as the csv module quotes
    them inside a row (a lead field keeps a lone empty value from being written as ``""``)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(["x", *fields])
    return buf.getvalue()[2:-1]


def _json_value(v: Any) -> Any:
    return orjson.Fragment(str.__str__(v)) if type(v) is Num else v


def write_csv(out_dir: Path, table: Table, max_rows: int = MAX_CSV_ROWS) -> list[Path]:
    """Write ``table`` as CSV slices of at most ``max_rows`` data rows; returns the paths."""
    rows: Iterator[Any] = iter(table.rows) if table.lines is None else table.lines()
    first = next(rows, None)
    base = out_dir / summary_file(table.name, table.dev, "csv")
    if first is None:
        remove_stale([], base)
        return []
    parts: list[OutFile] = []
    try:
        if table.lines is None:
            _write_csv_slices(out_dir, table, first, rows, max_rows, parts)
        else:
            _write_line_slices(out_dir, table, first, rows, max_rows, parts)
        if len(parts) == 1:
            paths = [parts[0].commit(base)]
        else:
            paths = [p.commit(out_dir / summary_file(table.name, table.dev, "csv", k))
                     for k, p in enumerate(parts)]
    except BaseException:
        for p in parts:
            p.abort()
        raise
    remove_stale(paths, base)
    return paths


def _write_csv_slices(out_dir: Path, table: Table, first: Sequence[Any],
                      rows: Iterator[Sequence[Any]], max_rows: int,
                      parts: list[OutFile]) -> None:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    pending = [first]
    in_slice = max_rows  # forces a new slice at the first row
    while pending:
        for row in pending:
            if in_slice >= max_rows:
                if parts:
                    parts[-1].write(buf.getvalue().encode())
                    buf.seek(0)
                    buf.truncate()
                parts.append(OutFile(out_dir / summary_file(
                    table.name, table.dev, "csv", len(parts) or None)))
                writer.writerow(table.header)
                in_slice = 0
            writer.writerow(row)
            in_slice += 1
        parts[-1].write(buf.getvalue().encode())
        buf.seek(0)
        buf.truncate()
        pending = [r for _, r in zip(range(_CHUNK), rows, strict=False)]


def _write_line_slices(out_dir: Path, table: Table, first: str, lines: Iterator[str], max_rows: int,
                       parts: list[OutFile]) -> None:
    """:func:`_write_csv_slices` for ready lines (same bytes)."""
    sink = LineSlices(out_dir, table.name, table.dev, table.header, max_rows, parts)
    pending = [first]
    while pending:
        sink.add(pending)
        pending = [r for _, r in zip(range(_CHUNK), lines, strict=False)]


def _line_end(data: bytes, lines: int) -> int:
    """The offset just past the ``lines``-th CSV line of ``data`` (a newline inside a quoted
    field does not end a line: an even number of quotes precedes a line's end)."""
    at = quotes = 0
    while lines:
        nl = data.index(b"\n", at)
        quotes += data.count(b'"', at, nl)
        at = nl + 1
        if quotes % 2 == 0:
            lines -= 1
            quotes = 0
    return at


class LineSlices:
    """A CSV table written from chunks of ready lines, sliced above ``max_rows`` data rows as
    :func:`write_csv` slices (same bytes); :meth:`finish` commits, :meth:`abort` drops."""

    def __init__(self, out_dir: Path, name: str, dev: int | str, header: list[str],
                 max_rows: int = MAX_CSV_ROWS, parts: list[OutFile] | None = None) -> None:
        self.out_dir, self.name, self.dev, self.max_rows = out_dir, name, dev, max_rows
        self.header = (csv_fields(header) + "\n").encode()
        self.parts: list[OutFile] = [] if parts is None else parts
        self.in_slice = max_rows

    def _room(self) -> int:
        """Rows the current slice still takes (a full one is followed by a new slice)."""
        if self.in_slice >= self.max_rows:
            self.parts.append(OutFile(self.out_dir / summary_file(
                self.name, self.dev, "csv", len(self.parts) or None)))
            self.parts[-1].write(self.header)
            self.in_slice = 0
        return self.max_rows - self.in_slice

    def add(self, lines: list[str]) -> None:
        while lines:
            take = lines[: self._room()]
            lines = lines[len(take):]
            self.parts[-1].write("".join(take).encode())
            self.in_slice += len(take)

    def add_block(self, data: bytes, lines: int) -> None:
        """:meth:`add` for ``lines`` lines already joined and UTF-8 encoded (same bytes)."""
        while lines:
            take = min(lines, self._room())
            cut = len(data) if take == lines else _line_end(data, take)
            self.parts[-1].write(data[:cut])
            data, lines = data[cut:], lines - take
            self.in_slice += take

    def finish(self) -> list[Path]:
        """Commit the slices (no rows: no file, and a former file of the name is removed)."""
        base = self.out_dir / summary_file(self.name, self.dev, "csv")
        if len(self.parts) == 1:
            paths = [self.parts[0].commit(base)]
        else:
            paths = [p.commit(self.out_dir / summary_file(self.name, self.dev, "csv", k))
                     for k, p in enumerate(self.parts)]
        remove_stale(paths, base)
        return paths

    def abort(self) -> None:
        for p in self.parts:
            p.abort()


def write_json(out_dir: Path, table: Table) -> list[Path]:
    """Write ``table`` as a JSON array of objects keyed by column name (header order)."""
    rows = iter(table.rows)
    first = next(rows, None)
    path = out_dir / summary_file(table.name, table.dev, "json")
    if first is None:
        remove_stale([], path)
        return []
    out = OutFile(path)
    try:
        header = table.header
        out.write(b"[")
        pending = [first]
        sep = b""
        while pending:
            body = b",\n".join(
                orjson.dumps({k: _json_value(v) for k, v in zip(header, r, strict=False)})
                for r in pending)
            out.write(sep + body)
            sep = b",\n"
            pending = [r for _, r in zip(range(_CHUNK), rows, strict=False)]
        out.write(b"]\n")
        paths = [out.commit()]
    except BaseException:
        out.abort()
        raise
    remove_stale(paths, path)
    return paths


def write_table(out_dir: Path, table: Table, fmt: str = "csv") -> list[Path]:
    """Write ``table`` in ``fmt`` (``csv`` or ``json``)."""
    return write_json(out_dir, table) if fmt == "json" else write_csv(out_dir, table)
