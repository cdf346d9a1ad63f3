"""A disk that fills during export: the partial file is removed and the error is clear.

Uses a real 1 MiB tmpfs mounted over the output folder (skipped where mounting is impossible).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from openmsprof.cli.main import main
from openmsprof.config.errors import StorageError
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof.summary_export import write_summary
from openmsprof.export.msprof.timeline import write_timeline
from tests.export.dbfactory import make_big_db
from tests.tmpfs import mount_tmpfs


@pytest.fixture
def big(tmp_path: Path) -> Path:
    job = tmp_path / "PROF_000001_20240101000000000_00004242ABCDEFGH"
    (job / "host" / "data").mkdir(parents=True)
    make_big_db(job / "sqlite" / "msprof.db", 20_000)
    return job


@pytest.fixture
def tiny(tmp_path: Path) -> Iterator[Path]:
    yield from mount_tmpfs(tmp_path / "tiny", "1m")


def test_timeline_disk_full(big: Path, tiny: Path) -> None:
    with JobDB(big / "sqlite" / "msprof.db", big) as db, \
            pytest.raises(StorageError, match=r"disk full while writing .*msprof_0\.json.*removed"):
        write_timeline(db, tiny)
    assert list(tiny.iterdir()) == []


def test_summary_disk_full(big: Path, tiny: Path) -> None:
    with JobDB(big / "sqlite" / "msprof.db", big) as db, \
            pytest.raises(StorageError, match=r"disk full while writing .*op_summary_0\.csv"):
        write_summary(db, tiny)
    assert list(tiny.iterdir()) == []


def test_cli_reports_disk_full(big: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for tl in mount_tmpfs(big / "timeline", "1m"):
        assert main(["export", "timeline", "-dir", str(big)]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "disk full" in err and "partial file removed" in err
        assert list(tl.iterdir()) == []
