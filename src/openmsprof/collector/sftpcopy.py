"""SFTP transfers: upload a program or project folder; bring ``PROF_*`` job directories back.

Local files are written through :mod:`openmsprof.fileio.fs` (0750 dirs, 0640 files, no
symlink followed, never overwriting).  A remote job directory that disappears while it is being
copied is reported, the files already copied are kept, and the other jobs are still copied.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openmsprof.fileio import fs

CHUNK = 1 << 15  # paramiko serves prefetched data fastest in 32 KiB reads (as SFTPClient.getfo)
#: Folders never uploaded with a project.
SKIP_DIRS = frozenset({".git", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache"})
OnFile = Callable[[str, Path], None]


@dataclass
class CopyReport:
    """What a fetch brought back."""

    files: int = 0
    bytes: int = 0
    jobs: list[Path] = field(default_factory=list)
    partial: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def makedirs(sftp: Any, path: str, mode: int = 0o750) -> None:
    """``mkdir -p`` on the board."""
    missing: list[str] = []
    p = path
    while p not in ("", "/"):
        try:
            sftp.stat(p)
            break
        except FileNotFoundError:
            missing.append(p)
            p = posixpath.dirname(p)
    for d in reversed(missing):
        sftp.mkdir(d, mode)


def upload_file(sftp: Any, local: Path, remote: str) -> int:
    """Copy one file to the board keeping its exec bits; returns its size."""
    sftp.put(str(local), remote)
    sftp.chmod(remote, stat.S_IMODE(local.stat().st_mode) & 0o755 | 0o600)
    return local.stat().st_size


def upload_tree(sftp: Any, local: Path, remote: str) -> int:
    """Copy a project folder to the board (symlinks and VCS/cache folders skipped); file count."""
    count = 0
    makedirs(sftp, remote)
    for root, dirs, files in os.walk(local):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not os.path.islink(os.path.join(root, d)))
        rel = os.path.relpath(root, local)
        rdir = remote if rel == "." else posixpath.join(remote, *Path(rel).parts)
        if rel != ".":
            sftp.mkdir(rdir, 0o750)
        for name in sorted(files):
            src = Path(root) / name
            if src.is_symlink() or not src.is_file():
                continue
            upload_file(sftp, src, posixpath.join(rdir, name))
            count += 1
    return count


def _fetch_file(sftp: Any, remote: str, local: Path, size: int) -> int:
    with sftp.open(remote, "rb") as src:
        src.prefetch(size)
        fd = fs.open_new(local, append=False)
        written = 0
        try:
            while True:
                chunk = src.read(CHUNK)
                if not chunk:
                    break
                fs.write_all(fd, chunk)
                written += len(chunk)
        except BaseException:
            os.close(fd)
            local.unlink(missing_ok=True)
            raise
        os.close(fd)
    return written


def _fetch_tree(sftp: Any, remote: str, local: Path, report: CopyReport, on_file: OnFile | None) -> None:
    fs.make_dir(local)
    for entry in sorted(sftp.listdir_attr(remote), key=lambda e: e.filename):
        rpath = posixpath.join(remote, entry.filename)
        lpath = local / entry.filename
        mode = entry.st_mode or 0
        if stat.S_ISDIR(mode):
            _fetch_tree(sftp, rpath, lpath, report, on_file)
        elif stat.S_ISREG(mode):
            report.bytes += _fetch_file(sftp, rpath, lpath, entry.st_size or 0)
            report.files += 1
            if on_file is not None:
                on_file(rpath, lpath)


def _is_missing(exc: OSError) -> bool:
    return isinstance(exc, FileNotFoundError) or exc.errno == errno.ENOENT


def fetch_jobs(sftp: Any, remote_out: str, local_out: Path, *, on_file: OnFile | None = None,
               report: CopyReport | None = None) -> CopyReport:
    """Copy every ``PROF_*`` directory of ``remote_out`` into ``local_out``."""
    report = report if report is not None else CopyReport()
    try:
        entries = sftp.listdir_attr(remote_out)
    except OSError as exc:
        if _is_missing(exc):
            report.problems.append(f"remote output {remote_out!r} does not exist; the program wrote no job")
            return report
        raise
    for entry in sorted(entries, key=lambda e: e.filename):
        if not (entry.filename.startswith("PROF_") and stat.S_ISDIR(entry.st_mode or 0)):
            continue
        rjob, ljob = posixpath.join(remote_out, entry.filename), local_out / entry.filename
        before = report.files
        try:
            _fetch_tree(sftp, rjob, ljob, report, on_file)
        except OSError as exc:
            if not _is_missing(exc):
                raise
            report.partial.append(ljob)
            report.problems.append(
                f"remote job directory {rjob!r} vanished during copy; kept the "
                f"{report.files - before} files already copied in {str(ljob)!r}")
            continue
        report.jobs.append(ljob)
    return report
