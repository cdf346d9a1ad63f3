"""Cluster analysis over many ranks: per-rank columnar stores, DuckDB across them, local
process pool or Dask distributed workers.  See docs/cluster.md."""

from openmsprof.cluster.analyse import MODES, ClusterRun, run_cluster
from openmsprof.cluster.notebook import Cluster, load

__all__ = ["MODES", "Cluster", "ClusterRun", "load", "run_cluster"]
