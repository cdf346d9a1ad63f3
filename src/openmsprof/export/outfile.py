"""Streaming output files: a private temp file renamed into place on success.

Any failure (a full disk included) removes the partial temp file and raises a one-line
:class:`~openmsprof.config.errors.StorageError`/``PathError`` naming the file.
"""

from __future__ import annotations

import os
from pathlib import Path

from openmsprof.config.errors import PathError, StorageError
from openmsprof.fileio import fs


class OutFile:
    """A file written through ``fs.open_new`` into ``.{name}.{pid}.tmp`` and renamed on commit."""

    __slots__ = ("fd", "path", "size", "tmp")

    def __init__(self, path: Path) -> None:
        if path.is_symlink():
            raise PathError(f"output file {str(path)!r} is a symbolic link; refused")
        self.path = path
        self.tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self.tmp.unlink(missing_ok=True)
        self.fd: int | None = fs.open_new(self.tmp, append=False)
        self.size = 0

    def write(self, data: bytes) -> None:
        """Append ``data``; a full disk aborts the file and raises ``StorageError``."""
        if self.fd is None:
            raise PathError(f"output file {str(self.path)!r} is already closed")
        try:
            fs.write_all(self.fd, data)
        except StorageError as exc:
            self.abort()
            reason = str(exc).rsplit(": ", 1)[-1]
            raise StorageError(
                f"disk full while writing {str(self.path)!r}: {reason}; partial file removed"
            ) from None
        except OSError as exc:
            self.abort()
            raise PathError(f"cannot write {str(self.path)!r}: {exc.strerror}") from None
        self.size += len(data)

    def commit(self, final: Path | None = None) -> Path:
        """Close and rename to ``final`` (default: the path given at creation)."""
        target = final or self.path
        if self.fd is None:
            raise PathError(f"output file {str(self.path)!r} was aborted")
        fd, self.fd = self.fd, None
        os.close(fd)  # no fsync: exports are derived data, re-export rebuilds them
        if target.is_symlink():
            self.tmp.unlink(missing_ok=True)
            raise PathError(f"output file {str(target)!r} is a symbolic link; refused")
        os.replace(self.tmp, target)
        return target

    def abort(self) -> None:
        """Close (if open) and delete the temp file; safe to call twice."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            self.tmp.unlink(missing_ok=True)
        except OSError:
            pass
