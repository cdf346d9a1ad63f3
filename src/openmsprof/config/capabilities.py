"""What this machine can honour: ``check(cfg)`` lists, one line each, the switches asked for
that need hardware or software that is not here (docs/internals.md) — never faked, never silent.

Detection is cheap and import-free: NVIDIA GPUs from ``/proc/driver/nvidia/gpus`` and
``/dev/nvidia*``, Ascend NPUs from ``/dev/davinci*``.  openmsprof reads no Ascend PMU itself, so
AI Core, L2, HCCL and AI CPU switches are reported on every machine it runs on today.
"""

from __future__ import annotations

import functools
import glob
import os
from dataclasses import dataclass

from openmsprof.config.model import ProfileConfig

#: host_sys items the host sampler implements.
SAMPLED_HOST_SYS = ("cpu", "mem")
#: Compute devices of this product: the CPU, device 0 (acl.rt's device count).
DEVICE_COUNT = 1
#: Switches only torch_npu.profiler applies (its experimental_config).
TORCH_ONLY = ("profiler_level", "export_type", "data_simplification", "record_op_args")
#: Config sources whose sessions apply ``interval`` (acl.json, and msprof collect / the command
#: line, which hand it to the program in an acl.json).
_INTERVAL_SOURCES = ("acl.json", "collect", "command line")


@dataclass(frozen=True)
class Machine:
    """Accelerators visible on this machine."""

    nvidia_gpus: int = 0
    ascend_npus: int = 0

    def describe(self) -> str:
        parts = []
        if self.nvidia_gpus:
            parts.append(f"{self.nvidia_gpus} NVIDIA GPU{'s' if self.nvidia_gpus > 1 else ''}")
        if self.ascend_npus:
            parts.append(f"{self.ascend_npus} Ascend NPU{'s' if self.ascend_npus > 1 else ''} "
                         "(not read by openmsprof)")
        return "CPU only" if not parts else "CPU + " + " + ".join(parts)


def _count(pattern: str) -> int:
    return len([p for p in glob.glob(pattern) if os.path.basename(p)[-1:].isdigit()])


@functools.lru_cache(maxsize=1)
def machine() -> Machine:
    """Detect accelerators once per process (no torch/CUDA import, no subprocess)."""
    try:
        gpus = len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        gpus = 0
    gpus = gpus or _count("/dev/nvidia[0-9]*")
    return Machine(nvidia_gpus=gpus, ascend_npus=_count("/dev/davinci[0-9]*"))


def reasons(cfg: ProfileConfig, here: Machine | None = None) -> list[str]:
    """One line per switch in ``cfg`` that this machine cannot honour."""
    m = here or machine()
    where = f"this machine is {m.describe()}"
    out: list[str] = []
    if cfg.aic_metrics_active:
        out.append(f"aic_metrics={cfg.aic_metrics}: AI Core PMU counters exist only on an Ascend "
                   f"NPU and {where}; no AI Core metric columns are written")
    if cfg.task_time in ("l2", "l3"):
        out.append(f"task_time={cfg.task_time}: level-2/3 task details are Ascend hardware task "
                   f"data and {where}; tasks are collected at level l1")
    hw = (("l2", cfg.l2, "L2 cache hit counters are Ascend NPU counters"),
          ("hccl", cfg.hccl, "HCCL collective tracing needs Ascend HCCL"),
          ("aicpu", cfg.aicpu, "AI CPU operators run only on an Ascend NPU"))
    for name, on, why in hw:
        if on:
            out.append(f"{name}=on: {why} and {where}; nothing is collected for it")
    freqs = (("sys_hardware_mem_freq", "on-chip memory (HBM/LLC) bandwidth"),
             ("sys_io_sampling_freq", "NIC/RoCE sampling"),
             ("sys_interconnection_freq", "PCIe/HCCS interconnect sampling"),
             ("dvpp_freq", "DVPP sampling"),
             ("instr_profiling_freq", "instruction sampling"))
    for name, what in freqs:
        value = getattr(cfg, name)
        if value is not None:
            out.append(f"{name}={value}: {what} reads Ascend NPU counters and {where}; "
                       "nothing is collected for it")
    if cfg.ge_api != "off":
        out.append(f"ge_api={cfg.ge_api}: there is no Ascend Graph Engine here; framework API "
                   "spans come from the acl/torch facades")
    missing = [h for h in cfg.host_sys if h not in SAMPLED_HOST_SYS]
    if missing:
        out.append(f"host_sys={','.join(missing)}: only {' and '.join(SAMPLED_HOST_SYS)} host "
                   "sampling is implemented; nothing is collected for the rest")
    return out + _cpu_product(cfg, where)


def _cpu_product(cfg: ProfileConfig, where: str) -> list[str]:
    """The switches of Ascend task data, and of other entry points, that a session here cannot
    apply (each asked for with a non-default value or named explicitly)."""
    out: list[str] = []
    others = [d for d in cfg.devices if d >= DEVICE_COUNT]
    if others:
        out.append(f"devices={','.join(map(str, others))}: the only compute device here is the CPU "
                   f"(device 0); nothing is collected for the others")
    if cfg.llc_profiling != "read":  # "read", the default, is said with sys_hardware_mem_freq
        out.append(f"llc_profiling={cfg.llc_profiling}: LLC write bandwidth is sampled from "
                   f"Ascend NPU counters and {where}; nothing is collected for it")
    ascend = (("op_attr", "operator attributes are those of aclnn operators on an Ascend NPU; "
               "COMPUTE_TASK_INFO.attrInfo stays N/A"),
              ("task_memory", "operator memory of Ascend tasks is reported by the NPU runtime; "
               "no task memory rows are written"),
              ("aicore_shape", "AI Core shape data comes from the NPU's task descriptors; "
               "nothing is collected for it"),
              ("api_stats", "online API statistics are the Ascend driver's counters; every "
               "other switch is off with it, so this session collects nothing"))
    for name, why in ascend:
        if getattr(cfg, name) and not (name == "op_attr" and cfg.source == "torch"):  # torch says it
            out.append(f"{name}=True: {why}")
    if cfg.interval and not any(s in cfg.source for s in _INTERVAL_SOURCES):
        out.append(f"interval={cfg.interval}: it paces pyACL model executions of an acl.json or "
                   "msprof collect session; this session records every execution")
    if cfg.source != "torch":
        defaults = ProfileConfig()
        for name in TORCH_ONLY:
            value = getattr(cfg, name)
            if value != getattr(defaults, name):
                out.append(f"{name}={value}: a torch_npu.profiler experimental_config switch; this "
                           "session (not torch_npu.profiler.profile) does not apply it")
    return out


def check(cfg: ProfileConfig, here: Machine | None = None) -> ProfileConfig:
    """``cfg`` with ``unsupported`` holding every reason of :func:`reasons` (idempotent)."""
    if not cfg.switch:
        return cfg
    merged = list(dict.fromkeys([*cfg.unsupported, *reasons(cfg, here)]))
    return cfg.replace(unsupported=merged)
