"""Raw files or folders that are symbolic links are not read (a link may point anywhere), and
the import says so in one warning line with their count, instead of dropping them silently; a
FIFO in the same place is warned about too."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from openmsprof.parse.importer import import_job
from tests.parse.conftest import make_job


@pytest.fixture
def small_job(out_dir: Path) -> Path:
    return make_job(out_dir, sampler=False)[0]


def test_linked_slices_are_counted_in_one_line(small_job: Path, tmp_path: Path) -> None:
    full = import_job(small_job, progress=False)
    data = small_job / "host" / "data"
    aside = tmp_path / "aside"
    aside.mkdir()
    slices = sorted(p for p in data.iterdir() if ".slice_" in p.name)
    assert len(slices) >= 2
    for p in slices[:2]:  # the files moved away, links left in their place
        shutil.move(str(p), aside / p.name)
        p.symlink_to(aside / p.name)
    r = import_job(small_job, progress=False)
    lines = [w for w in r.warnings if "symbolic link" in w]
    assert len(lines) == 1 and lines[0].startswith("2 raw file(s) or folder(s) are symbolic links; not read: ")
    assert slices[0].name in lines[0]
    assert r.records < full.records  # they were not read


def test_a_linked_device_folder_is_counted(small_job: Path, tmp_path: Path) -> None:
    dev = tmp_path / "device_7"
    dev.mkdir()
    (small_job / "device_7").symlink_to(dev)
    os.mkfifo(small_job / "host" / "data" / "Mstx.records.host.slice_99")
    r = import_job(small_job, progress=False)
    assert [w for w in r.warnings if "symbolic link" in w] == [
        "1 raw file(s) or folder(s) are symbolic links; not read: device_7"]
    assert any("slice_99" in w for w in r.warnings), r.warnings  # the FIFO: warned, not read
