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
    path = tmp_path / "out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        left = trace_split._groups(fd, iter(groups), first=first)
    finally:
        os.close(fd)
    values = [v for g in groups for v in g]
    want = b",".join(values)
    if values and not first:
        want = b"," + want
    assert path.read_bytes() == want
    assert left == (first and not values)
