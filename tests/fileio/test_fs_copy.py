"""``fs.copy_file_atomic``: the kernel's copy or read/write give the same bytes, in a private
file renamed into place; a symlinked target is refused and a full disk leaves nothing behind."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from openmsprof.config.errors import PathError, StorageError
from openmsprof.fileio import fs
from tests.tmpfs import mount_tmpfs

DATA = os.urandom(3 << 20) + b"tail"  # not a multiple of the 4 MiB read-and-write chunk


@pytest.mark.parametrize("kernel", [True, False], ids=["copy_file_range", "read-write"])
def test_copy_is_exact_private_and_replaces(tmp_path: Path, kernel: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not kernel:
        monkeypatch.delattr(os, "copy_file_range", raising=False)
    src, dst = tmp_path / "src.csv", tmp_path / "dst.csv"
    src.write_bytes(DATA)
    dst.write_bytes(b"old")
    old = os.umask(0o002)
    try:
        fs.copy_file_atomic(src, dst)
    finally:
        os.umask(old)
    assert dst.read_bytes() == DATA
    assert oct(dst.stat().st_mode & 0o777) == "0o640"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst.csv", "src.csv"]


def test_a_symlinked_target_is_refused(tmp_path: Path) -> None:
    src, victim = tmp_path / "src", tmp_path / "victim"
    src.write_bytes(b"x")
    victim.write_bytes(b"keep")
    (tmp_path / "dst").symlink_to(victim)
    with pytest.raises(PathError, match="symbolic link"):
        fs.copy_file_atomic(src, tmp_path / "dst")
    assert victim.read_bytes() == b"keep"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    yield from mount_tmpfs(tmp_path / "disk", "1m")


@pytest.mark.parametrize("kernel", [True, False], ids=["copy_file_range", "read-write"])
def test_a_full_disk_raises_and_leaves_no_temp_file(small_disk: Path, tmp_path: Path, kernel: bool,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    if not kernel:
        monkeypatch.delattr(os, "copy_file_range", raising=False)
    src = tmp_path / "src"
    src.write_bytes(DATA)
    with pytest.raises(StorageError, match="disk full"):
        fs.copy_file_atomic(src, small_disk / "dst")
    assert list(small_disk.iterdir()) == []
