"""The seed pair on torch CPU: the ResNet-like CNN of ``openmsprof.demo.models.resnet_like`` with Mish
written by hand (``x * tanh(softplus(x))``, as users write it: aten::softplus → aten::tanh →
aten::mul), with ``F.mish`` (one aten op) and with LeakyReLU; profiled through
``openmsprof.torch.profiler`` with shapes, a schedule of several active steps and the
TensorBoard trace handler."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

ACTIVE = 20


class ResNetLike(torch.nn.Module):
    def __init__(self, activation: str, channels: int = 16, blocks: int = 2) -> None:
        super().__init__()
        self.activation = activation
        self.stem = torch.nn.Conv2d(3, channels, 3, padding=1)
        self.blocks = torch.nn.ModuleList(
            torch.nn.ModuleList([torch.nn.Conv2d(channels, channels, 3, padding=1),
                                 torch.nn.Conv2d(channels, channels, 3, padding=1)])
            for _ in range(blocks))
        self.fc = torch.nn.Linear(channels, 10)

    def act(self, x: torch.Tensor) -> torch.Tensor:
        if self.activation == "mish":
            return x * torch.tanh(F.softplus(x))
        if self.activation == "fmish":
            return F.mish(x)
        return F.leaky_relu(x, 0.01)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act(self.stem(x))
        for c1, c2 in self.blocks:
            x = self.act(x + c2(self.act(c1(x))))
        return self.fc(x.mean((2, 3)))


def profile_cnn(activation: str, out: Path, export_type: str = "text") -> Path:
    """Run the CNN under the profiler (1 wait, 2 warmup, ``ACTIVE`` active steps); the rank dir."""
    import openmsprof.torch.profiler as tp

    exp = tp._ExperimentalConfig(export_type=[export_type])
    torch.manual_seed(0)
    model = ResNetLike(activation).eval()
    x = torch.randn(1, 3, 32, 32)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on a shared machine, intra-op threads stall for milliseconds
    try:
        _run(model, x, out, exp)
    finally:
        torch.set_num_threads(threads)
    (rank,) = [p for p in out.iterdir() if p.name.endswith("_ascend_pt")]
    return rank


def _run(model: torch.nn.Module, x: torch.Tensor, out: Path, exp: object) -> None:
    import openmsprof.torch.profiler as tp

    with torch.no_grad(), tp.profile(
            activities=[tp.ProfilerActivity.CPU], record_shapes=True,
            schedule=tp.schedule(wait=1, warmup=2, active=ACTIVE, repeat=1),
            on_trace_ready=tp.tensorboard_trace_handler(str(out)),
            experimental_config=exp) as prof:
        for _ in range(ACTIVE + 3):
            model(x)
            prof.step()
