"""The one task classification (openmsprof.export.classify) and the engine-class values it gives."""

from __future__ import annotations

import pytest

from openmsprof.export.classify import Kind, classify, core_name, core_names, op_type


@pytest.mark.parametrize(("name", "kind"), [
    ("aten::mm", Kind.CUBE), ("aten::addmm", Kind.CUBE), ("aten::bmm", Kind.CUBE), ("MatMul", Kind.CUBE),
    ("Gemm", Kind.CUBE), ("aten::mkldnn_convolution", Kind.CUBE), ("Conv", Kind.CUBE),
    ("aten::convolution_backward", Kind.CUBE), ("aten::_scaled_dot_product_flash_attention", Kind.CUBE),
    ("aten::relu", Kind.VECTOR), ("aten::add_", Kind.VECTOR), ("Relu", Kind.VECTOR),
    ("aten::max_pool2d_with_indices", Kind.VECTOR),
    ("gloo:all_reduce", Kind.COMMUNICATION), ("nccl:send", Kind.COMMUNICATION),
    ("hcom_allReduce__256_0_1", Kind.COMMUNICATION),
    ("aten::copy_", Kind.MEMCPY), ("MemcpyAsync", Kind.MEMCPY),
])
def test_kinds(name: str, kind: Kind) -> None:
    assert classify(name) == kind
    assert core_name(name) == core_names()[kind] == core_names("CPU")[kind]


def test_core_names_name_the_real_executor() -> None:
    # docs/formats.md decision 1: computing work is named by its executor, never AI_CORE/AI_VECTOR_CORE
    assert core_names() == ["CPU", "CPU", "COMMUNICATION", "MEMCPY_ASYNC"]
    assert core_names("CUDA") == ["CUDA", "CUDA", "COMMUNICATION", "MEMCPY_ASYNC"]
    assert core_name("aten::mm", "CUDA") == "CUDA" and core_name("gloo:send", "CUDA") == "COMMUNICATION"


@pytest.mark.parametrize(("name", "want"), [
    ("aten::addmm", "MatMul"), ("aten::mm", "MatMul"), ("aten::bmm", "BatchMatMul"),
    ("aten::mkldnn_convolution", "Conv2D"), ("aten::convolution_backward", "Conv2DBackward"),
    ("aten::relu", "aten::relu"), ("hcom_allReduce__256_0_1", "hcom_allReduce_"), ("gloo:send", "gloo:send"),
])
def test_op_type(name: str, want: str) -> None:
    t = op_type(name)
    assert t == want
    # msprof-analyze finds matmul/conv by these words in the type
    assert ("matmul" in t.lower()) == (classify(name) == Kind.CUBE and "conv" not in name and "attention" not in name)
