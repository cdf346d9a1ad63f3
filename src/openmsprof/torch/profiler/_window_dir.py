"""One profiling window's rank dir as the training process makes and saves it (``_KinetoProfile``).

The dir is created, and the window's files saved into it, on the ``_writer`` thread: ``create``
makes the dir (a failure is logged once and the window's data are dropped, training goes on);
``save`` moves the raw Kineto trace in and writes profiler_info and the metadata
(``_window_files.save``) when no analysis worker took that work.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from openmsprof.torch.profiler import _window_files, prof_dir

__all__ = ["WindowDir"]

log = logging.getLogger("openmsprof")


class WindowDir:
    """One window's rank dir; its methods run on the writer thread."""

    __slots__ = ("ok", "path", "root")

    def __init__(self, root: Path, path: Path) -> None:
        self.root, self.path = root, path
        self.ok: bool | None = None  # None until the writer has tried to create the dir

    def create(self) -> None:
        if self.ok is not None:
            return
        try:
            prof_dir.create_at(self.root, self.path)
            self.ok = True
        except Exception as exc:
            self.ok = False
            log.warning("openmsprof: cannot create the profiling dir under %s (%s); the data of this "
                        "window will not be saved, training goes on", self.root, exc)

    def save(self, tmp: Path, files: dict[str, Any], saved: list[Path]) -> None:
        """Make the dir if not yet made, move the raw Kineto trace into place, then write
        profiler_info (with this window's ``openmsprof_overhead`` of the training process) and
        the metadata (``_window_files.save``; a window the worker saved meanwhile is left as is)."""
        if self.ok is False:
            Path(tmp).unlink(missing_ok=True)
            return
        try:
            _window_files.save(self.path, tmp, files, "writer_thread", made=bool(self.ok))
            self.ok = True
            saved.append(self.path)
        except Exception as exc:
            log.warning("openmsprof: saving %s failed: %s; the data of this window are not saved, training "
                        "goes on", self.path, exc)
