"""Finding jobs and reading what a job says about itself (info.json, start_info, end_info).

A job is a ``PROF_*`` directory (``host/`` and/or ``device_{id}/`` with ``data/``), or an S2
``JOB…`` directory that holds ``data/`` and ``info.json.{id}`` itself.  A folder of jobs (also
``*_ascend_pt/PROF_*``) is searched two levels deep.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from openmsprof.config.errors import RawDataError
from openmsprof.fileio.read_guard import MAX_JSON_BYTES, escape, read_regular

_DEVICE_RE = re.compile(r"^device_(\d+)$")
_SUFFIX_RE = re.compile(r"^(?:info\.json|start_info)\.(\d+)$")


@dataclass
class DataDirInfo:
    """One raw data directory of a job."""

    path: Path  # the .../data directory
    device_id: int  # -1 = host
    offset_ns: int | None  # epoch = mono + offset (None: no start_info here)
    end_mono_ns: int | None  # from end_info (None: crashed or missing)


@dataclass
class JobInfo:
    root: Path
    dirs: list[DataDirInfo]
    info: dict[str, Any] = field(default_factory=dict)
    start_wall_ns: int | None = None
    end_wall_ns: int | None = None
    offset_ns: int = 0
    warnings: list[str] = field(default_factory=list)
    #: Records the recorder dropped (buffers full), in total and by thread id and marker kind.
    dropped: int = 0
    drops: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        pid = _int(self.info, "pid")
        return pid & 0x7FFFFFFF if pid is not None and pid >= 0 else 0


def _read_json(path: Path, warnings: list[str] | None = None) -> dict[str, Any] | None:
    """A job JSON file as a dict; None when missing, not a regular file, too big or invalid
    (said in ``warnings`` unless it is simply missing)."""
    try:
        obj = orjson.loads(read_regular(path, "job file", MAX_JSON_BYTES, RawDataError))
    except RawDataError as exc:
        if warnings is not None and os.path.lexists(path):
            warnings.append(str(exc))
        return None
    except orjson.JSONDecodeError:
        if warnings is not None:
            warnings.append(f"{escape(path.name)}: not valid JSON; ignored")
        return None
    return obj if isinstance(obj, dict) else None


#: Types the readers rely on, per info.json key; a value of another type is left out.
_INFO_TYPES: dict[str, type | tuple[type, ...]] = {
    "openmsprof": dict, "DeviceInfo": list, "CPU": list, "netCard": list, "hostname": str,
    "hostUid": str, "pid_name": str, "platform_version": str, "devices": str, "OS": str,
    "version": str, "rank_id": int, "pid": (int, str), "memoryTotal": int, "cpuNums": int,
}


def sane_info(obj: dict[str, Any] | None) -> dict[str, Any]:
    """``info.json`` with wrongly typed values left out (and nested config checked), so readers
    can use ``.get`` chains safely; strings are cut to 4096 characters."""
    out: dict[str, Any] = {}
    for key, value in (obj or {}).items():
        want = _INFO_TYPES.get(key)
        if want is None:
            out[key] = value
        elif isinstance(value, want) and not (want is int and isinstance(value, bool)):
            out[key] = value[:4096] if isinstance(value, str) else value
    tool = out.get("openmsprof")
    if isinstance(tool, dict):
        cfg = tool.get("config")
        if cfg is not None and not isinstance(cfg, dict):
            out["openmsprof"] = {k: v for k, v in tool.items() if k != "config"}
        elif isinstance(cfg, dict) and not isinstance(cfg.get("unsupported", []), list):
            out["openmsprof"] = {**tool, "config": {k: v for k, v in cfg.items() if k != "unsupported"}}
    if isinstance(out.get("DeviceInfo"), list):
        out["DeviceInfo"] = [e for e in out["DeviceInfo"] if isinstance(e, dict)]
    return out


def _int(obj: dict[str, Any] | None, key: str) -> int | None:
    """An integer field (int or decimal text) within +-2^62, else None (range-checked)."""
    if obj is None:
        return None
    v = obj.get(key)
    if isinstance(v, str) and len(v) <= 24:
        try:
            v = int(v)
        except ValueError:
            return None
    if type(v) is not int or not -(1 << 62) < v < 1 << 62:
        return None
    return v


def _device_dirs(root: Path) -> list[tuple[int, Path]]:
    out = []
    if root.is_dir():
        for p in root.iterdir():
            m = _DEVICE_RE.match(p.name)
            if m and p.is_dir() and not p.is_symlink():
                out.append((int(m[1]), p))
    return sorted(out)


def _s2_device(root: Path) -> int | None:
    """The device id of an S2 ``JOB…`` directory (data/ plus info.json.{id}), else None."""
    if not (root / "data").is_dir():
        return None
    for p in sorted(root.iterdir()):
        m = _SUFFIX_RE.match(p.name)
        if m:
            return int(m[1])
    return 0 if root.name.startswith("JOB") else None


def is_job(path: Path) -> bool:
    if not path.is_dir():
        return False
    if (path / "host" / "data").is_dir() or (path / "host" / "start_info").is_file():
        return True
    if any((p / "data").is_dir() for _d, p in _device_dirs(path)):
        return True
    return _s2_device(path) is not None


def find_jobs(path: Path) -> list[Path]:
    """The job directories at ``path``: itself if it is a job, else jobs up to two levels below."""
    path = Path(path)
    if not path.exists():
        raise RawDataError(f"collection directory {escape(str(path))!r} does not exist")
    if not path.is_dir():
        raise RawDataError(f"collection directory {escape(str(path))!r} is not a directory")
    try:
        return _search(path)
    except OSError as exc:
        raise RawDataError(f"cannot search {escape(str(path))!r} for jobs: {exc.strerror}") from None


def _search(path: Path) -> list[Path]:
    if is_job(path):
        return [path]
    found: list[Path] = []
    for child in sorted(path.iterdir()):
        try:
            if child.is_symlink() or not child.is_dir():
                continue
            if is_job(child):
                found.append(child)
            else:
                found.extend(g for g in sorted(child.iterdir())
                             if g.is_dir() and not g.is_symlink() and is_job(g))
        except OSError:  # an unreadable entry is not a job
            continue
    if not found:
        raise RawDataError(
            f"{escape(str(path))!r} is not a profiling job (no host/ or device_*/ data directory) "
            "and holds no job directories"
        )
    return found


def _clock(directory: Path, suffix: str, warnings: list[str]) -> tuple[int | None, int | None, int | None, int | None]:
    """(offset_ns, start_wall_ns, end_mono_ns, end_wall_ns) from start_info/end_info; values
    outside 0..2^52 us / 0..2^61 ns are left out."""
    start = _read_json(directory / f"start_info{suffix}", warnings)
    end = _read_json(directory / f"end_info{suffix}", warnings)
    begin_us, mono0 = _int(start, "collectionTimeBegin"), _int(start, "clockMonotonicRaw")
    end_us, mono1 = _int(end, "collectionTimeEnd"), _int(end, "clockMonotonicRaw")
    begin_us, end_us = (x if x is not None and 0 <= x < 1 << 52 else None for x in (begin_us, end_us))
    mono0, mono1 = (x if x is not None and 0 <= x < 1 << 61 else None for x in (mono0, mono1))
    offset = begin_us * 1000 - mono0 if begin_us is not None and mono0 is not None else None
    return (offset, begin_us * 1000 if begin_us is not None else None, mono1,
            end_us * 1000 if end_us is not None else None)


def read_job(root: Path) -> JobInfo:
    """Describe the job at ``root`` (must satisfy :func:`is_job`)."""
    job = JobInfo(root=root, dirs=[])
    host = root / "host"
    s2 = None if host.is_dir() or _device_dirs(root) else _s2_device(root)
    if s2 is not None:
        places = [(s2, root, f".{s2}")]
        job.info = sane_info(_read_json(root / f"info.json.{s2}", job.warnings))
    else:
        places = [(-1, host, "")] if host.is_dir() else []
        places += [(d, p, f".{d}") for d, p in _device_dirs(root)]
        job.info = sane_info(_read_json(host / "info.json", job.warnings))
        if not job.info and len(places) > (1 if host.is_dir() else 0):
            _d0, p0, s0 = places[-1]
            job.info = sane_info(_read_json(p0 / f"info.json{s0}"))
    for dev, directory, suffix in places:
        offset, start_wall, end_mono, end_wall = _clock(directory, suffix, job.warnings)
        if job.start_wall_ns is None and start_wall is not None:
            job.start_wall_ns, job.offset_ns = start_wall, offset or 0
        if job.end_wall_ns is None and end_wall is not None:
            job.end_wall_ns = end_wall
        job.dirs.append(DataDirInfo(directory / "data", dev, offset, end_mono))
    _read_drops(job, host)
    if job.start_wall_ns is None:
        job.warnings.append(f"{root.name}: no readable start_info; times are left on the monotonic clock")
    if job.end_wall_ns is None:
        job.warnings.append(
            f"{root.name}: no end_info (the run did not stop cleanly); open ranges end at the last record"
        )
    return job


#: At most this many forked children's overhead files are read (``openmsprof_overhead.pid{pid}.json``).
_MAX_CHILD_FILES = 4096


def _read_drops(job: JobInfo, host: Path) -> None:
    """Drop counts from host/openmsprof_overhead.json (else end_info), plus those of the
    processes forked during the session (``openmsprof_overhead.pid{pid}.json``), range-checked."""
    _add_drops(job, _read_json(host / "openmsprof_overhead.json") or {}, host)
    try:
        children = sorted(p for p in os.listdir(host)
                          if p.startswith("openmsprof_overhead.pid") and p.endswith(".json"))
    except OSError:
        children = []
    for name in children[:_MAX_CHILD_FILES]:
        _add_drops(job, _read_json(host / name, job.warnings) or {}, None)


def _add_drops(job: JobInfo, over: dict[str, Any], host: Path | None) -> None:
    total = _int(over, "records_dropped")
    if total is None and host is not None:
        total = _int(_read_json(host / "end_info"), "openmsprofDropped")
    if total is None or not 0 <= total < 1 << 62:
        return
    job.dropped += total
    raw = over.get("drops_by_thread_kind")
    if isinstance(raw, dict):
        for tid, kinds in list(raw.items())[:10_000]:
            if isinstance(kinds, dict):
                ok = {str(k): n for k, n in kinds.items() if type(n) is int and 0 < n < 1 << 62}
                if ok:
                    job.drops[str(tid)[:32]] = ok


def device_names(job: JobInfo) -> dict[int, str]:
    """Device id -> a name describing its real executor (info.json DeviceInfo)."""
    names: dict[int, str] = {}
    for d in job.dirs:
        if d.device_id < 0:
            continue
        info = sane_info(_read_json(d.path.parent / f"info.json.{d.device_id}")) or job.info
        name = "CPU"
        for entry in info.get("DeviceInfo") or []:
            if isinstance(entry, dict) and str(entry.get("id")) == str(d.device_id):
                name = str(entry.get("name") or entry.get("executor") or name)
        names[d.device_id] = name
    return names
