"""``openmsprof.load(JOB)``: a job's summaries from Python, as rows or pandas DataFrames.

The numbers are those of ``export summary`` (the export layer's producers, run on the job's
database; the job is imported first if needed).  Raw database tables are available too::

    job = openmsprof.load("out/PROF_...")
    job.names()                    # ['op_summary', 'op_statistic', 'api_statistic', ...]
    job.rows("op_statistic")       # [{'Device_id': 0, 'OP Type': 'Conv', ...}, ...]
    job.dataframe("op_statistic")  # pandas.DataFrame (pandas installed)
    job.db_rows("TASK")            # raw table rows as dicts
    job.dataframe("roofline")      # each operator against the machine's measured peaks
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from openmsprof.config.errors import ConfigError, RawDataError
from openmsprof.parse.importer import ensure_imported
from openmsprof.parse.jobinfo import find_jobs
from openmsprof.parse.schema import TABLES

__all__ = ["ROOFLINE", "LoadedJob", "load"]

#: The roofline view's name: ``job.rows("roofline")`` — every operator (name, type, shapes)
#: with its modelled FLOPs/bytes, attainable time, efficiency, bound and memory-bound ratio.
ROOFLINE = "roofline"


def _value(v: Any) -> Any:
    """Numeric CSV text -> int/float; anything else unchanged (timestamps keep their digits)."""
    if type(v) is str or v is None or isinstance(v, (int, float)):
        return v
    text = str.__str__(v)  # export's Num (numeric text)
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


class LoadedJob:
    """One imported job.  Close it (or use ``with``) to release the database."""

    def __init__(self, job: Path) -> None:
        self.path = job
        from openmsprof.export.ascend_pt import kernel_job  # not at import: export needs rich

        self.db_path = (kernel_job.ensure_kernel_db(job) if kernel_job.is_rank_dir(job)
                        else ensure_imported(job))
        self._con = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True)
        self._db: Any = None
        self._cache: dict[str, tuple[list[str], list[list[Any]]]] = {}

    # -- summaries ------------------------------------------------------------------------
    def _export_db(self) -> Any:
        if self._db is None:
            from openmsprof.export.jobdb import JobDB

            self._db = JobDB(self.db_path, self.path)
        return self._db

    def _tables(self, names: list[str] | None = None) -> Iterator[Any]:
        try:
            from openmsprof.export.msprof import roofline
            from openmsprof.export.msprof import summary_export as summary
        except ImportError:  # export layer absent: summaries unavailable, raw tables still are
            return iter(())
        if names == [ROOFLINE]:  # the roofline view: modelled cost against the job's peaks
            return roofline.roofline_table(self._export_db())
        return summary.iter_tables(self._export_db(), names=names)

    def names(self) -> list[str]:
        """Summary names that have data, in export order, then the ``roofline`` view."""
        out: list[str] = []
        for t in self._tables():
            if t.name not in out:
                out.append(t.name)
        if "op_summary" in out:
            out.append(ROOFLINE)
        return out

    def table(self, name: str) -> tuple[list[str], list[list[Any]]]:
        """(header, rows) of summary ``name``; rows of every device, numbers as int/float."""
        if name not in self._cache:
            header: list[str] = []
            rows: list[list[Any]] = []
            for t in self._tables([name]):
                if t.name != name:
                    continue
                header = list(t.header)
                rows.extend([_value(v) for v in r] for r in t.rows)
            if not header:
                have = ", ".join(self.names()) or "none"
                raise ConfigError(f"job {str(self.path)!r} has no summary {name!r} (summaries with data: {have})")
            self._cache[name] = (header, rows)
        return self._cache[name]

    def rows(self, name: str) -> list[dict[str, Any]]:
        """Summary ``name`` as a list of {column: value} dicts."""
        header, rows = self.table(name)
        return [dict(zip(header, r, strict=False)) for r in rows]

    def dataframe(self, name: str) -> Any:
        """Summary ``name`` as a pandas DataFrame (needs pandas)."""
        pd = _pandas()
        header, rows = self.table(name)
        return pd.DataFrame(rows, columns=header)

    # -- raw database tables ----------------------------------------------------------------
    def db_tables(self) -> list[str]:
        return [r[0] for r in self._con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]

    def _select(self, table: str) -> tuple[list[str], Sequence[tuple[Any, ...]]]:
        if table not in self.db_tables():
            raise ConfigError(f"database {str(self.db_path)!r} has no table {table!r} (known: {', '.join(TABLES)})")
        cur = self._con.execute(f'SELECT * FROM "{table}"')
        return [d[0] for d in cur.description], cur.fetchall()

    def db_rows(self, table: str) -> list[dict[str, Any]]:
        """Raw rows of database table ``table`` (string columns hold STRING_IDS ids)."""
        cols, rows = self._select(table)
        return [dict(zip(cols, r, strict=True)) for r in rows]

    def db_dataframe(self, table: str) -> Any:
        pd = _pandas()
        cols, rows = self._select(table)
        return pd.DataFrame(rows, columns=cols)

    def strings(self) -> dict[int, str]:
        return dict(self._con.execute("SELECT id, value FROM STRING_IDS"))

    def close(self) -> None:
        self._con.close()
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> LoadedJob:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LoadedJob({str(self.path)!r})"


def _pandas() -> Any:
    try:
        import pandas as pd
    except ImportError:
        raise ConfigError("pandas is not installed; use rows() or pip install pandas") from None
    return pd


def load(job: str | os.PathLike[str]) -> LoadedJob:
    """Open one job (importing it first if needed), or a torch rank dir (``…_ascend_pt``)."""
    from openmsprof.export.ascend_pt import kernel_job

    jobs = kernel_job.rank_dirs_under(Path(job)) or find_jobs(Path(job))
    if len(jobs) != 1:
        raise RawDataError(f"{os.fspath(job)!r} holds {len(jobs)} jobs; load one of them")
    return LoadedJob(jobs[0])
