"""The cost model against torch.utils.flop_counter (mm/bmm/conv/SDPA) and its documented rules."""

from __future__ import annotations

import pytest

from openmsprof.parse.costmodel import ELEMENTWISE, op_cost, parse_shapes, roofline

torch = pytest.importorskip("torch")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402


def _torch_flops(fn, *args):  # type: ignore[no-untyped-def]
    with FlopCounterMode(display=False) as m:
        out = fn(*args)
    return m.get_total_flops(), out


def _txt(*shapes: tuple[int, ...]) -> str:
    return ";".join(",".join(str(d) for d in s) for s in shapes)


@pytest.mark.parametrize("m,k,n", [(64, 32, 16), (1, 2048, 1000), (7, 3, 5)])
def test_mm_and_gemm_equal_flop_counter(m: int, k: int, n: int) -> None:
    a, b = torch.rand(m, k), torch.rand(k, n)
    want, out = _torch_flops(torch.mm, a, b)
    assert op_cost("aten::mm", _txt(a.shape, b.shape), "float;float").flops == want
    # the ONNX spelling with the output shape, and Gemm with transB (weight (n, k))
    assert op_cost("MatMul", _txt(a.shape, b.shape), "FLOAT;FLOAT", _txt(out.shape),
                   "FLOAT").flops == want
    assert op_cost("Gemm", _txt((m, k), (n, k), (n,)), "FLOAT;FLOAT;FLOAT", _txt((m, n)),
                   "FLOAT").flops == want
    bias = torch.rand(n)
    want_addmm, _ = _torch_flops(torch.addmm, bias, a, b)
    assert op_cost("aten::addmm", _txt(bias.shape, a.shape, b.shape), "float;float;float"
                   ).flops == want_addmm


def test_bmm_equals_flop_counter() -> None:
    a, b = torch.rand(4, 8, 16), torch.rand(4, 16, 32)
    want, out = _torch_flops(torch.bmm, a, b)
    assert op_cost("aten::bmm", _txt(a.shape, b.shape), "float;float").flops == want
    assert op_cost("MatMul", _txt(a.shape, b.shape), "FLOAT;FLOAT", _txt(out.shape)
                   ).flops == want


@pytest.mark.parametrize("cin,cout,k,stride,pad,groups,size", [
    (3, 16, 3, 1, 1, 1, 32), (16, 32, 5, 2, 0, 1, 17), (32, 32, 3, 1, 1, 32, 8),
    (8, 4, 1, 1, 0, 2, 9)])
def test_conv_equals_flop_counter(cin: int, cout: int, k: int, stride: int, pad: int,
                                  groups: int, size: int) -> None:
    conv = torch.nn.Conv2d(cin, cout, k, stride=stride, padding=pad, groups=groups)
    x = torch.rand(2, cin, size, size)
    with torch.no_grad():
        want, out = _torch_flops(conv, x)
    got = op_cost("Conv", _txt(x.shape, conv.weight.shape, conv.bias.shape),
                  "FLOAT;FLOAT;FLOAT", _txt(out.shape), "FLOAT")
    assert got.kind == "conv" and got.flops == want
    # bytes: unfused input + weight + bias + output, float32
    assert got.bytes == 4 * (x.numel() + conv.weight.numel() + cout + out.numel())


def test_conv_transpose_equals_flop_counter() -> None:
    conv = torch.nn.ConvTranspose2d(8, 4, 3, stride=2)
    x = torch.rand(1, 8, 10, 10)
    with torch.no_grad():
        want, out = _torch_flops(conv, x)
    assert op_cost("ConvTranspose", _txt(x.shape, conv.weight.shape), "FLOAT;FLOAT",
                   _txt(out.shape), "FLOAT").flops == want


@pytest.mark.parametrize("b,h,sq,sk,d", [(2, 4, 16, 16, 8), (1, 8, 5, 33, 64)])
def test_sdpa_equals_flop_counter(b: int, h: int, sq: int, sk: int, d: int) -> None:
    q, k, v = torch.rand(b, h, sq, d), torch.rand(b, h, sk, d), torch.rand(b, h, sk, d)
    # torch counts SDPA for its registered kernels (flash/efficient/cudnn); the CPU kernel is
    # not registered, so use the formula those registrations call
    from torch.utils.flop_counter import sdpa_flop_count
    want = sdpa_flop_count(q.shape, k.shape, v.shape)
    assert want == 2 * b * h * sq * sk * d * 2
    got = op_cost("aten::scaled_dot_product_attention", _txt(q.shape, k.shape, v.shape),
                  "float;float;float")
    assert got.kind == "attention" and got.flops == want


def test_elementwise_weights_and_bytes() -> None:
    c = op_cost("Softplus", "1,16,32,32", "FLOAT", "1,16,32,32", "FLOAT")
    n = 16 * 32 * 32
    assert (c.flops, c.transc) == (ELEMENTWISE["softplus"][0] * n, ELEMENTWISE["softplus"][1] * n)
    assert c.bytes == 2 * 4 * n and c.kind == "transcendental"
    mul = op_cost("Mul", "1,16,32,32;1,16,32,32", "FLOAT;FLOAT", "1,16,32,32", "FLOAT")
    assert mul.bytes == 3 * 4 * n and mul.flops == n
    half = op_cost("aten::add", "8,8;8,8", "c10::Half;c10::Half")  # torch: no output shapes
    assert half.bytes == 3 * 2 * 64


def test_unknown_ops_and_missing_shapes_claim_nothing() -> None:
    for c in (op_cost("MyCustomOp", "1,16", "FLOAT", "1,16", "FLOAT"),
              op_cost("Conv", "N/A", "N/A", "N/A", "N/A"), op_cost("Relu", "", "")):
        assert not c.modelled and c.flops == 0 and c.bytes == 0
        r = roofline(c, 1e10, 1e11, 1e9)
        assert r.bound == "unmodelled" and r.memory_bound_ratio is None


def test_roofline_bounds() -> None:
    big_add = op_cost("Add", "4096,4096;4096,4096", "FLOAT;FLOAT", "4096,4096", "FLOAT")
    r = roofline(big_add, 10e9, 100e9)
    assert r.bound == "memory" and r.memory_bound_ratio is not None and r.memory_bound_ratio > 1
    assert r.attainable_ns == pytest.approx(big_add.bytes / 10e9 * 1e9)
    gemm = op_cost("MatMul", "2048,2048;2048,2048", "FLOAT;FLOAT", "2048,2048", "FLOAT")
    r = roofline(gemm, 10e9, 100e9)
    assert r.bound == "compute" and r.memory_bound_ratio is not None and r.memory_bound_ratio < 1
    assert r.intensity == pytest.approx(gemm.flops / gemm.bytes)
    tiny = op_cost("Relu", "1,16", "FLOAT", "1,16", "FLOAT")
    assert roofline(tiny, 10e9, 100e9).bound == "overhead"


def test_parse_shapes() -> None:
    assert parse_shapes("1,3,32,32;16;") == [(1, 3, 32, 32), (16,), ()]
    assert parse_shapes("N/A") == [] and parse_shapes("1,?") == [None]


def test_tensorflow_conv_is_nhwc() -> None:
    # Conv2D: NHWC input, HWIO filter; 2 per MAC over every output element
    c = op_cost("Conv2D", "2,32,32,3;3,3,3,16", "float;float", "2,32,32,16", "float")
    assert c.flops == 2 * (2 * 32 * 32 * 16) * (3 * 3 * 3)
    d = op_cost("DepthwiseConv2dNative", "1,8,8,4;3,3,4,2", "float;float", "1,8,8,8", "float")
    assert d.flops == 2 * (8 * 8 * 8) * 9
    assert op_cost("AddV2", "4,4;4,4", "float;float", "4,4", "float").flops == 16


def test_runtime_class_ceilings() -> None:
    """A runtime's conv rate lifts a Conv's compute ceiling (never lowers it); a measured
    element rate prices an element-wise op by its elements, not by the machine's exp rate."""
    conv = op_cost("Conv", "1,64,64,64;64,64,3,3", "FLOAT;FLOAT", "1,64,64,64", "FLOAT")
    assert conv.op == "Conv"
    base = roofline(conv, 40e9, 100e9)
    fast = roofline(conv, 40e9, 100e9, flops_rate=400e9)
    assert fast.compute_ns == pytest.approx(base.compute_ns / 4)
    assert roofline(conv, 40e9, 100e9, flops_rate=50e9).compute_ns == base.compute_ns
    sp = op_cost("Softplus", "1,64,64,64", "FLOAT", "1,64,64,64", "FLOAT")
    assert sp.elems == 64 ** 3 and sp.transc == 2 * 64 ** 3
    machine = roofline(sp, 40e9, 100e9, 4e9)
    slow = roofline(sp, 40e9, 100e9, 4e9, elem_rate=0.1e9)
    assert slow.compute_ns == pytest.approx(64 ** 3 / 0.1e9 * 1e9)
    assert slow.attainable_ns > 10 * machine.attainable_ns and slow.bound == "compute"
    mul = op_cost("Mul", "1,64,64,64;1,64,64,64", "FLOAT;FLOAT", "1,64,64,64", "FLOAT")
    assert roofline(mul, 40e9, 100e9, elem_rate=1e15).bound == "memory"  # bytes still count
