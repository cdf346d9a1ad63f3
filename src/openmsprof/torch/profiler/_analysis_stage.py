"""A window analysed off its rank dir: staged in a private hard-linked copy, published in one rename.

The analysis worker copies a saved rank dir into ``{output root}/.openmsprof.{worker pid}.stage/{rank
dir name}`` (hard links of its files, under the dir's claim right after the save: a consistent
copy) and analyses that copy holding no claim, so ``profile.stop()`` can analyse the window in
place meanwhile without ending the worker.  ``publish`` exchanges the analysed copy with the rank
dir (``renameat2(RENAME_EXCHANGE)``: one syscall) under the claim and only if the rank dir is not
analysed yet, so the dir is seen unanalysed or complete, never torn, and a window analysed
elsewhere first is left as it is (the copy is discarded: nothing is written twice).  The raw tree
an exchange replaced is emptied and kept (``recycle``): the next ``stage`` renames it into place
instead of making its dirs (a mkdir costs ~0.1-1 ms of CPU on ext4; a rename ~20 µs).  Where the
exchange is not supported (``publish`` returns None), the caller analyses in place as before.
Stage dirs a killed worker left are removed by ``sweep`` (offline ``analyse``) or by the training
process that ended the worker.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import stat
from pathlib import Path

from openmsprof.fileio import fs
from openmsprof.torch.profiler import _analysis_claim

__all__ = ["STAGE_RE", "discard", "publish", "recycle", "release", "stage", "stage_root", "supported", "sweep"]

#: ``stage_root``'s name: ``.openmsprof.{worker pid}.stage``.
STAGE_RE = re.compile(r"^\.openmsprof\.(?P<pid>\d+)\.stage$")
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_UNSUPPORTED = {errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP}


def _renameat2() -> object | None:
    try:
        return getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    except (OSError, TypeError):  # (no C library by that name here)
        return None


_RENAME = _renameat2()


def supported() -> bool:
    """Windows can be staged here (else the worker analyses them in place, holding the claim)."""
    return _RENAME is not None


def stage_root(rank_dir: Path, pid: int) -> Path:
    """The worker ``pid``'s stage dir beside ``rank_dir``."""
    return rank_dir.parent / f".openmsprof.{pid}.stage"


def _copy(src: str, dst: str, have: frozenset[str] | None = None) -> bool:
    """Hard-link ``src``'s tree into the new dir ``dst`` (modes kept); False for anything but
    dirs and regular files (a link, a FIFO: that dir is analysed in place).  ``have``: ``dst`` is
    a recycled skeleton (``recycle``) holding these empty dirs, reused, and removed if ``src``
    lacks them."""
    if have is None:
        os.mkdir(dst, fs.DIR_MODE)
    os.chmod(dst, stat.S_IMODE(os.lstat(src).st_mode))
    seen = set()
    with os.scandir(src) as it:
        for e in it:
            if e.is_dir(follow_symlinks=False):
                seen.add(e.name)
                reuse = have is not None and e.name in have
                if not _copy(e.path, os.path.join(dst, e.name), frozenset() if reuse else None):
                    return False
            elif e.is_file(follow_symlinks=False):
                os.link(e.path, os.path.join(dst, e.name), follow_symlinks=False)
            else:
                return False
    for name in (have or frozenset()) - seen:
        os.rmdir(os.path.join(dst, name))
    return True


#: empty dir trees left by published windows, kept per stage dir for the next ``stage`` (one
#: rename instead of a mkdir per dir, and no rmdir): (path, its subdirs)
_spares: dict[str, list[tuple[str, frozenset[str]]]] = {}  # (plain strings: cheaper than paths)
_SPARES = 2
_serial = 0


def _take_spare(root: str, dst: str) -> frozenset[str] | None:
    """Rename one of ``root``'s skeletons to ``dst``; its subdirs (None: no skeleton)."""
    spares = _spares.get(root)
    while spares:
        path, subs = spares.pop()
        try:
            os.rename(path, dst)
            return subs
        except OSError:
            shutil.rmtree(path, ignore_errors=True)
    return None


def recycle(staged: Path) -> None:
    """After ``publish``, ``staged`` holds the replaced raw tree: its files are unlinked and its
    dirs (two levels at most) kept as a skeleton for the next ``stage`` of this process; any
    other tree, or one too many, is discarded (the stage dir kept)."""
    global _serial
    parent, _ = os.path.split(os.fspath(staged))
    spares = _spares.setdefault(parent, [])
    subs = _empty_out(staged) if len(spares) < _SPARES else None
    if subs is None:
        discard(staged, keep_root=True)
        return
    _serial += 1
    spare = os.path.join(parent, f".spare{_serial}")
    try:
        os.rename(staged, spare)
    except OSError:
        discard(staged, keep_root=True)
        return
    spares.append((spare, subs))


def _empty_out(d: Path | str) -> frozenset[str] | None:
    """Unlink the files of ``d`` and of its subdirs; the subdirs' names (None: a deeper tree, or
    anything that could not be removed)."""
    subs = []
    try:
        with os.scandir(d) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    subs.append(e.name)
                    with os.scandir(e.path) as inner:
                        for f in inner:
                            if f.is_dir(follow_symlinks=False):
                                return None
                            os.unlink(f.path)
                else:
                    os.unlink(e.path)
    except OSError:
        return None
    return frozenset(subs)


def release(root: Path) -> None:
    """Remove this process's skeletons in the stage dir ``root`` and the dir itself if empty."""
    for path, _ in _spares.pop(os.fspath(root), []):
        shutil.rmtree(path, ignore_errors=True)
    try:
        root.rmdir()
    except OSError:  # (not empty: a copy a dying child left; ``sweep`` removes it later)
        pass


def stage(rank_dir: Path, pid: int) -> Path | None:
    """A hard-linked copy of ``rank_dir`` in worker ``pid``'s stage dir (call under the dir's
    claim), or None where it cannot be staged (then it is analysed in place)."""
    if _RENAME is None:
        return None
    src = os.fspath(rank_dir)
    parent, name = os.path.split(src)
    root = os.path.join(parent, f".openmsprof.{pid}.stage")  # (``stage_root``, as its text)
    dst = os.path.join(root, name)
    try:
        if root not in _spares:  # (made, or found, by an earlier window of this process)
            try:
                os.mkdir(root, fs.DIR_MODE)
                os.chmod(root, fs.DIR_MODE)
            except FileExistsError:
                if not stat.S_ISDIR(os.lstat(root).st_mode):
                    return None
            _spares[root] = []
        if os.path.lexists(dst):
            shutil.rmtree(dst)
        if _copy(src, dst, _take_spare(root, dst)):
            return Path(dst)
    except OSError:
        _spares.pop(root, None)  # (checked again next time: it may have been removed)
    discard(Path(dst))
    return None


def _exchange(a: Path, b: Path) -> None:
    rename = _RENAME
    assert callable(rename)
    if rename(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), os.fspath(b))


def publish(staged: Path, rank_dir: Path) -> bool | None:
    """Exchange the analysed copy ``staged`` with ``rank_dir`` unless the dir is analysed or held
    by another process (False: left as it is; the copy is to be discarded).  None where this file
    system cannot exchange.  Afterwards ``staged`` holds what was replaced (``discard`` it)."""
    with _analysis_claim.claim(rank_dir) as mine:
        if not mine:
            return False
        try:
            _exchange(staged, rank_dir)
        except OSError as exc:
            if exc.errno in _UNSUPPORTED:
                return None
            raise
    return True


def discard(staged: Path, keep_root: bool = False) -> None:
    """Remove a staged copy, and its stage dir once empty (unless ``keep_root``: the worker keeps
    its stage dir until it leaves, one mkdir per output root rather than per window)."""
    shutil.rmtree(staged, ignore_errors=True)
    if keep_root:
        return
    try:
        staged.parent.rmdir()
    except OSError:
        pass


def sweep(root: Path, pid: int | None = None) -> list[Path]:
    """Remove the stage dirs under the output ``root`` of worker ``pid`` (None: of every worker
    no longer running); returns those removed."""
    import psutil

    gone: list[Path] = []
    try:
        found = [(p, m) for p in root.iterdir() if (m := STAGE_RE.match(p.name))]
    except OSError:
        return gone
    for p, m in found:
        owner = int(m["pid"])
        if pid is None:
            try:
                if psutil.Process(owner).status() != psutil.STATUS_ZOMBIE:
                    continue
            except psutil.NoSuchProcess:
                pass
            except psutil.Error:
                continue
        elif owner != pid:
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
            gone.append(p)
    return gone
