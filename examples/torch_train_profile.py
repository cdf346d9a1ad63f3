"""Seed 004's first snippet with only the import changed: a small MLP trained on random data under
``openmsprof.torch.profiler`` (torch_npu.profiler API), results in ./result/*_ascend_pt.

    .venv/bin/python examples/torch_train_profile.py && msprof-analyze advisor all -d result/<dir> -o adv
"""

import openmsprof.torch.profiler as torch_npu_profiler  # was: torch_npu.profiler
import torch

model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
criterion = torch.nn.CrossEntropyLoss()


def train_one_step() -> None:
    x, y = torch.randn(16, 32), torch.randint(0, 10, (16,))
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


experimental_config = torch_npu_profiler._ExperimentalConfig(
    aic_metrics=torch_npu_profiler.AiCMetrics.PipeUtilization,
    profiler_level=torch_npu_profiler.ProfilerLevel.Level1,
    l2_cache=False,
    data_simplification=False,
)
with torch_npu_profiler.profile(
        activities=[torch_npu_profiler.ProfilerActivity.CPU, torch_npu_profiler.ProfilerActivity.NPU],
        schedule=torch_npu_profiler.schedule(wait=0, warmup=0, active=1, repeat=1, skip_first=1),
        on_trace_ready=torch_npu_profiler.tensorboard_trace_handler("./result"),
        record_shapes=True, profile_memory=False, with_stack=False, with_flops=False,
        experimental_config=experimental_config) as prof:
    for _step in range(4):
        train_one_step()
        prof.step()
print("supported activities here:", torch_npu_profiler.supported_activities())
