"""Seed 004 (Ascend PyTorch Profiler): each sample run as printed with ``import torch_npu``
replaced by ``import openmsprof.torch as torch_npu`` (``from torch_npu.profiler import ...`` by
``from openmsprof.torch.profiler import ...``), after a prelude that defines what the samples
leave to the reader (``steps``, ``train_one_step``, ``activities``, ...).  File names and the
profiler_config.json template are checked against the seed's (seed_facts/seed_004.json)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conformance.facts import facts, texts

pytest.importorskip("torch")

SWAP = "import torch\nimport openmsprof.torch as torch_npu  # the one changed line (seed: import torch_npu)\n"

PRELUDE = """\
import os, time
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
criterion = torch.nn.CrossEntropyLoss()
train_loader = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(4)]
steps = epochs = 4
def forward(): return model(train_loader[0][0])
def backward(): criterion(forward(), train_loader[0][1]).backward()
def optimizer_step(): optimizer.step(); optimizer.zero_grad()
def train_one_step(*args):
    x, y = train_loader[0]
    loss = criterion(model(x), y)
    optimizer.zero_grad(); loss.backward(); optimizer.step()
trian_model_step = train_one_step  # (sic: the _KinetoProfile sample's spelling)
"""


def run(tmp_path: Path, body: str, name: str = "sample.py") -> subprocess.CompletedProcess[str]:
    script = tmp_path / name
    script.write_text(SWAP + PRELUDE + body)
    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)


def rank_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.name.endswith("_ascend_pt"))


def test_profile_with_experimental_config(tmp_path: Path) -> None:
    body = """
experimental_config = torch_npu.profiler._ExperimentalConfig(
       aic_metrics=torch_npu.profiler.AiCMetrics.PipeUtilization,
       profiler_level=torch_npu.profiler.ProfilerLevel.Level0,
       l2_cache=False,
       data_simplification=False
       )
with torch_npu.profiler.profile(
        activities=[
                torch_npu.profiler.ProfilerActivity.CPU,
                torch_npu.profiler.ProfilerActivity.NPU
                ],
        schedule=torch_npu.profiler.schedule(wait=0, warmup=0, active=1, repeat=1, skip_first=1),
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler("./result"),
        record_shapes=False,
        profile_memory=False,
        with_stack=False,
        with_flops=False,
        experimental_config=experimental_config) as prof:
                for step in range(steps):
                       train_one_step(step, steps, train_loader, model, optimizer, criterion)
                       prof.step()
"""
    assert 'torch_npu.profiler.tensorboard_trace_handler("./result")' in texts("004", "calls")
    r = run(tmp_path, body)
    assert r.returncode == 0, r.stderr
    (rd,) = rank_dirs(tmp_path / "result")
    out = rd / "ASCEND_PROFILER_OUTPUT"
    for name in ("trace_view.json", "kernel_details.csv", "op_statistic.csv", "step_trace_time.csv"):
        assert (out / name).is_file(), name
    assert (rd / "FRAMEWORK").is_dir()  # data_simplification=False keeps it
    assert (rd / "profiler_metadata.json").is_file()


def test_start_stop_and_simplification(tmp_path: Path) -> None:
    body = """
experimental_config = torch_npu.profiler._ExperimentalConfig(
        aic_metrics=torch_npu.profiler.AiCMetrics.ArithmeticUtilization,
        profiler_level=torch_npu.profiler.ProfilerLevel.Level0
         )
prof = torch_npu.profiler.profile(
        activities=[
                torch_npu.profiler.ProfilerActivity.CPU,
                torch_npu.profiler.ProfilerActivity.NPU
                ],
        schedule=torch_npu.profiler.schedule(wait=0, warmup=0, active=1, repeat=1, skip_first=1),
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler("./result"),
        experimental_config=experimental_config)
prof.start()
for step in range(steps):
         train_one_step()
         prof.step()
prof.stop()
"""
    r = run(tmp_path, body)
    assert r.returncode == 0, r.stderr
    (rd,) = rank_dirs(tmp_path / "result")
    assert (rd / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").is_file()
    # data_simplification defaults to on: FRAMEWORK/ and the PROF_ intermediates are gone
    assert not (rd / "FRAMEWORK").exists()
    assert {p.name for p in rd.iterdir() if p.is_dir() and not p.name.startswith("PROF_")} <= {
        "ASCEND_PROFILER_OUTPUT", "logs"}  # logs/: what this machine could not honour (NPU activity)
    assert "not supported here: NPU activity" in (rd / "logs" / "collection.log").read_text()


def test_export_chrome_trace_without_handler(tmp_path: Path) -> None:
    body = """
with torch_npu.profiler.profile() as prof:
        for step in range(steps):
                train_one_step(step, steps, train_loader, model, optimizer, criterion)
prof.export_chrome_trace('./chrome_trace_14.json')
pid = os.getpid()
prof.export_chrome_trace(f'./chrome_trace_{pid}.json')
print("PID", pid)
"""
    r = run(tmp_path, body)
    assert r.returncode == 0, r.stderr
    pid = r.stdout.split("PID")[1].strip()
    for name in ("chrome_trace_14.json", f"chrome_trace_{pid}.json"):
        doc = orjson.loads((tmp_path / name).read_bytes())
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        assert any(e.get("ph") == "X" for e in events), name


def test_kineto_profile_positional_call_and_export_stacks(tmp_path: Path) -> None:
    body = """
activities = [torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU]
record_shape, profile_memory, with_stack = True, False, True
experimental_config = torch_npu.profiler._ExperimentalConfig(profiler_level=torch_npu.profiler.ProfilerLevel.Level1)
prof = torch_npu.profiler._KinetoProfile(activities, record_shape, profile_memory, with_stack, experimental_config)
for epoch in range(epochs):
        trian_model_step()
        if epoch == 0:
                prof.start()
        if epoch == 1:
                prof.stop()
prof.export_chrome_trace("result_dir/trace.json")
prof.export_stacks('resule_dir/stack.log', metric='self_npu_time_total')
print("LEVEL", prof.experimental_config.profiler_level, "FLOPS", prof.with_flops)
"""
    r = run(tmp_path, body)
    assert r.returncode == 0, r.stderr
    assert "experimental_config=" in r.stderr  # the warning names the keyword form
    assert "LEVEL Level1 FLOPS False" in r.stdout
    assert (tmp_path / "result_dir" / "trace.json").is_file()
    stacks = (tmp_path / "resule_dir" / "stack.log").read_text()  # the seed's (sic) directory, created
    assert stacks and all(line.rsplit(" ", 1)[1].isdigit() for line in stacks.splitlines())


def test_mstx_sample(tmp_path: Path) -> None:
    body = """
mstx = torch_npu.npu.mstx()     # 创建mstx对象

def train_one_step(*args):
    mstx.mark("forward_start")
    forward()
    mstx.mark("forward_stop")
    mstx.mark("backward_start")
    backward()
    mstx.mark("backward_stop")
    mstx.mark("optimizer_start")
    optimizer_step()
    mstx.mark("optimizer_stop")

experimental_config = torch_npu.profiler._ExperimentalConfig(
       profiler_level=torch_npu.profiler.ProfilerLevel.Level0,
       msprof_tx=True,
       export_type=torch_npu.profiler.ExportType.Text
       )
with torch_npu.profiler.profile(
       activities=[
               torch_npu.profiler.ProfilerActivity.CPU,
               torch_npu.profiler.ProfilerActivity.NPU
               ],
       schedule=torch_npu.profiler.schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1),
       on_trace_ready=torch_npu.profiler.tensorboard_trace_handler("./result"),
       experimental_config=experimental_config) as prof:

      for epoch in range(epochs):
          mstx.mark("train epoch start")    # 打点的消息
          for step in range(steps):
                   train_one_step(step, steps, train_loader, model, optimizer, criterion)
                   prof.step()
"""
    r = run(tmp_path, body)
    assert r.returncode == 0, r.stderr
    dirs = rank_dirs(tmp_path / "result")
    assert len(dirs) == 2  # repeat=2
    trace = (dirs[0] / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text()
    for word in ("forward_start", "backward_stop", "optimizer_stop"):
        assert word in trace, word


def test_metadata_and_switches(tmp_path: Path) -> None:
    body = """
with torch_npu.profiler.profile(on_trace_ready=torch_npu.profiler.tensorboard_trace_handler("./result")) as prof:
    prof.add_metadata("test_key1", "test_value1")
    prof.add_metadata_json("test_key2", [1, 2, 3])
    train_one_step()
with torch_npu.profiler._KinetoProfile() as prof:
    prof.add_metadata_json("test_key2", [1, 2, 3])
print("SUP", torch_npu.profiler.supported_activities(), torch_npu.profiler.supported_profiler_level(),
      torch_npu.profiler.supported_ai_core_metrics(), torch_npu.profiler.supported_export_type())
print("ACT", [a.name if hasattr(a, "name") else str(a) for a in torch_npu.profiler.ProfilerAction])
for _ in range(2):
    e = torch_npu.profiler._ExperimentalConfig(profiler_level=torch_npu.profiler.ProfilerLevel.Level2,
                                               l2_cache=True, record_op_args=True,
                                               aic_metrics=torch_npu.profiler.AiCMetrics.PipeUtilization)
    with torch_npu.profiler.profile(experimental_config=e,
                                    on_trace_ready=torch_npu.profiler.tensorboard_trace_handler("./r2")) as prof:
        train_one_step()
e = torch_npu.profiler._ExperimentalConfig(profiler_level=torch_npu.profiler.ProfilerLevel.Level_none,
                                           msprof_tx=True, export_type=torch_npu.profiler.ExportType.Db)
"""
    r = run(tmp_path, body)
    assert r.returncode == 0, r.stderr
    (rd,) = rank_dirs(tmp_path / "result")
    meta = orjson.loads((rd / "profiler_metadata.json").read_bytes())
    assert meta["test_key1"] == "test_value1" and meta["test_key2"] == [1, 2, 3]
    for word in ("NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE"):
        assert word in r.stdout
    # every switch the CPU cannot honour: logged once, and in each window's profiler_info
    for word in ("l2_cache", "record_op_args", "Level2", "aic_metrics"):
        assert sum(word in line and "not supported here" in line for line in r.stderr.splitlines()) == 1, word
    for d in rank_dirs(tmp_path / "r2"):
        info = json.loads(next(d.glob("profiler_info_*.json")).read_text())
        assert len([u for u in info["unsupported"] if "l2_cache" in u or "record_op_args" in u or "Level2" in u]) == 3
        log = (d / "logs" / "collection.log").read_text()
        assert all(log.count(word) == 1 for word in ("l2_cache", "record_op_args", "Level2", "aic_metrics"))
    assert "msprof_tx=True cannot be used with both export_type=ExportType.Db and " \
           "profiler_level=ProfilerLevel.Level_none" in r.stderr


def test_dynamic_profile_template_and_prof_dir(tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    body = """
# 加载dynamic_profile模块
from openmsprof.torch.profiler import dynamic_profile as dp  # seed: from torch_npu.profiler import ...
# 设置模型训练时Profiling配置文件的路径
dp.init("profiler_config_path")
import json as _j, time as _t
_cfg = "profiler_config_path/profiler_config.json"
print("TEMPLATE", open(_cfg).read().replace("\\n", " "))
_doc = _j.load(open(_cfg)); _doc["prof_dir"] = "./dyn_out"
open(_cfg + ".tmp", "w").write(_j.dumps(_doc)); os.replace(_cfg + ".tmp", _cfg)
_end = _t.monotonic() + 60  # the watcher polls every 2 s; wait until it has read the edit
while dp.monitor().pending is None and _t.monotonic() < _end:
    _t.sleep(0.1)
for step in range(steps):
       train_one_step()
        # 划分训练step
       dp.step()
dp.shutdown()
""".replace("        # 划分训练step\n", "       # 划分训练step\n")
    script = cwd / "train.py"
    script.write_text(SWAP + PRELUDE + body)
    r = subprocess.run([sys.executable, str(script)], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    template = json.loads(r.stdout.split("TEMPLATE", 1)[1].strip())
    seed = facts("004")["profiler_config"]["json"]  # the seed's profiler_config.json, parsed
    assert set(seed) <= set(template)  # every key of the seed's template (openmsprof adds more)
    assert {k: template[k] for k in seed if k != "experimental_config"} == {
        k: v for k, v in seed.items() if k != "experimental_config"}  # with the seed's defaults
    # msprof_tx: the seed's template lists it; openmsprof reads it and writes it only when set
    assert set(seed["experimental_config"]) - set(template["experimental_config"]) <= {"msprof_tx"}
    assert len(rank_dirs(cwd / "dyn_out")) == 1  # prof_dir relative to the working directory


def test_handler_arguments_offline_analyse_and_db(tmp_path: Path) -> None:
    """tensorboard_trace_handler(dir_name, worker_name, analyse_flag=False) leaves raw data that
    offline parsing (离线解析, ``torch_npu.profiler.analyse``) turns into the Level1 text files
    and, with ExportType.Db, the .db files."""
    body = """
experimental_config = torch_npu.profiler._ExperimentalConfig(
        profiler_level=torch_npu.profiler.ProfilerLevel.Level1,
        export_type=[torch_npu.profiler.ExportType.Text, torch_npu.profiler.ExportType.Db])
with torch_npu.profiler.profile(
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler("./result", worker_name="worker0",
                                                                    analyse_flag=False),
        experimental_config=experimental_config) as prof:
    for step in range(steps):
        train_one_step()
        prof.step()
import glob
print("RAW", sorted(os.path.basename(p) for p in glob.glob("./result/*/ASCEND_PROFILER_OUTPUT")))
torch_npu.profiler.analyse("./result")
"""
    r = run(tmp_path, body)
    assert r.returncode == 0, r.stderr
    assert "RAW []" in r.stdout  # analyse_flag=False: nothing parsed at collection
    (rd,) = rank_dirs(tmp_path / "result")
    assert rd.name.startswith("worker0_")
    out = rd / "ASCEND_PROFILER_OUTPUT"
    for name in ("trace_view.json", "kernel_details.csv", "op_statistic.csv", "api_statistic.csv",
                 "step_trace_time.csv", "analysis.db"):
        assert (out / name).is_file(), name
    assert list(out.glob("ascend_pytorch_profiler*.db"))  # the seed's "ascend_pytorch.db"
