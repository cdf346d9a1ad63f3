"""Job directory ``PROF_{seq}_{stamp}_{pid}{letters}``: layout, info files, locks (docs/formats.md §2)."""

from __future__ import annotations

import fcntl
import os
import platform
import secrets
import socket
import string
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from openmsprof.config.errors import PathError, SessionError
from openmsprof.fileio import fs
from openmsprof.recorder.clock import ClockPair, local_stamp

PLATFORM_VERSION = "CPU"
_seq = 0


def new_job_name(wall_ns: int) -> str:
    """A fresh job directory name; the suffix holds no ``_``."""
    global _seq
    _seq = _seq % 999999 + 1
    letters = "".join(secrets.choice(string.ascii_uppercase) for _ in range(8))
    return f"PROF_{_seq:06d}_{local_stamp(wall_ns)}_{os.getpid() % 100_000_000:08d}{letters}"


def host_uid() -> str:
    try:
        return Path("/etc/machine-id").read_text().strip() or socket.gethostname()
    except OSError:
        return socket.gethostname()


def _cpu_info() -> list[dict[str, Any]]:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return [{"Id": 0, "Name": model, "Type": platform.machine(), "Frequency": "", "Logical_CPU_Count": os.cpu_count() or 1}]


def _mem_total_kb() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def info_json(config: dict[str, Any], devices: list[int], rank_id: int = -1,
              device_info: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    from openmsprof import __version__

    return {
        "platform_version": PLATFORM_VERSION,
        "pid": str(os.getpid()),
        "pid_name": program_name(),
        "hostname": socket.gethostname(),
        "hostUid": host_uid(),
        "rank_id": rank_id,
        "devices": ",".join(str(d) for d in devices),
        "CPU": _cpu_info(),
        "DeviceInfo": device_info or [{"id": d, "executor": "CPU", "name": "host CPU (ONNX Runtime / framework executor)"} for d in devices],
        "memoryTotal": _mem_total_kb(),
        "netCard": [],
        "cpuNums": os.cpu_count() or 1,
        "sysClockFreq": 1_000_000_000,
        "OS": f"{platform.system()} {platform.release()}",
        "version": __version__,
        "openmsprof": {"config": config, "python": sys.version.split()[0]},
    }


def program_name() -> str:
    """The profiled program's name for the framework track: the script, or the package of a
    ``python -m pkg`` run (whose argv[0] is ``pkg/__main__.py``)."""
    if not sys.argv or not sys.argv[0] or sys.argv[0] == "-c":
        return "python"
    p = Path(sys.argv[0])
    return p.parent.name if p.name == "__main__.py" and p.parent.name else p.name


def start_info(pair: ClockPair) -> dict[str, str]:
    return {
        "collectionDateBegin": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(pair.wall_ns // 10**9)),
        "collectionTimeBegin": str(pair.wall_ns // 1000),
        "clockMonotonicRaw": str(pair.mono_ns),
    }


def end_info(pair: ClockPair) -> dict[str, str]:
    return {
        "collectionDateEnd": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(pair.wall_ns // 10**9)),
        "collectionTimeEnd": str(pair.wall_ns // 1000),
        "clockMonotonicRaw": str(pair.mono_ns),
    }


def start_log(pair: ClockPair) -> str:
    return f"clock_monotonic_raw:{pair.mono_ns}\ncntvct:{pair.mono_ns}\ncntvct_diff:0\n"


def dump(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2)


@dataclass
class JobDir:
    """Paths of one job; created by :func:`create`."""

    root: Path
    host: Path
    devices: dict[int, Path] = field(default_factory=dict)

    @property
    def host_data(self) -> Path:
        return self.host / "data"

    def device(self, dev: int) -> Path:
        return self.root / f"device_{dev}"


class OutputLock:
    """An exclusive ``flock`` on a lock file: two profilers cannot share one output or job."""

    def __init__(self, directory: Path, name: str = ".openmsprof.lock") -> None:
        self.path = directory / name
        try:
            self.fd = fs.open_lock_file(self.path)
        except PathError as exc:
            raise SessionError(str(exc)) from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                holder = os.pread(self.fd, 64, 0).decode(errors="replace").strip() or "another process"
            finally:
                os.close(self.fd)
            raise SessionError(
                f"output directory {str(directory)!r} is in use by another profiler (pid {holder}); "
                "choose another output"
            ) from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        if self.fd >= 0:
            try:
                os.ftruncate(self.fd, 0)
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
                self.fd = -1


def create(output: Path, wall_ns: int) -> JobDir:
    """Create a new, empty job directory under ``output``."""
    fs.make_dir(output)
    fs.check_writable(output)
    for _ in range(20):
        root = output / new_job_name(wall_ns)
        try:
            os.mkdir(root, fs.DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(root, fs.DIR_MODE)
        host = fs.make_dir(root / "host")
        fs.make_dir(host / "data")
        return JobDir(root=root, host=host)
    raise SessionError(f"could not create a unique job directory under {str(output)!r}")


def write_config_files(directory: Path, suffix: str, info: dict[str, Any], sample: dict[str, Any],
                       pair: ClockPair, log_name: str) -> None:
    fs.write_file_atomic(directory / f"info.json{suffix}", dump(info))
    fs.write_file_atomic(directory / f"sample.json{suffix}", dump(sample))
    fs.write_file_atomic(directory / f"start_info{suffix}", dump(start_info(pair)))
    fs.write_file_atomic(directory / log_name, start_log(pair))
