"""Named regressions of the fault campaign: FIFOs, /dev/zero, a flipped bit, huge integers,
pyACL argument types and CLI values.  Each case must answer in one line, promptly, without a
traceback, and exports must never see an impossible row."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import openmsprof
from openmsprof import acl, mstx
from openmsprof.config.acl_json import load_acl_json
from openmsprof.config.errors import ConfigError
from openmsprof.parse.importer import import_job
from openmsprof.recorder import rawread
from openmsprof.recorder.records import HEADER
from tests.recorder.slice_forms import to_fixed

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def job(out_dir: Path) -> Path:
    with openmsprof.profile(output=out_dir, runtime_api=True) as prof:
        for i in range(200):
            mstx.mark(f"m{i % 7}")
            with mstx.mstx_range("r"):
                pass
    assert prof.job is not None
    return prof.job


def cli(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openmsprof", *argv], capture_output=True, text=True,
                          timeout=timeout)


def one_line_error(r: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in r.stderr, r.stderr
    lines = [x for x in r.stderr.splitlines() if "error" in x]
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_fifo_as_job_file_does_not_hang_import(job: Path) -> None:
    slice0 = next((job / "host" / "data").glob("Mstx.records.*.slice_0"))
    slice0.unlink()
    os.mkfifo(slice0)
    os.unlink(job / "host" / "start_info")
    os.mkfifo(job / "host" / "start_info")
    r = cli("import", "-dir", str(job), timeout=60)
    assert r.returncode == 0, r.stderr
    assert "is a FIFO, not a regular file; refused" in r.stderr
    assert "Traceback" not in r.stderr


def test_fifo_as_acl_json_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "acl.json")
    with pytest.raises(ConfigError, match="FIFO"):
        load_acl_json(tmp_path / "acl.json")
    assert acl.init(str(tmp_path / "acl.json")) != 0
    assert "FIFO" in acl.get_recent_err_msg()


def test_dev_zero_as_job_file_and_acl_json(job: Path, tmp_path: Path) -> None:
    info = job / "host" / "info.json"
    info.unlink()
    os.symlink("/dev/zero", info)
    table = next((job / "host" / "data").glob("*.table.*.slice_0"))
    table.rename(table.with_name(table.name + ".orig"))
    os.symlink("/dev/zero", table)
    res = import_job(job, progress=False)
    assert any("symbolic link" in w for w in res.warnings)
    os.symlink("/dev/zero", tmp_path / "acl.json")
    with pytest.raises(ConfigError):
        load_acl_json(tmp_path / "acl.json")


def test_bit_flip_record_is_dropped_counted_and_exports_run(job: Path) -> None:
    slice0 = next((job / "host" / "data").glob("Mstx.records.*.slice_0"))
    to_fixed(slice0)  # (the native core's packed blocks: the bytes below index fixed records)
    data = bytearray(slice0.read_bytes())
    data[HEADER.size + 32 * 5 + 15] ^= 0x40  # the top byte of t0 of the 6th record
    data[HEADER.size + 32 * 9 + 2] ^= 0x80  # aux of the 10th record
    slice0.write_bytes(bytes(data))
    r = cli("import", "-dir", str(job))
    assert r.returncode == 0 and "impossible value (dropped)" in r.stderr, r.stderr
    for argv in (["export", "timeline", "-dir", str(job)], ["export", "summary", "-dir", str(job)],
                 ["show", "-dir", str(job)]):
        r = cli(*argv)
        assert r.returncode == 0 and "Traceback" not in r.stderr, (argv, r.stderr)


def test_huge_int_and_wrong_types_in_job_json(job: Path) -> None:
    (job / "host" / "start_info").write_text(json.dumps({"collectionTimeBegin": 10**400,
                                                         "clockMonotonicRaw": [1]}))
    (job / "host" / "info.json").write_text(json.dumps({"pid": 1e308, "rank_id": {"a": 1},
                                                        "hostname": [1, 2], "DeviceInfo": 5}))
    (job / "host" / "end_info").write_text('{"collectionTimeEnd": "9' + "9" * 5000 + '"}')
    for argv in (["import", "-dir", str(job)], ["export", "timeline", "-dir", str(job)],
                 ["show", "-dir", str(job)]):
        r = cli(*argv)
        assert r.returncode == 0 and "Traceback" not in r.stderr, (argv, r.stderr)


def test_acl_entry_points_return_codes_for_any_argument(tmp_path: Path) -> None:
    assert acl.init(5) == 100000  # type: ignore[arg-type]
    deep = tmp_path / "deep.json"
    deep.write_text('{"profiler": {"switch": ' + "[" * 950 + "]" * 950 + "}}")
    assert acl.init(str(deep)) != 0
    assert len(acl.get_recent_err_msg().splitlines()) == 1
    assert acl.prof.init(b"\x00") != 0  # type: ignore[arg-type]
    assert acl.rt.set_device("zero") != 0  # type: ignore[arg-type]
    _model, ret = acl.mdl.load_from_file(5)  # type: ignore[arg-type]
    assert ret != 0


@pytest.mark.parametrize("argv, needle", [
    (["show", "-dir", "/tmp", "--top", "1e20"], "--top"),
    (["show", "-dir", "/tmp", "--top", "99999999999999999999"], "--top"),
    (["export", "timeline", "-dir", "/tmp", "--start-us", "nan"], "finite"),
    (["export", "timeline", "-dir", "/tmp", "--start-us", "1e300"], "finite"),
    (["export", "timeline", "-dir", "/tmp", "--max-size-mb", "inf"], "finite"),
    (["import", "-dir", "/tmp/" + "n" * 300], "255 bytes"),
    (["import", "-dir", "/tmp/a\nb"], "control characters"),
    (["import", "-dir", "/proc"], "not a profiling job"),
])
def test_cli_values_get_one_line_errors(argv: list[str], needle: str) -> None:
    r = cli(*argv)
    assert r.returncode != 0
    assert needle in one_line_error(r)


def test_exports_never_see_impossible_rows(job: Path) -> None:
    # every record made impossible in a different way: nothing reaches the database
    slice0 = next((job / "host" / "data").glob("Mstx.records.*.slice_0"))
    arr = rawread.read_all_records(job / "host" / "data").copy()
    arr = arr[arr["kind"] == 1]
    arr["t0"] = np.int64(-5)
    slice0.write_bytes(HEADER.pack(b"OMSPREC\0", 1, 32, 0) + arr.tobytes())
    res = import_job(job, progress=False)
    assert res.rows.get("MSTX_EVENTS", 0) == 0
    assert any("impossible value" in w for w in res.warnings)


def test_toctou_job_dir_swapped_for_a_symlink_is_refused(out_dir: Path, tmp_path: Path, backend: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "host" / "data").mkdir(parents=True)
    s = openmsprof.start(output=out_dir)
    for _ in range(1000):
        mstx.mark("before")
    root = s.root
    moved = root.with_name(root.name + ".moved")
    root.rename(moved)
    os.symlink(elsewhere, root)
    for _ in range(1000):
        mstx.mark("after")
    openmsprof.stop()
    assert not (elsewhere / "host" / "end_info").exists()
    assert list((elsewhere / "host" / "data").iterdir()) == []  # no record went through the link
    assert not (moved / "host" / "end_info").exists()
    log = (moved / "host" / "collection.log").read_text()
    assert "was replaced after the start" in log and "end records refused" in log
    marks = rawread.read_all_records(moved / "host" / "data")
    assert int(np.count_nonzero(marks["kind"] == 1)) == 2000  # the writes kept to the real dir


def test_job_name_with_a_newline_is_escaped_in_messages(tmp_path: Path) -> None:
    bad = tmp_path / "job\nname"
    r = cli("import", "-dir", str(bad))
    line = one_line_error(r)
    assert "\\n" in line and "job\nname" not in r.stderr


def test_import_on_a_full_disk_one_line_naming_it_and_no_temp_file(job: Path) -> None:
    from tests.tmpfs import mount_tmpfs

    for mnt in mount_tmpfs(job / "sqlite", "256k"):
        (mnt / "filler").write_bytes(b"\0" * (200 * 1024))
        r = cli("import", "-dir", str(job))
        line = one_line_error(r)
        assert r.returncode == 1
        assert "disk full" in line and str(mnt) in line, line
        left = sorted(p.name for p in mnt.iterdir() if p.name != ".import.lock")  # the (empty) lock stays
        assert left == ["filler"], f"a temp file was left behind: {left}"
