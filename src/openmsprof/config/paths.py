"""Path rules for anything openmsprof writes or reads (docs/formats.md §8).

A path is accepted when every character is ASCII alphanumeric, one of ``. _ - / ~``, a space or
a CJK ideograph (U+4E00–U+9FA5); control characters and the acl.json blacklist are always
rejected; the whole path is at most 4096 bytes and each component at most 255; no component
may be a symbolic link.  Errors are :class:`PathError` with a one-line message naming the path.
"""

from __future__ import annotations

import os
from pathlib import Path

from openmsprof.config.errors import PathError

#: system roots refused as an output (or a tree to write into): writing a job, a
#: cluster_analysis_output/ or a store there is never what was meant
#: (a user's choices such as /tmp, /home, /root, /opt, /mnt stay allowed)
SYSTEM_ROOTS = frozenset({"/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc",
                          "/run", "/sbin", "/sys", "/usr", "/var", "/usr/bin", "/usr/lib", "/usr/local",
                          "/usr/sbin", "/usr/share", "/var/lib", "/var/log"})
#: pseudo file systems: nothing is written anywhere under them (/dev/shm excepted)
_PSEUDO = ("/proc/", "/sys/", "/dev/")
MAX_PATH_BYTES = 4096
MAX_COMPONENT_BYTES = 255
_EXTRA_OK = frozenset("._-/~ ")


def _char_ok(ch: str) -> bool:
    if ch.isascii():
        return ch.isalnum() or ch in _EXTRA_OK
    return "\u4e00" <= ch <= "\u9fa5"


def check_path_text(path: str | os.PathLike[str], what: str = "path", strict: bool = False) -> str:
    """Validate the characters and lengths of ``path``; return it as text.

    ``strict`` applies the S2 rule: letters, digits and underscore only in each component.
    """
    text = os.fspath(path)
    if not isinstance(text, str):
        raise PathError(f"{what} must be text, got {type(text).__name__}")
    if not text:
        raise PathError(f"{what} is empty")
    for ch in text:
        if not _char_ok(ch):
            raise PathError(f"{what} {text!r} contains a forbidden character {ch!r}")
    if len(text.encode()) > MAX_PATH_BYTES:
        raise PathError(f"{what} {text[:40]!r}... is longer than {MAX_PATH_BYTES} bytes")
    for part in text.split("/"):
        if len(part.encode()) > MAX_COMPONENT_BYTES:
            raise PathError(f"{what} component {part[:40]!r}... is longer than {MAX_COMPONENT_BYTES} bytes")
        if strict and part not in ("", ".", "..", "~") and not part.replace("_", "").isalnum():
            raise PathError(f"{what} component {part!r} may hold only letters, digits and '_'")
    return text


def find_symlink(path: Path) -> Path | None:
    """Return the first existing component of ``path`` that is a symbolic link, or None.

    System prefixes owned by root (such as ``/tmp`` on some distributions being a link) are
    not the user's choice, so only components that the user can own are checked: a link whose
    parent directory is writable by the current user.
    """
    path = Path(os.path.abspath(os.path.expanduser(path)))
    current = Path(path.anchor)
    for part in path.parts[1:]:
        current = current / part
        try:
            if current.is_symlink():
                parent = current.parent
                if os.access(parent, os.W_OK) or current.owner() != "root":
                    return current
        except OSError:
            return None
        if not current.exists():
            return None
    return None


def resolve_output(path: str | os.PathLike[str], what: str = "output path") -> Path:
    """Check ``path`` (text rules, no ``..`` component, no symlinks) and return it absolute,
    ``~`` expanded.  ``..`` is refused because output paths often come from config files, where
    a parent reference is the classic way to write outside the intended tree."""
    text = check_path_text(path, what)
    if ".." in text.split("/"):
        raise PathError(f"{what} {text!r} contains a '..' component; give the directory without it")
    p = Path(os.path.abspath(os.path.expanduser(os.fspath(path))))
    norm = "/" + str(p).strip("/")
    if norm in SYSTEM_ROOTS or (norm.startswith(_PSEUDO) and not (norm + "/").startswith("/dev/shm/")):
        raise PathError(f"{what} {text!r} is the system directory {norm!r}; give a directory of your own")
    link = find_symlink(p)
    if link is not None:
        raise PathError(f"{what} {os.fspath(path)!r} goes through a symbolic link at {str(link)!r}; refused")
    return p
