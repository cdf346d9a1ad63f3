"""A real torch window analysed with trace_view's Perfetto fit in C (export/ascend_pt/_perfetto_fit.c)
and with its Python reference gives the same bytes in every file, and the fit had work to do."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from openmsprof.export.ascend_pt import perfetto_fit, trace_tracks
from openmsprof.export.ascend_pt.trace_tracks import TraceFit
from openmsprof.torch.profiler import analysis
from tests.torch.conftest import Trainer, raw_window

pytest.importorskip("openmsprof.export.ascend_pt._perfetto_fit",
                    reason="the C extension was not built (no compiler): the Python fit runs")


def _files(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*"))
            if p.is_file()}


def test_native_and_python_fits_write_the_same_window(cnn: Trainer, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # one private copy first: both analyses start from the same bytes whatever the worker does later
    saved = raw_window(cnn, tmp_path / "raw")
    raw = shutil.copytree(saved, tmp_path / "kept" / saved.name)
    fits: list[TraceFit] = []
    real = trace_tracks.fit_trace

    def spy(*a: object) -> TraceFit:
        fits.append(real(*a))  # type: ignore[arg-type]
        return fits[-1]

    monkeypatch.setattr(trace_tracks, "fit_trace", spy)
    native = shutil.copytree(raw, tmp_path / "native" / raw.name)
    analysis.analyse_dir(native, parallel=False)
    monkeypatch.setattr(perfetto_fit, "_native", None)
    python = shutil.copytree(raw, tmp_path / "python" / raw.name)
    analysis.analyse_dir(python, parallel=False)

    got = _files(native)
    assert any(k.endswith("trace_view.json") for k in got)
    assert got == _files(python)
    assert len(fits) == 2
    assert (fits[0].shortened, fits[0].shortened_ns, fits[0].moved) == (fits[1].shortened, fits[1].shortened_ns,
                                                                       fits[1].moved)
    # the window's stacks cross its operators and Perfetto's grid cuts some slices: both paths fit
    assert fits[0].shortened > 0 and fits[0].moved > 0
