"""``openmsprof.cluster.load(DIR)``: the cluster views as pandas DataFrames, and SQL over the
rank stores, for notebooks.  The stores are built (or reused) on first load."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from openmsprof.cluster import opstats, sqlviews, views_step, waits
from openmsprof.cluster.analyse import OUTPUT, STORE, parse_all
from openmsprof.config.errors import ConfigError
from openmsprof.fileio import fs

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Cluster", "load"]


def _empty() -> pd.DataFrame:
    import pandas as pd  # (imported on use: the command line's cluster run needs no pandas)

    return pd.DataFrame()


class Cluster:
    """The ranks of one cluster folder; ``.sql(query)`` runs DuckDB over the views of
    :mod:`openmsprof.cluster.sqlviews` (``kernels``, ``step_trace``, ``comm``, ``comm_bw``,
    ``matrix``, ``waits``)."""

    def __init__(self, store: Path, partials: list[dict[str, Any]], problems: list[str]) -> None:
        self.store = store
        self.partials = partials
        self.problems = problems
        self.ranks = [int(p["rank"]) for p in partials if not p.get("failed")]
        self._con = sqlviews.connect(store, self.ranks)
        waits.build_waits(self._con)

    def sql(self, query: str) -> pd.DataFrame:
        return self._con.execute(query).df()

    @property
    def step_trace(self) -> pd.DataFrame:
        return views_step.step_trace_frame(self._con)

    @property
    def communication(self) -> pd.DataFrame:
        return self.sql("SELECT * EXCLUDE (info) FROM comm") if sqlviews.has(self._con, "comm") else _empty()

    @property
    def kernels(self) -> pd.DataFrame:
        return self.sql("SELECT * FROM kernels") if sqlviews.has(self._con, "kernels") else _empty()

    @property
    def waits(self) -> pd.DataFrame:
        return self.sql("SELECT * FROM waits") if sqlviews.has(self._con, "waits") else _empty()

    def compute_op(self) -> dict[str, pd.DataFrame]:
        return opstats.compute_op_frames(self._con)

    def slow_rank(self) -> dict[str, Any]:
        return waits.slow_rank_report(self._con)

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load(directory: str | Path, *, output: str | Path | None = None, workers: int | None = None,
         scheduler: str | None = None) -> Cluster:
    """Parse (or reuse the stores of) every rank under ``directory``."""
    root = Path(directory)
    if not root.is_dir():
        raise ConfigError(f"cluster input {root}: not a directory")
    store = fs.make_dir(Path(output or root) / OUTPUT) / STORE
    partials, problems = parse_all(root, store, scheduler=scheduler, workers=workers)
    return Cluster(store, partials, problems)
