"""The timeline passes' shared state: :class:`PassContext` (database, writer, id/time spelling,
window, names and thread tracks) and :class:`ThreadTids` (a track's drawn thread ids, allocated
on first use)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import Any

from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof.trace_layout import Style, thread_meta
from openmsprof.export.msprof.trace_writer import TraceWriter

__all__ = ["CHUNK", "PassContext", "ThreadTids"]

CHUNK = 20_000
_MASK32 = 0xFFFFFFFF


class _Names(dict):  # type: ignore[type-arg]
    """String id → JSON literal; unknown ids read ``"N/A"``."""

    def __missing__(self, key: object) -> str:
        return '"N/A"'


@dataclass
class PassContext:
    """Everything a pass needs: the database, the writer, id/time spelling and the window."""

    db: JobDB
    w: TraceWriter
    style: Style
    lo: int
    hi: int
    names: dict[Any, str] = field(default_factory=dict)
    threads: dict[int, str] = field(default_factory=dict)
    api_pid: int = 0
    api_tids: dict[int, int] = field(default_factory=dict)
    stream_tids: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.names = _Names(self.db.json_strings)
        if "THREAD_INFO" in self.db.tables:
            self.threads = {g: self.db.text(n, "") for g, n in
                            self.db.conn.execute("SELECT globalTid, name FROM THREAD_INFO")}

    def chunks(self, sql: str, params: tuple[Any, ...]) -> Iterator[Iterable[Any]]:
        """The query's rows in chunks of up to ``CHUNK``, each an iterator to walk once: rows
        come straight from the cursor (no list; each row is used while still in cache)."""
        cur = iter(self.db.stream(sql, params))
        for first in cur:
            yield chain((first,), islice(cur, CHUNK - 1))

    def thread_tracks(self, pid: int, sort_index: int) -> ThreadTids:
        """globalTid → drawn tid for a track's threads, allocated on first use."""
        return ThreadTids(self, pid, sort_index)


class ThreadTids(dict):  # type: ignore[type-arg]
    """globalTid → drawn tid of one track; a new thread gets the next ``k`` of the track (shared
    with its overflow lanes through ``ks``) and its metadata is written on first use, so no
    ``SELECT DISTINCT`` pass over the table is needed."""

    def __init__(self, ctx: PassContext, pid: int, sort_index: int) -> None:
        super().__init__()
        self.ctx, self.pid, self.sort_index = ctx, pid, sort_index
        self.labels: dict[int, str] = {}  # drawn tid → thread label (for overflow lane names)
        self.ks = [0]

    def __missing__(self, g: int) -> int:
        self.ks[0] += 1
        real = g & _MASK32
        tid = self[g] = self.ctx.style.tid(self.sort_index, self.ks[0], real)
        name = self.ctx.threads.get(g, "")
        label = f"Thread {real} ({name})" if name else f"Thread {real}"
        proc = g >> 32
        if proc and proc != self.ctx.db.pid:  # a process forked during the session: its own rows
            label = f"Process {proc} {label}"
        self.labels[tid] = label
        thread_meta(self.ctx.w, self.pid, tid, label, real)
        return tid
