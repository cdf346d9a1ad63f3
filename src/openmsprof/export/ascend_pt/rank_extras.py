"""What a rank's optional outputs need, gathered once per analysis: the communication
operations with their group, the memory view, the CANN API layer and the overhead records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openmsprof.export import overhead
from openmsprof.export.ascend_pt import cann, communication, framework, memory

__all__ = ["Extras"]


class Extras:
    """What the optional outputs need: the communication operations (with their group; the JSON
    views only at Level1+, docs/formats.md §3) and the memory view (profile_memory only)."""

    def __init__(self, rank_dir: Path, fw: framework.Framework, rank: int | None, level: int,
                 profile_memory: bool, info: dict[str, Any] | None = None, jobs: list[Path] | None = None) -> None:
        """``info``: the rank dir's profiler_info, ``jobs``: its PROF_ dirs, when already read."""
        self.group = communication.group_of(rank_dir, rank)
        self.comm = communication.collect(fw, self.group)
        communication.rename_kernels(fw, self.group)
        self.comm_views = level >= 1 and bool(self.comm)
        self.memory = memory.load(fw) if profile_memory else None
        self.apis = cann.build(fw)
        self.overhead = overhead.read(rank_dir, info, jobs)
