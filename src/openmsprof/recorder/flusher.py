"""The background flusher: drains per-thread buffers into fixed-size raw records.

Runs in its own daemon thread and wakes at least every ``interval`` seconds (0.2 s by default),
sooner when a thread's list would fill at its last rate; a producer whose marker list is full
drains it itself (:meth:`Flusher.try_drain`).  Records are encoded by
:class:`~openmsprof.recorder.encode.Encoder`; string entries are written before the records
that use them.  Any error stops collection with a warning; the application is never disturbed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from openmsprof.recorder import buffers, pymarkers, threads
from openmsprof.recorder.datadir import DataDir
from openmsprof.recorder.encode import Encoder
from openmsprof.recorder.records import (
    GENERIC,
    Kind,
)

log = logging.getLogger("openmsprof")

_MASK32 = 0xFFFFFFFF
#: Longest wait (s) of the final drain for a lock that an interrupted producer may have left held.
STUCK_S = 2.0
#: Records encoded per write: bounds the work between two writes of one busy thread.
CHUNK = 1 << 15
#: Encoded marker chunks (<= CHUNK records each) waiting for the writer: a producer that finds
#: this many queued drops instead of taking its list (memory stays bounded if writes stall).
QUEUE_CHUNKS = 4
#: The same for the main thread, which leaves the writing of what it takes to the flusher thread
#: (it waits for the GIL meanwhile): more chunks wait for it.
MAIN_QUEUE_CHUNKS = 8


class Flusher(Encoder):
    """Owns the encoding and the writer thread of one session."""

    def __init__(self, host: DataDir, device_dir: Callable[[int], DataDir], interval: float = 0.2,
                 on_written: Callable[[int], None] | None = None,
                 on_cycle: Callable[[], None] | None = None) -> None:
        self.host = host
        self.device_dir = device_dir
        self.interval = interval
        self.on_written = on_written
        self.on_cycle = on_cycle
        #: Source name of marker records written here ("MstxPy" beside the native core's "Mstx").
        self.mstx_source = "Mstx"
        #: CPU time spent draining (thread CPU of whoever drained).
        self.cpu_ns = 0
        self.records = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one drain at a time (flusher vs. final drain)
        self._known_threads: set[int] = set()
        self._closed = False
        #: (tid, thread name, encoded records, count) taken from marker lists, not yet written
        self._queue: deque[tuple[int, str, memoryview, int, np.ndarray]] = deque()
        #: work arrays (5 x CHUNK int64) whose chunk was written: reused, so their pages stay
        #: mapped (a fresh 1 MiB array page-faults in every cycle, which doubled the encode time)
        self._spare: list[np.ndarray] = []
        self.cycle_seconds = 0.0
        self._most = 0  # most records one thread had buffered at the last drain
        #: no marker of this session can be older (the pymarkers are enabled after this)
        self.ts_lo = max(0, time.perf_counter_ns() - 10**10)

    # -- thread control -----------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="openmsprof-flusher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        buffers.WAKE.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        # a producer interrupted by a raising signal handler right after taking the lock may
        # have left it held: after a bounded wait the final drain goes on (producers are off)
        got = self._lock.acquire(timeout=STUCK_S)
        try:
            self._drain(wait=True)
            self._closed = True  # the session closes the files next: producers stop helping
            self._spare.clear()  # the session object may outlive its collection
        finally:
            if got:
                self._lock.release()

    def _run(self) -> None:
        threads.background_policy()  # its wakes do not preempt the application's threads
        wait = self.interval
        last = time.monotonic()
        while True:
            buffers.WAKE.wait(wait)  # a producer with a full list wakes us early
            buffers.WAKE.clear()
            if self._stop.is_set():
                return
            with self._lock:
                n = self._drain()
            if self.error is not None:
                return
            pymarkers.refresh()  # a new slot epoch before a cached marker's time could overflow
            if self.on_cycle is not None:
                try:
                    self.on_cycle()
                except Exception as exc:  # pragma: no cover - defensive
                    log.warning("openmsprof: flusher hook failed: %s", exc)
            # Come back before the busiest thread's list can fill at its last rate (a full list
            # drops records; producers only wake us when it is full already).
            now = time.monotonic()
            rate = self._most / max(now - last, 1e-3)
            last = now
            wait = 0.0 if n >= CHUNK else min(self.interval, max(0.002, 0.4 * buffers.MARK_CAP / max(rate, 1.0)))

    # -- one cycle ------------------------------------------------------------------------
    def try_drain(self) -> bool:
        """A producer whose marker list is full takes it on its own thread (it holds the GIL
        the flusher thread would wait for) and writes it when no write is under way (else the
        writer under way or the next cycle does).  The main thread only takes it and wakes the
        flusher thread, which writes it.  Returns False when it could not (the queue of taken
        records is full): the caller drops."""
        buf = buffers.TLS.buf
        # ``with`` on the locks, not acquire() then try: a signal handler may raise in the
        # producer's thread after any call, and a lock acquired by a call would stay held; a
        # ``with`` takes it inside the protected region.  A list the flusher thread is taking
        # right now is waited for (the wait releases the GIL the flusher's take needs; dropping
        # instead lost everything marked until the flusher got the GIL back, ~5 ms flat out).
        main = threading.current_thread() is threading.main_thread()
        if (self._closed or self.error is not None
                or len(self._queue) >= (MAIN_QUEUE_CHUNKS if main else QUEUE_CHUNKS)):
            return False
        c0 = time.thread_time_ns()
        with buf.lock:
            self._take_marks(buf)
        if main:
            # Python runs signal handlers on the main thread only, between any two calls: one
            # that raises inside a write here would lose a taken chunk (or tear a record), and
            # its exception would look like a write error.  The take above leaves no such gap
            # (the list's prefix leaves it and the queue gets its records with no call between).
            self.cpu_ns += time.thread_time_ns() - c0
            buffers.WAKE.set()
            return True
        if not self._lock.locked():
            with self._lock:
                try:
                    if not self._closed:
                        self._write(self._write_queue())
                except Exception as exc:  # never let profiling kill the application
                    self.error = exc
                    log.warning("openmsprof: collection stopped: %s", exc)
        self.cpu_ns += time.thread_time_ns() - c0  # approximate under races; a cost figure
        return True

    def _take_marks(self, buf: buffers.ThreadBuffer) -> int:
        """Move ``buf``'s marker records (its runs, then its current list: one int each) into
        the write queue, encoded (the caller holds ``buf.lock``).  Returns the number of
        records.

        The runs and the current list's items are copied in one step with no call between
        (no thread switch, no signal handler), encoded, and only then removed from the lists
        and queued, again with no call between: a handler that raises anywhere in here leaves
        every record in its list for next time, none lost, none twice.  A list both in the
        runs and current (its producer was rotating it) is taken once, as the current list."""
        cur = buf.marks
        runs = buf.runs
        lists = runs[:]
        head = cur[:]
        k = len(lists)
        if cur is buffers.FULL:
            head = []
        ints: list[int] = []
        seen: set[int] = set()
        for lst in lists:
            if lst is not cur and id(lst) not in seen:
                seen.add(id(lst))
                ints += lst
        ints += head
        if not ints:
            del runs[:k]
            return 0
        taken: list[tuple[int, str, memoryview, int, np.ndarray]] = []
        bad = done = 0
        for start in range(0, len(ints), CHUNK):
            try:
                out = self._spare.pop()
            except IndexError:
                out = np.empty(5 * CHUNK, dtype="<i8")  # records, then the slots they come from
            data, n, dropped = self._encode_marks(ints if len(ints) <= CHUNK else ints[start:start + CHUNK],
                                                  out, buf.tid)
            taken.append((buf.tid, buf.name, data, n, out))
            bad += dropped
            done += n
        nh = len(head)
        del runs[:k]
        del cur[:nh]
        self._queue.extend(taken)
        buf.drops[0] += bad  # impossible records: counted for the thread as kind "invalid"
        return done

    def _write_queue(self) -> int:
        """Write the queued marker records (under ``_lock``): the string entries they use
        first.  Returns the bytes written."""
        host, q = self.host, self._queue
        if not q:
            return 0
        for tid, name, _data, _k, _out in list(q):
            if tid not in self._known_threads:
                self._known_threads.add(tid)
                host.out("Thread").extend(GENERIC.pack(Kind.THREAD, 0, 0, tid & _MASK32, 0, 0,
                                                       host.strings.intern(name), 0))
        written = host.flush()  # the string entries (and thread names) first
        while q:  # then each chunk as it is: no copy into one buffer
            _tid, _name, data, k, out = q.popleft()
            written += host.write_records(self.mstx_source, data)
            data.release()
            self.records += k
            if len(self._spare) < QUEUE_CHUNKS:
                self._spare.append(out)
        return written

    def _write(self, written: int) -> None:
        if written and self.on_written is not None:
            self.on_written(written)

    def drain(self) -> int:
        """Move everything buffered so far to disk; returns the number of records."""
        with self._lock:
            return self._drain(wait=True)

    def _drain(self, wait: bool = False) -> int:
        """One cycle (under ``_lock``).  A marker list its producer is taking right now is
        skipped unless ``wait`` (the producer writes it, or the next cycle does)."""
        if self.error is not None:
            return 0
        t0 = time.perf_counter()
        c0 = time.thread_time_ns()
        n = most = marks_total = 0
        written = 0
        dirs: list[DataDir] = [self.host]
        try:
            for buf in buffers.snapshot():
                items = buf.items
                count = len(items)
                held = buffers.held_marks(buf)
                if not (count or held):
                    continue
                most = max(most, count, held)
                marks_total += held
                if count and buf.tid not in self._known_threads:
                    self._known_threads.add(buf.tid)
                    h = self.host
                    h.out("Thread").extend(GENERIC.pack(Kind.THREAD, 0, 0, buf.tid & _MASK32, 0, 0,
                                                        h.strings.intern(buf.name), 0))
                if held:
                    got = buf.lock.acquire(timeout=STUCK_S) if wait else buf.lock.acquire(blocking=False)
                    if got or wait:  # else its producer takes it; wait: the final drain goes on
                        try:
                            self._take_marks(buf)
                        finally:
                            if got:
                                buf.lock.release()
                    if len(self._queue) >= QUEUE_CHUNKS // 2:
                        written += self._write_queue()
                while count:
                    take = min(count, CHUNK)
                    chunk = items[:take]
                    del items[:take]
                    count -= take
                    self._encode_each(chunk, buf.tid, dirs, buf.drops)
                    n += take
                    # write each piece at once: tuples encode slowly, and a kill must
                    # not lose what was already encoded
                    for d in dirs:
                        written += d.flush()
            written += self._write_queue()
            for d in dirs:
                written += d.flush()
            buffers.drop_dead_empty()
        except BaseException as exc:  # never let profiling kill the application
            self.error = exc
            log.warning("openmsprof: collection stopped: %s", exc)
            return n
        self.records += n
        self._most = most
        self.cycle_seconds += time.perf_counter() - t0
        self.cpu_ns += time.thread_time_ns() - c0
        self._write(written)
        return n + marks_total
