"""``peaks_cache.cache_path`` is kept between calls but follows every variable its root reads."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from openmsprof.machine import peaks_cache


def test_the_path_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"peaks-{socket.gethostname()}.json"
    monkeypatch.setenv("OPENMSPROF_CACHE", str(tmp_path / "a"))
    assert peaks_cache.cache_path() == tmp_path / "a" / name
    assert peaks_cache.cache_path() == tmp_path / "a" / name
    monkeypatch.setenv("OPENMSPROF_CACHE", str(tmp_path / "b"))
    assert peaks_cache.cache_path() == tmp_path / "b" / name
    monkeypatch.delenv("OPENMSPROF_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert peaks_cache.cache_path() == tmp_path / "xdg" / "openmsprof" / name
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert peaks_cache.cache_path() == tmp_path / "home" / ".cache" / "openmsprof" / name
    monkeypatch.setenv("HOME", str(tmp_path / "home2"))
    assert peaks_cache.cache_path() == tmp_path / "home2" / ".cache" / "openmsprof" / name
    monkeypatch.delenv("HOME")  # the user database's home directory
    assert peaks_cache.cache_path() == Path(os.path.expanduser("~")) / ".cache" / "openmsprof" / name
