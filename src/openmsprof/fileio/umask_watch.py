"""The process umask known without a syscall per new file, so ``fs`` sets a mode only when the
umask did not already give it.

The umask is read race-free from ``/proc/self/status`` (its ``Umask:`` line, Linux 4.7+) once,
and read again after every ``os.umask`` call: the module wraps ``os.umask`` (same arguments,
same result) so that each call moves an epoch.  A writer takes :func:`current` before it creates
a file and :func:`unchanged` after: a ``os.umask`` call in between, from any thread, makes it set
the mode itself.  Where the umask cannot be read (no ``/proc``), :func:`current` says so and
the mode is always set.  Whatever happens, a file is never more open than the mode asked for
(the kernel masks the creation mode); a umask changed by native code behind ``os.umask``'s back
(or by a caller of a reference taken before this module was imported) is not seen, and a
directory's default ACL, which takes the umask's place for the files made in it, may leave a
file more private than asked (the kernel masks the ACL with the mode asked for).
"""

from __future__ import annotations

import os
import threading
from typing import Any

__all__ = ["current", "unchanged"]

_UMASK_LINE = b"\nUmask:\t"
#: a new object per change of the umask through ``os.umask``; None while a call runs
_epoch: object | None = object()
#: (epoch, umask) read in that epoch (-1: not readable here)
_known: tuple[object, int] | None = None
_lock = threading.Lock()
_real_umask = getattr(os.umask, "_openmsprof_real", os.umask)


def _read_proc() -> int:
    """The umask from ``/proc/self/status`` (-1 when it cannot be read)."""
    try:
        fd = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return -1
    try:
        text = os.read(fd, 1 << 16)
    except OSError:
        return -1
    finally:
        os.close(fd)
    at = text.find(_UMASK_LINE)
    if at < 0:
        return -1
    start = at + len(_UMASK_LINE)
    try:
        return int(text[start:text.index(b"\n", start)], 8)
    except ValueError:
        return -1


def current() -> tuple[object, int] | None:
    """(epoch, umask) while no ``os.umask`` call runs (umask -1: unknown here), else None."""
    global _known
    epoch = _epoch
    if epoch is None:
        return None
    known = _known
    if known is None or known[0] is not epoch:
        known = (epoch, _read_proc())
        if _epoch is not epoch:  # changed while it was read
            return None
        _known = known
    return known


def unchanged(epoch: object) -> bool:
    """Whether no ``os.umask`` call started since :func:`current` gave ``epoch``."""
    return _epoch is epoch


def _umask(mask: Any, /) -> int:
    """``os.umask``, moving the epoch around the call (see module)."""
    global _epoch
    with _lock:
        _epoch = None
        try:
            return _real_umask(mask)
        finally:
            _epoch = object()


def _after_fork() -> None:
    """The child's own lock and epoch (another thread may have been inside ``os.umask``)."""
    global _lock, _epoch
    _lock = threading.Lock()
    _epoch = object()


_umask._openmsprof_real = _real_umask  # type: ignore[attr-defined]
_umask.__doc__ = _real_umask.__doc__
if os.umask is _real_umask or getattr(os.umask, "_openmsprof_real", None) is _real_umask:  # (a reload: this one)
    os.umask = _umask
    os.register_at_fork(after_in_child=_after_fork)
