"""A pyACL inference application with no profiling code: what seed 002's one-step profiling
(``openmsprof collect``, or an acl.json given to ``acl.init``) profiles from outside::

    openmsprof collect -m examples/acl_infer.py --output prof --all
    python examples/acl_infer.py [ACL_JSON] [MODEL.onnx] [EXECUTES]

Without a model the ResNet-like Mish CNN of examples/models.py is built in a temp dir.
"""

import os
import sys
import tempfile

import numpy as np

from openmsprof import acl

ACL_JSON = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else None
if len(sys.argv) > 2:
    MODEL_PATH = sys.argv[2]
else:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import models
    _MODELS = tempfile.TemporaryDirectory(prefix="acl_sample_")  # removed when the program ends
    MODEL_PATH = str(models.save_all(_MODELS.name)["resnet_mish"])
EXECUTES = int(sys.argv[3]) if len(sys.argv) > 3 else 10


def check(ret, what):
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")


def create_dataset(sizes):
    dataset = acl.mdl.create_dataset()
    ptrs = []
    for size in sizes:
        ptr, ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "acl.rt.malloc")
        _, ret = acl.mdl.add_dataset_buffer(dataset, acl.create_data_buffer(ptr, size))
        check(ret, "acl.mdl.add_dataset_buffer")
        ptrs.append(ptr)
    return dataset, ptrs


check(acl.init(ACL_JSON), "acl.init")
# 1.申请运行管理资源,包括设置用于计算的Device、创建Context、创建Stream
check(acl.rt.set_device(0), "acl.rt.set_device")
context, ret = acl.rt.create_context(0)
stream, ret = acl.rt.create_stream()
# 2.模型加载,加载成功后,返回标识模型的model_id
model_id, ret = acl.mdl.load_from_file(MODEL_PATH)
check(ret, "acl.mdl.load_from_file")
model_desc = acl.mdl.create_desc()
check(acl.mdl.get_desc(model_desc, model_id), "acl.mdl.get_desc")
# 3.创建aclmdlDataset类型的数据,用于描述模型的输入数据input、输出数据output
input, input_ptrs = create_dataset([acl.mdl.get_input_size_by_index(model_desc, i)
                                    for i in range(acl.mdl.get_num_inputs(model_desc))])
output, output_ptrs = create_dataset([acl.mdl.get_output_size_by_index(model_desc, i)
                                      for i in range(acl.mdl.get_num_outputs(model_desc))])
dims, ret = acl.mdl.get_input_dims(model_desc, 0)
image = np.random.default_rng(0).random(dims["dims"], dtype=np.float32)
check(acl.rt.memcpy(input_ptrs[0], image.nbytes, acl.util.numpy_to_ptr(image), image.nbytes,
                    acl.ACL_MEMCPY_HOST_TO_DEVICE), "acl.rt.memcpy")

# 4.执行模型 (profiled when collect or the acl.json switched profiling on)
for _ in range(EXECUTES):
    check(acl.mdl.execute(model_id, input, output), "acl.mdl.execute")
# 5.处理模型推理结果
dims, ret = acl.mdl.get_output_dims(model_desc, 0)
scores = acl.util.ptr_to_numpy(output_ptrs[0], dims["dims"], 11)
print("top class:", int(np.argmax(scores)))
# 6.释放资源,卸载模型
for ds, ptrs in ((input, input_ptrs), (output, output_ptrs)):
    for i in range(acl.mdl.get_dataset_num_buffers(ds)):
        acl.destroy_data_buffer(acl.mdl.get_dataset_buffer(ds, i))
    acl.mdl.destroy_dataset(ds)
    for p in ptrs:
        acl.rt.free(p)
acl.mdl.destroy_desc(model_desc)
acl.mdl.unload(model_id)
acl.rt.destroy_stream(stream)
acl.rt.destroy_context(context)
acl.rt.reset_device(0)
check(acl.finalize(), "acl.finalize")
