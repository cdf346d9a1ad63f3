# ruff: noqa: RUF059  (the seed sample keeps its unused ret values)
"""Seed sample 2 (seeds/001, 示例代码2): operator subscription through a pipe.

The seed's steps run unchanged except the import line (``from openmsprof import acl``); the
elided steps (resources, model load, datasets, release) are filled in.  The reader prints every
operator it receives.  Usage::

    python examples/acl_sample_subscribe.py [MODEL.onnx] [EXECUTES]
"""

import os
import sys
import tempfile

import numpy as np

from openmsprof import acl

if len(sys.argv) > 1:
    MODEL_PATH = sys.argv[1]
else:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import models
    _MODELS = tempfile.TemporaryDirectory(prefix="acl_sample_")  # removed when the program ends
    MODEL_PATH = str(models.save_all(_MODELS.name)["resnet_mish"])
EXECUTES = int(sys.argv[2]) if len(sys.argv) > 2 else 3


def create_dataset(sizes):
    dataset = acl.mdl.create_dataset()
    for size in sizes:
        ptr, _ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        acl.mdl.add_dataset_buffer(dataset, acl.create_data_buffer(ptr, size))
    return dataset


acl.init()
# 1.申请运行管理资源,包括设置用于计算的Device、创建Context、创建Stream
acl.rt.set_device(0)
context, ret = acl.rt.create_context(0)
# 2.模型加载,加载成功后,返回标识模型的model_id
model_id, ret = acl.mdl.load_from_file(MODEL_PATH)
model_desc = acl.mdl.create_desc()
acl.mdl.get_desc(model_desc, model_id)
# 3.创建aclmdlDataset类型的数据,用于描述模型的输入数据input、输出数据output
input = create_dataset([acl.mdl.get_input_size_by_index(model_desc, 0)])
output = create_dataset([acl.mdl.get_output_size_by_index(model_desc, 0)])

# ---- the seed sample, unchanged (prints added in 6.1) ----
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
        print(f"op model={model_id} type={op_type} name={op_name} start={op_start} end={op_end} duration={op_duration}", flush=True)
# 6.2 自定义函数,实现从管道中读取数据到用户内存的函数
def prof_data_read(args):
    fd, ctx = args
    acl.rt.set_context(ctx)
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
for _ in range(EXECUTES):
    ret = acl.mdl.execute(model_id, input, output)
    print(f"execute ret={ret}", flush=True)
# 9.处理模型推理结果
# ......
# 10.释放描述模型输入/输出信息、内存等资源,卸载模型
# (the model is unloaded after un-subscribing, below)
# 11.取消订阅,释放订阅相关资源
ret = acl.prof.model_un_subscribe(model_id)
ret = acl.util.stop_thread(thr_id)
os.close(r)
ret = acl.prof.destroy_subscribe_config(subscribe_config)
# 12.释放运行管理资源
acl.mdl.unload(model_id)
acl.mdl.destroy_desc(model_desc)
acl.rt.destroy_context(context)
acl.rt.reset_device(0)
acl.finalize()
