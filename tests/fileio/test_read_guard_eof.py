"""``read_regular`` ends a read at the size ``fstat`` gave without a second read, and still reads
files that report no size (``/proc``) to their end, over several reads."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from openmsprof.config.errors import ProfilingError
from openmsprof.fileio.read_guard import read_regular

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.mark.parametrize("size", [0, 1, 4095, (1 << 20) - 1, 1 << 20, (3 << 20) + 7])
def test_regular_files_are_read_exactly(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    (tmp_path / "f").write_bytes(data)
    assert read_regular(tmp_path / "f", "test file", 4 << 20) == data


def test_the_limit_holds_at_one_byte(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 101)
    assert read_regular(tmp_path / "f", "test file", 101) == b"x" * 101
    with pytest.raises(ProfilingError, match=r"^test file .*101 bytes is larger than the 100 byte limit$"):
        read_regular(tmp_path / "f", "test file", 100)


@pytest.mark.skipif(not os.path.exists("/proc/self/environ"), reason="needs Linux /proc")
def test_a_proc_file_of_no_size_is_read_to_its_end_over_several_reads(tmp_path: Path) -> None:
    """/proc/self/environ says size 0; with 12 values of 100 KiB it takes two 1 MiB reads."""
    env = {**os.environ, "PYTHONPATH": SRC, **{f"BIG{i}": chr(65 + i) * 100_000 for i in range(12)}}
    code = textwrap.dedent("""
        import sys
        from openmsprof.fileio.read_guard import read_regular
        got = read_regular("/proc/self/environ", "environ", 4 << 20)
        with open("/proc/self/environ", "rb") as f:
            want = f.read()
        sys.stdout.write(f"{len(got)} {got == want}")
    """)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    size, same = out.stdout.split()
    assert int(size) > 1_200_000 and same == "True"


def test_a_file_that_grew_after_the_open_is_read_on(tmp_path: Path) -> None:
    """The first read asks for the fstat size and one byte more; a file appended to before it
    (between ``fstat`` and the read) gets the rest in further reads, up to the limit."""
    path = tmp_path / "f"
    path.write_bytes(b"a" * 1000)
    real_fstat = os.fstat

    def fstat_then_grow(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        with open(path, "ab") as f:
            f.write(b"b" * 3_000_000)
        return st

    mp = pytest.MonkeyPatch()
    mp.setattr(os, "fstat", fstat_then_grow)
    try:
        data = read_regular(path, "test file", 4 << 20)
    finally:
        mp.undo()
    assert data == b"a" * 1000 + b"b" * 3_000_000
    path.write_bytes(b"a" * 1000)
    mp.setattr(os, "fstat", fstat_then_grow)
    try:
        with pytest.raises(ProfilingError, match=r"larger than the 2000000 byte limit$"):
            read_regular(path, "test file", 2_000_000)
    finally:
        mp.undo()
