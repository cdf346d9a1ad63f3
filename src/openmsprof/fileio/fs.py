"""File-system primitives: private modes whatever the umask, no symlink following, atomic writes.

Directories are 0750 and files 0640 (docs/formats.md §8).  New files are opened with
``O_CREAT | O_EXCL | O_NOFOLLOW`` so a planted symlink is never written through.  The free-space
helpers of :mod:`disk_space` and the guarded reads of :mod:`read_guard` named in ``__all__`` stay
importable here, as part of this module's API.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from openmsprof.config.errors import PathError, StorageError
from openmsprof.fileio.disk_space import FREE_SPACE_FLOOR, disk_full_message, free_bytes
from openmsprof.fileio.read_guard import escape, open_regular, read_regular

__all__ = ["DIR_MODE", "FILE_MODE", "FREE_SPACE_FLOOR", "Reserve", "cache_root", "check_writable", "copy_fd",
           "copy_file_atomic", "disk_full_message", "escape", "free_bytes", "make_dir", "open_dir_fd", "open_new",
           "open_regular", "read_regular", "same_dir", "write_all", "write_file_at", "write_file_atomic",
           "write_stream_atomic", "write_stream_new"]

#: Size limits of what readers accept (``read_regular``): raw slices, tables (job JSON: ``read_guard``).
MAX_SLICE_BYTES = 1024 * 1024 * 1024
MAX_TABLE_BYTES = 256 * 1024 * 1024

DIR_MODE = 0o750
FILE_MODE = 0o640
#: Space held back during a session for its end records (end_info, overhead, .done markers).
RESERVE_BYTES = 1024 * 1024
#: ``write_stream_atomic`` gathers parts up to this many bytes per write.
WRITE_BYTES = 1 << 20
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def cache_root() -> Path:
    """The user's cache directory for openmsprof: ``$OPENMSPROF_CACHE``, else
    ``$XDG_CACHE_HOME/openmsprof``, else ``~/.cache/openmsprof`` (not created here)."""
    root = os.environ.get("OPENMSPROF_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "openmsprof")
    return Path(root)


def make_dir(path: Path) -> Path:
    """Create ``path`` (and parents) with mode 0750; refuse an existing symlink."""
    if path.is_symlink():
        raise PathError(f"directory {str(path)!r} is a symbolic link; refused")
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PathError(f"cannot create directory {str(path)!r}: {exc.strerror}") from None
    for d in missing:
        try:
            os.chmod(d, DIR_MODE)
        except OSError:
            pass
    if not path.is_dir():
        raise PathError(f"{str(path)!r} exists and is not a directory")
    return path


def make_new_dir(path: Path) -> Path:
    """Create the fresh directory ``path`` (its parent exists) with mode 0750; an existing path,
    a symlink included, is refused.  Two syscalls: for dirs known to be new, on hot paths."""
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        raise PathError(f"{str(path)!r} already exists; refusing to reuse it") from None
    except OSError as exc:
        raise PathError(f"cannot create directory {str(path)!r}: {exc.strerror}") from None
    os.chmod(path, DIR_MODE)
    return path


def open_new(path: Path | str, append: bool = True, dir_fd: int | None = None) -> int:
    """Open a new private file for writing; fails if it exists or is a link.  Returns an fd.
    With ``dir_fd`` the file is ``path.name`` inside that directory (a path swapped for a
    symlink after the directory was opened cannot redirect it)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    if append:
        flags |= os.O_APPEND
    try:
        if dir_fd is not None:
            fd = os.open(os.path.basename(path), flags, FILE_MODE, dir_fd=dir_fd)
        else:
            fd = os.open(path, flags, FILE_MODE)
    except FileExistsError:
        raise PathError(f"file {str(path)!r} already exists; refusing to overwrite") from None
    except OSError as exc:
        raise PathError(f"cannot create file {str(path)!r}: {exc.strerror}") from None
    os.fchmod(fd, FILE_MODE)
    return fd


def _raise_if_disk_full(exc: OSError) -> None:
    """A write's full disk (or quota, or file size limit) as :class:`StorageError`."""
    if exc.errno in _DISK_FULL:
        raise StorageError(f"disk full while writing profiling data: {exc.strerror}") from None


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write everything or raise; ENOSPC/EDQUOT become :class:`StorageError`."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except OSError as exc:
            _raise_if_disk_full(exc)
            raise
        view = view[n:]


def _replace_atomic(path: Path, fill: Callable[[int], None]) -> None:
    """Create ``path`` by ``fill(fd)`` on a private temp file renamed into place; a crash or a
    full disk leaves the old file or the new one, never a partial one (the temp file is removed)."""
    text = os.fspath(path)  # (plain strings from here: a path's methods cost more than its syscalls)
    if os.path.islink(text):
        raise PathError(f"file {text!r} is a symbolic link; refused")
    head, name = os.path.split(text)
    tmp = os.path.join(head, f".{name}.{os.getpid()}.tmp")
    try:
        fd = open_new(tmp, append=False)
    except PathError:  # a leftover of a killed writer of this pid (or a link planted there)
        _unlink_missing_ok(tmp)
        fd = open_new(tmp, append=False)
    try:
        fill(fd)
    except BaseException:
        os.close(fd)
        _unlink_missing_ok(tmp)
        raise
    os.close(fd)
    os.replace(tmp, text)


def _unlink_missing_ok(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _fill_parts(fd: int, parts: Iterable[bytes | bytearray | memoryview]) -> None:
    """``parts`` into ``fd`` in writes of up to ``WRITE_BYTES`` (one for a small file)."""
    buf: list[bytes | bytearray | memoryview] = []
    size = 0
    for part in parts:
        if part:
            buf.append(part)
            size += len(part)
            if size >= WRITE_BYTES:
                write_all(fd, buf[0] if len(buf) == 1 else b"".join(buf))
                buf, size = [], 0
    if buf:
        write_all(fd, buf[0] if len(buf) == 1 else b"".join(buf))


def write_stream_atomic(path: Path, parts: Iterable[bytes | bytearray | memoryview]) -> None:
    _replace_atomic(path, lambda fd: _fill_parts(fd, parts))  # (see there)


def write_stream_new(path: Path | str, parts: Iterable[bytes | bytearray | memoryview]) -> None:
    """``parts`` straight into the new file ``path`` (``open_new``: no file or link there), for a
    private dir that appears whole once written; a failure removes the partial file."""
    fd = open_new(path, append=False)
    try:
        _fill_parts(fd, parts)
    except BaseException:
        os.close(fd)
        _unlink_missing_ok(os.fspath(path))
        raise
    os.close(fd)


def copy_fd(src: int, dst: int) -> None:
    """``src``'s bytes into the new, empty file ``dst``: the kernel's copy where it can (Linux
    ``copy_file_range``, no pass through Python), else read and write.  A full disk raises
    :class:`StorageError`."""
    size, done = os.fstat(src).st_size, 0
    kernel_copy = getattr(os, "copy_file_range", None)
    try:
        while kernel_copy is not None and done < size and (n := kernel_copy(src, dst, size - done, done, done)):
            done += n
    except OSError as exc:
        _raise_if_disk_full(exc)
        done = 0  # no kernel copy between these file systems: read and write
    os.lseek(dst, done, os.SEEK_SET)
    while data := os.pread(src, 1 << 22, done):
        write_all(dst, data)
        done += len(data)


def copy_file_atomic(source: Path, target: Path) -> None:
    """``source``'s bytes as ``target``, atomically (see :func:`_replace_atomic`), copied by the
    kernel where it can."""

    def fill(fd: int) -> None:
        with open(source, "rb") as f:
            copy_fd(f.fileno(), fd)

    _replace_atomic(target, fill)


def write_file_at(dir_fd: int, name: str, data: bytes | str) -> None:
    """Write ``name`` inside the directory ``dir_fd`` through a private temp file and rename,
    both relative to the fd: never through a symlink swapped in for the directory's path."""
    tmp = f".{name}.{os.getpid()}.tmp"
    try:
        os.unlink(tmp, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    fd = open_new(Path(tmp), append=False, dir_fd=dir_fd)
    try:
        write_all(fd, data.encode() if isinstance(data, str) else data)
    except BaseException:
        os.close(fd)
        os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.close(fd)
    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def same_dir(path: Path, dir_fd: int) -> bool:
    """Whether ``path`` (not followed if a link) is still the directory ``dir_fd`` was opened on."""
    try:
        now = os.lstat(path)
        then = os.fstat(dir_fd)
    except OSError:
        return False
    return stat.S_ISDIR(now.st_mode) and (now.st_dev, now.st_ino) == (then.st_dev, then.st_ino)


def write_file_atomic(path: Path, data: bytes | str) -> None:
    """Write ``path`` at once through a private temp file and rename."""
    write_stream_atomic(path, [data.encode() if isinstance(data, str) else data])


def open_lock_file(path: Path) -> int:
    """Open (create) a private lock file for ``flock``; refuses a symlink.  Returns the fd."""
    if path.is_symlink():
        raise PathError(f"lock file {str(path)!r} is a symbolic link; refused")
    flags = os.O_RDWR | os.O_CREAT | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, FILE_MODE)
    except OSError as exc:
        raise PathError(f"cannot create lock file {str(path)!r}: {exc.strerror}") from None
    os.fchmod(fd, FILE_MODE)
    return fd


def open_dir_fd(path: Path) -> int:
    """A read-only fd of the directory ``path`` that refuses a symlink at its last component."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags)
    except OSError as exc:
        raise PathError(f"cannot open directory {str(path)!r}: {exc.strerror}") from None


class Reserve:
    """Disk space held back (a preallocated private file) and given back at release, so the end
    records of a session are written even when collection filled the disk to its floor."""

    def __init__(self, path: Path, nbytes: int = RESERVE_BYTES) -> None:
        self.path: Path | None = path
        try:
            fd = open_new(path, append=False)
        except PathError:
            self.path = None
            return
        try:
            os.posix_fallocate(fd, 0, nbytes)
        except (OSError, AttributeError):
            pass
        finally:
            os.close(fd)

    def release(self) -> None:
        if self.path is not None:
            try:
                os.unlink(self.path)
            except OSError:
                pass
            self.path = None


def check_writable(path: Path) -> None:
    """Raise a clear :class:`PathError` if ``path`` (an existing directory) is not writable."""
    if not os.access(path, os.W_OK | os.X_OK):
        raise PathError(f"output directory {str(path)!r} is not writable")
