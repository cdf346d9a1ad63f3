"""ONNX Runtime's own ceilings in the peaks: measured with its kernels, carried into the
roofline by op type, checked in override files."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from openmsprof.config.errors import ConfigError
from openmsprof.export.msprof.roofline import ceilings
from openmsprof.machine import peaks
from openmsprof.machine.runtime_peaks import ORT_ELEMENTWISE, measure_onnxruntime
from openmsprof.parse.costmodel import op_cost

pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def ort_figures() -> dict[str, Any]:
    skipped: list[str] = []
    out = measure_onnxruntime(lambda fn, dl, _must: peaks._runs(fn, dl, must=True), peaks._stat,
                              time.perf_counter() + 60, skipped, load=True)
    out["_skipped"] = skipped
    return out


def test_onnxruntime_kernels_are_timed(ort_figures: dict[str, Any]) -> None:
    conv = ort_figures["flops"]["Conv"]
    assert conv["unit"] == "GFLOP/s" and conv["best"] >= conv["median"] > 0
    assert conv["runs"] >= peaks.RUNS
    timed = set(ort_figures["elements"])
    assert {"Exp", "Tanh", "Softplus", "Sigmoid"} <= timed <= set(ORT_ELEMENTWISE)
    assert timed | {s.split()[1] for s in ort_figures["_skipped"]} == set(ORT_ELEMENTWISE)
    for v in ort_figures["elements"].values():
        assert v["unit"] == "Gelem/s" and v["best"] > 0 and v["cv"] >= 0


def test_runtime_ceilings_reach_the_roofline(ort_figures: dict[str, Any]) -> None:
    doc = {"stream": {"copy": 40.0}, "gemm": {"numpy float32": 100.0}, "special": {"exp": 4.0},
           "runtime": {"onnxruntime": {k: ort_figures[k] for k in ("flops", "elements")}}}
    ceil = ceilings(peaks.validate(doc, "x"))
    sp = op_cost("Softplus", "1,64,64,64", "FLOAT", "1,64,64,64", "FLOAT")
    rate = ort_figures["elements"]["Softplus"]["best"] * 1e9
    assert ceil.roof(sp).compute_ns == pytest.approx(sp.elems / rate * 1e9)
    tf_like = op_cost("aten::softplus", "1,64,64,64", "float", "1,64,64,64", "float")
    assert ceil.roof(tf_like).compute_ns != ceil.roof(sp).compute_ns  # keyed by spelling


@pytest.mark.parametrize("runtime, what", [
    ([], "'runtime' must map"),
    ({"onnxruntime": {"flops": []}}, "'runtime' must map"),
    ({"onnxruntime": {"elements": {"Exp": "fast"}}}, "runtime.onnxruntime.elements.Exp"),
    ({"onnxruntime": {"flops": {"Conv": {"best": -1}}}}, "runtime.onnxruntime.flops.Conv"),
])
def test_override_runtime_section_is_checked(tmp_path: Path, runtime: Any, what: str) -> None:
    f = tmp_path / "target.json"
    f.write_bytes(orjson.dumps({"stream": {"copy": 1}, "gemm": {"numpy float32": 1},
                                "runtime": runtime}))
    with pytest.raises(ConfigError, match=what) as exc:
        peaks.load_peaks(f)
    assert "\n" not in str(exc.value)
