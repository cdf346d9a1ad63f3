"""What a dump adds beside the history: ``then_capture`` (a recorder session into the same job for
the next N steps), PyTorch's own flight recorder dump, the rank, and the one-line messages."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from openmsprof.config.model import ProfileConfig
from openmsprof.fileio import fs
from openmsprof.flight import dump
from openmsprof.recorder import session
from openmsprof.recorder.clock import ClockPair
from openmsprof.sources import emit, gc_watch, host_sampler, markers  # noqa: F401  (register listeners)

__all__ = ["Capture", "current_rank", "say", "torch_fr"]


def say(line: str) -> None:
    """One line on stderr (a closed stderr is ignored)."""
    try:
        sys.stderr.write(f"openmsprof: {line}\n")
    except Exception:
        pass


def current_rank() -> int:
    """torch.distributed's rank when initialised, else ``RANK`` from the environment, else -1."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    try:
        return int(os.environ.get("RANK", "-1"))
    except ValueError:
        return -1


def torch_fr(root: Path) -> None:
    """PyTorch's own flight recorder (``TORCH_FR_BUFFER_SIZE`` > 0), when a process group is up:
    its JSON dump goes beside ours as ``host/torch_fr.json`` (cluster joins the two)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not os.environ.get("TORCH_FR_BUFFER_SIZE", os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE")):
        return
    try:
        if not (dist.is_available() and dist.is_initialized()):
            return
        c10d = sys.modules.get("torch._C._distributed_c10d")
        data = c10d._dump_fr_trace_json(True, False) if c10d is not None else None
    except Exception:
        return
    if data:
        fs.write_file_atomic(root / "host" / dump.TORCH_FR_FILE, data)


class Capture:
    """``then_capture``: one recorder session at a time, for ``left`` more steps."""

    def __init__(self) -> None:
        self.session: session.Session | None = None
        self.left = 0
        self._start: ClockPair | None = None
        self._flight: dict[str, Any] = {}

    def possible(self) -> bool:
        return self.session is None and session.current() is None

    def begin(self, output: Path, steps: int, rank: int, snap: dict[str, list[Any]], flight: dict[str, Any],
              trigger_ns: int, keep_ns: int, main_tid: int, names: dict[int, str]) -> Path:
        """Start the session, write the history into its job; returns the job."""
        s = session.start(ProfileConfig(msproftx=True), output, exclusive_output=False, rank_id=rank)
        self.session, self.left = s, steps
        flight["then_capture"] = {"steps": steps, "what": "recorder session (markers, ORT/acl tasks); "
                                  "torch.profiler activities not supported here"}
        self._start = dump.write_into_session(s, snap, flight, trigger_ns, keep_ns, main_tid, names, rank)
        self._flight = flight
        return s.root

    def end(self) -> None:
        """Stop the session; its job's info.json gains ``flight`` and starts with the history."""
        s, self.session = self.session, None
        if s is None or self._start is None:
            return
        if session.current() is s:
            session.stop()
        dump.finish_capture(s.root, self._start, self._flight)
