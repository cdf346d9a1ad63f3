"""msprof command-line profiling flags → :class:`ProfileConfig`, and the precedence merge.

``add_arguments(parser)`` adds every switch in both spellings (``--aic_metrics`` and
``--aic-metrics``, S2's ``--aacpu``/``--aac_metrics`` too); on/off switches may be given bare
(``--aicpu`` = on).  ``from_args(namespace)`` maps only the flags actually given, so
``merge(acl_json_cfg, from_args(ns))`` lets the command line win (S2: CLI > acl.json > API).
"""

from __future__ import annotations

import argparse
from typing import Any

from openmsprof.config.capabilities import check
from openmsprof.config.model import ProfileConfig
from openmsprof.config.profiler_options import parse_options
from openmsprof.config.validate import validate

#: option key (acl.json spelling) → (help text, bare flag value or None when a value is required)
FLAGS: dict[str, tuple[str, str | None]] = {
    "output": ("directory the job is written under", None),
    "switch": ("profiling on|off", "on"),
    "acl_api": ("record pyACL API calls, on|off", "on"),
    "ascendcl": ("same as --acl-api, on|off", "on"),
    "runtime_api": ("record runtime API calls, on|off", "on"),
    "task_time": ("operator/task timing, on|off|l0|l1", "on"),
    "aicpu": ("AI CPU data, on|off", "on"),
    "aacpu": ("S2 spelling of --aicpu, on|off", "on"),
    "aic_metrics": ("AI Core metric set (PipeUtilization, ..., AiCoreNone, Custom:r1,...)", None),
    "aac_metrics": ("S2 spelling of --aic-metrics (ArithmeticUtilization|AiCoreNone)", None),
    "l2": ("L2 cache data, on|off", "on"),
    "hccl": ("HCCL communication data, on|off", "on"),
    "msproftx": ("msproftx / mstx markers, on|off", "on"),
    "training_trace": ("iteration (step) trace, on|off", "on"),
    "ge_api": ("GE API level, off|l0|l1", None),
    "interval": ("profile every N-th model execution (0 = all)", None),
    "storage_limit": ("cap on the job's size, {N}MB with N in [200, 4294967295]", None),
    "host_sys": ("host system data, comma list of cpu,mem,disk,network,osrt", None),
    "host_sys_usage": ("host usage sampling, comma list of cpu,mem", None),
    "host_sys_usage_freq": ("host usage sampling frequency, Hz in [1, 50]", None),
    "sys_hardware_mem_freq": ("on-chip memory sampling, Hz in [1, 100]", None),
    "sys_io_sampling_freq": ("NIC/RoCE sampling, Hz in [1, 100]", None),
    "sys_interconnection_freq": ("PCIe/HCCS sampling, Hz in [1, 50]", None),
    "dvpp_freq": ("DVPP sampling, Hz in [1, 100]", None),
    "instr_profiling_freq": ("instruction profiling, Hz in [300, 30000]", None),
    "llc_profiling": ("LLC event, read|write", None),
}
_DEST = "prof_"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the profiling switches (both spellings) to ``parser`` in their own group."""
    group = parser.add_argument_group("profiling switches (msprof / acl.json spellings)")
    for key, (help_text, bare) in FLAGS.items():
        spellings = [f"--{key}"] + ([f"--{key.replace('_', '-')}"] if "_" in key else [])
        kwargs: dict[str, Any] = {"dest": _DEST + key, "default": None, "help": help_text,
                                  "metavar": "VALUE"}
        if bare is not None:
            kwargs.update(nargs="?", const=bare, metavar="on|off" if bare == "on" else "VALUE")
        group.add_argument(*spellings, **kwargs)


def given_flags(namespace: argparse.Namespace) -> dict[str, Any]:
    """The flags the user gave, as an acl.json-style option dict."""
    out: dict[str, Any] = {}
    for key in FLAGS:
        value = getattr(namespace, _DEST + key, None)
        if value is not None:
            out[key] = value
    return out


def from_args(namespace: argparse.Namespace) -> ProfileConfig:
    """The config of the flags given on the command line (``explicit`` names exactly those)."""
    return parse_options(given_flags(namespace), "command line", "cli", key_prefix="--")


def merge(base: ProfileConfig, override: ProfileConfig) -> ProfileConfig:
    """``base`` with every field that ``override`` set explicitly taken from ``override``.

    Precedence CLI > acl.json > API is ``merge(merge(api_cfg, acl_json_cfg), cli_cfg)``;
    ``unsupported`` is recomputed for the result.
    """
    changes = {name: getattr(override, name) for name in override.explicit}
    merged = base.replace(**changes)
    merged.explicit = sorted(set(base.explicit) | set(override.explicit))
    merged.notes = list(dict.fromkeys([*base.notes, *override.notes]))
    merged.unsupported = []
    merged.source = f"{override.source} > {base.source}"
    return check(validate(merged, f"{override.source} over {base.source}"))
