"""The device pass of a timeline file in a forked child process, so that it runs on the second
core while the parent writes markers, APIs and counters.

The child opens its own read-only connection and writes its events (tasks, flow ends, steps)
as a raw comma-separated body into a private temp file, and — fused mode — the flows' ``s``
ends into a second one; it reports event counts and metadata events through a pipe.  The parent
appends the bodies to its current slice (the ``s`` ends only if no API ended up on an overflow
lane; else it writes them itself).  A disk-full or path error in the child is raised again in
the parent; any other failure (a killed child included) makes the parent run the pass itself,
so the export never depends on the fork.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from openmsprof.config.errors import PathError, StorageError
from openmsprof.export.fork_worker import ForkWorker
from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof import trace_device, trace_passes
from openmsprof.export.msprof.naming import timeline_file
from openmsprof.export.msprof.trace_writer import TraceWriter
from openmsprof.fileio import fs

_ERRORS: dict[str, type[Exception]] = {"StorageError": StorageError, "PathError": PathError}


class BodySink(TraceWriter):
    """A TraceWriter stand-in for the child: events go to a raw body file, metadata to a list."""

    def __init__(self, path: Path, shown: Path) -> None:
        self.path, self.shown = path, shown
        self.meta: list[bytes] = []
        self.events = 0
        self._fd: int | None = fs.open_new(path, append=False)
        self._started = False

    def add_meta(self, event: dict[str, object]) -> None:
        self.meta.append(orjson.dumps(event))

    def write_events(self, chunk: list[str], count: int | None = None) -> None:
        if not chunk or self._fd is None:
            return
        n = len(chunk) if count is None else count
        if self._started:
            chunk.insert(0, "")  # a leading separator without copying the chunk text
        try:
            fs.write_all(self._fd, ",".join(chunk).encode())
        except StorageError as exc:
            reason = str(exc).rsplit(": ", 1)[-1]
            raise StorageError(f"disk full while writing {str(self.shown)!r}: {reason}; "
                               "partial file removed") from None
        self._started = True
        self.events += n

    def finish(self) -> list[Path]:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        return [self.path]

    def abort(self) -> None:
        self.finish()
        self.path.unlink(missing_ok=True)


class DeviceChild:
    """A forked child running :func:`trace_device.write_device` for one device."""

    def __init__(self, worker: ForkWorker, body: Path, starts: Path | None) -> None:
        self.worker, self.body, self.starts = worker, body, starts

    @property
    def fused(self) -> bool:
        """Whether the child writes the flows' ``s`` ends too."""
        return self.starts is not None

    @classmethod
    def start(cls, ctx: trace_passes.PassContext, dev: int, out_dir: Path,
              fused: bool = False) -> DeviceChild | None:
        """Fork the child.  ``fused`` needs every API thread's tid in ``ctx`` already
        (:func:`trace_passes.prepare_apis` with ``all_threads``).  None: no child (the fork
        policy refused, or the fork failed)."""
        ctx.db.json_strings  # noqa: B018 - the caches, built once before the fork, for both
        tmp = f"{os.getpid()}.tmp"
        body = out_dir / f".msprof_{dev}.body.{tmp}"
        starts = out_dir / f".msprof_{dev}.starts.{tmp}" if fused else None
        for path in (body, starts):
            if path is not None:
                path.unlink(missing_ok=True)
        worker = ForkWorker.start(lambda w: _child_main(ctx, dev, body, starts, w))
        return None if worker is None else cls(worker, body, starts)

    def finish(self, w: TraceWriter, take_starts: bool = True) -> bool:
        """Wait for the child and merge its output into ``w`` (its ``s`` ends only when
        ``take_starts``).  False: the child failed for a reason other than storage, nothing was
        merged, and the caller runs the pass itself."""
        data, _code = self.worker.result()
        try:
            msg = orjson.loads(data) if data else {"error": "", "message": "child died"}
            if not isinstance(msg, dict):
                raise ValueError("bad message")
        except (orjson.JSONDecodeError, ValueError):
            msg = {"error": "", "message": "unreadable child report"}
        try:
            if "error" in msg:
                exc = _ERRORS.get(str(msg["error"]))
                if exc is not None:
                    raise exc(str(msg["message"]))
                return False
            for m in msg["meta"]:
                w.add_raw_meta(m.encode())
            w.append_body(self.body, int(msg["events"]))
            if self.starts is not None and take_starts:
                w.append_body(self.starts, int(msg["starts"]))
            return True
        finally:
            self._remove()

    def cancel(self) -> None:
        """Stop the child (the parent failed) and remove its body files."""
        self.worker.kill()
        self._remove()

    def _remove(self) -> None:
        for path in (self.body, self.starts):
            if path is not None:
                path.unlink(missing_ok=True)


def _child_main(parent: trace_passes.PassContext, dev: int, body: Path, starts: Path | None,
                fd: int) -> int:  # pragma: no cover - runs in the child
    msg: dict[str, object]
    try:
        db = parent.db
        own = JobDB(db.path, db.job)
        own._strings, own._json, own._streams = db._strings, db._json, db._streams  # inherited
        shown = body.parent / timeline_file(dev)
        sink = BodySink(body, shown)
        s_sink = BodySink(starts, shown) if starts is not None else None
        ctx = trace_passes.PassContext(own, sink, parent.style, parent.lo, parent.hi)
        # a plain copy: an unknown thread must fail here, not write into the parent's file
        ctx.api_pid, ctx.api_tids = parent.api_pid, dict(parent.api_tids)
        trace_device.write_device(ctx, dev, s_sink)
        sink.finish()
        msg = {"events": sink.events, "meta": [m.decode() for m in sink.meta]}
        if s_sink is not None:
            s_sink.finish()
            msg["starts"] = s_sink.events
    except (StorageError, PathError) as exc:
        msg = {"error": type(exc).__name__, "message": str(exc)}
    except BaseException as exc:  # reported; the parent then runs the pass itself
        msg = {"error": "", "message": repr(exc)}
    fs.write_all(fd, orjson.dumps(msg))
    return 0
