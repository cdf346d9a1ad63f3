"""Packed record slices (raw format version 2, docs/formats.md "Packed record slices"): the native
flusher's encoding (``_pack.h``), its C and numpy decoders (``packed_read``), the tolerant reader
(``rawread``) over torn and damaged files, and a real session's burst written packed and fixed."""

from __future__ import annotations

import json
import os
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from openmsprof.parse.importer import import_job
from openmsprof.recorder import core, packed_read, rawread
from openmsprof.recorder.rawfile import GENERIC_DTYPE
from openmsprof.recorder.records import HEADER, RECORDS_MAGIC

pytestmark = pytest.mark.skipif(core.ring is None, reason="native core not built (it is the encoder)")
DECODERS = ["native", "python"]


def _decode(which: str, buf: bytes) -> packed_read.Unpacked:
    return packed_read.unpack_blocks(buf) if which == "native" else packed_read._unpack(buf)


def _pack(recs: np.ndarray) -> bytes:
    assert core.ring is not None
    return bytes(core.ring.pack_records(recs.tobytes()))


def test_one_marker_packs_to_the_bytes_the_format_documents() -> None:
    """The literal example of docs/formats.md: a marker (kind 1, aux 3, tid 5, t0 = t1 = 1000,
    message id 0x80000001, no domain) is a 13-byte payload after its 8-byte header."""
    rec = np.zeros(1, dtype=GENERIC_DTYPE)
    rec[0] = (1, 0, 3, 5, 1000, 1000, 0x80000001, 0)
    want = bytes.fromhex("01000000" "0d000000" "01" "00" "03" "0a" "d00f" "00" "fdffffff0f" "00")
    assert _pack(rec) == want


@pytest.mark.parametrize("which", DECODERS)
def test_any_32_bytes_round_trip_in_blocks_of_4096(which: str) -> None:
    """Random bytes (every layout: counters' float bits, task info) at sizes around the block
    size come back byte for byte; a block never holds more than 4096 records."""
    rng = np.random.default_rng(7)
    for n in (1, 2, 4095, 4096, 4097, 3 * 4096 + 11):
        raw = rng.integers(0, 256, size=n * 32, dtype=np.uint8)
        raw[rng.random(n * 32) < 0.3] = 0
        packed = _pack(np.frombuffer(raw.tobytes(), dtype=GENERIC_DTYPE))
        got = _decode(which, packed)
        assert got.consumed == len(packed) and (got.bad_blocks, got.unframed) == (0, False)
        assert got.records.tobytes() == raw.tobytes()
        counts = [struct.unpack_from("<I", packed, off)[0] for off in _block_offsets(packed)]
        assert counts == [min(4096, n - i) for i in range(0, n, 4096)]


@pytest.mark.parametrize("which", DECODERS)
def test_extreme_values_and_wrapping_differences(which: str) -> None:
    """Differences that wrap: t0 from the int64 maximum to its minimum, ids from 2^32 - 1 to 0,
    a tid that changes every record, t1 before t0."""
    recs = np.zeros(6, dtype=GENERIC_DTYPE)
    recs["kind"] = [255, 1, 7, 10, 8, 0]
    recs["flags"] = [255, 0, 1, 2, 3, 4]
    recs["aux"] = [65535, 0, 1, 65534, 2, 3]
    recs["tid"] = [0xFFFFFFFF, 0, 0x80000000, 1, 0x7FFFFFFF, 5]
    recs["t0"] = [2**63 - 1, -(2**63), 0, -1, 1, 2**62]
    recs["t1"] = [-(2**63), 2**63 - 1, -5, 0, 0, -(2**62)]
    recs["a"] = [0xFFFFFFFF, 0, 0x80000000, 0x7FFFFFFF, 1, 0]
    recs["b"] = [0, 0xFFFFFFFF, 1, 0x80000001, 0, 0xFFFFFFFF]
    got = _decode(which, _pack(recs))
    assert got.records.tobytes() == recs.tobytes()


def test_a_flat_out_marker_stream_is_a_quarter_of_its_fixed_size() -> None:
    """Markers 56 ns apart with one message: 8 bytes a record after the first, against 32."""
    recs = _markers(100_000)
    assert len(_pack(recs)) <= 8 * len(recs) + 64 * (len(recs) // 4096 + 1)


@pytest.mark.parametrize("which", DECODERS)
def test_a_torn_last_block_is_left_unconsumed(which: str) -> None:
    recs = _markers(10_000)
    packed = _pack(recs)
    last = _block_offsets(packed)[-1]
    for cut in (1, 5, len(packed) - last - 8, len(packed) - last - 3):
        got = _decode(which, packed[:-cut])
        assert got.consumed == last and got.bad_blocks == 0
        assert got.records.tobytes() == recs[:8192].tobytes()


@pytest.mark.parametrize("which", DECODERS)
def test_a_damaged_block_is_skipped_and_counted_and_the_next_one_read(which: str) -> None:
    """A payload byte of the middle block made a continuation byte: that block's varints no
    longer align (one fewer), so its 4096 records are skipped; the blocks around it decode."""
    recs = _markers(3 * 4096)
    packed = bytearray(_pack(recs))
    mid = _block_offsets(bytes(packed))[1]
    packed[mid + 8 + 4] |= 0x80  # (the first record's tid varint runs into its t0)
    got = _decode(which, bytes(packed))
    assert (got.bad_blocks, got.bad_records, got.consumed) == (1, 4096, len(packed))
    assert got.records.tobytes() == np.concatenate([recs[:4096], recs[8192:]]).tobytes()


@pytest.mark.parametrize("which", DECODERS)
def test_a_field_out_of_range_marks_its_block_damaged(which: str) -> None:
    """A kind of 300 (two bytes, still aligned) is no record: the block goes, counted."""
    rec = np.zeros(1, dtype=GENERIC_DTYPE)
    payload = bytes.fromhex("ac02" "00" "00" "00" "00" "00" "00" "00")
    bad = struct.pack("<II", 1, len(payload)) + payload
    good = _pack(rec)
    got = _decode(which, good + bad + good)
    assert (got.bad_blocks, got.bad_records, len(got.records)) == (1, 1, 2)


@pytest.mark.parametrize("which", DECODERS)
def test_a_header_no_encoder_writes_stops_the_framing(which: str) -> None:
    good = _pack(_markers(10))
    for header in (struct.pack("<II", 0, 8), struct.pack("<II", 70_000, 10**6), struct.pack("<II", 2, 3)):
        got = _decode(which, good + header + b"\0" * 16)
        assert got.unframed and got.consumed == len(good) and len(got.records) == 10


def test_both_decoders_agree_on_random_damage() -> None:
    """Three hundred packed streams with one to three random bytes overwritten: the C decoder and
    the numpy fallback return the same records and counts."""
    rng = np.random.default_rng(11)
    flagged = 0
    for _ in range(300):
        n = int(rng.integers(1, 9000))
        raw = rng.integers(0, 256, size=n * 32, dtype=np.uint8)
        raw[rng.random(n * 32) < 0.5] = 0
        packed = bytearray(_pack(np.frombuffer(raw.tobytes(), dtype=GENERIC_DTYPE)))
        for _ in range(int(rng.integers(1, 4))):
            packed[int(rng.integers(0, len(packed)))] = int(rng.integers(0, 256))
        a, b = packed_read.unpack_blocks(bytes(packed)), packed_read._unpack(bytes(packed))
        assert (a.consumed, a.bad_blocks, a.bad_records, a.unframed) == \
            (b.consumed, b.bad_blocks, b.bad_records, b.unframed)
        assert a.records.tobytes() == b.records.tobytes()
        flagged += a.bad_blocks > 0 or a.unframed
    assert flagged > 150  # (most damage is caught: the varint counts, lengths and ranges)


def test_pack_records_refuses_a_partial_record() -> None:
    assert core.ring is not None
    with pytest.raises(ValueError, match="multiple of 32"):
        core.ring.pack_records(b"\0" * 33)


def test_the_reader_counts_a_torn_tail_and_a_damaged_block(tmp_path: Path) -> None:
    """A version-2 slice read in small chunks: its records in order, the damaged block's records
    counted in ``dropped_records`` and the torn tail in ``dropped_bytes``, each with a warning."""
    recs = _markers(5 * 4096)
    packed = bytearray(_pack(recs))
    offs = _block_offsets(bytes(packed))
    packed[offs[2] + 8 + 4] |= 0x80
    path = tmp_path / "Mstx.records.host.slice_0"
    path.write_bytes(HEADER.pack(RECORDS_MAGIC, 2, 32, 0) + bytes(packed[:-7]))
    report = rawread.ReadReport()
    got = np.concatenate(list(rawread.iter_record_chunks(path, report, chunk_records=1000)))
    assert got.tobytes() == np.concatenate([recs[:8192], recs[12288:16384]]).tobytes()
    assert (report.records, report.dropped_records) == (3 * 4096, 4096)
    assert report.dropped_bytes == len(packed) - 7 - offs[4]
    assert any("1 damaged block(s) of 4096 record(s)" in w for w in report.warnings)
    assert any("torn tail" in w and "a block of 4096 record(s)" in w for w in report.warnings)


def test_the_reader_stops_at_a_header_no_encoder_writes_and_counts_the_rest(tmp_path: Path) -> None:
    """A block header of 0 records after two good blocks: their records are read, the file's
    remaining bytes (the bad header and 100 KB after it) counted as dropped, with the offset."""
    recs = _markers(8192)
    packed = _pack(recs)
    path = tmp_path / "Mstx.records.host.slice_0"
    path.write_bytes(HEADER.pack(RECORDS_MAGIC, 2, 32, 0) + packed + struct.pack("<II", 0, 8) + b"\1" * 100_000)
    report = rawread.ReadReport()
    got = np.concatenate(list(rawread.iter_record_chunks(path, report, chunk_records=1000)))
    assert got.tobytes() == recs.tobytes()
    assert report.dropped_bytes == 8 + 100_000
    assert any(f"bad block header at byte {HEADER.size + len(packed)}; the last 100008 bytes dropped" in w
               for w in report.warnings), report.warnings


BURST = """
import json, sys, time
import openmsprof
from openmsprof import mstx
from openmsprof.recorder import session
openmsprof.start(output=sys.argv[1])
for i in range(200_000):
    mstx.mark("m%d" % (i % 7), domain="d%d" % (i % 3) if i % 5 else None)
s = session.stop()
print(json.dumps({"written": s.overhead["records_written"], "bytes": s.overhead["bytes_written"]}))
"""


@pytest.mark.parametrize("packed", ["1", "0"])
def test_a_session_writes_packed_by_default_and_fixed_when_told(tmp_path: Path, packed: str) -> None:
    """200,000 markers of 7 messages and 3 domains from a real session: the slice's header
    version (2 packed, 1 fixed), its size, and import's MSTX_EVENTS: every marker, in order,
    with its message and domain."""
    env = dict(os.environ, OPENMSPROF_RECORDER="native", OPENMSPROF_RECORDER_PACKED=packed)
    r = subprocess.run([sys.executable, "-c", BURST, str(tmp_path)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stdout.splitlines()[-1])
    job = next(tmp_path.glob("PROF_*"))
    slices = rawread.list_slices(job / "host" / "data")
    assert [s[0] for s in slices] == ["Mstx"]
    head = slices[0][3].read_bytes()[:HEADER.size]
    assert HEADER.unpack(head)[1] == (2 if packed == "1" else 1)
    assert stats["written"] == 200_001  # (and the thread's name)
    assert (stats["bytes"] < 200_000 * 12) if packed == "1" else (stats["bytes"] > 200_000 * 32)
    import_job(job, progress=False)

    db = sqlite3.connect(next(job.glob("sqlite/msprof.db")))
    try:
        rows = db.execute("SELECT m.value, d.value, e.startNs FROM MSTX_EVENTS e JOIN STRING_IDS m ON e.message = m.id"
                          " JOIN STRING_IDS d ON e.domainId = d.id ORDER BY e.startNs, e.rowid").fetchall()
    finally:
        db.close()
    assert len(rows) == 200_000  # (the final drain writes them in several ~1 MB chunks)
    assert [m for m, _d, _t in rows] == [f"m{i % 7}" for i in range(200_000)]
    assert [d for _m, d, _t in rows] == ["default" if i % 5 == 0 else f"d{i % 3}" for i in range(200_000)]
    assert len({t for _m, _d, t in rows}) == 200_000  # (each marker once: none written twice)


def _markers(n: int) -> np.ndarray:
    recs = np.zeros(n, dtype=GENERIC_DTYPE)
    recs["kind"] = 1
    recs["tid"] = 4242
    recs["t0"] = 5_000_000_000_000 + np.arange(n, dtype=np.int64) * 56
    recs["t1"] = recs["t0"]
    recs["a"] = 0x80000001
    return recs


def _block_offsets(packed: bytes) -> list[int]:
    offs, pos = [], 0
    while pos < len(packed):
        offs.append(pos)
        pos += 8 + struct.unpack_from("<I", packed, pos + 4)[0]
    return offs


LATE = """
import sys
import openmsprof
from openmsprof import mstx
openmsprof.start(output=sys.argv[1], storage_limit_mb=1)
for i in range(400_000):
    mstx.mark("fill")
openmsprof.stop()
"""


def test_a_late_flush_writes_the_blocks_that_fit_under_the_storage_limit(tmp_path: Path) -> None:
    """400,000 markers made before the flusher's first cycle (~3.6 MB packed) against
    storage_limit 1 MB: the blocks that fit under it are written (~110 k markers), then
    collection stops and says so; what was buffered is counted as lost, not written."""
    env = dict(os.environ, OPENMSPROF_RECORDER="native")
    r = subprocess.run([sys.executable, "-c", LATE, str(tmp_path)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    job = next(tmp_path.glob("PROF_*"))
    assert "storage_limit 1MB reached" in (job / "host" / "collection.log").read_text()
    data = job / "host" / "data"
    recs = rawread.read_all_records(data)
    marks = int((recs["kind"] == 1).sum())
    assert 60_000 < marks < 400_000, marks
    size = sum(p.stat().st_size for p in data.iterdir() if ".records." in p.name)
    assert 512 * 1024 < size <= 1024 * 1024, size
    overhead = json.loads((job / "host" / "openmsprof_overhead.json").read_text())
    # (what was buffered when it stopped is counted as lost; later markers are not collected)
    assert overhead["drop_reasons"].get("collection_halted", 0) == overhead["records_dropped"] > 0, overhead
    assert overhead["records_written"] + overhead["records_dropped"] <= 400_001, overhead
