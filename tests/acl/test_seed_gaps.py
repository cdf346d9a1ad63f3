"""pyACL calls seeds 001/002 use that the first facade missed: load_from_mem, unsubscribe after
unload (sample 2's order), one step info for several iterations, stamps with msproftx off,
aclprofStop's real duration, and acl.json's output fallback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from openmsprof import acl
from tests.acl.helpers import jobs_under, read_job


def _start(out: Path, mask: int) -> int:
    assert acl.prof.init(str(out)) == 0
    cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0, mask)
    assert acl.prof.start(cfg) == 0
    return cfg


def _stop(cfg: int) -> None:
    assert acl.prof.stop(cfg) == 0
    assert acl.prof.destroy_config(cfg) == 0
    assert acl.prof.finalize() == 0


def test_load_from_mem_runs_and_is_traced(tmp_path: Path, models: dict[str, Path], loaded) -> None:
    assert acl.init() == 0
    cfg = _start(tmp_path / "out", acl.ACL_PROF_ACL_API | acl.ACL_PROF_TASK_TIME)
    data = models["resnet_leakyrelu"].read_bytes()
    ptr, ret = acl.rt.malloc_host(len(data))
    assert ret == 0
    src = np.frombuffer(data, dtype=np.uint8).copy()
    assert acl.rt.memcpy(ptr, len(data), acl.util.numpy_to_ptr(src), len(data), acl.ACL_MEMCPY_HOST_TO_HOST) == 0
    model_id, ret = acl.mdl.load_from_mem(ptr, len(data))
    assert ret == 0, acl.get_recent_err_msg()
    ref = loaded(models["resnet_leakyrelu"])  # the same model from its file gives the same result
    mem = loaded.__new__(loaded)
    mem.__dict__.update(ref.__dict__)
    mem.model_id = model_id
    x = np.random.default_rng(1).random(ref.in_shape, dtype=np.float32)
    ref.feed(x)
    assert ref.execute() == 0
    want = ref.result()
    assert mem.execute() == 0
    np.testing.assert_allclose(mem.result(), want, rtol=1e-5)
    assert acl.mdl.load_from_mem(ptr, len(data) + 10**9)[1] == acl.ACL_ERROR_INVALID_PARAM
    assert acl.mdl.load_from_mem(0, 0)[1] == acl.ACL_ERROR_INVALID_PARAM
    _stop(cfg)
    job = read_job(jobs_under(tmp_path / "out")[0])
    assert job.api_names().count("aclmdlLoadFromMem") == 3
    assert {t.model_id for t in job.tasks} >= {model_id}


def test_un_subscribe_after_unload_is_sample_2_order(models: dict[str, Path], loaded) -> None:
    assert acl.init() == 0
    m = loaded(models["resnet_leakyrelu"])
    r, w = os.pipe()
    sub = acl.prof.create_subscribe_config(1, 0xFF, w)
    assert acl.prof.model_subscribe(m.model_id, sub) == 0
    m.feed(np.zeros(m.in_shape, dtype=np.float32))
    assert m.execute() == 0
    assert acl.mdl.unload(m.model_id) == 0                  # step 10: unload
    assert acl.prof.model_un_subscribe(m.model_id) == 0     # step 11: unsubscribe (was 100011)
    assert acl.prof.model_un_subscribe(m.model_id) == acl.ACL_ERROR_INVALID_MODEL_ID  # only once
    data = b""
    while chunk := os.read(r, 1 << 16):  # the pipe was closed: the reader sees end-of-file
        data += chunk
    os.close(r)
    size, _ = acl.prof.get_op_desc_size()
    assert data and len(data) % size == 0
    assert acl.prof.destroy_subscribe_config(sub) == 0


def test_one_step_info_for_several_iterations(tmp_path: Path) -> None:
    assert acl.init() == 0
    cfg = _start(tmp_path / "out", acl.ACL_PROF_ACL_API)
    info = acl.prof.create_step_info()
    for _ in range(3):
        assert acl.prof.get_step_timestamp(info, acl.ACL_STEP_START) == 0
        assert acl.prof.get_step_timestamp(info, acl.ACL_STEP_END) == 0
    assert acl.prof.get_step_timestamp(info, acl.ACL_STEP_END) == acl.ACL_ERROR_INVALID_PARAM  # END twice
    acl.prof.destroy_step_info(info)
    _stop(cfg)
    steps = read_job(jobs_under(tmp_path / "out")[0]).steps
    indexes = [idx for _ts, idx, _tag in steps]
    assert len(steps) == 6 and len(set(indexes)) == 3  # three distinct steps from one info
    assert indexes == sorted(indexes)


def test_step_end_before_start_is_refused_and_not_recorded(tmp_path: Path) -> None:
    """END on a fresh step info (no START yet) is out of order: refused, nothing recorded; the
    step that follows records START then END."""
    assert acl.init() == 0
    cfg = _start(tmp_path / "out", acl.ACL_PROF_ACL_API)
    info = acl.prof.create_step_info()
    assert acl.prof.get_step_timestamp(info, acl.ACL_STEP_END) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.prof.get_step_timestamp(info, acl.ACL_STEP_START) == 0
    assert acl.prof.get_step_timestamp(info, acl.ACL_STEP_END) == 0
    acl.prof.destroy_step_info(info)
    _stop(cfg)
    steps = read_job(jobs_under(tmp_path / "out")[0]).steps
    assert [tag for _ts, _idx, tag in steps] == [acl.ACL_STEP_START, acl.ACL_STEP_END]
    assert len({idx for _ts, idx, _tag in steps}) == 1 and steps[0][0] <= steps[1][0]


def test_stamps_with_msproftx_off_noted_once(tmp_path: Path) -> None:
    assert acl.init() == 0
    cfg = _start(tmp_path / "out", acl.ACL_PROF_ACL_API)  # no ACL_PROF_MSPROFTX
    stamp = acl.prof.create_stamp()
    assert acl.prof.set_stamp_trace_message(stamp, "ignored", 7) == 0
    for _ in range(3):
        assert acl.prof.mark(stamp) == 0
        assert acl.prof.push(stamp) == 0
        assert acl.prof.pop() == 0
    acl.prof.destroy_stamp(stamp)
    _stop(cfg)
    job_dir = jobs_under(tmp_path / "out")[0]
    assert read_job(job_dir).marks == []  # ignored, as CANN does
    log = (job_dir / "host" / "collection.log").read_text()
    assert log.count("stamps are ignored because ACL_PROF_MSPROFTX") == 1


def test_prof_stop_has_its_real_duration(tmp_path: Path, models: dict[str, Path], loaded) -> None:
    assert acl.init() == 0
    m = loaded(models["resnet_mish"])
    m.feed(np.zeros(m.in_shape, dtype=np.float32))
    cfg = _start(tmp_path / "out", acl.ACL_PROF_ACL_API | acl.ACL_PROF_TASK_TIME)
    for _ in range(3):
        assert m.execute() == 0
    _stop(cfg)
    job = read_job(jobs_under(tmp_path / "out")[0])
    (stop,) = [a for a in job.apis if a[0] == "aclprofStop"]
    assert stop[3] > stop[2]  # the harvest of pending task data takes time: not an instant


def test_acl_json_missing_output_falls_back_to_executable_dir(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "acl.json").write_text(json.dumps({"profiler": {"switch": "on", "acl_api": "on",
                                                           "output": str(tmp_path / "no_such_dir")}}))
    (app / "main.py").write_text("import os, sys\nfrom openmsprof import acl\n"
                                 "assert acl.init(os.path.join(os.path.dirname(__file__), 'acl.json')) == 0\n"
                                 "assert acl.finalize() == 0\n")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    r = subprocess.run([sys.executable, str(app / "main.py")], cwd=elsewhere, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "no_such_dir").exists()
    (job,) = jobs_under(app)  # the executable's directory, not the working directory
    assert not jobs_under(elsewhere)
    log = (job / "host" / "collection.log").read_text()
    assert "does not exist; writing to the executable's directory" in log
