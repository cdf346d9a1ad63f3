"""What a rank's optional outputs need, gathered once per analysis: the communication
operations with their group, the memory view, the CANN API layer and the overhead records."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

from openmsprof.export import overhead
from openmsprof.export.ascend_pt import cann, communication, framework, memory

__all__ = ["Extras"]


class Extras:
    """What the optional outputs need: the communication operations (with their group; the JSON
    views only at Level1+, docs/formats.md §3) and the memory view (profile_memory only).  The
    group and the CANN API layer are read on first use (a plain CPU window without communication
    needs neither for its text outputs at Level0)."""

    def __init__(self, rank_dir: Path, fw: framework.Framework, rank: int | None, level: int,
                 profile_memory: bool, info: dict[str, Any] | None = None, jobs: list[Path] | None = None) -> None:
        """``info``: the rank dir's profiler_info, ``jobs``: its PROF_ dirs, when already read."""
        self._rank_dir, self._rank, self._fw = rank_dir, rank, fw
        # a CPU trace's communication operators are all among its kernels (framework.load): none
        # there, no operation to collect or rename
        if fw.backend == "CPU" and not fw.kernels.comm.any():
            self.comm: list[communication.CommOp] = []
        else:
            self.comm = communication.collect(fw, self.group)
            communication.rename_kernels(fw, self.group)
        self.comm_views = level >= 1 and bool(self.comm)
        self.memory = memory.load(fw) if profile_memory else None
        self.overhead = overhead.read(rank_dir, info, jobs)

    @cached_property
    def group(self) -> communication.Group:
        """The default communication group (``communication.group_of``: profiler_metadata.json)."""
        return communication.group_of(self._rank_dir, self._rank)

    @cached_property
    def apis(self) -> cann.Apis:
        """The CANN API layer (``cann.build``)."""
        return cann.build(self._fw)
