"""``OP State`` of a job's computing tasks (docs/formats.md decision 14), set once every task is in.

``static`` when every call of an operator (same name in the job) had the same input shapes,
``dynamic`` when they varied, ``N/A`` (as imported) when no call recorded shapes.  msprof-analyze's
advisor reads a job with no ``static`` operator as dynamic-shape, so the state must be measured,
never guessed.
"""

from __future__ import annotations

from typing import Any

from openmsprof.parse.strings import StringIds

__all__ = ["set_op_states"]


def set_op_states(con: Any, strings: StringIds) -> None:
    """Rewrite ``COMPUTE_TASK_INFO.opState`` on ``con`` (a sqlite3 or the native writer's
    connection; the ids are ints, inlined); interns ``static`` / ``dynamic`` into ``strings``
    before its STRING_IDS rows are written."""
    static, dynamic = strings.intern("static"), strings.intern("dynamic")
    unknown = f"{int(strings.na)},{int(strings.empty)}"
    con.execute("BEGIN")
    con.execute("CREATE TEMP TABLE omsp_op_state AS SELECT name, CASE WHEN count(DISTINCT inputShapes) = 1 "
                f"THEN {int(static)} ELSE {int(dynamic)} END AS state FROM COMPUTE_TASK_INFO "
                f"WHERE inputShapes IS NOT NULL AND inputShapes NOT IN ({unknown}) GROUP BY name")
    con.execute("UPDATE COMPUTE_TASK_INFO SET opState = (SELECT state FROM omsp_op_state s "
                "WHERE s.name = COMPUTE_TASK_INFO.name) WHERE name IN (SELECT name FROM omsp_op_state)")
    con.execute("DROP TABLE omsp_op_state")
    con.execute("COMMIT")
