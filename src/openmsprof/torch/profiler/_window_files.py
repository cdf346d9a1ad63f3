"""A window's files in its rank dir: the one routine that saves them, wherever it runs.

At a window end the training thread exports Kineto's raw trace to a temp file and describes the
window in a plain dict (``files``: config, start/end info, rank, backend, notes, metadata, torch
version, the training thread's share).  ``save`` then makes the rank dir if missing, moves the
trace into ``FRAMEWORK/`` and writes ``profiler_info_{rank}.json`` and ``profiler_metadata.json``.
It runs in the analysis worker process (a ``tensorboard_trace_handler``'s windows), on the
training process's writer thread (other windows, and the fallback when no worker can), or in offline
``analyse`` for a window both processes left unsaved (``_orphans``; ``files`` then holds what the
trace tells, and ``recovered`` says what was derived and what is missing).

Saving is idempotent, so both may try the same window (the training process saves itself what a
stalled worker has not confirmed): the party that moves the temp trace in writes the info files;
a later one finds the trace in place and stops.  The training process never imports torch here.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Any

from openmsprof.config.errors import PathError
from openmsprof.fileio import fs
from openmsprof.sources import gc_watch as _gc_watch
from openmsprof.torch.profiler import prof_dir

__all__ = ["FRAMEWORK_TRACE", "OVERHEAD_KEY", "PARTIAL_KEY", "RECOVERED_KEY", "TEMP_SUFFIX", "WORKER_MODULE", "save", "temp_trace_name"]

FRAMEWORK_TRACE = "torch.kineto_trace.json"
OVERHEAD_KEY = "openmsprof_overhead"
RECOVERED_KEY = "openmsprof_recovered"
#: a window that lacks some of its steps says so here (``files["partial"]``)
PARTIAL_KEY = "openmsprof_partial"
#: A window's Kineto trace is exported to ``.{rank dir name}.{writer pid}`` + this, then saved.
TEMP_SUFFIX = ".kineto.tmp"
#: The analysis worker's module; its argv names it and its training process's pid, by which
#: offline ``analyse`` tells a live worker that may still save a temp trace (``_orphans``).
WORKER_MODULE = "openmsprof.torch.profiler._worker_process"


def temp_trace_name(rank_dir_name: str, pid: int) -> str:
    """The temp trace a window end exports (offline ``analyse`` adopts those a killed run left)."""
    return f".{rank_dir_name}.{pid}{TEMP_SUFFIX}"


#: True in a process that set its umask to ``EXACT_UMASK`` (the analysis worker): a dir made with
#: mode 0750 has it, so a window's dirs are made without a chmod each
exact_umask = False
EXACT_UMASK = 0o027


def _ensure_dir(path: Path) -> bool:
    """Create the rank dir ``path`` with FRAMEWORK/ and logs/; one that another party created (a
    directory of this user, not a link) is accepted: then False, and only FRAMEWORK/ is made if
    missing (logs/ is the saving party's, ``save``)."""
    made = False
    if exact_umask and prof_dir.root_ready(path.parent):  # three mkdirs, the modes exact
        text = os.fspath(path)
        try:
            os.mkdir(text, fs.DIR_MODE)
            made = True
            os.mkdir(f"{text}/FRAMEWORK", fs.DIR_MODE)
            os.mkdir(f"{text}/logs", fs.DIR_MODE)
            return True
        except FileExistsError:
            pass
        except OSError:
            if not made:  # (as create_at reports it, and re-checks the root next time)
                made = True
                try:
                    prof_dir.create_at(path.parent, path)
                    return True
                except PathError:
                    pass
    if not made:
        try:
            prof_dir.create_at(path.parent, path)
            return True
        except PathError:
            pass
    for d in (path, path / "FRAMEWORK"):
        _make_dir(d)
    return False


def _make_dir(d: Path) -> None:
    """Make ``d`` unless it is there; refuse a thing that is not a directory of this user."""
    try:
        os.mkdir(d, fs.DIR_MODE)
        os.chmod(d, fs.DIR_MODE)
    except FileExistsError:
        pass
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise PathError(f"{str(d)!r} is not a directory of this user; refused")


def save(path: Path, tmp: Path, files: dict[str, Any], where: str, made: bool = False, checked: bool = False) -> bool:
    """Save one window into the rank dir ``path`` (its parent is the output root) from the raw
    trace ``tmp``; ``where`` names the saver in ``openmsprof_overhead`` (``worker``,
    ``writer_thread``, ``offline_analyse``); ``made``: the caller made the dir; ``checked``: the
    caller holds the dir's claim and found it not analysed.  True if this call
    saved the window, False if another party already had (an analysed dir is left as it is).
    Raises OSError / PathError (the caller logs)."""
    c0 = time.thread_time()
    d = os.fspath(path)
    logs = False  # (made whole, by the caller or here)
    if not made:
        if not checked and os.path.exists(f"{d}/ASCEND_PROFILER_OUTPUT/analyse.done"):
            return False  # saved and analysed by the other party (and maybe simplified: nothing to add)
        logs = not _ensure_dir(path)
    final = f"{d}/FRAMEWORK/{FRAMEWORK_TRACE}"
    rank = int(files["rank"])
    info_name = f"profiler_info_{rank}.json"
    try:
        os.chmod(tmp, fs.FILE_MODE)
        os.replace(tmp, final)
    except FileNotFoundError:
        if os.path.isfile(final) and os.path.isfile(f"{d}/{info_name}"):
            return False  # saved by the other party
        if not os.path.isfile(final):
            raise PathError(f"the raw trace of {d!r} is gone ({os.fspath(tmp)!r})") from None
    if logs:  # the dir was another party's: its logs/ is made by the party that saves
        _make_dir(path / "logs")
    notes = list(files.get("notes") or [])
    info = prof_dir.profiler_info(files["config"], files["start"], files["end"], rank, files["backend"], notes,
                                  files.get("torch_version"))
    over = {"window_end_training_thread_s": float(files["window_end_s"])} if "window_end_s" in files else {}
    info[OVERHEAD_KEY] = {**over, f"window_files_{where}_cpu_s": round(time.thread_time() - c0, 6)}
    if files.get("recovered"):  # a window offline analyse adopted: what was derived, what is missing
        info[RECOVERED_KEY] = files["recovered"]
    if files.get("partial"):
        info[PARTIAL_KEY] = files["partial"]
    prof_dir.write_json(path / info_name, info)
    prof_dir.write_json(path / "profiler_metadata.json", files["meta"])
    if files.get("gc_events") is not None:  # gc_detect_threshold: the window's long collections
        prof_dir.write_json(path / "FRAMEWORK" / _gc_watch.FILE, files["gc_events"])
    if notes:  # the window's log: each switch this machine could not honour, once
        fs.write_file_atomic(path / "logs" / "collection.log", "".join(f"not supported here: {n}\n" for n in notes))
    return True
