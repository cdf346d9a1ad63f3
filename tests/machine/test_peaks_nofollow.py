"""host/peaks.json is written through the session's directory fd, like end_info: a host/ swapped
for a symbolic link after the start is never written through, neither at stop (cached peaks)
nor by the detached child that measures them later (it writes into the directory it was handed)."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

import openmsprof
from openmsprof.machine import peaks
from tests.machine.test_peaks_child import _wait_gone

_DOC = {"stream": {"triad": 12.5}, "gemm": {"float32": 300.0}}


def _swap_host(root: Path, decoy: Path) -> Path:
    """Move host/ aside and put a link to ``decoy`` in its place; returns where host/ went."""
    decoy.mkdir()
    real = root / "host.real"
    (root / "host").rename(real)
    (root / "host").symlink_to(decoy)
    return real


def test_cached_peaks_not_written_through_a_swapped_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENMSPROF_CACHE", str(tmp_path / "cache"))
    peaks_file = tmp_path / "peaks_in.json"
    peaks_file.write_bytes(orjson.dumps(_DOC))
    monkeypatch.setenv("OPENMSPROF_PEAKS", str(peaks_file))
    s = openmsprof.start(tmp_path / "out")
    real = _swap_host(s.root, tmp_path / "decoy")
    openmsprof.stop()
    assert list((tmp_path / "decoy").iterdir()) == []
    assert not (real / peaks.PEAKS_FILE).exists()
    log = (real / "collection.log").read_text()
    assert "machine peaks not stored" in log and "was replaced after the start" in log


def test_unswapped_host_gets_the_given_peaks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    peaks_file = tmp_path / "peaks_in.json"
    peaks_file.write_bytes(orjson.dumps(_DOC))
    monkeypatch.setenv("OPENMSPROF_PEAKS", str(peaks_file))
    s = openmsprof.start(tmp_path / "out")
    openmsprof.stop()
    doc = orjson.loads((s.root / "host" / peaks.PEAKS_FILE).read_bytes())
    assert peaks.bandwidth(doc) == 12.5e9


def test_the_measuring_child_writes_into_the_directory_it_was_handed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENMSPROF_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENMSPROF_PEAKS", raising=False)
    s = openmsprof.start(tmp_path / "out")
    openmsprof.stop()
    log = (s.root / "host" / "collection.log").read_text()
    m = re.search(r"measuring in background process (\d+)", log)
    assert m, log
    real = _swap_host(s.root, tmp_path / "decoy")  # while the child measures
    assert _wait_gone(int(m.group(1)), 120), "the peaks child did not finish"
    assert list((tmp_path / "decoy").iterdir()) == []
    assert orjson.loads((real / peaks.PEAKS_FILE).read_bytes())["source"] == "measured"
