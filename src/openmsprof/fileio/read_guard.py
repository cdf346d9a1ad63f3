"""Reading untrusted small files: only regular files of plausible size, never a blocking open.

Every reader of job files, acl.json, profiler_config.json and ini files goes through
:func:`read_regular` (or :func:`open_regular` for streaming).  The file is opened with
``O_NONBLOCK | O_NOFOLLOW`` (a FIFO cannot block the open, a symlink is refused), then
``fstat`` must say regular file and at most ``limit`` bytes; reading stops at ``limit`` bytes
whatever the file does meanwhile.  Errors are one line naming the file, of the class asked for.
"""

from __future__ import annotations

import errno
import os
import stat
from array import array
from itertools import accumulate
from typing import Any

import orjson

from openmsprof.config.errors import ProfilingError

__all__ = ["MAX_JSON_BYTES", "MAX_JSON_DEPTH", "JSONTooDeep", "check_depth", "escape", "loads_json", "open_regular",
           "parse_bounded", "read_json", "read_regular"]

#: Small job JSON files (info.json, sample.json, peaks.json, overhead figures).
MAX_JSON_BYTES = 16 << 20
#: Deepest nesting of arrays/objects a JSON document may have (no file we read needs 20).
MAX_JSON_DEPTH = 128

#: bracket depth scans: every byte but the brackets (deleted), each bracket's step as a signed byte
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_PY_MARKS = 1 << 20

_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
          | getattr(os, "O_CLOEXEC", 0))
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def escape(text: object) -> str:
    """``text`` with control characters escaped (``\\n`` -> ``\\\\n``): safe in one log line."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)


def open_regular(path: str | os.PathLike[str], what: str, limit: int,
                 error: type[ProfilingError] = ProfilingError) -> tuple[int, int]:
    """Open ``path`` for reading if it is a regular file of at most ``limit`` bytes; returns
    (fd, size).  The fd is blocking again (a regular file never blocks anyway)."""
    fd, size = _open_checked(path, what, limit, error)
    try:
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, size


def _open_checked(path: str | os.PathLike[str], what: str, limit: int,
                  error: type[ProfilingError]) -> tuple[int, int]:
    """``open_regular`` without the return to blocking mode: (fd, size), the fd still
    ``O_NONBLOCK`` (which a regular file ignores)."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        reason = "is a symbolic link; refused" if exc.errno == errno.ELOOP else exc.strerror
        raise error(f"{what} {escape(os.fspath(path))!r}: cannot read: {reason}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((k for test, k in _KINDS if test(st.st_mode)), "not a regular file")
            raise error(f"{what} {escape(os.fspath(path))!r} is {kind}, not a regular file; refused")
        if st.st_size > limit:
            raise error(f"{what} {escape(os.fspath(path))!r}: {st.st_size} bytes is larger than the {limit} "
                        "byte limit")
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def read_regular(path: str | os.PathLike[str], what: str, limit: int,
                 error: type[ProfilingError] = ProfilingError) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes (see module).
    The file is read in one read of its ``fstat`` size and one byte more; a read shorter than
    asked that reaches that size is the end of the file (no second read to see it); a file that
    grew is read on in 1 MiB reads, one that reports no size (``/proc``) or shrank to its end.
    The fd stays ``O_NONBLOCK``: a regular file ignores it, and a file system that answers
    EAGAIN all the same gets the fd blocking and the read again."""
    fd, size = _open_checked(path, what, limit, error)
    try:
        chunks: list[bytes] = []
        got = 0
        want = size + 1 if size else min(1 << 20, limit + 1)  # (the whole file and one byte more: one read)
        while got <= limit:
            try:
                chunk = os.read(fd, want)
            except BlockingIOError:
                os.set_blocking(fd, True)
                continue
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
            if len(chunk) < want and 0 < size <= got:  # short of what was asked, at the size: the end
                break
            want = min(1 << 20, limit + 1 - got)
        if got > limit:
            raise error(f"{what} {escape(os.fspath(path))!r}: larger than the {limit} byte limit")
    except OSError as exc:
        raise error(f"{what} {escape(os.fspath(path))!r}: cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_json(path: str | os.PathLike[str], what: str, limit: int = MAX_JSON_BYTES,
              error: type[ProfilingError] = ProfilingError) -> Any:
    """The parsed JSON of a regular file of at most ``limit`` bytes; any failure (not a regular
    file, too large, unreadable, not JSON, nested deeper than :data:`MAX_JSON_DEPTH`) is one
    ``error``."""
    return loads_json(read_regular(path, what, limit, error), what, path, error)


class JSONTooDeep(ValueError):
    """A JSON text nested deeper than the bound (or too deep for orjson to read at all)."""


def _bracket_bound(data: bytes, limit: int) -> int:
    """An upper bound of the nesting depth of the JSON text ``data``: its opening brackets when
    they are at most ``limit``, else the deepest running bracket count (a C-level pass over the
    brackets, numpy for very many; brackets inside strings count too, so a text within the bound
    is surely within it)."""
    if data.count(b"[") + data.count(b"{") <= limit:  # no deeper than its opening brackets
        return limit
    marks = data.translate(None, _NOT_BRACKETS)
    if len(marks) <= _PY_MARKS:  # a C-level pass over the brackets alone costs less than importing numpy
        signed = array("b", marks.translate(_STEP))  # (a text that opens with no bracket starts at depth 0)
        return max(accumulate(signed, initial=0) if data[0] not in b"[]{}" else accumulate(signed))
    import numpy as np  # only for texts with very many brackets (config stays light to import)

    raw = np.frombuffer(data, dtype=np.uint8)
    steps = np.zeros(len(raw), dtype=np.int32)
    steps[(raw == 0x5B) | (raw == 0x7B)] = 1
    steps[(raw == 0x5D) | (raw == 0x7D)] = -1
    return int(np.cumsum(steps).max()) if len(raw) else 0


def _doc_depth(doc: Any, limit: int) -> int:
    """The nesting depth of a parsed document, or -1 when it is deeper than ``limit``."""
    deepest, todo = 0, [(doc, 1)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, (dict, list)):
            if depth > limit:
                return -1
            deepest = max(deepest, depth)
            todo.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node))
    return deepest


def parse_bounded(data: bytes, limit: int = MAX_JSON_DEPTH) -> Any:
    """``orjson.loads(data)``, parsed once, refusing a document nested deeper than ``limit``
    (:class:`JSONTooDeep`; a bracket count decides cheaply, the parsed document only when
    brackets inside strings leave it open).  Not JSON: ``orjson.JSONDecodeError``."""
    if _bracket_bound(data, limit) <= limit:
        return orjson.loads(data)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:  # orjson stops at 1024 levels itself
        raise JSONTooDeep(limit) from None
    if _doc_depth(doc, limit) < 0:
        raise JSONTooDeep(limit)
    return doc


def check_depth(data: bytes, limit: int = MAX_JSON_DEPTH) -> int:
    """At least the nesting depth of the JSON text ``data`` and at most ``limit`` when within
    it, else -1 (see :func:`parse_bounded`)."""
    bound = _bracket_bound(data, limit)
    if bound <= limit:
        return bound
    try:
        return _doc_depth(orjson.loads(data), limit)
    except orjson.JSONDecodeError:
        return -1


def loads_json(data: bytes, what: str, name: object, error: type[ProfilingError] = ProfilingError,
               depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse ``data`` (the text of ``what`` ``name``); not JSON or nested deeper than ``depth``
    is one ``error`` line."""
    shown = escape(os.fspath(name) if isinstance(name, os.PathLike) else name)
    try:
        return parse_bounded(data, depth)
    except JSONTooDeep:
        raise error(f"{what} {shown!r}: JSON nested deeper than {depth} levels; refused") from None
    except orjson.JSONDecodeError as exc:
        raise error(f"{what} {shown!r} is not JSON: {exc}") from None
