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


BACKENDS = ["native", "python"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test on the native recorder core and on the pure-Python fallback (the marker
    entry points of ``sources.markers`` and ``openmsprof.mstx`` rebound for the test)."""
    from openmsprof import mstx
    from openmsprof.recorder import core
    from openmsprof.sources import markers

    name = request.param
    if name == "native" and core.ring is None:
        pytest.skip("the native recorder core was not built (no compiler at install time)")
    fns = {"mark": markers.py_mark, "push": markers.py_push, "pop": markers.py_pop,
           "range_start": markers.py_range_start, "range_end": markers.py_range_end}
    if name == "native":
        assert core.ring is not None
        fns = {k: getattr(core.ring, k) for k in fns}
    monkeypatch.setattr(core, "BACKEND", name)
    monkeypatch.setattr(markers, "BACKEND", name)
    for k, f in fns.items():
        monkeypatch.setattr(markers, k, f)
    for k, alias in (("mark", "mark"), ("push", "range_push"), ("pop", "range_pop"),
                     ("range_start", "range_start"), ("range_end", "range_end")):
        monkeypatch.setattr(mstx, alias, fns[k])
    return name
