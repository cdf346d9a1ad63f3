"""Texts as codes for ``columns.Columns``: ``Vocab`` and ``ArgCodes`` (the operators' kept args and input shapes).

``Vocab`` holds distinct values in first-seen order.  ``ArgCodes`` codes the trace_view ``args``
object (already serialised, only the keys trace_view keeps) and the input shapes/dtypes texts of
each operator once per distinct value, from the native scan's keys or from event dicts, with memos
kept from window to window.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Generic, TypeVar

import numpy as np
import orjson

__all__ = ["ARG_KEYS", "ArgCodes", "Vocab"]

T = TypeVar("T")
ARG_KEYS = ("Input Dims", "Input type", "Sequence number", "Fwd thread id")
_EMPTY_KEY = ("absent",)
_PARTS = re.compile(rb"([\x01\x02])([^\x01\x02]*)")


class Vocab(Generic[T]):
    """Distinct values in first-seen order; ``code(v)`` is the index of ``v``."""

    def __init__(self, *first: T) -> None:
        self.index: dict[T, int] = {}
        self.items: list[T] = []
        for v in first:
            self.code(v)

    def code(self, v: T) -> int:
        c = self.index.get(v)
        if c is None:
            c = self.index[v] = len(self.items)
            self.items.append(v)
        return c

    def codes(self, values: list[T]) -> list[int]:
        """``code`` of each value: the new ones coded first, in first-seen order (as one pass
        would), then every value looked up at C speed."""
        index = self.index
        for v in dict.fromkeys(values):
            if v not in index:
                index[v] = len(self.items)
                self.items.append(v)
        return list(map(index.__getitem__, values))

    def __len__(self) -> int:
        return len(self.items)


def _shapes(args: dict[str, Any]) -> tuple[str, str]:
    dims = args.get("Input Dims")
    types = args.get("Input type")
    s = ";".join(",".join(str(x) for x in d) if isinstance(d, list) else "" for d in dims) if dims else ""
    t = ";".join(str(x) for x in types) if types else ""
    return s, t


@lru_cache(maxsize=1 << 12)  # the same operators' shapes window after window (the analysis worker)
def _shape_part(dims: bytes, types: bytes) -> tuple[tuple[str, str], bytes]:
    """(``_shapes`` texts, the args object's members so far: ``{`` and its Input Dims / Input type
    members, comma-separated) of a key's first two parts (each its mark byte and raw value)."""
    sub = {name: orjson.loads(part[1:]) for name, part in zip(ARG_KEYS[:2], (dims, types), strict=True)
           if part[:1] == b"\x01"}
    head = b"{" + b",".join(orjson.dumps(name) + b":" + orjson.dumps(v) for name, v in sub.items())
    return (_shapes(sub) if sub else ("", "")), head


_PLAIN = rb"(?:0|-?[1-9][0-9]{0,17})"  # a raw JSON integer orjson writes back byte for byte
#: a key whose Sequence number and Fwd thread id are absent or plain integers (the usual one)
_PLAIN_KEY = re.compile(rb"(\x01[^\x01\x02]*|\x02)(\x01[^\x01\x02]*|\x02)(?:\x01(" + _PLAIN + rb")|\x02)(?:\x01("
                        + _PLAIN + rb")|\x02)")
_SEQ, _FWD = b'"Sequence number":', b'"Fwd thread id":'


def _closed(head: bytes, seq: bytes | None, fwd: bytes | None) -> bytes:
    """The args object: ``head`` (``{`` and the shape members) with the Sequence number and Fwd
    thread id texts that are there."""
    if seq is not None:
        head += (_SEQ if len(head) == 1 else b"," + _SEQ) + seq
    if fwd is not None:
        head += (_FWD if len(head) == 1 else b"," + _FWD) + fwd
    return head + b"}"


def _key_texts(key: bytes) -> tuple[tuple[str, str], bytes]:
    """(``_shapes`` texts, serialised kept args) of one scan key (see ``ArgCodes._raw_codes``): its
    shape part kept from window to window (``_shape_part``), its Sequence number and Fwd thread
    id (new in every window) spliced in as written where they are plain integers, else as orjson
    writes them."""
    m = _PLAIN_KEY.fullmatch(key)
    if m is not None:
        dims, types, seq, fwd = m.groups()
        shapes, head = _shape_part(dims, types)
        return shapes, _closed(head, seq, fwd)
    parts = _PARTS.findall(key)
    if len(parts) != len(ARG_KEYS):
        raise ValueError(f"a scan key has {len(parts)} parts, not {len(ARG_KEYS)}")
    shapes, head = _shape_part(parts[0][0] + parts[0][1], parts[1][0] + parts[1][1])
    seq, fwd = (orjson.dumps(orjson.loads(raw)) if mark == b"\x01" else None for mark, raw in parts[2:])
    return shapes, _closed(head, seq, fwd)


class ArgCodes:
    """The args and shapes vocabularies of the operators and the memos that code them (a base of
    ``columns.Columns``: each code as the one pass over the events in file order would give it)."""

    def __init__(self) -> None:
        self.args: Vocab[bytes] = Vocab(b"{}")
        self.shapes: Vocab[tuple[str, str]] = Vocab(("", ""))
        self._seq_args: dict[tuple[Any, Any], int] = {}
        self._shape_args: dict[str, tuple[int, int]] = {}
        self._raw_args: dict[bytes, int] = {}  # scan key -> index into _raw_pairs
        self._raw_pairs: list[tuple[int, int]] = []  # (shape code, args code)

    def _raw_codes(self, keys: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """(shape codes, args codes) of the scan's distinct keys (the kept args' raw JSON bytes):
        the texts of each new key (``_key_texts``, kept from window to window) coded in
        first-seen order."""
        memo, pairs = self._raw_args, self._raw_pairs
        for k in keys:
            if k not in memo:
                s, a = _key_texts(k)
                memo[k] = len(pairs)
                pairs.append((self.shapes.code(s), self.args.code(a)))
        table = np.asarray([pairs[memo[k]] for k in keys] or [(0, 0)], np.int32).reshape(-1, 2)
        return np.ascontiguousarray(table[:, 0]), np.ascontiguousarray(table[:, 1])

    def _shape_codes(self, args: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
        """(shape codes, args codes) of ops that recorded shapes: one ``_shapes`` text and one
        serialisation per distinct kept-args value (``repr`` of the four kept values is the key:
        equal reprs of JSON values are equal values), codes assigned in first-seen order as
        ``Vocab.codes`` would.  Values ``repr`` cannot key (nested too deep) take the plain path."""
        try:
            return self._memo_codes(args)
        except RecursionError:
            dumps, none = orjson.dumps, ("", "")
            return (self.shapes.codes([_shapes(a) if "Input Dims" in a or "Input type" in a else none for a in args]),
                    self.args.codes([dumps({k: a[k] for k in ARG_KEYS if k in a}) for a in args]))

    def _memo_codes(self, args: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
        memo = self._shape_args
        keys = [repr((a.get("Input Dims", ...), a.get("Input type", ...), a.get("Sequence number", ...),
                      a.get("Fwd thread id", ...))) for a in args]
        new = set(keys).difference(memo)
        if not new:
            pairs = [memo[k] for k in keys]
        else:
            dumps, none, shapes, vocab = orjson.dumps, ("", ""), self.shapes, self.args
            pairs = []
            for k, a in zip(keys, args, strict=True):
                pair = memo.get(k)
                if pair is None:
                    s = _shapes(a) if "Input Dims" in a or "Input type" in a else none
                    pair = memo[k] = (shapes.code(s), vocab.code(dumps({n: a[n] for n in ARG_KEYS if n in a})))
                pairs.append(pair)
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def _seq_codes(self, args: list[dict[str, Any]]) -> list[int] | None:
        """Args codes when the kept args are at most Sequence number / Fwd thread id (no shapes):
        one serialisation per distinct pair.  None when a value is not hashable."""
        keyed = self._seq_args
        try:
            keys = [(a.get("Sequence number", _EMPTY_KEY), a.get("Fwd thread id", _EMPTY_KEY)) for a in args]
            new = set(keys).difference(keyed)
        except TypeError:
            return None
        if new:
            for key, a in zip(keys, args, strict=True):
                if key in new:
                    sub = {k: a[k] for k in ARG_KEYS if k in a}
                    keyed[key] = self.args.code(orjson.dumps(sub)) if sub else 0
                    new.discard(key)
        return [keyed[k] for k in keys]
