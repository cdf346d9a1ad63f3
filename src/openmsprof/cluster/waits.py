"""Wait/transfer split of every collective across ranks, the slow rank, and its cause.

For one collective (same step and ``op@group`` on every rank of the group), rank r arrives at
``start_r`` and leaves at ``end_r`` on the aligned clock (epoch µs: each job maps its monotonic
clock to the epoch with its own (monotonic, epoch) pair).  The last arrival ``L = max start``
splits r's time into *wait* ``[start_r, min(L, end_r)]`` and *transfer* ``[max(start_r, L), end_r]``.
The rank arriving last made the others wait; the *cause* is what it did between its previous
collective and this one: the operator whose time there exceeds the other ranks' median by most,
or, when operators explain less than half of the delay, the idle phase (host gap, no operator).

No collective can end on any rank before its last rank arrived, so ``L - min end`` > 0 is clock
disagreement: its maximum is reported as the observed alignment error.
"""

from __future__ import annotations

from typing import Any

import duckdb

from openmsprof.cluster.sqlviews import has

__all__ = ["build_waits", "slow_rank_report"]

WAITS = """
CREATE OR REPLACE TABLE waits AS
WITH c AS (
  SELECT rank, step, op_key, op_name, group_name, start_us, start_us + elapse_ms * 1000 AS end_us,
         lag(start_us + elapse_ms * 1000) OVER (PARTITION BY rank ORDER BY start_us) AS prev_end_us
  FROM comm WHERE type = 'collective'),
inst AS (
  SELECT step, op_key, max(start_us) AS last_arrival_us, arg_max(rank, start_us) AS last_rank,
         min(end_us) AS first_end_us, count(*) AS n
  FROM c GROUP BY step, op_key HAVING count(*) > 1)
SELECT c.rank, c.step, c.op_key, c.op_name, c.group_name, c.start_us, c.end_us, c.prev_end_us,
       inst.last_rank, inst.last_arrival_us, inst.n AS ranks,
       greatest(least(inst.last_arrival_us, c.end_us) - c.start_us, 0) / 1000 AS wait_ms,
       greatest(c.end_us - greatest(c.start_us, inst.last_arrival_us), 0) / 1000 AS transfer_ms,
       greatest(inst.last_arrival_us - inst.first_end_us, 0) AS clock_disagreement_us
FROM c JOIN inst USING (step, op_key)
"""

SELECTED = """
SELECT step, op_key, sum(wait_ms) AS imposed_ms FROM waits
WHERE last_rank = $rank GROUP BY step, op_key ORDER BY imposed_ms DESC LIMIT $top
"""
EXCESS = """
WITH excess AS (
  SELECT step, op_key, name,
         max(us) FILTER (WHERE rank = $rank) - coalesce(median(us) FILTER (WHERE rank <> $rank), 0) AS excess_us
  FROM per GROUP BY ALL)
SELECT name, sum(excess_us) AS excess_us, count(*) AS collectives FROM excess
WHERE excess_us IS NOT NULL GROUP BY name ORDER BY excess_us DESC LIMIT 5
"""


def _cause_ops(con: duckdb.DuckDBPyConnection, rank: int, top: int) -> list[tuple[str, float, int]]:
    """Operators by their excess time on ``rank`` before its ``top`` most costly late arrivals
    (from each rank's ``gaps`` table, computed by its worker: see :func:`.opstats.rank_gaps`)."""
    if not has(con, "gaps"):
        return []
    sel = con.execute(SELECTED, {"rank": rank, "top": top}).df()  # noqa: F841 - read by name in SQL
    per = con.execute("SELECT g.step, g.op_key, g.rank, g.name, g.us FROM gaps g JOIN sel USING (step, op_key)").df()
    if not len(per):
        return []
    con.register("per", per)
    try:
        return [(str(n), float(e), int(c)) for n, e, c in con.execute(EXCESS, {"rank": rank}).fetchall()]
    finally:
        con.unregister("per")


def build_waits(con: duckdb.DuckDBPyConnection) -> bool:
    """Create the ``waits`` table (False when no collective was seen by two ranks)."""
    if not has(con, "comm"):
        return False
    con.execute(WAITS)
    return bool(con.execute("SELECT count(*) FROM waits").fetchone()[0])  # type: ignore[index]


def _lateness(con: duckdb.DuckDBPyConnection, rank: int) -> float:
    """Total µs by which ``rank`` started its window-to-collective later than the others' median."""
    row = con.execute("""
        WITH g AS (SELECT step, op_key, rank, start_us - prev_end_us AS gap FROM waits
                   WHERE prev_end_us IS NOT NULL AND (step, op_key) IN
                         (SELECT step, op_key FROM waits WHERE last_rank = $rank))
        SELECT sum(d) FROM (SELECT max(gap) FILTER (WHERE rank = $rank)
                                   - median(gap) FILTER (WHERE rank <> $rank) AS d FROM g GROUP BY step, op_key)
        """, {"rank": rank}).fetchone()
    return float(row[0] or 0.0) if row else 0.0


def slow_rank_report(con: duckdb.DuckDBPyConnection, top: int = 50) -> dict[str, Any]:
    """Per-rank wait/transfer totals, the slow rank, its cause, and the observed clock disagreement."""
    if not build_waits(con):
        return {"ranks": [], "slow_rank": None}
    per_rank = con.execute("""
        SELECT w.rank, sum(w.wait_ms) AS wait_ms, sum(w.transfer_ms) AS transfer_ms,
               quantile_cont(w.wait_ms, 0.99) AS p99_wait_ms,
               (SELECT count(DISTINCT (step, op_key)) FROM waits x WHERE x.last_rank = w.rank AND x.rank = w.rank)
                 AS arrived_last,
               (SELECT coalesce(sum(wait_ms), 0) FROM waits x WHERE x.last_rank = w.rank) AS imposed_wait_ms
        FROM waits w GROUP BY w.rank ORDER BY w.rank""").df()
    disagreement = float(con.execute("SELECT max(clock_disagreement_us) FROM waits").fetchone()[0] or 0)  # type: ignore[index]
    report: dict[str, Any] = {"ranks": per_rank.to_dict("records"), "clock_disagreement_us": disagreement,
                              "slow_rank": None}
    worst = per_rank.sort_values("imposed_wait_ms", ascending=False).iloc[0]
    if float(worst["imposed_wait_ms"]) <= 0:
        return report
    rank = int(worst["rank"])
    cause: dict[str, Any] = {"phase": "unknown", "op": None}
    late_us = _lateness(con, rank)
    if has(con, "gaps"):
        ops = _cause_ops(con, rank, top)
        if ops and ops[0][1] > 0 and (late_us <= 0 or ops[0][1] >= 0.5 * late_us):
            cause = {"phase": "compute", "op": ops[0][0], "excess_ms": ops[0][1] / 1000, "collectives": int(ops[0][2]),
                     "candidates": [{"op": n, "excess_ms": e / 1000} for n, e, _c in ops]}
        elif late_us > 0:
            cause = {"phase": "idle (no operator running: host gap / data loading)", "op": None,
                     "candidates": [{"op": n, "excess_ms": e / 1000} for n, e, _c in ops]}
    report["slow_rank"] = {"rank": rank, "imposed_wait_ms": float(worst["imposed_wait_ms"]),
                           "arrived_last": int(worst["arrived_last"]), "late_ms": late_us / 1000, "cause": cause}
    return report
