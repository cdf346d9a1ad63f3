"""Read a Kineto chrome trace in bounded memory: ``traceEvents`` parsed by orjson one block of
events at a time.

Kineto writes each top-level event as ``  {`` … ``  }`` lines.  A raw newline never occurs inside
a JSON string, so ``"\\n  },\\n  {"`` can only separate two top-level events; each block is cut
there and parsed as its own array.  Any other layout (a compact file, a bare array, a hand-made
trace) falls back to one whole-document parse, as does a block that does not parse.

Kineto writes some strings as given (a ``record_function`` name with a ``"`` makes its own file
invalid JSON; it turns ``\\`` into ``/``).  When the whole document does not parse, its
``"key": "value",`` lines whose value holds unescaped quotes or control characters are repaired
(``_repair``) and the count reported in one line; anything else still fails in one line.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from openmsprof.config import native_ext
from openmsprof.config.errors import RawDataError
from openmsprof.fileio.read_guard import (
    MAX_JSON_DEPTH,
    JSONTooDeep,
    open_regular,
    parse_bounded,
    read_regular,
)

__all__ = ["BLOCK", "GPU_CATS", "MAX_TRACE_BYTES", "MAX_WHOLE_BYTES", "Restart", "TraceReader", "scan"]

#: Kineto categories of device activity (a GPU trace; CPU-only traces have none).
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
BLOCK = 8 << 20
#: Largest trace streamed block by block, and largest parsed whole (the fallback holds it all).
MAX_TRACE_BYTES = 64 << 30
MAX_WHOLE_BYTES = 2 << 30
_SEP = b"\n  },\n  {"
_END = b"\n  ]"
_EVENTS_RE = re.compile(rb'"traceEvents"\s*:\s*\[')
#: one ``"key": "value"`` line of Kineto's layout (the value as written, maybe unescaped)
_STRING_LINE_RE = re.compile(rb'^( *"[A-Za-z_ ]+": ")(.*)("),?$')
log = logging.getLogger("openmsprof")


_ext = native_ext.load("openmsprof.sources._kineto_scan", "OPENMSPROF_KINETO_SCAN_PYTHON")
#: The native scan of one block (``_kineto_scan.c``: the operator and flow columns straight from
#: the bytes, or None for a block it leaves to orjson; ``scan(buf, start, stop)`` reads a span of
#: ``spans`` in place); None when not built.  The analysis' ``Columns.add_block`` / ``add_span``
#: use it; ``Columns.add`` of the parsed events is the reference path.
scan: Callable[..., Any] | None = _ext.ops if _ext is not None else None


class _NotKinetoLayout(Exception):
    """The file is not in Kineto's layout; parse it whole."""


class TraceReader:
    """``chunks()`` yields lists of event dicts; ``base_ns`` is Kineto's baseTimeNanoseconds (or None),
    ``header`` the document's other top-level fields read before the events."""

    def __init__(self, path: str | Path, block: int = BLOCK, start: int | None = None,
                 stop: int | None = None) -> None:
        self.path = path
        self.block = block
        self.base_ns: int | None = None
        self.header: dict[str, Any] = {}
        #: byte range for a split read (``split_point``): ``stop`` ends the first half (header
        #: included), ``start`` begins the second half (events after the separator, then the end).
        self.start, self.stop = start, stop

    def split_point(self) -> int | None:
        """Offset of an event separator near the middle of the file (None: none found there);
        ``stop=p + 4`` and ``start=p + 5`` then read the two halves."""
        with self._open() as f:
            half = os.fstat(f.fileno()).st_size // 2
            f.seek(half)
            i = f.read(self.block).find(_SEP)
        return None if i < 0 else half + i

    def chunks(self) -> Iterator[list[Any]]:
        """Blocks of events in file order.  Raises RawDataError for a file that is not JSON.

        On an unexpected layout the whole document is parsed instead; that happens before any
        block is yielded, or the caller gets ``Restart`` and must drop what it received."""
        for block in self.blocks():
            yield self.events(block)

    def blocks(self) -> Iterator[bytes]:
        """The blocks of ``chunks`` unparsed: each a JSON array of events for ``events`` (or a
        native scan, ``scan``).  ``Restart`` as for ``chunks``."""
        for buf, start, stop in self.spans():
            yield b"".join((b"[", memoryview(buf)[start:stop], b"]"))  # one copy

    def spans(self) -> Iterator[tuple[bytes, int, int]]:
        """The blocks of ``blocks`` uncopied: ``(buf, start, stop)``, the events of one block
        being ``buf[start:stop]`` without the array's brackets (``scan(buf, start, stop)`` reads
        them in place).  ``Restart`` as for ``chunks``."""
        try:
            yield from self._stream()
        except _NotKinetoLayout:
            raise Restart() from None

    @classmethod
    def events(cls, block: bytes) -> list[Any]:
        """One block of ``blocks`` parsed (``Restart`` when it is not a JSON array)."""
        try:
            out: list[Any] = cls._parse(block)
        except _NotKinetoLayout:
            raise Restart() from None
        return out

    def whole(self) -> list[Any]:
        """The whole document parsed at once (the fallback)."""
        data = read_regular(self.path, "trace", MAX_WHOLE_BYTES, RawDataError)
        try:
            doc = parse_bounded(data)
        except JSONTooDeep:
            raise RawDataError(f"{str(self.path)!r}: JSON nested deeper than {MAX_JSON_DEPTH} levels; refused") from None
        except orjson.JSONDecodeError as exc:
            doc = self._repaired(data, exc)
        if isinstance(doc, dict):
            self.header = {k: v for k, v in doc.items() if k != "traceEvents"}
            base = doc.get("baseTimeNanoseconds")
            self.base_ns = base if isinstance(base, int) and not isinstance(base, bool) else None
            events = doc.get("traceEvents", [])
        else:
            events = doc
        return events if isinstance(events, list) else []

    def _repaired(self, data: bytes, exc: orjson.JSONDecodeError) -> Any:
        """``data`` parsed after ``_repair``; RawDataError (naming the first error) if that
        does not make it valid."""
        fixed, count = _repair(data)
        if count:
            try:
                doc = parse_bounded(fixed)
            except (orjson.JSONDecodeError, JSONTooDeep):
                pass
            else:
                log.warning("openmsprof: %s: repaired %d string(s) Kineto wrote unescaped (a record_function "
                            "name with a quote?)", self.path, count)
                return doc
        raise RawDataError(f"{str(self.path)!r} is not valid JSON: {exc}") from None

    def _open(self) -> IO[bytes]:
        """The trace opened only if it is a regular file of at most MAX_TRACE_BYTES (a FIFO, a
        device or a link is refused with one line)."""
        fd, _size = open_regular(self.path, "trace", MAX_TRACE_BYTES, RawDataError)
        return open(fd, "rb", buffering=0)  # (unbuffered: blocks are read whole; no isatty, tell, extra read)

    def _stream(self) -> Iterator[tuple[bytes, int, int]]:
        with self._open() as f:
            stop = self.stop

            def read(n: int) -> bytes:
                return f.read(n if stop is None else max(0, min(n, stop - f.tell())))

            pos = 0  # where the events start in buf (the header before them is not copied away)
            if self.start is not None:
                f.seek(self.start)
                buf = b""
            else:
                buf = read(self.block)
                m = _EVENTS_RE.search(buf)
                if m is None or buf[:m.start()].lstrip()[:1] != b"{":
                    raise _NotKinetoLayout()
                head = self.header = self._parse(buf[:m.start()].rstrip().rstrip(b",") + b"}", dict)
                base = head.get("baseTimeNanoseconds")
                self.base_ns = base if isinstance(base, int) and not isinstance(base, bool) else None
                pos = m.end()
            while more := read(self.block):  # (at the end of the file the rest is one span, below)
                buf, pos = buf[pos:] + more, 0
                cut = buf.rfind(_SEP, pos)
                if cut < 0:
                    if len(buf) - pos > 8 * self.block:
                        raise _NotKinetoLayout()
                    continue
                yield buf, pos, cut + 4
                buf, pos = buf[cut + 5:], 0
            if stop is not None:  # the first half ends with a whole event
                buf = buf[pos:]
                if f.tell() != stop or not buf.endswith(b"\n  }"):
                    raise _NotKinetoLayout()
                yield buf, 0, len(buf)
                return
            end = buf.rfind(_END, pos)
            if end < 0:
                raise _NotKinetoLayout()
            yield buf, pos, end  # (a trace within one block: its events in one span, scanned once)
            tail = buf[end + len(_END):].strip()
            if tail != b"}":
                rest = self._parse(b"{" + tail[1:], dict) if tail[:1] == b"," else None
                if rest is None or "baseTimeNanoseconds" in rest or "traceEvents" in rest:
                    raise _NotKinetoLayout()

    @staticmethod
    def _parse(data: bytes, kind: type = list) -> Any:
        """``data`` as JSON of ``kind``; anything else is not Kineto's layout."""
        try:
            out = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise _NotKinetoLayout() from None
        if not isinstance(out, kind):
            raise _NotKinetoLayout()
        return out


def _repair(data: bytes) -> tuple[bytes, int]:
    """``data`` with each ``"key": "value",`` line whose value is not a valid JSON string body
    (a raw ``"``, ``\\`` or control character, as Kineto writes a ``record_function`` name)
    escaped; and how many lines were changed."""
    lines = data.split(b"\n")
    count = 0
    for i, line in enumerate(lines):
        m = _STRING_LINE_RE.match(line)
        if m is None or _valid(b"{" + line.strip().rstrip(b",") + b"}"):
            continue  # not a string member, or a valid one (maybe several on the line)
        lines[i] = m.group(1)[:-1] + orjson.dumps(m.group(2).decode("utf-8", "replace")) + line[m.end(3):]
        count += 1
    return b"\n".join(lines), count


def _valid(data: bytes) -> bool:
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return True


class Restart(Exception):
    """Raised by ``TraceReader.chunks`` when the layout is not Kineto's: use ``whole()``."""
