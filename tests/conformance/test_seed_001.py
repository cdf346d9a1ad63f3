"""Seed 001 (pyACL Profiling 性能数据采集): both samples run as printed, only the import changed.

Each sample's code lines are checked against the seed's own code (seed_facts/seed_001.json) (so the test cannot drift from
the document), run in a subprocess after the steps the seed elides ("# ......"), and every pyACL
call's return code is recorded.  Seed errors get the smallest fix, each marked ``# SEED FIX``.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.conformance.facts import facts, flat
from tests.conformance.helpers import EPILOGUE, RECORDER, SETUP, calls, run_script

IMPORT = "from openmsprof import acl  # the one changed line (seed: import acl)\nimport numpy as np\n"

#: 示例代码1, steps 4-9 as printed (steps 1-3, 7, 8, 10 are "# ......" in the seed).
SAMPLE_1 = """\
# 4.profiling初始化
# 设置数据落盘路径
PROF_INIT_PATH='...'
PROF_INIT_PATH = OUT  # the seed's '...' placeholder, filled in
ret = acl.prof.init(PROF_INIT_PATH)
# 5.进行profiling配置
device_list = [0]
ACL_PROF_ACL_API = 0x0001
ACL_PROF_TASK_TIME = 0x0002
ACL_PROF_AICORE_METRICS = 0x0004
ACL_PROF_AICPU_TRACE = 0x0008
# SEED FIX: the sample uses ACL_PROF_L2CACHE and ACL_PROF_HCCL without defining them:
ACL_PROF_L2CACHE, ACL_PROF_HCCL = acl.ACL_PROF_L2CACHE, acl.ACL_PROF_HCCL  # SEED FIX
# 创建配置结构体
prof_config = acl.prof.create_config(device_list, 0, 0, ACL_PROF_ACL_API | ACL_PROF_TASK_TIME | ACL_PROF_AICPU_TRACE | ACL_PROF_AICORE_METRICS | ACL_PROF_L2CACHE | ACL_PROF_HCCL)
ret = acl.prof.start(prof_config)
# 6.执行模型
ret = acl.mdl.execute(model_id, input, output)
# 7.处理模型推理结果
# ......
# 8.释放描述模型输入/输出信息、内存等资源,卸载模型
# ......
# 9.关闭profiling配置, 释放配置资源, 释放profiling组件资源
ret = acl.prof.stop(prof_config)
ret = acl.prof.destroy_config(prof_config)
ret = acl.prof.finalize()
# 10.释放运行管理资源
# ......
"""

#: 示例代码2, steps 4-11 as printed.
SAMPLE_2 = """\
import os  # SEED FIX: the sample calls os.pipe/os.read/os.close but imports only acl and numpy
# 4.创建管道,用于读取以及写入模型订阅的数据
r, w = os.pipe()
# 5.创建模型订阅的配置并且进行模型订阅
ACL_AICORE_NONE = 0xFF
subscribe_config = acl.prof.create_subscribe_config(1, ACL_AICORE_NONE, w)
# 模型订阅需要传入模型的model_id
ret = acl.prof.model_subscribe(model_id, subscribe_config)
# 6.实现管道读取订阅数据的函数
# 6.1 自定义函数,实现从用户内存中读取订阅数据的函数
def get_model_info(data, data_len):
    # 获取算子信息个数
    op_number, ret = acl.prof.get_op_num(data, data_len)
    # 遍历用户内存的算子信息
    for i in range(op_number):
        # 获取算子的模型id
        model_id = acl.prof.get_model_id(data, data_len, i)
        # 获取算子的类型名称
        op_type, ret = acl.prof.get_op_type(data, data_len, i, 65)
        # 获取算子的名称
        op_name, ret = acl.prof.get_op_name(data, data_len, i, 275)
        # 获取算子的执行开始时间
        op_start = acl.prof.get_op_start(data, data_len, i)
        # 获取算子的执行结束时间
        op_end = acl.prof.get_op_end(data, data_len, i)
        # 获取算子执行的耗时时间
        op_duration = acl.prof.get_op_duration(data, data_len, i)
        SEEN.append((model_id, op_type, op_name, op_start, op_end, op_duration))  # test probe
# 6.2 自定义函数,实现从管道中读取数据到用户内存的函数
def prof_data_read(args):
    fd, ctx = args
    ret = acl.rt.set_context(ctx)
    # 获取单位算子信息的大小(Byte)
    buffer_size, ret = acl.prof.get_op_desc_size()
    # 设置每次从管道中读取的算子信息个数
    N = 10
    # 计算存储算子信息的内存的大小
    data_len = buffer_size * N
    # 从管道中读取数据到申请的内存中,读取到的实际数据大小可能小于buffer_size * N,如果管道中没
    # 有数据,默认会阻塞直到读取到数据为止
    while True:
        data = os.read(fd, data_len)
        if len(data) == 0:
            break
        np_data = np.array(data)
        np_data_ptr = acl.util.numpy_to_ptr(np_data)
        size = np_data.itemsize * np_data.size
        # 调用6.1实现的函数解析内存中的数据
        get_model_info(np_data_ptr, size)
# 7.启动线程读取管道数据并解析
thr_id, ret = acl.util.start_thread(prof_data_read, [r, context])
# 8.执行模型
ret = acl.mdl.execute(model_id, input, output)
# 9.处理模型推理结果
# ......
# 10.释放描述模型输入/输出信息、内存等资源,卸载模型
# ......
acl.mdl.unload(model_id)  # the seed's step 10 ends with the unload (elided there)
# 11.取消订阅,释放订阅相关资源
ret = acl.prof.model_un_subscribe(model_id)
ret = acl.util.stop_thread(thr_id)
os.close(r)
ret = acl.prof.destroy_subscribe_config(subscribe_config)
# 12.释放运行管理资源
# ......
"""


def _code_lines(sample: str) -> list[str]:
    """The sample's lines that are the seed's own (not comments, fixes, probes or elisions)."""
    out = []
    for line in sample.splitlines():
        text = line.split("  #")[0].strip()
        if not text or text.startswith("#") or "SEED FIX" in line or "test probe" in line \
                or "filled in" in line or "elided there" in line:
            continue
        out.append(" ".join(text.split()))
    return out


def test_samples_are_the_seeds_own_lines() -> None:
    code = {s["section"]: flat(s["code"]) for s in facts("001")["samples"]}
    for section, sample in (("示例代码1", SAMPLE_1), ("示例代码2", SAMPLE_2)):
        for line in _code_lines(sample):
            assert line in code[section], (section, line)
    seed = " ".join(code.values())
    assert "ACL_PROF_L2CACHE =" not in seed and "import os" not in seed  # the two seed errors


def test_sample_1_profiles_into_the_init_path(tmp_path: Path, models: dict[str, Path]) -> None:
    out = tmp_path / "prof"
    out.mkdir()
    script = (IMPORT + RECORDER + f"MODEL_PATH = {str(models['resnet_mish'])!r}\nOUT = {str(out)!r}\n" + SETUP
              + SAMPLE_1 + EPILOGUE)
    r = run_script(tmp_path / "sample1.py", script, tmp_path)
    assert r.returncode == 0, r.stderr
    seen = calls(r.stdout)
    assert [n for n, _ in seen if n.startswith("prof.")] == [
        "prof.init", "prof.create_config", "prof.start", "prof.stop", "prof.destroy_config", "prof.finalize"]
    rets = {n: c for n, c in seen if n in ("prof.init", "prof.start", "mdl.execute", "prof.stop",
                                               "prof.destroy_config", "prof.finalize")}
    assert rets == dict.fromkeys(rets, 0) and len(rets) == 6, seen  # every ret of the sample is 0
    (job,) = sorted(out.glob("PROF_*"))
    log = (job / "host" / "collection.log").read_text()
    assert "not supported here" in log and "l2" in log  # L2 cache / HCCL / AI CPU: said, not faked
    from openmsprof.cli.main import main

    assert main(["import", "-dir", str(job)]) == 0
    assert main(["export", "summary", "-dir", str(job), "--layout", "svp"]) == 0
    names = [p.name for p in (job / "summary").iterdir()]
    assert any(re.fullmatch(r"op_summary_0\.resnet_mish\.\d+\.1\.1\.1\.NA\.\w+\.csv", n) for n in names), names


def test_sample_2_subscription_in_the_seed_order(tmp_path: Path, models: dict[str, Path]) -> None:
    script = (IMPORT + RECORDER + "SEEN = []\n" + f"MODEL_PATH = {str(models['resnet_leakyrelu'])!r}\n" + SETUP
              + SAMPLE_2 + "print('OPS', len(SEEN), len({s[2] for s in SEEN}))\n"
              + "assert all(s[3] <= s[4] and s[5] == s[4] - s[3] for s in SEEN)\n" + EPILOGUE)
    r = run_script(tmp_path / "sample2.py", script, tmp_path)
    assert r.returncode == 0, r.stderr
    seen = dict(calls(r.stdout))
    for name in ("prof.create_subscribe_config", "prof.model_subscribe", "mdl.execute", "mdl.unload",
                 "prof.model_un_subscribe", "prof.destroy_subscribe_config"):
        assert seen[name] == 0 or name == "prof.create_subscribe_config", (name, seen[name])
    ops = next(ln for ln in r.stdout.splitlines() if ln.startswith("OPS")).split()
    assert int(ops[1]) > 5 and int(ops[1]) == int(ops[2])  # every operator of the one execute, once
