"""Issue 24's table, typed as the seeds print it: one test (or more) per row, most severe first.

The seed text each test needs is quoted in the test, with the seed and section it comes from, so
this module runs on a fresh clone (it never reads the seed documents themselves).  What openmsprof
still does deliberately otherwise is listed in docs/conformance.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PYTHON = sys.executable
REPO = Path(__file__).resolve().parents[2]
CLI = [PYTHON, "-m", "openmsprof"]

#: A pyACL inference application with profiling from acl.json only (seed 002 "一键Profiling":
#: the application calls acl.init(acl.json path) and acl.finalize(); no profiling code).
ACL_APP = """\
import os, sys
from openmsprof import acl
assert acl.init(sys.argv[1] if len(sys.argv) > 1 else None) == 0
model_id, ret = acl.mdl.load_from_file(os.environ["SEED_MODEL"])
assert ret == 0
desc = acl.mdl.create_desc(); acl.mdl.get_desc(desc, model_id)
def dataset(sizes):
    ds = acl.mdl.create_dataset()
    for size in sizes:
        ptr, _ = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size))
    return ds
inp = dataset([acl.mdl.get_input_size_by_index(desc, i) for i in range(acl.mdl.get_num_inputs(desc))])
out = dataset([acl.mdl.get_output_size_by_index(desc, i) for i in range(acl.mdl.get_num_outputs(desc))])
for _ in range(4):
    assert acl.mdl.execute(model_id, inp, out) == 0
acl.mdl.unload(model_id)
assert acl.finalize() == 0
print("APP DONE")
"""


def _seed_acl_json(output: Path, **over: str) -> str:
    """Seed 002 "通过调用acl.json文件方式采集Profiling数据", the printed acl.json with its values
    replaced by ``over`` (and ``output`` pointing at a directory that exists here)."""
    keys = {"output": str(output), "aacpu": "on", "aac_metrics": "ArithmeticUtilization", "interval": "0",
            "acl_api": "on", "switch": "on", **over}
    return '{ "profiler":{ ' + ", ".join(f'"{k}":"{v}"' for k, v in keys.items()) + " } }"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if str(REPO / "examples") not in sys.path:
        sys.path.insert(0, str(REPO / "examples"))
    import models as example_models  # examples/models.py: the models, built in code

    return example_models.save_all(tmp_path_factory.mktemp("round2_models"))


def _run(args: list[str], cwd: Path, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "100", **env})


def _one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def _jobs(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("PROF_*") if p.is_dir())


# --- row 1: acl.json "switch": "ON" ----------------------------------------------------------


@pytest.mark.parametrize("switch", ["ON", "On", "1", "yes"])
def test_row01_switch_not_on_means_off_and_app_runs(models: dict[str, Path], tmp_path: Path, switch: str) -> None:
    """Seed 002 acl.json: "switch:Profiling开关,取值on或off。... 如果缺失该参数或参数值不为on,
    则表示关闭Profiling" -- acl.init returns 0, the application runs, nothing is written."""
    out = tmp_path / "profiling"
    out.mkdir()
    (tmp_path / "main.py").write_text(ACL_APP)
    (tmp_path / "acl.json").write_text(_seed_acl_json(out, switch=switch))
    r = _run([PYTHON, "main.py", "acl.json"], tmp_path, SEED_MODEL=str(models["tiny_mlp"]))
    assert r.returncode == 0, r.stderr
    assert "APP DONE" in r.stdout
    assert _jobs(out) == [] and _jobs(tmp_path) == []
    assert f"profiler.switch={switch!r} is not \"on\"; profiling off" in _one_line(r.stderr)


# --- row 2: acl.json "aac_metrics": "PipeUtilization" ----------------------------------------


@pytest.mark.parametrize("metrics", ["PipeUtilization", "Memory"])
def test_row02_aac_metrics_other_value_collects_nothing(models: dict[str, Path], tmp_path: Path,
                                                        metrics: str) -> None:
    """Seed 002 acl.json: "aac_metrics:AA Core采集事件,当前只支持ArithmeticUtilization,配置为
    ArithmeticUtilization代表采集..., 否则为不采集" -- profiling runs, no AI Core metrics, no error."""
    out = tmp_path / "profiling"
    out.mkdir()
    (tmp_path / "main.py").write_text(ACL_APP)
    (tmp_path / "acl.json").write_text(_seed_acl_json(out, aac_metrics=metrics))
    r = _run([PYTHON, "main.py", "acl.json"], tmp_path, SEED_MODEL=str(models["tiny_mlp"]))
    assert r.returncode == 0, r.stderr
    (job,) = _jobs(out)
    sample = json.loads((job / "host" / "sample.json").read_text())
    assert sample["openmsprof"]["aic_metrics"] == "AiCoreNone"
    log = (job / "host" / "collection.log").read_text()
    assert f"profiler.aac_metrics={metrics!r} is not ArithmeticUtilization; no AI Core metrics" in log
