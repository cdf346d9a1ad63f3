"""``fs.write_stream_atomic``: parts gathered into few writes give the same bytes in a private
file renamed into place; a temp file a killed writer of this pid left is replaced, a symlink
planted at the temp name is not written through.  ``fs.write_stream_new``: the same bytes
straight into a new file, never over one or a link, and nothing left when it fails."""

from __future__ import annotations

import os
from collections.abc import Iterator
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


def test_a_new_stream_is_written_in_place_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``write_stream_new``: the same bytes and mode, gathered the same way, straight into the file
    (no temp file, no rename); a file or a link already there is refused and left as it was."""
    calls: list[int] = []
    _writes(monkeypatch, calls)
    renames: list[object] = []
    monkeypatch.setattr(fs.os, "replace", lambda *a, **k: renames.append(a))
    parts = [b"head\n", *SMALL, LARGE, b"", *SMALL, b"end"]
    old = os.umask(0o077)
    try:
        fs.write_stream_new(tmp_path / "t.csv", iter(parts))
    finally:
        os.umask(old)
    assert (tmp_path / "t.csv").read_bytes() == b"".join(parts)
    assert oct((tmp_path / "t.csv").stat().st_mode & 0o777) == "0o640"
    assert 2 <= len(calls) <= 4 and not renames
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (tmp_path / "link.csv").symlink_to(victim)
    for name in ("t.csv", "link.csv"):
        with pytest.raises(fs.PathError, match="already exists"):
            fs.write_stream_new(tmp_path / name, [b"new"])
    assert (tmp_path / "t.csv").read_bytes() == b"".join(parts) and victim.read_bytes() == b"keep"


def test_a_new_stream_that_fails_leaves_no_file(tmp_path: Path) -> None:
    def parts() -> Iterator[bytes]:
        yield LARGE  # (written: past WRITE_BYTES)
        raise RuntimeError("formatting failed")

    with pytest.raises(RuntimeError, match="formatting failed"):
        fs.write_stream_new(tmp_path / "t.csv", parts())
    assert list(tmp_path.iterdir()) == []
