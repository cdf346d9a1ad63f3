"""Raw record chunks of one data directory -> database rows (vectorised with numpy).

:class:`DirConverter` is fed GENERIC_DTYPE chunks in file order and returns
``(insert statement, rows)`` batches; pairing state is carried between chunks, so memory is
bounded by the chunk size plus the ranges open at any moment.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openmsprof.parse import schema
from openmsprof.parse.api_groups import ApiGroups
from openmsprof.parse.pairing import PushPopPairer, RangePairer
from openmsprof.parse.record_checks import impossible, valid_records
from openmsprof.parse.strings import LocalMap, StringIds
from openmsprof.recorder.rawfile import COUNTER_DTYPE, GENERIC_DTYPE, TASKINFO_DTYPE
from openmsprof.recorder.records import API_LEVEL_CODES, EXECUTOR_NAMES, NO_MODEL, Executor, Series

Batch = tuple[str, Iterator[Any] | np.ndarray]
INV = schema.INVALID
_API_TYPES = np.array([int(x) for x in API_LEVEL_CODES], dtype=np.int64)
_KNOWN_KINDS = np.zeros(256, dtype=bool)
_KNOWN_KINDS[1:13] = True


@dataclass
class JobCounters:
    """Job-wide id sequences and tallies shared by every directory."""

    next_task: int = 0
    next_connection: int = schema.FRESH_CONNECTION_BASE
    last_mono: int = -(1 << 62)
    counts: dict[str, int] = field(default_factory=dict)
    #: raw file name → reason → records dropped for an impossible value (:func:`impossible`)
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, key: str, n: int) -> None:
        if n:
            self.counts[key] = self.counts.get(key, 0) + n

    def add_impossible(self, where: str, chunk: np.ndarray) -> np.ndarray:
        """Count ``chunk``'s impossible records by file and reason; returns the valid mask."""
        ok = np.ones(len(chunk), dtype=bool)
        per = self.dropped.setdefault(where, {})
        for reason, bad in impossible(chunk).items():
            n = int(np.count_nonzero(bad & ok))  # each record counted once, under its first reason
            if n:
                per[reason] = per.get(reason, 0) + n
            ok &= ~bad
        return ok

    def impossible_lines(self) -> list[str]:
        """One line per raw file with dropped records: how many, where, and why."""
        return [f"{sum(per.values())} × record with an impossible value (dropped) in {where}: "
                + ", ".join(f"{why} {n}" for why, n in sorted(per.items()))
                for where, per in sorted(self.dropped.items()) if per]


def _objmat(*cols: np.ndarray) -> np.ndarray:
    """Columns of mixed types (ints and floats) as one (rows, columns) matrix of Python numbers:
    bound ``ROWS_PER_STATEMENT`` rows per statement like :func:`_mat` (the values a statement
    per row would bind: ``tolist`` makes exact Python ints and floats)."""
    out = np.empty((len(cols[0]), len(cols)), dtype=object)
    for j, c in enumerate(cols):
        out[:, j] = c.tolist()
    return out


def _mat(*cols: np.ndarray) -> np.ndarray:
    """Integer columns as one (rows, columns) int64 matrix (bulk multi-row insert)."""
    out = np.empty((len(cols[0]), len(cols)), dtype=np.int64)
    for j, c in enumerate(cols):
        out[:, j] = c
    return out


class DirConverter:
    def __init__(self, device_id: int, pid: int, offset_ns: int, strings: StringIds,
                 smap: LocalMap, job: JobCounters, api_groups: ApiGroups | None = None) -> None:
        self.dev, self.pid, self.off = device_id, pid, offset_ns
        #: the raw file being fed (named in the impossible-value warning)
        self.where = f"device {device_id}" if device_id >= 0 else "host"
        #: acl_statistic's groups, gathered from the API rows written (:mod:`api_groups`)
        self.api_groups = api_groups
        self.gpid = pid << 32
        self.s, self.smap, self.job = strings, smap, job
        self.pushes = PushPopPairer()
        self.ranges = RangePairer()
        self.task_carry: np.ndarray | None = None
        self.steps: dict[tuple[int, int], int] = {}
        self.last_total_kb = 0.0
        self.end_mono: int | None = None
        self._open_pushes = self._open_starts = np.zeros(0, dtype=GENERIC_DTYPE)
        self.ex_ids = np.array([strings.intern(EXECUTOR_NAMES[Executor(k)]) for k in range(3)], dtype=np.int64)
        na, d, p = strings.na, device_id, pid
        self.sql_api = schema.insert("CANN_API", ["?"] * 6)
        self.sql_task = schema.insert("TASK", ["?", "?", str(d), "?", "?", str(p), "?", str(INV), "?", "?", "?"])
        self.sql_info = schema.insert("COMPUTE_TASK_INFO", ["?", "?", str(INV), str(INV), "?", "?", str(na), "?", "?",
                                                            str(na), "?", "?", str(na), str(na), str(na)])
        self.sql_mstx = schema.insert("MSTX_EVENTS", ["?", "?", "?", "?", str(na), "?", "?", "?", "?", "-1"])
        self.sql_step = schema.insert("STEP_TIME", ["?", "?", "?", "?", str(d)])
        self.sql_counter = schema.insert("OMSP_COUNTER", ["?", str(d), "?", "?", "?"])
        self.sql_cpu = schema.insert("CPU_USAGE", ["?", "?", "?"])
        self.sql_mem = schema.insert("HOST_MEM_USAGE", ["?", "?"])
        self.sql_thread = schema.insert("THREAD_INFO", ["?", "?"])

    def _gtid(self, tid: np.ndarray) -> np.ndarray:
        return tid.astype(np.int64) | self.gpid

    def feed(self, chunk: np.ndarray) -> list[Batch]:
        if self.task_carry is not None:
            chunk = np.concatenate([self.task_carry, chunk])
            self.task_carry = None
        ok = valid_records(chunk)
        if not ok.all():
            chunk = chunk[self.job.add_impossible(self.where, chunk)]
            if not len(chunk):
                return []
        kind = chunk["kind"]
        job = self.job
        timed = (kind != 8) & (kind != 11)
        if timed.any():
            job.last_mono = max(job.last_mono, int(chunk["t0"][timed].max()))
        job.add("unknown record kind", int(np.count_nonzero(~_KNOWN_KINDS[kind])))
        out: list[Batch] = []
        present = np.bincount(kind, minlength=256)
        if present[6]:
            out.append(self._api(chunk[kind == 6]))
        if present[7] or present[8]:
            if kind[-1] == 7:  # its TASK_INFO may start the next chunk
                self.task_carry = chunk[-1:].copy()
                chunk, kind = chunk[:-1], kind[:-1]
            out.extend(self._tasks(chunk, kind))
        if present[1]:
            m = chunk[kind == 1]
            g = self._gtid(m["tid"])
            out.append((self.sql_mstx, _mat(m["t0"] + self.off, m["t0"] + self.off, m["aux"],
                                             np.full(len(m), INV), self.smap.map(m["a"]), g, g,
                                             self.smap.map(m["b"], self.smap.domain))))
        if present[2] or present[3]:
            push, pop = self.pushes.feed(chunk[(kind == 2) | (kind == 3)])
            if len(push):
                out.append(self._ranges(push, pop, 1))
        if present[4] or present[5]:
            st, en = self.ranges.feed(chunk[kind == 4], chunk[kind == 5])
            if len(st):
                out.append(self._ranges(st, en, 2))
        if present[10]:
            out.extend(self._counters(chunk[kind == 10].view(COUNTER_DTYPE)))
        if present[9] or present[12]:
            out.extend(self._steps(chunk[(kind == 9) | (kind == 12)]))
        if present[11]:
            t = chunk[kind == 11]
            out.append((self.sql_thread, _mat(self._gtid(t["tid"]), self.smap.map(t["a"]))))
        return out

    def _api(self, a: np.ndarray) -> Batch:
        aux = a["aux"].astype(np.int64)
        bad = aux >= len(_API_TYPES)
        if bad.any():
            self.job.add("API record with an unknown level", int(np.count_nonzero(bad)))
            aux = np.where(bad, len(_API_TYPES) - 1, aux)
        conn = a["b"].astype(np.int64)
        zero = conn == 0
        nz = int(np.count_nonzero(zero))
        if nz:
            conn[zero] = self.job.next_connection + np.arange(nz)
            self.job.next_connection += nz
        start, end, typ = a["t0"] + self.off, a["t1"] + self.off, _API_TYPES[aux]
        gtid, name = self._gtid(a["tid"]), self.smap.map(a["a"])
        if self.api_groups is not None:
            self.api_groups.add(gtid, typ, name, start, end)
        return (self.sql_api, _mat(start, end, typ, gtid, conn, name))

    def _tasks(self, chunk: np.ndarray, kind: np.ndarray) -> list[Batch]:
        ti = np.flatnonzero(kind == 7)
        nxt = np.minimum(ti + 1, len(chunk) - 1)
        has_info = (kind[nxt] == 8) & (chunk["b"][ti] == chunk["tid"][nxt]) & (nxt > ti)
        self.job.add("TASK_INFO without its TASK", int(np.count_nonzero(kind == 8)) - int(np.count_nonzero(has_info)))
        t = chunk[ti]
        info = chunk[nxt].view(TASKINFO_DTYPE)
        n = len(t)
        gid = self.job.next_task + np.arange(n, dtype=np.int64)
        self.job.next_task += n
        sm = self.smap
        na_tab = sm.na
        ex = np.where(has_info, info["aux"], 0).astype(np.int64)
        ttype = self.ex_ids[np.minimum(ex, 2)]
        conn = np.where(has_info & (info["connection_id"] != 0), info["connection_id"].astype(np.int64), -1)
        model = t["aux"].astype(np.int64)
        model[model == NO_MODEL] = INV

        def col(name: str) -> np.ndarray:
            return np.where(has_info, sm.map(info[name], na_tab), self.s.na)

        name = sm.map(t["a"])
        task = (self.sql_task, _mat(t["t0"] + self.off, t["t1"] + self.off, conn, gid, ttype,
                                     t["tid"], t["b"], model))
        cti = (self.sql_info, _mat(name, gid, ttype, col("op_type"), col("in_dtypes"),
                                    col("in_shapes"), col("out_dtypes"), col("out_shapes")))
        return [task, cti]

    def _ranges(self, st: np.ndarray, en: np.ndarray | None, etype: int) -> Batch:
        """MSTX rows for PUSH/POP (etype 1) or RANGE (2) pairs; ``en`` None: still open."""
        g0 = self._gtid(st["tid"])
        if en is None:
            end = self.job.last_mono if self.end_mono is None else self.end_mono
            t1: Any = np.full(len(st), end, dtype=np.int64) + self.off
            g1 = g0
        else:
            t1, g1 = en["t0"] + self.off, self._gtid(en["tid"])
        rid = st["t1"] if etype == 2 else np.full(len(st), INV)
        return (self.sql_mstx, _mat(st["t0"] + self.off, t1, np.full(len(st), etype), rid,
                                     self.smap.map(st["a"]), g0, g1, self.smap.map(st["b"], self.smap.domain)))

    def _counters(self, c: np.ndarray) -> list[Batch]:
        ts = c["ts"] + self.off
        series, sub, val = c["a"], c["b"], c["value"]
        out: list[Batch] = [(self.sql_counter, _objmat(ts, series, sub, val))]
        if self.dev >= 0:
            return out
        cpu = series == Series.SYS_CPU_PERCENT
        if cpu.any():
            out.append((self.sql_cpu, _objmat(ts[cpu], sub[cpu].astype(np.int64) - 1, val[cpu])))
        total, used = series == Series.SYS_MEM_TOTAL_KB, series == Series.SYS_MEM_USED_KB
        if used.any():
            # the latest total at or before each "used" sample (the sampler writes total first)
            pos = np.where(total, np.arange(len(c)), -1)
            np.maximum.accumulate(pos, out=pos)
            tot = np.where(pos >= 0, val[np.maximum(pos, 0)], self.last_total_kb)[used]
            pct = np.where(tot > 0, val[used] * 100.0 / np.where(tot > 0, tot, 1.0), 0.0)
            out.append((self.sql_mem, _objmat(ts[used], pct)))
        if total.any():
            self.last_total_kb = float(val[total][-1])
        return out

    def _steps(self, recs: np.ndarray) -> list[Batch]:
        rows = []
        t0s, t1s = (recs["t0"] + self.off).tolist(), (recs["t1"] + self.off).tolist()
        for k, tag, t0, t1, a, b in zip(recs["kind"].tolist(), recs["aux"].tolist(), t0s, t1s,
                                        recs["a"].tolist(), recs["b"].tolist(), strict=True):
            if k == 12:
                rows.append((a, t0, t1, INV))
                continue
            model = INV if b in (NO_MODEL, INV) else b
            if tag == 0:
                if (a, model) in self.steps:
                    self.job.add("step start without its end", 1)
                self.steps[(a, model)] = t0
            else:
                start = self.steps.pop((a, model), None)
                if start is None:
                    self.job.add("step end without its start", 1)
                else:
                    rows.append((a, start, t0, model))
        return [(self.sql_step, iter(rows))] if rows else []

    def finish(self, end_mono: int | None) -> list[Batch]:
        """End of the directory's data: flush carried records, count what stayed open.  Open
        ranges are written by :meth:`close_open` once every directory has been read."""
        self.end_mono = end_mono
        out: list[Batch] = []
        if self.task_carry is not None:
            carry, self.task_carry = self.task_carry, None
            out.extend(self._tasks(carry, carry["kind"]))
        self._open_pushes = self.pushes.finish()
        self._open_starts, orphan_ends = self.ranges.finish()
        self.job.add("POP without a PUSH", self.pushes.orphan_pops)
        self.job.add("RANGE_END without its start", orphan_ends)
        self.job.add("unclosed marker range (ended at the session end, or the last record after a crash)",
                     len(self._open_pushes) + len(self._open_starts))
        self.job.add("step start without its end", len(self.steps))
        self.steps.clear()
        self.job.add("string id not in the string table", self.smap.bad)
        return out

    def close_open(self) -> list[Batch]:
        """Rows for ranges never closed: they end at end_info's time, else the job's last record."""
        out: list[Batch] = []
        if len(self._open_pushes):
            out.append(self._ranges(self._open_pushes, None, 1))
        if len(self._open_starts):
            out.append(self._ranges(self._open_starts, None, 2))
        return out
