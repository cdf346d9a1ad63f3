"""``fs.write_stream_atomic``: parts gathered into few writes give the same bytes in a private
file renamed into place; a temp file a killed writer of this pid left is replaced, a symlink
planted at the temp name is not written through."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from openmsprof.fileio import fs

SMALL = [b"%d," % i for i in range(5000)]
LARGE = os.urandom(fs.WRITE_BYTES + 12345)


def _writes(monkeypatch: pytest.MonkeyPatch, calls: list[int]) -> None:
    real = os.write

    def counting(fd: int, data: bytes) -> int:
        calls.append(len(data))
        return real(fd, data)

    monkeypatch.setattr(fs.os, "write", counting)


def test_parts_are_gathered_and_exact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    _writes(monkeypatch, calls)
    target = tmp_path / "t.csv"
    parts = [b"head\n", *SMALL, LARGE, b"", *SMALL, b"end"]
    fs.write_stream_atomic(target, iter(parts))
    assert target.read_bytes() == b"".join(parts)
    assert oct(target.stat().st_mode & 0o777) == "0o640"
    # 10,005 small parts and one large one: a handful of writes, none of them empty
    assert 2 <= len(calls) <= 4 and min(calls) > 0, calls
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_a_leftover_temp_file_is_replaced(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    leftover = tmp_path / f".out.json.{os.getpid()}.tmp"
    leftover.write_bytes(b"half of a killed write")
    fs.write_file_atomic(target, b"[1]")
    assert target.read_bytes() == b"[1]"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_a_symlink_at_the_temp_name_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (tmp_path / f".out.json.{os.getpid()}.tmp").symlink_to(victim)
    fs.write_file_atomic(tmp_path / "out.json", b"[2]")
    assert victim.read_bytes() == b"keep"
    assert (tmp_path / "out.json").read_bytes() == b"[2]"
    assert not (tmp_path / "out.json").is_symlink()
