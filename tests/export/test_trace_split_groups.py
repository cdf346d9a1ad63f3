"""trace_split._groups writes the groups' values comma-joined, small groups gathered and large ones
written as joined: the file is the same as one join of every value, whatever the sizes."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from openmsprof.export.ascend_pt import trace_split


@pytest.mark.parametrize("seed", range(12))
def test_groups_write_one_comma_joined_sequence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    rng = random.Random(seed)
    monkeypatch.setattr(trace_split, "WRITE_BYTES", rng.choice([1, 7, 64, 1 << 20]))
    groups = [[bytes([rng.randrange(97, 123)]) * rng.randrange(0, 40) + b"%d" % i
               for i in range(rng.choice([0, 0, 1, 2, 5, 30]))] for _ in range(rng.randrange(0, 25))]
    first = rng.random() < 0.5
    lead, end = rng.choice([(b"", b""), (b"[", b"]"), (b"[", b""), (b"", b"]")])
    path = tmp_path / "out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        left = trace_split._groups(fd, iter(groups), first=first, lead=lead, end=end)
    finally:
        os.close(fd)
    values = [v for g in groups for v in g]
    want = b",".join(values)
    if values and not first:
        want = b"," + want
    assert path.read_bytes() == lead + want + end
    assert left == (first and not values)


def test_a_small_trace_is_one_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Below ``WRITE_BYTES`` the brackets and every group go out in a single writev."""
    calls: list[list[bytes]] = []
    real = os.writev
    monkeypatch.setattr(trace_split.os, "writev", lambda fd, parts: (calls.append(list(parts)), real(fd, parts))[1])
    path = tmp_path / "out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        assert not trace_split._groups(fd, iter([[b"a", b"b"], [], [b"c"]]), first=True, lead=b"[", end=b"]")
    finally:
        os.close(fd)
    assert len(calls) == 1 and b"".join(calls[0]) == b"[a,b,c]" and path.read_bytes() == b"[a,b,c]"


@pytest.mark.parametrize("short", [0, 1, 3, 6])
def test_a_short_or_failed_writev_is_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, short: int) -> None:
    """A writev that writes only ``short`` bytes (0: fails) is finished by write_all, in order,
    and more buffers than IOV_MAX go out in several calls."""
    monkeypatch.setattr(trace_split, "IOV_MAX", 4)

    def writev(fd: int, parts: list[bytes]) -> int:
        if not short:
            raise OSError(5, "I/O error")
        return os.write(fd, b"".join(parts)[:short])

    monkeypatch.setattr(trace_split.os, "writev", writev)
    parts = [b"[", b"ab", b",", b"cde", b",", b"f", b"]"]
    path = tmp_path / "out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        trace_split._write_parts(fd, parts)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"[ab,cde,f]"
