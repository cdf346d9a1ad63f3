"""acl.json "profiler" section through acl.init: no-code-change profiling, interval, env, faults."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import numpy as np

import openmsprof
from openmsprof import acl
from openmsprof.recorder import session
from tests.acl.helpers import ROOT, import_counts, jobs_under, read_job


def _acl_json(path: Path, out: Path, **extra: str) -> Path:
    section = {"switch": "on", "output": str(out), "acl_api": "on", "task_time": "on", **extra}
    path.write_text(json.dumps({"profiler": section}))
    return path


def _run(models, loaded, n: int, name: str = "tiny_mlp") -> None:
    m = loaded(models[name])
    m.feed(np.ones(m.in_shape, np.float32))
    for _ in range(n):
        assert m.execute() == 0


def test_switch_on_profiles_from_init_to_finalize(models, loaded, out_dir, tmp_path):
    assert acl.init(str(_acl_json(tmp_path / "acl.json", out_dir))) == 0
    assert session.current() is not None
    _run(models, loaded, 4)
    assert acl.finalize() == 0
    assert session.current() is None
    (job,) = jobs_under(out_dir)
    j = read_job(job)
    assert Counter(j.api_names())["aclmdlExecute"] == 4
    assert len({t.conn for t in j.tasks}) == 4


def test_interval_profiles_exactly_every_nth_execute(models, loaded, out_dir, tmp_path):
    assert acl.init(str(_acl_json(tmp_path / "acl.json", out_dir, interval="3"))) == 0
    _run(models, loaded, 10)
    assert acl.finalize() == 0
    j = read_job(jobs_under(out_dir)[0])
    execs = [a for a in j.apis if a[0] == "aclmdlExecute"]
    assert len(execs) == 10
    profiled = sorted({t.conn for t in j.tasks})
    order = [i + 1 for i, a in enumerate(sorted(execs, key=lambda a: a[2])) if a[4] in profiled]
    assert order == [3, 6, 9]


def test_switch_off_or_no_section_means_no_profiling(models, loaded, out_dir, tmp_path):
    p = tmp_path / "acl.json"
    p.write_text(json.dumps({"profiler": {"switch": "off", "output": str(out_dir)}}))
    assert acl.init(str(p)) == 0
    _run(models, loaded, 2)
    assert acl.finalize() == 0
    p.write_text("{}")
    assert acl.init(str(p)) == 0
    assert acl.finalize() == 0
    assert jobs_under(out_dir) == []


def test_bad_acl_json_gives_a_code_and_a_message(tmp_path, out_dir):
    cases = {
        "wrong_value": json.dumps({"profiler": {"switch": "on", "task_time": "sometimes"}}),
        "bad_interval": json.dumps({"profiler": {"switch": "on", "interval": "-2"}}),
        "corrupt": '{"profiler": {"switch": "on",',
        "hostile_output": json.dumps({"profiler": {"switch": "on", "output": "a;rm -rf /"}}),
    }
    for name, text in cases.items():
        p = tmp_path / f"{name}.json"
        p.write_text(text)
        ret = acl.init(str(p))
        assert ret != 0, name
        msg = acl.get_recent_err_msg()
        assert "\n" not in msg and str(p) in msg, (name, msg)
        assert session.current() is None
    assert acl.init(str(tmp_path / "missing.json")) != 0
    assert acl.init() == 0  # the application can go on


def test_env_acl_json_from_collect(models, loaded, out_dir, tmp_path, monkeypatch):
    env_json = _acl_json(tmp_path / "cli.json", out_dir, interval="2")
    monkeypatch.setenv("OPENMSPROF_ACL_JSON", str(env_json))
    app = tmp_path / "app.json"
    app.write_text(json.dumps({"profiler": {"switch": "on", "interval": "5", "output": str(tmp_path)}}))
    assert acl.init(str(app)) == 0
    s = session.current()
    assert s is not None and s.config.interval == 2 and str(out_dir) in str(s.root)  # CLI wins
    assert acl.prof.init(str(tmp_path)) == acl.ACL_ERROR_PROF_API_CONFLICT
    assert acl.finalize() == 0


def test_adopts_a_running_session(models, loaded, out_dir, tmp_path):
    s = openmsprof.start(output=out_dir)
    assert acl.init(str(_acl_json(tmp_path / "acl.json", tmp_path / "elsewhere"))) == 0
    assert session.current() is s
    _run(models, loaded, 2)
    assert acl.finalize() == 0
    assert session.current() is s  # the owner stops it
    openmsprof.stop()
    j = read_job(s.root)
    assert Counter(j.api_names())["aclmdlExecute"] == 2 and j.tasks


_APP = textwrap.dedent("""
    import sys, time, numpy as np
    sys.path.insert(0, {examples!r})
    from openmsprof import acl
    acl.init({cfg!r})
    mid, ret = acl.mdl.load_from_file({model!r})
    desc = acl.mdl.create_desc(); acl.mdl.get_desc(desc, mid)
    def ds(size):
        d = acl.mdl.create_dataset(); p, _ = acl.rt.malloc(size, 0)
        acl.mdl.add_dataset_buffer(d, acl.create_data_buffer(p, size)); return d
    i = ds(acl.mdl.get_input_size_by_index(desc, 0)); o = ds(acl.mdl.get_output_size_by_index(desc, 0))
    for k in range({n}):
        assert acl.mdl.execute(mid, i, o) == 0
        if k == 5:
            print("running", flush=True)
    print("done", flush=True)
""")


def _app(tmp_path: Path, models, out_dir: Path, n: int) -> list[str]:
    cfg = _acl_json(tmp_path / "acl.json", out_dir)
    script = tmp_path / "app.py"
    script.write_text(_APP.format(examples=str(ROOT / "examples"), cfg=str(cfg),
                                  model=str(models["resnet_mish"]), n=n))
    return [sys.executable, str(script)]


def test_no_finalize_still_leaves_a_closed_job(tmp_path, models, out_dir):
    r = subprocess.run(_app(tmp_path, models, out_dir, 6), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    (job,) = jobs_under(out_dir)
    assert (job / "host" / "end_info").exists()
    j = read_job(job)
    assert Counter(j.api_names())["aclmdlExecute"] == 6
    assert len({t.conn for t in j.tasks}) == 6
    assert import_counts(job) == (6, len(j.tasks))


def test_sigkill_mid_run_leaves_an_importable_job(tmp_path, models, out_dir):
    p = subprocess.Popen(_app(tmp_path, models, out_dir, 10**7), stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "running"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until tasks reached disk (harvest ~1 s + flush)
        jobs = jobs_under(out_dir)
        if jobs and list((jobs[0] / "device_0" / "data").glob("Task.records.*")):
            break
        time.sleep(0.2)
    time.sleep(1.5)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(30)
    (job,) = jobs_under(out_dir)
    assert not (job / "host" / "end_info").exists()
    j = read_job(job)
    executes = Counter(j.api_names())["aclmdlExecute"]
    assert j.tasks and executes > 5
    assert import_counts(job) == (executes, len(j.tasks))  # every record that reached disk, imported
