"""The msprof-style database schema (docs/internals.md "Database", docs/formats.md §6).

Tables are created without indexes; :data:`INDEXES` are built after the load.  INSERT
statements bind only the columns that vary; constant columns are SQL literals.
"""

from __future__ import annotations

#: Our own schema version (``META_DATA.OPENMSPROF_SCHEMA``); bump on any change.
OPENMSPROF_SCHEMA = 1
#: The msprof schema version we follow.
SCHEMA_VERSION = "1.2.0"
#: Invalid value / "none" sentinel of msprof.
INVALID = 4294967295
#: Invalid connection id.
NO_CONNECTION = -1
#: Fresh connection ids for API rows that had none start here.
FRESH_CONNECTION_BASE = 1 << 32

TABLES: dict[str, str] = {
    "STRING_IDS": "id INTEGER PRIMARY KEY, value TEXT",
    "META_DATA": "name TEXT, value TEXT",
    "SESSION_TIME_INFO": "startTimeNs INTEGER, endTimeNs INTEGER",
    "ENUM_API_TYPE": "id INTEGER PRIMARY KEY, name TEXT",
    "ENUM_MSTX_EVENT_TYPE": "id INTEGER PRIMARY KEY, name TEXT",
    "HOST_INFO": "hostUid TEXT, hostName TEXT",
    "NPU_INFO": "id INTEGER, name TEXT",
    "RANK_DEVICE_MAP": "rankId INTEGER, deviceId INTEGER",
    "THREAD_INFO": "globalTid INTEGER, name INTEGER",
    "CANN_API": "startNs INTEGER, endNs INTEGER, type INTEGER, globalTid INTEGER, "
                "connectionId INTEGER PRIMARY KEY, name INTEGER",
    "TASK": "startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, "
            "globalTaskId INTEGER, globalPid INTEGER, taskType INTEGER, contextId INTEGER, "
            "streamId INTEGER, taskId INTEGER, modelId INTEGER",
    "COMPUTE_TASK_INFO": "name INTEGER, globalTaskId INTEGER PRIMARY KEY, blockNum INTEGER, "
                         "mixBlockNum INTEGER, taskType INTEGER, opType INTEGER, "
                         "inputFormats INTEGER, inputDataTypes INTEGER, inputShapes INTEGER, "
                         "outputFormats INTEGER, outputDataTypes INTEGER, outputShapes INTEGER, "
                         "attrInfo INTEGER, opState INTEGER, hf32Eligible INTEGER",
    "MSTX_EVENTS": "startNs INTEGER, endNs INTEGER, eventType INTEGER, rangeId INTEGER, "
                   "category INTEGER, message INTEGER, globalTid INTEGER, endGlobalTid INTEGER, "
                   "domainId INTEGER, connectionId INTEGER",
    "STEP_TIME": "id INTEGER, startNs INTEGER, endNs INTEGER, modelId INTEGER, deviceId INTEGER",
    "CPU_USAGE": "timestampNs INTEGER, cpuId INTEGER, usage NUMERIC",
    "HOST_MEM_USAGE": "timestampNs INTEGER, usage NUMERIC",
    "OMSP_COUNTER": "timestampNs INTEGER, deviceId INTEGER, series INTEGER, subIndex INTEGER, "
                    "value NUMERIC",
}

INDEXES: tuple[str, ...] = (
    "CREATE INDEX TaskIndex ON TASK(startNs, globalTaskId)",
)

ENUM_API_TYPE: tuple[tuple[int, str], ...] = (
    (20000, "acl"), (15000, "model"), (10000, "node"), (5500, "communication"),
    (5000, "runtime"), (50001, "op"), (50002, "queue"), (50003, "trace"), (50004, "mstx"),
)
ENUM_MSTX_EVENT_TYPE: tuple[tuple[int, str], ...] = (
    (0, "marker"), (1, "push/pop"), (2, "start/end"), (3, "marker_ex"),
)


def create_statements() -> list[str]:
    return [f"CREATE TABLE {name} ({cols})" for name, cols in TABLES.items()]


def insert(table: str, values: list[str]) -> str:
    """``INSERT [OR IGNORE] INTO table VALUES (...)``; each item is ``?`` or an SQL literal.
    Tables with a primary key ignore duplicate keys (counted by the writer)."""
    assert len(values) == len(TABLES[table].split(",")), table
    verb = "INSERT OR IGNORE" if "PRIMARY KEY" in TABLES[table] else "INSERT"
    return f"{verb} INTO {table} VALUES ({', '.join(values)})"
