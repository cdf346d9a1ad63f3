"""What a window's ``profiler_info_{rank}.json`` says about its collection (docs/formats.md §3).

The requested activities mapped onto torch's, the backend text, the ``config`` block (common and
experimental settings) and the ``start_info`` / ``end_info`` clock pairs.  The live profiler builds
them at each window end (``_KinetoProfile``); offline ``analyse`` builds what it can of them from
an orphaned trace (``_orphans``).  No torch import at module level.
"""

from __future__ import annotations

import logging
from typing import Any

from openmsprof.recorder.clock import read_pair
from openmsprof.torch.profiler import _enums

__all__ = ["BACKEND_CPU", "BACKEND_CUDA", "backend", "bool_flag", "config_dict", "end_info", "start_info",
           "torch_activities", "warn_once"]

log = logging.getLogger("openmsprof")
BACKEND_CPU = ("CPU: no NPU or CUDA device; kernels are the leaf CPU operators that computed "
               "(aten ops without child ops)")
BACKEND_CUDA = "CUDA: kernels from Kineto CUPTI"
_warned: set[str] = set()


def torch_activities(activities: Any) -> tuple[list[str], list[Any], list[str]]:
    """(names, torch activities, unsupported notes) for the requested activities."""
    import torch.profiler as tp

    names: list[str] = []
    if activities and (isinstance(activities, str) or not hasattr(activities, "__iter__")):
        if _enums.activity_name(activities) is not None:  # one activity, not in a list
            activities = [activities]
        else:  # profile(activities=5): one line, the defaults; training goes on
            log.warning("openmsprof: activities=%r is not a list of ProfilerActivity; using CPU and NPU",
                        activities)
            activities = None
    for act in activities if activities else ["CPU", "NPU"]:
        name = _enums.activity_name(act)
        if name is None:
            log.warning("openmsprof: unknown profiler activity %r ignored", act)
        elif name not in names:
            names.append(name)
    if not names:
        names = ["CPU", "NPU"]
    notes: list[str] = []
    acts = [tp.ProfilerActivity.CPU]
    if "NPU" in names:
        if _enums.device_backend() == "CUDA":
            acts.append(tp.ProfilerActivity.CUDA)
        else:
            notes.append("NPU activity: no NPU or CUDA here; device-side data are the leaf CPU operators")
    return names, acts, notes


def warn_once(note: str) -> None:
    """Each switch this machine cannot honour is logged once per process (and is in every
    window's profiler_info ``unsupported`` list)."""
    if note not in _warned:
        _warned.add(note)
        log.warning("openmsprof: not supported here: %s", note)


def backend(cuda: bool) -> str:
    """The profiler_info ``backend`` text: CUDA kernels from CUPTI, else the CPU's leaf operators."""
    return BACKEND_CUDA if cuda else BACKEND_CPU


def config_dict(activity_names: list[str], schedule: dict[str, int] | None, flags: dict[str, bool],
                experimental: dict[str, Any]) -> dict[str, Any]:
    """The ``config`` block: ``flags`` holds record_shapes, profile_memory, with_stack,
    with_flops and with_modules; ``experimental`` the experimental_config's ``to_dict()``."""
    return {"common_config": {"activities": [f"ProfilerActivity.{a}" for a in activity_names],
                              "schedule": schedule, **flags},
            "experimental_config": experimental}


def start_info(start_mono_ns: int) -> dict[str, Any]:
    """``start_info``: no system counter here; the window's start on the monotonic clock (ns)."""
    return {"syscnt_enable": False, "freq": 1_000_000_000, "start_cnt": start_mono_ns,
            "start_monotonic": start_mono_ns}


def end_info() -> dict[str, Any]:
    """``end_info``: wall and monotonic clocks read together now (ns)."""
    pair = read_pair()
    return {"collectionTimeEnd": pair.wall_ns, "MonotonicTimeEnd": pair.mono_ns}


def bool_flag(what: str, value: Any, default: bool = False) -> bool:
    """A profiler switch: a bool as given; anything else is one warning naming it, and ``default``."""
    if isinstance(value, bool):
        return value
    log.warning("openmsprof: %s=%.80r is not a bool; using %s", what, value, default)
    return default
