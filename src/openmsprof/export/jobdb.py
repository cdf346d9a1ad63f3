"""Read access to a job's database ``JOB/sqlite/msprof.db`` (schema: docs/internals.md)."""

from __future__ import annotations

import importlib
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from openmsprof.config.errors import PathError, ProfilingError, RawDataError
from openmsprof.fileio.read_guard import read_regular
from openmsprof.parse.jobinfo import sane_info

DB_RELPATH = Path("sqlite") / "msprof.db"

_apsw: Any
try:  # optional: apsw walks rows about twice as fast as sqlite3 (the timeline's hot queries)
    import apsw as _apsw
except ImportError:  # pragma: no cover - depends on the environment
    _apsw = None
#: Errors a query may raise: sqlite3's, and apsw's when it is installed.
DB_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error,) + ((_apsw.Error,) if _apsw else ())


def _importer() -> Any | None:
    try:
        return importlib.import_module("openmsprof.parse.importer")
    except ImportError:
        return None


def find_jobs(path: Path) -> list[Path]:
    """Jobs under ``path`` (a job, or a folder of jobs) — the importer's rule when available."""
    path = Path(path)
    if not path.exists():
        raise PathError(f"collection dir {str(path)!r} does not exist")
    if not path.is_dir():
        raise PathError(f"collection dir {str(path)!r} is not a directory")
    from openmsprof.export.ascend_pt import kernel_job  # a torch rank dir is a job too

    ranks = kernel_job.rank_dirs_under(path)
    if ranks == [path]:
        return ranks
    imp = _importer()
    if imp is not None and hasattr(imp, "find_jobs"):
        try:
            found = list(imp.find_jobs(path))
        except ProfilingError:
            if not ranks:
                raise
            found = []
        # a rank dir's own PROF_ job (markers only) is not a job beside it
        return ranks + [j for j in found if not any(r in j.parents for r in ranks)]
    if _is_job(path):
        return [path]
    jobs = sorted(p for p in path.iterdir() if p.is_dir() and _is_job(p))
    if not jobs:
        raise PathError(f"{str(path)!r} is not a profiling job and holds none")
    return jobs


def _is_job(p: Path) -> bool:
    return (p / DB_RELPATH).is_file() or (p / "host").is_dir() or any(p.glob("device_*"))


def ensure_db(job: Path) -> Path:
    """The job's database path, importing the job first when needed (S2: export imports);
    a torch rank dir's is built from its kernel_details.csv."""
    from openmsprof.export.ascend_pt import kernel_job

    if kernel_job.is_rank_dir(job):
        return kernel_job.ensure_kernel_db(job)
    imp = _importer()
    if imp is not None and hasattr(imp, "ensure_imported"):
        return Path(imp.ensure_imported(job))
    db = job / DB_RELPATH
    if not db.is_file():
        raise PathError(f"job {str(job)!r} has no database {str(DB_RELPATH)!r}; run import first")
    return db


class JobDB:
    """An open, read-only job database with cached strings and metadata."""

    def __init__(self, db_path: Path, job: Path | None = None) -> None:
        self.path = Path(db_path)
        self.job = job if job is not None else self.path.parent.parent
        if not self.path.is_file():
            raise PathError(f"database {str(self.path)!r} does not exist")
        try:
            self.conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            self.conn.execute("PRAGMA query_only=1")
            names = self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            self.tables = {r[0] for r in names}
        except sqlite3.DatabaseError as exc:
            raise RawDataError(f"database {str(self.path)!r} is unreadable: {exc}") from None
        if "STRING_IDS" not in self.tables or "META_DATA" not in self.tables:
            raise RawDataError(f"database {str(self.path)!r} is not an openmsprof database")
        self.meta = dict(self.conn.execute("SELECT name, value FROM META_DATA").fetchall())
        self._strings: dict[int, str] | None = None
        self._json: dict[int, str] | None = None
        self._streams: dict[int, list[tuple[int, int]]] | None = None
        self._fast: Any = None  # the apsw connection of :meth:`stream`, opened on first use

    def close(self) -> None:
        self.conn.close()
        if self._fast is not None:
            self._fast.close()
            self._fast = None

    def stream(self, sql: str, params: tuple[Any, ...] = ()) -> Iterable[tuple[Any, ...]]:
        """The rows of a long read-only query, one tuple each, through apsw when it is installed
        (its own read-only connection; about twice as fast per row), else through sqlite3."""
        fast = self.scratch()
        if fast is None:
            return self.conn.execute(sql, params)
        return fast.execute(sql, params)  # type: ignore[no-any-return]

    def scratch(self) -> Any:
        """The apsw connection :meth:`stream` reads through (read-only on the db, its TEMP tables
        writable: lookup tables a query joins), or None without apsw."""
        if _apsw is None:
            return None
        if self._fast is None:
            self._fast = _apsw.Connection(str(self.path), flags=_apsw.SQLITE_OPEN_READONLY)
        return self._fast

    def __enter__(self) -> JobDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def base_ns(self) -> int:
        """The timeline base (META_DATA BASE_NS, else session start floored to the second)."""
        try:
            return int(self.meta["BASE_NS"])
        except (KeyError, ValueError):
            row = self.query("SELECT MIN(startTimeNs) FROM SESSION_TIME_INFO") if self.has(
                "SESSION_TIME_INFO") else [(None,)]
            start = row[0][0] or 0
            return int(start) // 1_000_000_000 * 1_000_000_000

    @property
    def pid(self) -> int:
        try:
            return int(self.meta.get("PID", 0))
        except ValueError:
            return 0

    def has(self, table: str) -> bool:
        """Whether ``table`` exists and holds at least one row."""
        if table not in self.tables:
            return False
        return self.conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    @property
    def strings(self) -> dict[int, str]:
        """STRING_IDS as a dict (id → text)."""
        if self._strings is None:
            self._strings = dict(self.conn.execute("SELECT id, value FROM STRING_IDS"))
        return self._strings

    @property
    def json_strings(self) -> dict[int, str]:
        """STRING_IDS as JSON string literals (quotes and escapes included)."""
        if self._json is None:
            dumps: Callable[[Any], bytes] = orjson.dumps
            self._json = {k: dumps(v or "").decode() for k, v in self.strings.items()}
        return self._json

    @property
    def task_streams(self) -> dict[int, list[tuple[int, int]]]:
        """deviceId → its distinct (taskType string id, streamId) pairs in TASK (one scan)."""
        if self._streams is None:
            self._streams = {}
            if "TASK" in self.tables:
                for dev, typ, sid in self.conn.execute(
                        "SELECT DISTINCT deviceId, taskType, streamId FROM TASK"):
                    self._streams.setdefault(dev, []).append((typ, sid))
        return self._streams

    def text(self, sid: int | None, default: str = "N/A") -> str:
        """The string with id ``sid`` (``default`` when missing or empty)."""
        if sid is None:
            return default
        value = self.strings.get(int(sid))
        return value if value else default

    def info_json(self) -> dict[str, Any]:
        """``JOB/host/info.json`` (empty dict when absent or unreadable)."""
        try:
            data = orjson.loads(read_regular(self.job / "host" / "info.json", "info.json", 16 << 20))
        except (ProfilingError, orjson.JSONDecodeError):
            return {}
        return sane_info(data) if isinstance(data, dict) else {}


def open_job(job: Path) -> JobDB:
    """Import if needed and open ``job``'s database."""
    return JobDB(ensure_db(Path(job)), Path(job))
