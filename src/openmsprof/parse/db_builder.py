"""Building the database file: a private temp file, bulk inserts, indexes last, atomic rename.

While building, ``journal_mode=OFF`` and ``synchronous=OFF`` (a crash leaves only the temp
file, never a half-written ``msprof.db``).  Two importers of one job serialise on an ``flock``
of ``sqlite/.import.lock``.

The inserts run in C where ``_bulk_insert`` was built (pip, the system compiler): int64 matrices
are bound from their buffers without the GIL, through the SQLite library Python's sqlite3 module
has loaded (the module refuses to load otherwise, or when its version differs), so the same
library writes the same file either way.  Without it, ``executemany`` binds Python lists.
"""

from __future__ import annotations

import fcntl
import importlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from openmsprof.config.errors import PathError, StorageError
from openmsprof.fileio import fs
from openmsprof.parse import schema

#: (table, statement, parameter sets or an int64 matrix for the C writer, rows).
Prepared = list[tuple[str, str, Any, int]]
LOCK_NAME = ".import.lock"
#: Rows bound per INSERT statement for integer batches (one VDBE run per 64 rows).
ROWS_PER_STATEMENT = 64
DB_NAME = "msprof.db"
#: the import cache (8 MiB: as fast as 32 MiB on a 1.75 M-record job, 25 MB less resident)
CACHE_KIB = 8192


def _load_native() -> Any:
    """The C writer, when built and bound to the same SQLite as the sqlite3 module."""
    try:
        native = importlib.import_module("openmsprof.parse._bulk_insert")
    except ImportError:  # pragma: no cover - depends on the build
        return None
    major, minor, micro = sqlite3.sqlite_version_info
    return native if native.libversion_number() == major * 1_000_000 + minor * 1000 + micro else None


_native: Any = _load_native()
#: what either connection raises for a database error
_DB_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error, *((_native.Error,) if _native is not None else ()))


class ImportLock:
    """An exclusive flock on ``directory/.import.lock``; waits up to ``timeout`` seconds."""

    def __init__(self, directory: Path, timeout: float = 600.0) -> None:
        self.path = directory / LOCK_NAME
        self.fd = fs.open_lock_file(self.path)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    os.close(self.fd)
                    raise PathError(
                        f"another import of {str(directory.parent)!r} is still running; try again later"
                    ) from None
                time.sleep(0.05)

    def release(self) -> None:
        if self.fd >= 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1


class DbWriter:
    """Writes one new database into ``sqlite_dir`` through a temp file."""

    def __init__(self, sqlite_dir: Path) -> None:
        self.final = sqlite_dir / DB_NAME
        if self.final.is_symlink():
            raise PathError(f"database {str(self.final)!r} is a symbolic link; refused")
        self.tmp = sqlite_dir / f".{DB_NAME}.{os.getpid()}.tmp"
        for stale in sqlite_dir.glob(f".{DB_NAME}.*.tmp"):  # left by a killed import (we hold the lock)
            stale.unlink(missing_ok=True)
        os.close(fs.open_new(self.tmp, append=False))
        #: the C writer's connection (None: the sqlite3 module's, ``con``)
        self.native = _native.Conn(str(self.tmp)) if _native is not None else None
        self.con: Any = self.native if self.native is not None else sqlite3.connect(
            self.tmp, isolation_level=None, check_same_thread=False)
        try:
            for pragma in ("journal_mode=OFF", "synchronous=OFF", "locking_mode=EXCLUSIVE",
                           f"cache_size=-{CACHE_KIB}", "temp_store=FILE"):
                self.con.execute(f"PRAGMA {pragma}")
            for stmt in schema.create_statements():
                self.con.execute(stmt)
        except _DB_ERRORS as exc:
            self._fail(exc)
        self.rows: dict[str, int] = {}
        self._multi_sql: dict[str, str] = {}
        #: rows not inserted because their primary key was already there (corrupt data)
        self.duplicates: dict[str, int] = {}

    def _multi(self, sql: str) -> str:
        multi = self._multi_sql.get(sql)
        if multi is None:
            head, values = sql.split(" VALUES ", 1)
            multi = self._multi_sql[sql] = f"{head} VALUES {', '.join([values] * ROWS_PER_STATEMENT)}"
        return multi

    def prepare(self, batches: Iterable[tuple[str, Iterable[Any] | np.ndarray]]) -> Prepared:
        """Turn converter batches into Python parameter lists (may run in another thread);
        a matrix (int64, or Python numbers of mixed types) becomes ``ROWS_PER_STATEMENT`` rows
        per statement.  For the C writer, an int64 matrix stays one (C-contiguous)."""
        out: Prepared = []
        for sql, rows in batches:
            table = sql.split(" INTO ", 1)[1].split(None, 1)[0]
            if not isinstance(rows, np.ndarray):
                params = list(rows)
                out.append((table, sql, params, len(params)))
                continue
            if self.native is not None and rows.dtype == np.int64:
                out.append((table, sql, np.ascontiguousarray(rows), len(rows)))
                continue
            n = len(rows)
            bulk = n - n % ROWS_PER_STATEMENT
            if bulk:
                out.append((table, self._multi(sql),
                            rows[:bulk].reshape(bulk // ROWS_PER_STATEMENT, -1).tolist(), bulk))
            if bulk < n:
                out.append((table, sql, rows[bulk:].tolist(), n - bulk))
        return out

    def write(self, batches: Iterable[tuple[str, Iterable[Any] | np.ndarray]]) -> None:
        self.write_prepared(self.prepare(batches))

    def write_prepared(self, prepared: Prepared) -> None:
        """One transaction for one prepared batch."""
        con, native = self.con, self.native
        try:
            con.execute("BEGIN")
            for table, sql, params, n in prepared:
                if native is None:
                    done = con.executemany(sql, params).rowcount
                elif isinstance(params, np.ndarray):
                    done = native.insert_matrix(sql, self._multi(sql), ROWS_PER_STATEMENT, params)
                else:
                    done = native.insert_rows(sql, params)
                self.rows[table] = self.rows.get(table, 0) + done
                if done != n:
                    self.duplicates[table] = self.duplicates.get(table, 0) + n - done
            con.execute("COMMIT")
        except _DB_ERRORS as exc:
            self._fail(exc)

    def run(self, step: Callable[[Any], None]) -> None:
        """Run ``step(connection)`` (a whole-job SQL pass); a database error fails the import."""
        try:
            step(self.con)
        except _DB_ERRORS as exc:
            self._fail(exc)

    def _fail(self, exc: Exception) -> NoReturn:
        """Remove the temp database and raise one line (naming the disk when it is full)."""
        self.abort()
        text = str(exc.args[-1]) if self.native is not None and exc.args else str(exc)
        if "full" in text.lower() or fs.free_bytes(self.final.parent) < 1024 * 1024:
            raise StorageError(fs.disk_full_message(self.final, "importing into")) from None
        raise StorageError(f"cannot write {fs.escape(self.final)!r}: {text}") from None

    def commit(self) -> Path:
        """Build the indexes, close and move the database into place."""
        try:
            for stmt in schema.INDEXES:
                self.con.execute(stmt)
            self.con.close()
        except _DB_ERRORS as exc:
            self._fail(exc)
        os.chmod(self.tmp, fs.FILE_MODE)
        os.replace(self.tmp, self.final)
        return self.final

    def abort(self) -> None:
        try:
            self.con.close()
        except _DB_ERRORS:
            pass
        self.tmp.unlink(missing_ok=True)
