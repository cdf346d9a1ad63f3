"""Machine peaks: the measurement's shape, the override file's checks, the per-machine cache and
the copy stored in each job at collection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

import openmsprof
from openmsprof.cli.main import main
from openmsprof.config.errors import ConfigError
from openmsprof.machine import peaks


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    return peaks.measure()


def test_measurement_shape(measured: dict[str, Any]) -> None:
    assert measured["stream"]["array_bytes"] >= 8 * peaks.llc_bytes()
    assert "copy" in measured["stream"] and "numpy float32" in measured["gemm"]
    for group in ("stream", "gemm", "special"):
        for name, v in measured[group].items():
            if name == "array_bytes":
                continue
            assert v["runs"] >= peaks.RUNS and v["best"] >= v["median"] > 0, (group, name)
            assert v["cv"] >= 0 and v["loaded"] == (v["cv"] > peaks.CV_LOADED)
    assert all(s.split()[0] in ("stream", "gemm", "special", "onnxruntime")
               for s in measured["skipped"])
    assert peaks.bandwidth(measured) > 1e8 and peaks.gemm_peak(measured) > 1e8
    assert peaks.special_rate(measured) > 0
    assert peaks.validate(measured, "x") is measured


@pytest.mark.parametrize("doc, what", [
    ([], "expected a JSON object"),
    ({"stream": {"copy": "fast"}, "gemm": {"numpy float32": 1}}, "stream.copy must be"),
    ({"stream": {"copy": {"best": -3}}, "gemm": {"numpy float32": 1}}, "stream.copy.best"),
    ({"stream": {"copy": 10}, "gemm": []}, "'gemm' must be an object"),
    ({"stream": {"copy": 10}}, "needs 'stream' and 'gemm'"),
    ({"stream": {"copy": True}, "gemm": {"numpy float32": 1}}, "stream.copy must be"),
])
def test_override_with_wrong_types_is_one_line_error(tmp_path: Path, doc: Any,
                                                     what: str) -> None:
    f = tmp_path / "target.json"
    f.write_bytes(orjson.dumps(doc))
    with pytest.raises(ConfigError, match=what) as exc:
        peaks.load_peaks(f)
    assert "\n" not in str(exc.value) and str(f) in str(exc.value)


def test_override_bare_numbers(tmp_path: Path) -> None:
    f = tmp_path / "target.json"
    f.write_text('{"stream": {"triad": 20}, "gemm": {"numpy float32": 500, "torch bfloat16": 900}}')
    doc = peaks.load_peaks(f)
    assert peaks.bandwidth(doc) == 20e9 and peaks.gemm_peak(doc, "bfloat16") == 900e9
    assert peaks.gemm_peak(doc, "float16") == 500e9 and doc["source"] == "override target.json"
    f.write_text("{not json")
    with pytest.raises(ConfigError, match="is not JSON"):
        peaks.load_peaks(f)


def test_job_stores_cached_peaks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENMSPROF_CACHE", str(tmp_path / "cache"))
    doc = {"host": "h", "stream": {"copy": {"best": 12.5}}, "gemm": {"numpy float32": 99}}
    cache = peaks.cache_path()
    cache.parent.mkdir(parents=True)
    cache.write_bytes(orjson.dumps(doc))
    s = openmsprof.start(tmp_path / "a")
    openmsprof.stop()
    assert orjson.loads((s.root / "host" / "peaks.json").read_bytes()) == doc
    override = tmp_path / "target.json"
    override.write_text('{"stream": {"copy": 3}, "gemm": {"numpy float32": 4}}')
    monkeypatch.setenv("OPENMSPROF_PEAKS", str(override))
    s = openmsprof.start(tmp_path / "b")
    openmsprof.stop()
    stored = orjson.loads((s.root / "host" / "peaks.json").read_bytes())
    assert stored["stream"] == {"copy": 3} and stored["source"] == "override target.json"
    monkeypatch.setenv("OPENMSPROF_PEAKS", "off")
    s = openmsprof.start(tmp_path / "c")
    openmsprof.stop()
    assert not (s.root / "host" / "peaks.json").exists()


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str],
             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENMSPROF_CACHE", str(tmp_path / "cache"))
    good = tmp_path / "good.json"
    good.write_text('{"stream": {"copy": {"best": 7, "median": 6, "cv": 0.2}}, '
                    '"gemm": {"numpy float32": 4}}')
    assert main(["peaks", "--check", str(good), "--output", str(tmp_path / "o.json")]) == 0
    out = capsys.readouterr().out
    assert "stream copy" in out and "(loaded)" in out  # CV 0.2 flagged
    assert orjson.loads((tmp_path / "o.json").read_bytes())["gemm"] == {"numpy float32": 4}
    bad = tmp_path / "bad.json"
    bad.write_text('{"stream": {"copy": "x"}, "gemm": {}}')
    assert main(["peaks", "--check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("openmsprof: error: peaks file") and err.count("\n") == 1
