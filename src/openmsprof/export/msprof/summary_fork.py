"""Half of the summary files of a big job written by a forked child, on the second core.

The child opens its own read-only connection, writes its tables (each file atomically, as the
parent would) and reports the written paths through a pipe.  A disk-full or path error in the
child is raised again in the parent; any other failure (a killed child included) makes the parent
write those tables itself, so the export never depends on the fork.  The files are the same.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson

from openmsprof.config.errors import PathError, StorageError
from openmsprof.export.fork_worker import ForkWorker, fork_allowed
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof.tables import Table, write_table
from openmsprof.fileio import fs

#: The tables the child writes when no task pass is given (about half of the work of a
#: task-heavy job); with CSV the child runs :mod:`summary_task_pass` instead.
CHILD_TABLES = ("op_summary", "op_statistic", "api_statistic")
#: The tables the child writes after the task pass (balances the two sides of a 350 k-task job
#: since the pass runs in C).
PASS_CHILD_TABLES: tuple[str, ...] = ("acl_statistic",)
#: The tables a thread of the parent writes beside the parent's own (their SQL runs without the
#: GIL, so the thread takes the child's core once the child is done).
THREAD_TABLES: tuple[str, ...] = ("api_statistic", "msprof_tx")
#: Tasks (TASK's largest rowid) from which the child pays for itself.
FORK_MIN_TASKS = 100_000
_ERRORS: dict[str, type[Exception]] = {"StorageError": StorageError, "PathError": PathError}

Producer = Callable[[JobDB], Iterator[Table]]
#: Writes several tables in one pass; returns the written paths by table name.
TaskPass = Callable[[JobDB], dict[str, list[Path]]]


def want_fork(db: JobDB) -> bool:
    """The fork policy allows it (:func:`fork_allowed`) and the TASK table is big."""
    if not fork_allowed():
        return False
    if "TASK" not in db.tables:
        return False
    (rows,) = db.conn.execute("SELECT MAX(rowid) FROM TASK").fetchone()
    return (rows or 0) >= FORK_MIN_TASKS


class SummaryChild:
    """A forked child writing ``producers``' tables into ``out_dir``."""

    def __init__(self, worker: ForkWorker, out_dir: Path) -> None:
        self.worker, self.out_dir = worker, out_dir

    @classmethod
    def start(cls, db: JobDB, out_dir: Path, fmt: str, producers: dict[str, Producer],
              task_pass: TaskPass | None = None) -> SummaryChild | None:
        """``task_pass``: run first, its written paths by name join the producers' tables'.
        None: no child (the fork policy refused, or the fork failed)."""
        db.strings  # noqa: B018 - the string cache, built once before the fork, for both
        worker = ForkWorker.start(lambda w: _child_main(db, out_dir, fmt, producers, w, task_pass))
        return None if worker is None else cls(worker, out_dir)

    def finish(self) -> dict[str, list[Path]] | None:
        """Wait for the child; its written paths per table name, or None when it failed (the
        caller writes those tables itself)."""
        data, code = self.worker.result()
        try:
            msg = orjson.loads(data) if data else {}
        except orjson.JSONDecodeError:
            msg = {}
        if not isinstance(msg, dict):
            return None
        exc = _ERRORS.get(str(msg.get("error")))
        if exc is not None:
            raise exc(str(msg.get("message")))
        if code != 0 or "paths" not in msg:
            for tmp in self.out_dir.glob(f".*.{self.worker.pid}.tmp"):  # a killed child's partial files
                tmp.unlink(missing_ok=True)
            return None
        return {str(k): [Path(p) for p in v] for k, v in msg["paths"].items()}

    def cancel(self) -> None:
        """Stop the child (the parent failed)."""
        self.worker.kill()


def _child_main(db: JobDB, out_dir: Path, fmt: str, producers: dict[str, Producer],
                fd: int, task_pass: TaskPass | None) -> int:  # pragma: no cover - runs in the child
    msg: dict[str, object]
    status = 1
    try:
        own = JobDB(db.path, db.job)
        own._strings = db._strings  # inherited cache
        paths: dict[str, list[str]] = {}
        if task_pass is not None:
            paths.update({k: [str(p) for p in v] for k, v in task_pass(own).items()})
        for name, producer in producers.items():
            for table in producer(own):
                paths.setdefault(name, []).extend(str(p) for p in write_table(out_dir, table, fmt))
        msg, status = {"paths": paths}, 0
    except (StorageError, PathError) as exc:
        msg = {"error": type(exc).__name__, "message": str(exc)}
    except BaseException as exc:
        msg = {"error": "", "message": str(exc)}
    fs.write_all(fd, orjson.dumps(msg))
    return status


class TableThread:
    """A thread of this process writing ``producers``' tables through its own connection."""

    def __init__(self, db: JobDB, out_dir: Path, fmt: str, producers: dict[str, Producer]) -> None:
        self.paths: dict[str, list[Path]] = {}
        self.error: BaseException | None = None
        self._args = (db, out_dir, fmt, producers)
        self.thread = threading.Thread(target=self._run, name="openmsprof-summary", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        db, out_dir, fmt, producers = self._args
        try:
            with JobDB(db.path, db.job) as own:
                own._strings = db._strings  # read only, built already
                for name, producer in producers.items():
                    self.paths[name] = [p for t in producer(own) for p in write_table(out_dir, t, fmt)]
        except BaseException as exc:  # the caller raises it, or writes the tables itself
            self.error = exc

    def finish(self) -> dict[str, list[Path]] | None:
        """Wait; the written paths by table, or None when it failed otherwise than on a full
        disk or a bad path (those are raised here)."""
        self.thread.join()
        if isinstance(self.error, (StorageError, PathError)):
            raise self.error
        return None if self.error is not None else self.paths
