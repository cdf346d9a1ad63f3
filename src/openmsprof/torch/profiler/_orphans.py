"""Windows a killed run left unsaved: offline ``analyse`` adopts their temp traces.

At a window end the training process exports Kineto's trace to ``.{dir}.{pid}.kineto.tmp`` (in the
output root, or in the rank dir's ``FRAMEWORK/`` when the dir was made first) and hands it to the
analysis worker, which moves it into place and writes the info files (``_window_files.save``).  If
both processes are SIGKILLed before that, only the temp trace is left.  ``adopt`` finds such temp
traces whose writer ``pid`` is gone, and its worker too (a live process's in-flight temp, or one
its worker may still save, is left alone), reads each through once (a truncated or corrupt one is
reported in one line and left as it is) and saves it with the same ``_window_files.save``.  What the worker would have written and the trace does not
tell (the schedule, experimental_config, user metadata, the torch version, the monotonic clock) is
listed under ``openmsprof_recovered.missing`` in profiler_info; what was derived, under ``derived``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, NamedTuple

from openmsprof.config.errors import ProfilingError, RawDataError
from openmsprof.fileio.read_guard import escape
from openmsprof.sources.kineto_trace import GPU_CATS, Restart, TraceReader
from openmsprof.torch.profiler import _window_files, _window_info

__all__ = ["TEMP_RE", "Orphan", "adopt", "describe", "find", "writer_alive"]

log = logging.getLogger("openmsprof")
#: ``_window_files.temp_trace_name``: ``.{rank dir name}.{writer pid}.kineto.tmp``.
TEMP_RE = re.compile(r"^\.(?P<dir>.+_\d+-[a-z0-9]{6}_\d{17}_ascend_pt)\.(?P<pid>\d+)"
                     + re.escape(_window_files.TEMP_SUFFIX) + "$")
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
MISSING = ["config.common_config.schedule", "config.experimental_config", "start_info.start_cnt",
           "start_info.start_monotonic", "end_info.MonotonicTimeEnd", "torch_version", "unsupported",
           "profiler_metadata (user metadata, ENV_VARIABLES, parallel_group_info)"]


class Orphan(NamedTuple):
    """A temp trace, the rank dir it belongs to, its writer's pid."""

    tmp: Path
    rank_dir: Path
    pid: int


def find(path: Path) -> list[Orphan]:
    """Temp traces under ``path``: an output root (its own and its rank dirs' FRAMEWORK/) or one rank dir."""
    places: list[tuple[Path, Path | None]] = [] if path.name.endswith("ascend_pt") else [(path, None)]
    dirs = [path] if not places else sorted(p for p in path.iterdir() if p.name.endswith("ascend_pt"))
    places += [(d / "FRAMEWORK", d) for d in dirs if d.is_dir() and not d.is_symlink()]
    out = []
    for where, owner in places:
        try:
            names = sorted(where.iterdir()) if where.is_dir() and not where.is_symlink() else []
        except OSError as exc:
            log.warning("openmsprof: %s cannot be listed (%s); its temp traces are not adopted", escape(where), exc)
            continue
        for p in names:
            m = TEMP_RE.match(p.name)
            if m and (owner is None or m["dir"] == owner.name):
                out.append(Orphan(p, owner if owner is not None else path / m["dir"], int(m["pid"])))
    return out


def _runs(proc: Any, before: float) -> bool:
    """``proc`` runs (no zombie) and was started before ``before`` (else its pid was reused)."""
    import psutil

    return bool(proc.status() != psutil.STATUS_ZOMBIE and proc.create_time() <= before + 1.0)


def writer_alive(pid: int, tmp: Path) -> str | None:
    """What may still save ``tmp`` (None: nothing): its writer ``pid``, or an analysis worker started
    by it (its argv names ``pid``), if running and older than the file.  Unknown counts as running."""
    import psutil

    try:
        before = tmp.lstat().st_mtime
        if _runs(psutil.Process(pid), before):
            return f"its writer (pid {pid}) is still running"
    except psutil.NoSuchProcess:
        pass
    except (psutil.Error, OSError):
        return f"its writer (pid {pid}) may still be running"
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info.get("cmdline") or []
        try:
            ours = len(cmd) == 4 and cmd[1] == "-c" and _window_files.WORKER_MODULE in cmd[2] and cmd[3] == str(pid)
            if ours and _runs(proc, before):
                return f"the analysis worker (pid {proc.pid}) of its writer (pid {pid}) is still running"
        except psutil.Error:
            continue
    return None


class _Seen:
    """What the events of one trace show."""

    def __init__(self) -> None:
        self.first, self.last = float("inf"), float("-inf")
        self.window_end: float | None = None
        self.ops, self.steps, self.pids = 0, set[int](), set[int]()
        self.flags = {"record_shapes": False, "profile_memory": False, "with_stack": False,
                      "with_flops": False, "with_modules": False}
        self.gpu = False

    def add(self, events: list[Any]) -> None:
        for e in events:
            if not isinstance(e, dict):
                continue
            name, cat, ts, args = e.get("name"), e.get("cat"), e.get("ts"), e.get("args")
            args = args if isinstance(args, dict) else {}
            if e.get("ph") == "X" and isinstance(ts, (int, float)):
                self.first = min(self.first, float(ts))
                self.last = max(self.last, float(ts) + float(e.get("dur") or 0))
            elif e.get("ph") == "i" and name == "Record Window End" and isinstance(ts, (int, float)):
                self.window_end = float(ts)
            self.ops += cat == "cpu_op"
            self.gpu |= cat in GPU_CATS
            if cat == "cpu_op" and isinstance(e.get("pid"), int):
                self.pids.add(e["pid"])
            if cat == "user_annotation" and isinstance(name, str) and (m := _STEP_RE.match(name)):
                self.steps.add(int(m.group(1)))
            f = self.flags
            f["record_shapes"] |= "Input Dims" in args
            f["with_stack"] |= "Call stack" in args
            f["with_flops"] |= "flops" in args
            f["profile_memory"] |= name == "[memory]"
            f["with_modules"] |= cat == "python_function" and isinstance(name, str) and name.startswith("nn.Module:")


def _scan(tmp: Path) -> tuple[_Seen, dict[str, Any], int | None]:
    """Read the trace through once (raises RawDataError for one that is truncated or not JSON)."""
    reader, seen = TraceReader(tmp), _Seen()
    try:
        try:
            for chunk in reader.chunks():
                seen.add(chunk)
        except Restart:
            seen = _Seen()
            seen.add(reader.whole())
    except (KeyError, TypeError, ValueError) as exc:
        raise RawDataError(f"{escape(tmp)!r}: malformed trace event ({type(exc).__name__}: {exc})") from None
    return seen, reader.header, reader.base_ns


def describe(orphan: Orphan) -> dict[str, Any]:
    """The ``files`` of ``_window_files.save`` for an orphan, from its trace alone."""
    seen, header, base = _scan(orphan.tmp)
    if base is None:
        raise RawDataError(f"{escape(orphan.tmp)!r} has no baseTimeNanoseconds: its clock cannot be placed")
    flags = dict(seen.flags)
    flags["record_shapes"] |= bool(header.get("record_shapes"))
    dist = header.get("distributedInfo")
    rank = dist.get("rank") if isinstance(dist, dict) else None
    rank = rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else None
    end_us = seen.window_end if seen.window_end is not None else seen.last if seen.last > seen.first else 0.0
    end_ns = base + round(end_us * 1000)
    derived: dict[str, Any] = {
        "activities": "from the events present", "flags": "True where the events show it",
        "end_info.collectionTimeEnd": "the trace's Record Window End (else its last event) on its baseTimeNanoseconds",
        "cpu_ops": seen.ops, "steps": sorted(seen.steps), "trace_pids": sorted(seen.pids)}
    if seen.last > seen.first:
        derived["window_start_wall_ns"] = base + round(seen.first * 1000)
    recovered = {"from": orphan.tmp.name, "writer_pid": orphan.pid, "derived": derived,
                 "missing": MISSING + ([] if rank is not None else ["rank_id (0 assumed: no distributedInfo)"])}
    config = _window_info.config_dict(["CPU", "NPU"] if seen.gpu else ["CPU"], None, flags, {})
    return {"config": config, "start": {"syscnt_enable": False, "freq": 1_000_000_000},
            "end": {"collectionTimeEnd": end_ns}, "rank": rank if rank is not None else 0,
            "backend": _window_info.backend(seen.gpu), "notes": [], "meta": {}, "torch_version": "",
            "recovered": recovered}


def adopt(path: Path) -> list[Path]:
    """Save each orphaned window under ``path`` into its rank dir (one log line each, as for
    what is left alone); returns the rank dirs saved."""
    done = []
    for o in find(path):
        name = escape(o.tmp)
        if (o.rank_dir / "FRAMEWORK" / _window_files.FRAMEWORK_TRACE).exists():
            log.warning("openmsprof: %s: its window %s is already saved; left alone", name, escape(o.rank_dir.name))
        elif (why := writer_alive(o.pid, o.tmp)) is not None:
            log.warning("openmsprof: %s: %s; left alone", name, why)
        else:
            try:
                _window_files.save(o.rank_dir, o.tmp, describe(o), "offline_analyse")
            except (ProfilingError, OSError) as exc:
                log.warning("openmsprof: %s: not adopted, left as it is: %s", name, escape(exc))
                continue
            log.warning("openmsprof: adopted the unsaved window %s (writer pid %d gone) into %s", name, o.pid,
                        escape(o.rank_dir))
            done.append(o.rank_dir)
    return done
