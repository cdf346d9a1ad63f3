"""``openmsprof.torch.profiler``: a drop-in for ``torch_npu.profiler`` built on torch.profiler
(Kineto), writing ``…_ascend_pt`` dirs that msprof-analyze and MindStudio Insight read.

    import openmsprof.torch.profiler as torch_npu_profiler   # only the import changes
"""

from __future__ import annotations

import sys as _sys
import types as _types
import warnings as _warnings

from openmsprof.torch.profiler import dynamic_profile
from openmsprof.torch.profiler._enums import (
    AiCMetrics,
    ExportType,
    HostSystem,
    ProfilerAction,
    ProfilerActivity,
    ProfilerLevel,
    supported_activities,
    supported_ai_core_metrics,
    supported_export_type,
    supported_profiler_level,
)
from openmsprof.torch.profiler.analysis import analyse
from openmsprof.torch.profiler.experimental_config import _ExperimentalConfig
from openmsprof.torch.profiler.kineto_profile import _KinetoProfile
from openmsprof.torch.profiler.npu_mstx import mstx
from openmsprof.torch.profiler.profile import profile, tensorboard_trace_handler
from openmsprof.torch.profiler.scheduler import schedule

# ``python -m openmsprof.torch.profiler.analysis PATH`` (docs/torch.md): this package imports the
# module before runpy runs it as __main__, which runpy warns about; the run is the intended one
_warnings.filterwarnings("ignore", message=r"'openmsprof\.torch\.profiler\.analysis' found in sys\.modules",
                         category=RuntimeWarning)

#: ``torch_npu.profiler.profiler`` (seed 004: ``torch_npu.profiler.profiler.analyse(path)``; also
#: ``from openmsprof.torch.profiler.profiler import analyse``): the module torch_npu defines them in.
profiler = _types.ModuleType(__name__ + ".profiler", "torch_npu.profiler.profiler: analyse, profile, "
                             "tensorboard_trace_handler (the same objects as openmsprof.torch.profiler's)")
for _name, _obj in (("analyse", analyse), ("profile", profile), ("tensorboard_trace_handler", tensorboard_trace_handler)):
    setattr(profiler, _name, _obj)
_sys.modules[profiler.__name__] = profiler

__all__ = [
    "AiCMetrics", "ExportType", "HostSystem", "ProfilerAction", "ProfilerActivity", "ProfilerLevel",
    "_ExperimentalConfig", "_KinetoProfile", "analyse", "dynamic_profile", "mstx", "profile", "profiler", "schedule",
    "supported_activities", "supported_ai_core_metrics", "supported_export_type", "supported_profiler_level",
    "tensorboard_trace_handler",
]
