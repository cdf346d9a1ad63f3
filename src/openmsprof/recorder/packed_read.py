"""Decoding of packed record blocks (raw format version 2, the native flusher's; docs/formats.md
"Packed record slices"; the encoder is ``recorder/_pack.h``).

A block is ``<II`` (record count, payload bytes) and eight LEB128 varints a record: kind, flags,
aux as they are; tid, a, b as zigzag int32 differences from the block's previous record; t0 as
the zigzag int64 difference from the previous t0; t1 as the zigzag int64 difference t1 - t0.
Every block starts from zero, so a damaged one is skipped (counted) and the next read.  The
decoding is numpy over whole buffers of blocks: no Python step a record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from openmsprof.config import native_ext
from openmsprof.recorder.rawfile import GENERIC_DTYPE

__all__ = ["BLOCK_HEADER", "MAX_BLOCK_RECORDS", "Unpacked", "unpack_blocks"]

BLOCK_HEADER = struct.Struct("<II")
#: the most records and payload bytes a block may declare (the encoder writes at most 4096
#: records of at most 80 bytes); a header beyond them is damage, not a block
MAX_BLOCK_RECORDS = 1 << 16
_MAX_RECORD_BYTES = 80
_FIELDS = 8
#: the C decoder (``_ring.unpack_blocks``), None when not built or forced off
#: (``OPENMSPROF_PACKED_READ_PYTHON=1``): the numpy code below is the fallback and the reference
NATIVE: Any = native_ext.load("openmsprof.recorder._ring", "OPENMSPROF_PACKED_READ_PYTHON")
_U32 = np.uint64(0xFFFFFFFF)
#: kind, flags, aux: the bound of each (uint8, uint8, uint16)
_SMALL = np.array([256, 256, 65536], dtype=np.uint64)


@dataclass
class Unpacked:
    """The records of the whole blocks at the front of a buffer, and what could not be used."""

    records: np.ndarray
    #: bytes of the buffer taken (whole blocks, damaged ones included); the rest is a partial block
    consumed: int
    #: blocks whose payload did not decode to the records their header declares, and those records
    bad_blocks: int = 0
    bad_records: int = 0
    #: the buffer holds a header no encoder writes: nothing after ``consumed`` can be framed
    unframed: bool = False


def unpack_blocks(buf: bytes | memoryview) -> Unpacked:
    """The whole blocks at the front of ``buf``, decoded to GENERIC_DTYPE records."""
    if NATIVE is not None:
        data, consumed, bad_blocks, bad_records, unframed = NATIVE.unpack_blocks(buf)
        return Unpacked(np.frombuffer(data, dtype=GENERIC_DTYPE), consumed, bad_blocks, bad_records, unframed)
    return _unpack(buf)


def _unpack(buf: bytes | memoryview) -> Unpacked:
    """unpack_blocks in numpy."""
    mv = memoryview(buf)
    size = len(mv)
    starts: list[int] = []
    counts: list[int] = []
    lens: list[int] = []
    pos = 0
    unframed = False
    while pos + BLOCK_HEADER.size <= size:
        n, plen = BLOCK_HEADER.unpack_from(mv, pos)
        if n == 0 or n > MAX_BLOCK_RECORDS or plen < n * _FIELDS or plen > n * _MAX_RECORD_BYTES:
            unframed = True
            break
        if pos + BLOCK_HEADER.size + plen > size:
            break
        starts.append(pos + BLOCK_HEADER.size)
        counts.append(n)
        lens.append(plen)
        pos += BLOCK_HEADER.size + plen
    if not starts:
        return Unpacked(np.zeros(0, dtype=GENERIC_DTYPE), pos, unframed=unframed)
    raw = np.frombuffer(mv, dtype=np.uint8, count=pos)
    u = raw[BLOCK_HEADER.size:] if len(starts) == 1 \
        else np.concatenate([raw[s:s + n] for s, n in zip(starts, lens, strict=True)])
    n_rec = np.asarray(counts, dtype=np.int64)
    good = np.ones(len(n_rec), dtype=bool)
    u = _framed(u, np.asarray(lens, dtype=np.int64), n_rec, good)
    v = _varints(u).reshape(-1, _FIELDS)
    over = (v[:, :3] >= _SMALL).any(axis=1) | (v[:, [3, 6, 7]] > _U32).any(axis=1)
    if over.any():  # a field out of its range: its block is damage
        rec_block = np.repeat(np.flatnonzero(good), n_rec[good])
        good[rec_block[over]] = False
        v = v[good[rec_block]]
    return Unpacked(_records(v, n_rec[good]), pos, int(len(good) - good.sum()), int(n_rec[~good].sum()), unframed)


def _framed(u: np.ndarray, plens: np.ndarray, n_rec: np.ndarray, good: np.ndarray) -> np.ndarray:
    """The payloads ``u`` less those of blocks (cleared in ``good``) that are not 8 × their
    records of varints, or hold one over 10 bytes (its fields would not align)."""
    term = u < 0x80
    offs = np.concatenate(([0], np.cumsum(plens)[:-1]))
    good &= (np.add.reduceat(term.astype(np.int64), offs) == n_rec * _FIELDS) & term[offs + plens - 1]
    if not good.all():
        keep = np.repeat(good, plens)
        u, term, plens = u[keep], term[keep], plens[good]
        offs = np.concatenate(([0], np.cumsum(plens)[:-1]))
    ends = np.flatnonzero(term)
    long_ = np.diff(ends, prepend=-1) > 10
    if long_.any():  # (each good block ends a varint: a long one lies in the block it ends in)
        idx = np.flatnonzero(good)
        bad = np.zeros(len(idx), dtype=bool)
        bad[np.searchsorted(offs, ends[long_], side="right") - 1] = True
        good[idx[bad]] = False
        u = u[np.repeat(~bad, plens)]
    return u


def _records(v: np.ndarray, n_rec: np.ndarray) -> np.ndarray:
    """GENERIC_DTYPE records of the varint rows ``v`` of blocks of ``n_rec`` records each."""
    out = np.zeros(len(v), dtype=GENERIC_DTYPE)
    if not len(v):
        return out
    first = np.concatenate(([0], np.cumsum(n_rec)[:-1]))
    out["kind"] = v[:, 0]
    out["flags"] = v[:, 1]
    out["aux"] = v[:, 2]
    out["tid"] = _running(_unzigzag(v[:, 3]), first, n_rec) & _U32
    t0 = _running(_unzigzag(v[:, 4]), first, n_rec)
    out["t0"] = t0.view(np.int64)
    out["t1"] = (t0 + _unzigzag(v[:, 5])).view(np.int64)
    out["a"] = _running(_unzigzag(v[:, 6]), first, n_rec) & _U32
    out["b"] = _running(_unzigzag(v[:, 7]), first, n_rec) & _U32
    return out


def _varints(u: np.ndarray) -> np.ndarray:
    """The LEB128 varints of ``u`` (every one ends in a byte < 0x80), as uint64."""
    term = u < 0x80
    ends = np.flatnonzero(term)
    if len(ends) == len(u):  # every varint one byte
        return u.astype(np.uint64)
    starts = np.concatenate(([0], ends[:-1] + 1))
    shift = (np.arange(len(u), dtype=np.int64) - np.repeat(starts, ends - starts + 1)) * 7
    part = (u & 0x7F).astype(np.uint64) << shift.astype(np.uint64)
    return np.bitwise_or.reduceat(part, starts)


def _unzigzag(z: np.ndarray) -> np.ndarray:
    """Zigzag-coded uint64 to the two's-complement difference (as uint64)."""
    return (z >> np.uint64(1)) ^ (np.uint64(0) - (z & np.uint64(1)))


def _running(d: np.ndarray, first: np.ndarray, n_rec: np.ndarray) -> np.ndarray:
    """Per block, the running sum of the differences ``d`` from zero (uint64, wrapping)."""
    c = np.cumsum(d, dtype=np.uint64)
    if len(first) > 1:
        before = np.concatenate(([np.uint64(0)], c[first[1:] - 1]))
        c -= np.repeat(before, n_rec)
    return c
