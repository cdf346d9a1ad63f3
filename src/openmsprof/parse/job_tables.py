"""The job-level tables of ``msprof.db``, written once per import from the job's info and strings.

``META_DATA`` (schema version, job name, pid, host, base time, clock offset, the switches not
supported here, the records dropped at collection), ``SESSION_TIME_INFO``, the enum tables,
``HOST_INFO``, ``NPU_INFO``, ``RANK_DEVICE_MAP`` and ``STRING_IDS`` (docs/internals.md "Database").
"""

from __future__ import annotations

import socket

import orjson

from openmsprof.parse import schema
from openmsprof.parse.db_builder import DbWriter
from openmsprof.parse.jobinfo import JobInfo, device_names
from openmsprof.parse.strings import StringIds

__all__ = ["meta_rows", "unsupported_switches", "write_job_tables"]


def meta_rows(job: JobInfo, unsupported: list[str]) -> list[tuple[str, str]]:
    """``META_DATA``'s (name, value) rows."""
    major, minor, micro = schema.SCHEMA_VERSION.split(".")
    base = (job.start_wall_ns // 10**9) * 10**9 if job.start_wall_ns is not None else 0
    return [
        ("SCHEMA_VERSION", schema.SCHEMA_VERSION), ("SCHEMA_VERSION_MAJOR", major),
        ("SCHEMA_VERSION_MINOR", minor), ("SCHEMA_VERSION_MICRO", micro),
        ("OPENMSPROF_SCHEMA", str(schema.OPENMSPROF_SCHEMA)), ("JOB_NAME", job.root.name),
        ("PID", str(job.pid)), ("HOSTNAME", str(job.info.get("hostname") or socket.gethostname())),
        ("BASE_NS", str(base)), ("CLOCK_OFFSET_NS", str(job.offset_ns)),
        ("UNSUPPORTED", orjson.dumps(unsupported).decode()),
        ("DROPPED_RECORDS", orjson.dumps({"total": job.dropped, "by_thread_kind": job.drops}).decode()),
    ]


def unsupported_switches(job: JobInfo) -> list[str]:
    """The job config's ``unsupported`` list: what was asked for and is not supported here."""
    cfg = (job.info.get("openmsprof") or {}).get("config") or {}
    items = cfg.get("unsupported") if isinstance(cfg, dict) else None
    return [str(x) for x in items] if isinstance(items, list) else []


def write_job_tables(w: DbWriter, job: JobInfo, strings: StringIds) -> None:
    """Write every job-level table through ``w``."""
    info = job.info
    rank = info.get("rank_id", -1)
    rank = rank if isinstance(rank, int) else -1
    devices = device_names(job)
    w.write([
        (schema.insert("META_DATA", ["?", "?"]), iter(meta_rows(job, unsupported_switches(job)))),
        (schema.insert("SESSION_TIME_INFO", ["?", "?"]), iter([(job.start_wall_ns, job.end_wall_ns)])),
        (schema.insert("ENUM_API_TYPE", ["?", "?"]), iter(schema.ENUM_API_TYPE)),
        (schema.insert("ENUM_MSTX_EVENT_TYPE", ["?", "?"]), iter(schema.ENUM_MSTX_EVENT_TYPE)),
        (schema.insert("HOST_INFO", ["?", "?"]),
         iter([(str(info.get("hostUid", "")), str(info.get("hostname", "")))])),
        (schema.insert("NPU_INFO", ["?", "?"]), iter(sorted(devices.items()))),
        (schema.insert("RANK_DEVICE_MAP", ["?", "?"]), iter([(rank, d) for d in sorted(devices)])),
        (schema.insert("STRING_IDS", ["?", "?"]), iter(strings.rows())),
    ])
