"""Issue 24's table, typed as the seeds print it: one test (or more) per row, most severe first.

The seed text each test needs is quoted in the test, with the seed and section it comes from, so
this module runs on a fresh clone (it never reads the seed documents themselves).  What openmsprof
still does deliberately otherwise is listed in docs/conformance.md.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance.helpers import ACL_JSON_APP as ACL_APP

PYTHON = sys.executable
REPO = Path(__file__).resolve().parents[2]
CLI = [PYTHON, "-m", "openmsprof"]


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


# --- rows 5, 6, 16: TensorFlow sess.run mode (seed 003) ---------------------------------------

#: Seed 003 "Collection of Raw Profile Data (TensorFlow 1.x Training/Online Inference)", sess.run
#: mode, as printed (imports: ``npu_bridge`` → ``openmsprof.tensorflow.npu_bridge``), around the
#: ordinary TF1 training loop it elides (``sess.run()``): the initializer, then five steps.
TF_SESS_RUN = """\
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow.compat.v1 as tf
from openmsprof.tensorflow.npu_bridge.npu_init import *
tf.disable_eager_execution()
x = tf.placeholder(tf.float32, [16, 8]); y = tf.placeholder(tf.float32, [16, 1])
w = tf.get_variable("w", [8, 1])
loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
feeds = {x: np.ones((16, 8), np.float32), y: np.ones((16, 1), np.float32)}
config = tf.ConfigProto()
custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
custom_op.name = "NpuOptimizer"
custom_op.parameter_map["use_off_line"].b = True
custom_op.parameter_map["profiling_mode"].b = True
custom_op.parameter_map["profiling_options"].s = tf.compat.as_bytes('{"output":"/tmp/profiling","training_trace":"on","task_trace":"on","fp_point":"","bp_point":"","aic_metrics":"PipeUtilization"}'.replace("/tmp/profiling", sys.argv[1]))
config.graph_options.rewrite_options.remapping = RewriterConfig.OFF  # Disable remapping.
with tf.Session(config=config) as sess:
    sess.run(tf.global_variables_initializer())
    for _ in range(5):
        sess.run(train_op, feeds)
print("APP DONE")
"""


@pytest.fixture(scope="module")
def tf_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("tensorflow")
    root = tmp_path_factory.mktemp("round2_tf")
    (root / "train.py").write_text(TF_SESS_RUN)
    r = _run([PYTHON, "train.py", str(root / "profiling")], root)
    assert r.returncode == 0, r.stderr
    (job,) = _jobs(root / "profiling")
    for what in ("summary", "timeline"):
        e = _run([*CLI, "export", what, "-dir", str(job)], root)
        assert e.returncode == 0, e.stderr
    return job


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_row05_step_trace_json_iteration_timeline(tf_job: Path) -> None:
    """Seed 003 Table 1: "step_trace (iteration trace data) | step_trace_*.json"."""
    (path,) = sorted((tf_job / "timeline").glob("step_trace_*.json"))
    events = json.loads(path.read_text())["traceEvents"]
    iterations = [e for e in events if e.get("ph") == "X" and e["name"].split()[:-1] == ["Iteration"]]
    assert [e["args"]["Iteration ID"] for e in iterations] == [1, 2, 3, 4, 5]
    assert all(e["dur"] > 0 for e in iterations)
    # training_trace on, fp/bp found automatically: FP_BP Time spans inside their iteration
    fpbp = {e["name"].split()[-1]: e for e in events if e.get("name", "").startswith("FP_BP Time ")}
    assert len(fpbp) == 5
    for it in iterations:
        f = fpbp[str(it["args"]["Iteration ID"])]
        assert it["ts"] - 0.01 <= f["ts"] and f["ts"] + f["dur"] <= it["ts"] + it["dur"] + 0.01


def test_row06_initializer_run_is_not_an_iteration(tf_job: Path) -> None:
    """Seed 003 sess.run mode: five training ``sess.run`` calls are five iterations; the
    ``sess.run(tf.global_variables_initializer())`` before them is none."""
    rows = _csv_rows(tf_job / "summary" / "step_trace_host.csv")
    assert [r["Iteration ID"] for r in rows] == ["1", "2", "3", "4", "5"]
    assert all(r["BP End(us)"] for r in rows)  # each is a training step (gradients found)


def test_row16_step_trace_host_device_id_says_host(tf_job: Path) -> None:
    """Every host file's Device_id is ``host`` (step_trace_host.csv too)."""
    rows = _csv_rows(tf_job / "summary" / "step_trace_host.csv")
    assert {r["Device_id"] for r in rows} == {"host"}
    api = _csv_rows(tf_job / "summary" / "api_statistic_host.csv")
    assert {r["Device_id"] for r in api} == {"host"}


# --- row 10: npu_bridge.profiler.profiler (seed 003, local profiling) ---------------------------

TF_LOCAL = """\
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow.compat.v1 as tf
from openmsprof.tensorflow.npu_bridge.profiler import profiler  # seed: npu_bridge.profiler.profiler
tf.disable_eager_execution()
x = tf.placeholder(tf.float32, [8, 8]); w = tf.get_variable("w", [8, 8])
train = tf.train.GradientDescentOptimizer(0.01).minimize(tf.reduce_sum(tf.matmul(x, w)))
feeds = {x: np.ones((8, 8), np.float32)}
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(train, feeds)  # before the window: not profiled
    with profiler.Profiler(level="L1", aic_metrics="PipeUtilization", output_path=sys.argv[1]):
        for _ in range(3):
            sess.run(train, feeds)
    with profiler.profiler(level="L9", output_path=sys.argv[2]):  # a wrong level: one warning
        sess.run(train, feeds)
print("APP DONE")
"""


def test_row10_npu_bridge_profiler_module_profiles_the_block(tmp_path: Path) -> None:
    """Seed 003: "Data can be profiled globally or locally by calling the
    npu_bridge.profiler.profiler class" -- only the ``with`` block is one job."""
    pytest.importorskip("tensorflow")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "local.py").write_text(TF_LOCAL)
    r = _run([PYTHON, "local.py", str(tmp_path / "a"), str(tmp_path / "b")], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "APP DONE" in r.stdout
    (job,) = _jobs(tmp_path / "a")
    e = _run([*CLI, "export", "summary", "-dir", str(job)], tmp_path)
    assert e.returncode == 0, e.stderr
    assert len(_csv_rows(job / "summary" / "step_trace_host.csv")) == 3
    (line,) = [ln for ln in r.stderr.splitlines() if "level=" in ln]
    assert "level='L9' is invalid" in line and "Traceback" not in r.stderr
    assert len(_jobs(tmp_path / "b")) == 1  # the wrong level still profiles, with L0


# --- rows 8, 9, 12: torch_npu (seed 004) ------------------------------------------------------

TORCH_PRELUDE = """\
import torch
import openmsprof.torch as torch_npu  # the one changed line (seed: import torch_npu)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
def train_one_step():
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad(); loss.backward(); optimizer.step()
"""


def _torch(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("torch")
    (tmp_path / "sample.py").write_text(TORCH_PRELUDE + body)
    return _run([PYTHON, "sample.py"], tmp_path)


def _rank_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.name.endswith("_ascend_pt"))


def test_row08_level_none_writes_no_level_files(tmp_path: Path) -> None:
    """Seed 004 profiler_level: "Level_none:不采集所有Level层级控制的数据,即关闭profiler_level"
    -- no kernel_details, op_statistic, operator_details, step_trace_time; trace_view (msprof_tx,
    which Level_none turns on) still."""
    body = """
experimental_config = torch_npu.profiler._ExperimentalConfig(
    profiler_level=torch_npu.profiler.ProfilerLevel.Level_none, msprof_tx=True)
with torch_npu.profiler.profile(
        activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler("./result"),
        experimental_config=experimental_config) as prof:
    for _ in range(2):
        train_one_step(); prof.step()
"""
    r = _torch(tmp_path, body)
    assert r.returncode == 0, r.stderr
    (rd,) = _rank_dirs(tmp_path / "result")
    out = rd / "ASCEND_PROFILER_OUTPUT"
    assert (out / "trace_view.json").is_file() and (out / "analyse.done").is_file()
    for name in ("kernel_details.csv", "op_statistic.csv", "operator_details.csv", "step_trace_time.csv"):
        assert not (out / name).exists(), name


def test_row09_op_attr_true_accepted(tmp_path: Path) -> None:
    """Seed 004 experimental_config: "op_attr ... bool类型。可取值True(开启)或False(关闭)" --
    accepted (kept in profiler_info.json), no "invalid" reset, what this machine cannot record
    said in one line."""
    body = """
experimental_config = torch_npu.profiler._ExperimentalConfig(
    profiler_level=torch_npu.profiler.ProfilerLevel.Level1, op_attr=True,
    export_type=torch_npu.profiler.ExportType.Db)
with torch_npu.profiler.profile(on_trace_ready=torch_npu.profiler.tensorboard_trace_handler("./result"),
                                experimental_config=experimental_config) as prof:
    train_one_step()
text_only = torch_npu.profiler._ExperimentalConfig(op_attr=True)
print("TEXT_OP_ATTR", text_only._op_attr)
"""
    r = _torch(tmp_path, body)
    assert r.returncode == 0, r.stderr
    assert "is invalid" not in r.stderr
    assert "TEXT_OP_ATTR True" in r.stdout
    (rd,) = _rank_dirs(tmp_path / "result")
    info = json.loads(next(rd.glob("profiler_info*.json")).read_text())
    assert info["config"]["experimental_config"]["_op_attr"] is True
    assert any("op_attr=True accepted" in u for u in info["unsupported"])
    assert list((rd / "ASCEND_PROFILER_OUTPUT").glob("ascend_pytorch_profiler*.db"))


def test_row12_torch_npu_profiler_profiler_analyse(tmp_path: Path) -> None:
    """Seed 004 离线解析: ``torch_npu.profiler.profiler.analyse(profiler_path)`` (the module
    torch_npu defines it in) parses raw data left by ``analyse_flag=False``."""
    body = """
with torch_npu.profiler.profile(
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler("./result", analyse_flag=False)) as prof:
    for _ in range(2):
        train_one_step(); prof.step()
import glob
print("RAW", len(glob.glob("./result/*/ASCEND_PROFILER_OUTPUT")))
torch_npu.profiler.profiler.analyse("./result")
from openmsprof.torch.profiler.profiler import analyse
print("SAME", analyse is torch_npu.profiler.analyse)
try:
    torch_npu.profiler.profiler.analyse(b"x" * 100000)  # a wrong type: one line naming it
except Exception as exc:
    print("BAD", type(exc).__name__, len(str(exc)), str(exc)[:40])
"""
    r = _torch(tmp_path, body)
    assert r.returncode == 0, r.stderr
    assert "RAW 0" in r.stdout and "SAME True" in r.stdout
    (bad,) = [ln for ln in r.stdout.splitlines() if ln.startswith("BAD ")]
    assert bad.startswith("BAD PathError ") and int(bad.split()[2]) < 200 and "profiler_path=b'xxx" in bad
    (rd,) = _rank_dirs(tmp_path / "result")
    assert (rd / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").is_file()


# --- row 14: export timeline with an empty window ---------------------------------------------

SLOW_START_APP = ACL_APP.replace("assert acl.init(sys.argv[1] if len(sys.argv) > 1 else None) == 0\n",
                                 "assert acl.init(sys.argv[1] if len(sys.argv) > 1 else None) == 0\n"
                                 "import time; time.sleep(0.3)  # nothing happens in the first 300 ms\n")


def test_row14_empty_window_keeps_earlier_timeline(models: dict[str, Path], tmp_path: Path) -> None:
    """Seed 002 ``export timeline -dir JOB`` then a ``--start-us``/``--end-us`` window with no
    events in it: the earlier msprof_0.json stays, and one line says why nothing was written.  The
    window holds the session's start, where the ``Profiling Overhead`` figures are drawn: our own
    figures are not data, so they alone make no file (CI once met this with the window
    ``[0, 5000]``: the job had started 1.7 ms after a whole second, BASE_NS's)."""
    out = tmp_path / "profiling"
    out.mkdir()
    (tmp_path / "main.py").write_text(SLOW_START_APP)
    (tmp_path / "acl.json").write_text(_seed_acl_json(out))
    r = _run([PYTHON, "main.py", "acl.json"], tmp_path, SEED_MODEL=str(models["tiny_mlp"]))
    assert r.returncode == 0, r.stderr
    (job,) = _jobs(out)
    full = _run([*CLI, "export", "timeline", "-dir", str(job)], tmp_path)
    assert full.returncode == 0, full.stderr
    (first,) = sorted((job / "timeline").glob("msprof_*.json"))
    before = first.read_bytes()
    doc = json.loads(before)
    counters = [e for e in doc["traceEvents"] if e.get("ph") == "C" and e["name"] == "records_written"]
    assert len(counters) == 1  # the overhead figures, at the session's start
    at = float(counters[0]["ts"])  # µs after BASE_NS
    start_info = json.loads((job / "host" / "start_info").read_text())
    assert at == int(start_info["collectionTimeBegin"]) - doc["otherData"]["openmsprof_base_ns"] // 1000
    lo, hi = int(at) - 1000, int(at) + 5000  # (the app sleeps 300 ms after acl.init: nothing else here)
    win = _run([*CLI, "export", "timeline", "-dir", str(job), "--start-us", str(lo), "--end-us", str(hi)], tmp_path)
    assert win.returncode == 0, win.stderr
    assert first.read_bytes() == before
    (line,) = [ln for ln in win.stdout.splitlines() if "no events in window" in ln]
    assert f"[{lo}, {hi}]" in line


# --- rows 11, 15: pyACL calls given wrong values (seed 001) ------------------------------------

ACL_BAD_CALLS = """\
import os
import re
from openmsprof import acl
assert acl.init() == 0
data = open(os.environ["SEED_MODEL"], "rb").read() * 4  # a model's bytes, whole (well over 100 KB)
model_id, ret = acl.mdl.load_from_mem(data, len(data))   # seed 001 spelling: (bytes, len)
print("LOAD", model_id, ret)
good = open(os.environ["SEED_MODEL"], "rb").read()
model_id, ret = acl.mdl.load_from_mem(acl.util.bytes_to_ptr(good), len(good))
print("LOAD_PTR", ret)
ACL_PROF_ACL_API = 0x0001
ACL_PROF_TASK_TIME = 0x0002
prof_config = acl.prof.create_config([99], 0, 0, ACL_PROF_ACL_API | ACL_PROF_TASK_TIME)
print("CONFIG", prof_config)
print("ERR", acl.get_recent_err_msg())
prof_config = acl.prof.create_config([0], 0, 0, ACL_PROF_ACL_API | ACL_PROF_TASK_TIME)
print("CONFIG0", prof_config != 0)
assert acl.finalize() == 0
"""


@pytest.fixture(scope="module")
def bad_calls(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    root = tmp_path_factory.mktemp("round2_bad")
    (root / "bad.py").write_text(ACL_BAD_CALLS)
    r = _run([PYTHON, "bad.py"], root, SEED_MODEL=str(models["resnet_mish"]))
    assert r.returncode == 0, r.stderr[-2000:]
    return r


def test_row11_load_from_mem_error_never_prints_the_payload(bad_calls: subprocess.CompletedProcess[str]) -> None:
    """Seed 001 ``acl.mdl.load_from_mem(bytes, len)`` with the bytes themselves: an error code
    and one short line naming what was passed; the pointer spelling loads."""
    assert "LOAD 0 100000" in bad_calls.stdout  # ACL_ERROR_INVALID_PARAM
    assert "LOAD_PTR 0" in bad_calls.stdout
    (line,) = [ln for ln in bad_calls.stderr.splitlines() if "load_from_mem" in ln]
    assert "model is a bytes of" in line and "bytes_to_ptr" in line and len(line) < 400
    assert "\\x" not in bad_calls.stderr and len(bad_calls.stderr) < 2000


def test_row15_create_config_no_such_device(bad_calls: subprocess.CompletedProcess[str]) -> None:
    """Seed 001 ``acl.prof.create_config(device_list, ...)`` with device 99 on a one-device
    machine: no handle (0), one line with ACL_ERROR_INVALID_DEVICE (107001) naming the device."""
    assert "CONFIG 0" in bad_calls.stdout and "CONFIG0 True" in bad_calls.stdout
    (line,) = [ln for ln in bad_calls.stderr.splitlines() if "create_config" in ln]
    assert "device 99 does not exist" in line and "107001" in line
    assert "ERR acl.prof.create_config: device 99 does not exist" in bad_calls.stdout


# --- row 4: collect ... --all --layout svp (seed 002's file names in one command) ---------------


def test_row04_collect_all_layout_svp(models: dict[str, Path], tmp_path: Path) -> None:
    """Seed 002 ``collect -m <main> ... --all`` and its Table 2 timeline names
    (``task_time_{deviceid}.{model_file_name}.{model_id}.{batch_num}.json``) in one command."""
    (tmp_path / "main.py").write_text(ACL_APP)
    r = _run([*CLI, "collect", "-m", "main.py", "--output", "out", "--all", "--layout", "svp"], tmp_path,
             SEED_MODEL=str(models["tiny_mlp"]))
    assert r.returncode == 0, r.stderr
    (job,) = _jobs(tmp_path / "out")
    names = sorted(p.name for p in (job / "timeline").iterdir())
    assert any(re.fullmatch(r"task_time_0\.tiny_mlp\.1\.\d+\.json", n) for n in names), names
    assert any(re.fullmatch(r"op_summary_0\.tiny_mlp\.1\..*\.csv", p.name) for p in (job / "summary").iterdir())
    assert not (job / "timeline" / "msprof_0.json").exists()  # the svp set, not the msprof one
    bad = _run([*CLI, "collect", "-m", "main.py", "--output", "out2", "--all", "--layout", "svq"], tmp_path,
               SEED_MODEL=str(models["tiny_mlp"]))
    assert bad.returncode == 2 and "'svq'" in _one_line(bad.stderr)


# --- row 19: docs/collect.md's first local example, as written ---------------------------------


def test_row19_docs_collect_first_local_example(tmp_path: Path) -> None:
    """docs/collect.md "Local runs": the first command, typed as written, from a folder holding
    the examples: a job under ``prof/`` with its exports, and no error line."""
    text = (REPO / "docs" / "collect.md").read_text()
    local = text[text.index("## Local runs"):]
    line = local[local.index("```") + 3:].strip().splitlines()[0].strip()
    assert line.startswith("openmsprof collect -m examples/")
    (tmp_path / "examples").mkdir()
    script = line.split()[3]
    for name in (script.split("/")[-1], "models.py"):
        (tmp_path / "examples" / name).write_bytes((REPO / "examples" / name).read_bytes())
    r = _run([*CLI, *line.split()[1:]], tmp_path)
    assert r.returncode == 0, r.stderr
    assert not [ln for ln in r.stderr.splitlines() if "error" in ln.lower()], r.stderr
    (job,) = _jobs(tmp_path / "prof")
    assert (job / "timeline" / "msprof_0.json").is_file() and (job / "summary" / "op_summary_0.csv").is_file()


# --- rows 18, 20: analyze over a trace handler's folder (docs/analyze.md, seed 004 Level1) -------

HANDLER_TWO_WINDOWS = """
experimental_config = torch_npu.profiler._ExperimentalConfig(
    profiler_level=torch_npu.profiler.ProfilerLevel.Level1)
with torch_npu.profiler.profile(
        schedule=torch_npu.profiler.schedule(wait=0, warmup=0, active=2, repeat=2),
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler("./out_mish"),
        experimental_config=experimental_config) as prof:
    for _ in range(4):
        train_one_step(); prof.step()
"""


@pytest.fixture(scope="module")
def handler_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("round2_handler")
    r = _torch(root, HANDLER_TWO_WINDOWS)
    assert r.returncode == 0, r.stderr
    assert len(_rank_dirs(root / "out_mish")) == 2
    return root


def test_row18_analyze_handler_folder_with_two_windows(handler_dir: Path) -> None:
    """docs/analyze.md: ``openmsprof analyze -dir ./out_mish  # the folder the trace handler
    wrote to`` -- with two windows each is analysed and named."""
    r = _run([*CLI, "analyze", "-dir", "./out_mish"], handler_dir)
    assert r.returncode == 0, r.stderr
    heads = [ln for ln in r.stdout.splitlines() if ln.startswith("== job ")]
    names = [p.name for p in _rank_dirs(handler_dir / "out_mish")]
    assert [h.split(": ", 1)[0] for h in heads] == ["== job 1 of 2", "== job 2 of 2"]
    assert [Path(h.split(": ", 1)[1]).name for h in heads] == names
    j = _run([*CLI, "analyze", "-dir", "./out_mish", "--format", "json"], handler_dir)
    assert j.returncode == 0, j.stderr
    assert [Path(d["dir"]).name for d in json.loads(j.stdout)["jobs"]] == names
    h = _run([*CLI, "analyze", "-dir", "./out_mish", "--html", "r.html"], handler_dir)
    assert h.returncode == 1 and "holds 2 jobs" in _one_line(h.stderr) and "--html" in h.stderr


def test_row20_analyze_level1_rank_dir_counts_api_calls(handler_dir: Path) -> None:
    """A Level1 rank dir's api_statistic.csv (seed 004: Level1 "生成...api_statistic.csv") holds
    the API calls ``analyze`` reports."""
    rank = _rank_dirs(handler_dir / "out_mish")[0]
    rows = _csv_rows(rank / "ASCEND_PROFILER_OUTPUT" / "api_statistic.csv")
    expected = sum(int(r["Count"]) for r in rows)
    assert expected > 0
    r = _run([*CLI, "analyze", "-dir", str(rank)], handler_dir)
    assert r.returncode == 0, r.stderr
    assert f" {expected} API calls," in r.stdout.splitlines()[0]


# --- rows 7, 17: host_sys_usage (seed 003 Table 1; README's profile()) --------------------------

HOST_USAGE_APP = """\
import multiprocessing as mp, sys, time
import openmsprof
def burn(seconds):
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        sum(range(1000))
    return seconds
if __name__ == "__main__":
    with openmsprof.profile(output=sys.argv[1], host_sys_usage=["cpu", "mem"], host_sys_usage_freq=50) as prof:
        if sys.argv[2] == "pool":
            with mp.get_context("fork").Pool(2) as pool:
                pool.map(burn, [0.6, 0.6])
        else:
            burn(0.08)  # README: around 80 ms of work
    print("JOB", prof.job)
"""


def _host_job(tmp_path: Path, mode: str) -> Path:
    (tmp_path / "app.py").write_text(HOST_USAGE_APP)
    r = _run([PYTHON, "app.py", "out", mode], tmp_path)
    assert r.returncode == 0, r.stderr
    (job,) = _jobs(tmp_path / "out")
    for what in ("summary", "timeline"):
        e = _run([*CLI, "export", what, "-dir", str(job)], tmp_path)
        assert e.returncode == 0, e.stderr
    return job


def test_row17_short_profile_writes_host_files(tmp_path: Path) -> None:
    """README: ``profile(..., host_sys_usage=["cpu","mem"], host_sys_usage_freq=50)`` around 80 ms
    of work: host_cpu_usage / host_mem_usage written from at least one sample at start and stop."""
    job = _host_job(tmp_path, "short")
    cpu = _csv_rows(job / "summary" / "host_cpu_usage_host.csv")
    mem = _csv_rows(job / "summary" / "host_mem_usage_host.csv")
    assert len(cpu) == 1 and int(cpu[0]["Total Cpu Numbers"]) == os.cpu_count()
    assert len(mem) == 1 and int(mem[0]["Peak Used Memory(KB)"]) > 0
    events = json.loads(next((job / "timeline").glob("msprof_*.json")).read_text())["traceEvents"]
    mem_ts = sorted(e["ts"] for e in events if e.get("ph") == "C" and e["name"] == "Memory Usage")
    assert len(mem_ts) >= 2  # one at start, one at stop


def test_row07_host_usage_of_processes(tmp_path: Path) -> None:
    """Seed 003 Table 1 host_sys_usage: "CPU usage of processes on the host", "Memory usage of
    processes on the host" -- per PID (the profiled process and its pool workers) on the timeline's
    CPU Usage / Memory Usage levels and in host CSVs with a PID column."""
    job = _host_job(tmp_path, "pool")
    cpu = _csv_rows(job / "summary" / "host_process_cpu_usage_host.csv")
    mem = _csv_rows(job / "summary" / "host_process_mem_usage_host.csv")
    main_pid = int(job.name.split("_")[-1][:8])  # PROF_..._{pid:08d}{random}
    assert {r["Device_id"] for r in cpu + mem} == {"host"}
    pids = {int(r["PID"]) for r in mem}
    assert main_pid in pids and len(pids) >= 3  # the main process and its two workers
    busy = [r for r in cpu if int(r["PID"]) != main_pid and float(r["Max Usage(%)"]) > 20]
    assert busy, cpu  # a worker burning CPU for 0.6 s shows it
    events = json.loads(next((job / "timeline").glob("msprof_*.json")).read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    levels = {(names[e["pid"]], e["name"]) for e in events if e.get("ph") == "C" and e["name"].startswith("PID ")}
    assert ("CPU Usage", f"PID {main_pid}") in levels and ("Memory Usage", f"PID {main_pid}") in levels
    assert {n for lv, n in levels if lv == "Memory Usage"} == {f"PID {p}" for p in pids}


# --- rows 3, 13: remote collect of a pyACL app (seed 002 "上板"), real OpenSSH on loopback -------

from tests.collector.conftest import Sshd, sshd, write_ini  # noqa: E402,F401  (the loopback sshd fixture)


def _alive(needle: str) -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if needle.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    out.append(int(pid))
            except OSError:
                pass
    return out


@pytest.mark.ssh
def test_row03_row13_remote_pyacl_app_bare_board(sshd: Sshd, models: dict[str, Path],  # noqa: F811
                                                 tmp_path: Path) -> None:
    """Seed 002 ``python3.7.5 msprof.pyc collect -m <main> --config <config> --all`` with a pyACL
    application, on a board whose Python has nothing installed: the bundle carries ONNX Runtime
    (row 3); the board's first session measures its peaks in the background, and the run waits
    for that, so no peaks_child outlives it and the job comes back with host/peaks.json (row 13)."""
    bare = tmp_path / "bare"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(bare)],
                   check=True)
    board_cache = tmp_path / "board_cache"  # a board that never measured its peaks
    wrapper = tmp_path / "board_python"
    wrapper.write_text(f"#!/bin/sh\nOPENMSPROF_CACHE={board_cache} exec {bare / 'bin' / 'python'} \"$@\"\n")
    wrapper.chmod(0o755)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "main.py").write_text(ACL_APP.replace('os.environ["SEED_MODEL"]', '"model.onnx"'))
    (proj / "model.onnx").write_bytes(models["tiny_mlp"].read_bytes())
    ini = write_ini(tmp_path / "board.ini",
                    {"ip": "127.0.0.1", "port": sshd.port, "username": sshd.user, "key_file": sshd.key,
                     "known_hosts": sshd.known_hosts(tmp_path)}, {"python": wrapper, "workdir": tmp_path / "board"})
    (tmp_path / "board").mkdir()
    # seed 002's line: -m <main> --config <config> --all (+ the project folder, the output, svp names)
    r = _run([*CLI, "collect", "-m", "main.py", "--config", str(ini), "--all", "--project", str(proj),
              "--output", str(tmp_path / "out"), "--layout", "svp"], tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "uploading openmsprof, numpy, orjson, onnxruntime" in r.stderr
    assert "APP DONE" in r.stdout
    (job,) = _jobs(tmp_path / "out")
    assert (job / "host" / "peaks.json").is_file()
    assert json.loads((job / "host" / "peaks.json").read_text())
    assert not _alive(str(board_cache)) and not _alive("openmsprof.machine.peaks_child " + str(job.name))
    assert any(p.name.startswith("task_time_0.model.") for p in (job / "timeline").iterdir())


def test_row03_board_that_cannot_get_the_runtime_is_refused_first(tmp_path: Path) -> None:
    """The refusal, where ONNX Runtime cannot be shipped: one line naming it, before any run."""
    from openmsprof.collector import bundle
    from openmsprof.config.errors import ProfilingError

    (tmp_path / "main.py").write_text(ACL_APP)
    runtimes = bundle.facade_needs([tmp_path / "main.py"])
    board = bundle.BoardPython("cpython-37", "aarch64", have={"numpy": "1.21", "orjson": "3.9"})
    with pytest.raises(ProfilingError) as e:
        bundle.plan(board, "HwHiAiUser@board:22", runtimes)
    assert "lacks onnxruntime" in str(e.value) and "\n" not in str(e.value)
