"""Test helpers: a records slice rewritten in the fixed form (version 1, 32-byte records, what
byte-level corruption tests index into) or in the packed form (version 2, the native flusher's)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from openmsprof.recorder import core, packed_read
from openmsprof.recorder.rawfile import GENERIC_DTYPE
from openmsprof.recorder.records import FORMAT_VERSION, HEADER, PACKED_VERSION


def to_fixed(path: Path) -> None:
    """``path`` (a records slice) in the fixed form; a fixed one is left as it is."""
    data = path.read_bytes()
    magic, version, size, _ = HEADER.unpack_from(data)
    if version != PACKED_VERSION:
        return
    got = packed_read._unpack(data[HEADER.size:])
    assert got.consumed == len(data) - HEADER.size and not got.bad_blocks, path
    path.write_bytes(HEADER.pack(magic, FORMAT_VERSION, size, 0) + got.records.tobytes())


def fixed_job(job: Path) -> Path:
    """Every records slice of ``job`` in the fixed form."""
    for p in job.glob("*/data/*.records.*"):
        if not p.name.endswith(".done"):
            to_fixed(p)
    return job


def write(path: Path, header: bytes, records: np.ndarray, packed: bool) -> None:
    """``records`` (any 32-byte layout) after ``header``'s magic, in the form asked for."""
    magic = HEADER.unpack_from(header)[0]
    if not packed:
        path.write_bytes(HEADER.pack(magic, FORMAT_VERSION, 32, 0) + records.tobytes())
        return
    assert core.ring is not None
    body = core.ring.pack_records(records.view(GENERIC_DTYPE).tobytes())
    path.write_bytes(HEADER.pack(magic, PACKED_VERSION, 32, 0) + body)
