"""The ``…_ascend_pt`` directory: its collision-proof name, the rank, profiler_info_{rank}.json
and profiler_metadata.json (docs/formats.md §3)."""

from __future__ import annotations

import functools
import logging
import os
import socket
import stat
import string
import time
from pathlib import Path
from typing import Any

import orjson

from openmsprof.config.errors import ProfilingError
from openmsprof.config.paths import check_path_text, resolve_output
from openmsprof.fileio import fs
from openmsprof.recorder.clock import local_stamp

log = logging.getLogger("openmsprof")
_ALPHABET = string.ascii_lowercase + string.digits
MAX_WORKER = 225
#: Ascend environment variables copied into profiler_metadata.json (docs/formats.md §3).
_ready_roots: set[Path] = set()  # roots made and found writable (by the writer thread)
ENV_VARS = ("ASCEND_GLOBAL_LOG_LEVEL", "HCCL_RDMA_TC", "HCCL_RDMA_SL", "ACLNN_CACHE_LIMIT",
            "HCCL_ALGO", "HCCL_BUFFSIZE", "PYTORCH_NPU_ALLOC_CONF", "ASCEND_LAUNCH_BLOCKING",
            "HOST_CACHE_CAPACITY")


def get_rank() -> int:
    """$RANK, else torch.distributed's rank, else 0."""
    env = os.environ.get("RANK", "")
    if env.strip().lstrip("-").isdigit():
        return int(env)
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    return 0


def default_root() -> Path:
    work = os.environ.get("ASCEND_WORK_PATH")
    return Path(work) / "profiling_data" if work else Path.cwd()


def check_root(dir_name: str | os.PathLike[str] | None) -> Path:
    """The output root: ``dir_name`` (str or Path) if usable, else the default, with a warning."""
    if dir_name is None:
        return default_root()
    if not isinstance(dir_name, (str, os.PathLike)):
        log.warning("openmsprof: tensorboard_trace_handler dir_name=%.80r is not a path; using %s", dir_name,
                    default_root())
        return default_root()
    if os.fspath(dir_name) == "":
        return default_root()
    try:
        return resolve_output(os.fspath(dir_name), "profiler output dir")
    except ProfilingError as exc:
        log.warning("openmsprof: %s; using %s", exc, default_root())
        return default_root()


def check_worker(worker_name: str | None) -> str | None:
    if worker_name is None:
        return None
    try:
        if not isinstance(worker_name, str) or len(worker_name) > MAX_WORKER:
            raise ProfilingError(f"worker_name {worker_name!r} must be text under {MAX_WORKER + 1} chars")
        check_path_text(worker_name, "worker_name")
        if "/" in worker_name:
            raise ProfilingError(f"worker_name {worker_name!r} may not contain '/'")
    except ProfilingError as exc:
        log.warning("openmsprof: %s; using the default", exc)
        return None
    return worker_name


@functools.lru_cache(maxsize=1)
def _host() -> str:
    """The host's name as a dir name's default worker part (read once per process)."""
    return socket.gethostname().replace("_", "-")


def dir_name(worker_name: str | None, wall_ns: int | None = None) -> str:
    """``{worker}_{pid}-{6 random [a-z0-9]}_{yyyymmddHHMMSSmmm}_ascend_pt``."""
    worker = worker_name or _host()
    n = int.from_bytes(os.urandom(8), "little") % 36**6  # (a 64-bit draw: no bias worth naming)
    token = ""
    for _ in range(6):
        n, digit = divmod(n, 36)
        token += _ALPHABET[digit]
    stamp = local_stamp(wall_ns if wall_ns is not None else time.time_ns())
    return f"{worker}_{os.getpid()}-{token}_{stamp}_ascend_pt"


def new_path(root: Path, worker_name: str | None) -> Path:
    """A fresh rank-dir path under ``root`` (not created; the name makes collisions negligible)."""
    return root / dir_name(worker_name)


def root_ready(root: Path) -> bool:
    """Whether ``root`` was made and found writable by an earlier window (then a window's dir is
    made later, on the writer thread, together with moving its trace in) and is still a
    directory: one removed meanwhile (a user's cleanup between runs or windows) is forgotten, and
    made and checked again by the next window, as torch's own handler makes its dir each time."""
    if root not in _ready_roots:
        return False
    try:
        if stat.S_ISDIR(os.lstat(root).st_mode):
            return True
    except OSError:
        pass
    _ready_roots.discard(root)
    return False


def create_at(root: Path, path: Path) -> None:
    """Create ``root`` if needed and the rank dir ``path`` with logs/ and FRAMEWORK/;
    a ``path`` that already exists is refused.  The root counts as ready (``root_ready``) only
    once the whole dir is made: a window end that finds it ready hands its dir's creation to
    whoever saves it, which must not race this one's subdirs."""
    if root not in _ready_roots:
        fs.make_dir(root)
        fs.check_writable(root)
    try:
        fs.make_new_dir(path)
    except Exception:
        _ready_roots.discard(root)  # re-check the root (removed, made read-only) next time
        raise
    fs.make_new_dir(path / "FRAMEWORK")
    fs.make_new_dir(path / "logs")
    _ready_roots.add(root)


def create(root: Path, worker_name: str | None) -> Path:
    """Create a fresh rank dir with logs/ and FRAMEWORK/ under ``root``."""
    fs.make_dir(root)
    fs.check_writable(root)
    for _ in range(5):
        path = root / dir_name(worker_name)
        if not path.exists():
            break
    fs.make_dir(path)
    fs.make_dir(path / "FRAMEWORK")
    fs.make_dir(path / "logs")
    return path


def write_json(path: Path, obj: Any) -> None:
    fs.write_file_atomic(path, orjson.dumps(obj, option=orjson.OPT_INDENT_2))


def profiler_info(config: dict[str, Any], start: dict[str, Any], end: dict[str, Any], rank: int,
                  backend: str, unsupported: list[str], torch_version: str | None = None) -> dict[str, Any]:
    """``torch_version``: given by the training process when another process writes the file."""
    from openmsprof import __version__

    if torch_version is None:
        torch_version = torch_version_text()
    return {
        "config": config, "start_info": start, "end_info": end, "rank_id": rank,
        "torch_npu_version": "", "torch_version": torch_version, "cann_version": "",
        "openmsprof_version": __version__, "backend": backend, "unsupported": unsupported,
    }


def torch_version_text() -> str:
    try:
        import torch

        return str(torch.__version__)
    except Exception:  # pragma: no cover
        return "unknown"


def metadata(user: dict[str, Any]) -> dict[str, Any]:
    """User pairs plus ENV_VARIABLES and, under torch.distributed, parallel_group_info."""
    meta = dict(user)
    meta.setdefault("ENV_VARIABLES", {k: os.environ.get(k, "") for k in ENV_VARS})
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and "distributed_args" not in meta:
            meta["distributed_args"] = {"world_size": dist.get_world_size(),
                                        "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1,
                                        "data_parallel_size": dist.get_world_size(),
                                        "context_parallel_size": 1, "expert_model_parallel_size": 1}
        if dist.is_available() and dist.is_initialized() and "parallel_group_info" not in meta:
            meta["parallel_group_info"] = parallel_group_info(dist)
    except Exception:
        pass
    return meta


def parallel_group_info(dist: Any) -> dict[str, Any]:
    """torch_npu's ``parallel_group_info``: per process group (keyed by its ``group_name``, e.g. "0"
    for the default group) its description, this process's rank in it and its global ranks."""
    world = dist.distributed_c10d._world
    out: dict[str, Any] = {}
    for pg, name in list(world.pg_names.items()):
        ranks = sorted(int(r) for r in world.pg_group_ranks.get(pg, {}))
        if not ranks:
            continue
        out[str(name)] = {"group_name": str(getattr(pg, "group_desc", "") or name),
                          "group_rank": int(dist.get_rank(pg)), "global_ranks": ranks}
    return out
