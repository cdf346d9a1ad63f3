"""Shared fixtures: every test leaves no session running and writes under tmp_path."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from openmsprof.recorder import session


@pytest.fixture(autouse=True)
def _no_leftover_session() -> Iterator[None]:
    yield
    if session.current() is not None:
        session.stop()


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    """A fresh output directory for a job."""
    d = tmp_path / "out"
    d.mkdir()
    return d


@pytest.fixture(autouse=True)
def _umask_wide() -> Iterator[None]:
    """Run with a permissive umask so the 0640/0750 guarantees are really tested."""
    old = os.umask(0o002)
    yield
    os.umask(old)
