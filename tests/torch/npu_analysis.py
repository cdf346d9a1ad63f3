"""Run torch_npu 2.14's own offline analysis (``torch_npu.profiler.profiler.analyse``: its
pure-Python ``analysis`` package) on an ``*_ascend_pt`` directory, as a subprocess of the tests.

Stand-in for the native module: torch_npu's package ``__init__`` files load ``torch_npu._C`` (the
NPU runtime) and the CANN libraries, which a machine without CANN lacks.  The analysis calls one
native function, ``torch_npu._C._profiler._get_host_uid`` (the HOST_INFO row of its db export);
the stand-in is that function (openmsprof's host uid, as our own db writes it) and empty package
modules for ``torch_npu``, ``torch_npu.utils``, ``torch_npu._init``, ``torch_npu._init.common`` and
``torch_npu.profiler`` whose ``__path__`` points at the sources fetched from the wheel
(tests/fetch_refclients.py): the submodules the analysis imports load from there, the package
``__init__`` files never run.

Usage: ``python npu_analysis.py SOURCES PROFILER_DIR``; prints the analysis' own messages.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

from openmsprof.export.hostinfo import host_uid

STUB_PACKAGES = ("torch_npu", "torch_npu.utils", "torch_npu._init", "torch_npu._init.common",
                 "torch_npu.profiler")


def install(sources: Path) -> None:
    for name in STUB_PACKAGES:
        mod = types.ModuleType(name)
        mod.__path__ = [str(sources.joinpath(*name.split(".")))]
        sys.modules[name] = mod
    native = types.ModuleType("torch_npu._C")
    profiler = types.ModuleType("torch_npu._C._profiler")
    profiler._get_host_uid = lambda: int(host_uid())  # type: ignore[attr-defined]
    native._profiler = profiler  # type: ignore[attr-defined]
    sys.modules.update({"torch_npu._C": native, "torch_npu._C._profiler": profiler})


def main(sources: str, profiler_dir: str) -> None:
    install(Path(sources))
    from torch_npu.profiler.analysis._npu_profiler import NpuProfiler
    from torch_npu.profiler.analysis.prof_common_func._constant import Constant

    # what torch_npu.profiler.profiler.analyse(profiler_dir) does, one process
    NpuProfiler.analyse(profiler_dir, Constant.TENSORBOARD_TRACE_HANDLER, max_process_number=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
