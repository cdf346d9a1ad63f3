"""The analysis worker process itself (``_analysis_worker`` is the training process's side).

It reads one JSON line per job on its stdin: ``{"dir", "tmp", "static", "files", "analyse"}`` for
a window whose files it saves (``_window_files.save``: rank dir, raw trace moved in, profiler_info,
metadata), then analyses if asked; ``{"dir", "analyse": true}`` for a dir already saved.  What every
window of a profiler shares (its config, backend, notes, torch version) comes once, before that
profiler's first window reaching this worker, as ``{"static": key, "files"}``; a window's line
names it by ``static`` (null: ``files`` is whole).  The
worker itself runs at normal priority and does only short file work: it saves each window as its
line arrives (``saved|unsaved <dir>`` answered at once) and, under the dir's claim, stages a
hard-linked copy of it (``_analysis_stage``: right after the save when the child is idle, else
when the child takes the window, so a window the training process took over meanwhile is never
copied; the stage dir itself stays until the worker leaves); the analysis runs in its forked child
(``_analysis_child``), under SCHED_IDLE and nice 19, on that copy, holding no claim; the worker then publishes the analysed
copy (``ok|fail <dir>``; ``taken <dir>`` for one the training process analysed meanwhile, see
``_analysis_claim``: the copy is discarded).  So every claim the worker holds is held a few
milliseconds at normal priority: ``profile.stop()`` never ends a worker for holding a window.
SIGINT is ignored; at the end of its input it finishes the queued analyses and leaves.
"""

from __future__ import annotations

import collections
import os
import signal
import sys
import threading
from pathlib import Path
from typing import IO, Any

import orjson

from openmsprof.torch.profiler import _analysis_child, _analysis_claim, _analysis_stage

#: the static file parts kept (the training side's ``_worker_pipe.MAX_STATICS``, with room)
MAX_STATICS = 256
#: the umask the worker was started with (its analysing child runs under it again; the worker
#: itself runs under ``_window_files.EXACT_UMASK``: a window's dirs need no chmod)
_umask: int | None = None


class _Answers:
    """The answer pipe, shared by the saving and the publishing thread."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out, self.lock, self.open = out, threading.Lock(), True

    def __call__(self, status: str, path: Path) -> None:
        with self.lock:
            if not self.open:
                return
            try:
                self.out.write(f"{status} {os.fspath(path)}\n".encode("utf-8", "surrogateescape"))
                self.out.flush()
            except OSError:  # the training process is gone: finish the queue quietly
                self.open = False


class _Analyser:
    """The worker's end of its analysing child, fed one window at a time: the windows queued here
    that the training process analysed meanwhile are discarded at once, at normal priority, never
    handed to the child (which gets little CPU when the training process had to take over)."""

    def __init__(self, answer: _Answers, close: list[int]) -> None:
        jobs_r, jobs_w = os.pipe()
        res_r, res_w = os.pipe()
        worker = os.getpid()
        pid = os.fork()  # (before any thread starts)
        if pid == 0:
            code = 1
            try:
                for fd in (jobs_w, res_r, *close):  # the training process sees the worker's end alone
                    os.close(fd)
                if _umask is not None:
                    os.umask(_umask)
                _analysis_child.run(jobs_r, res_w, worker)
                code = 0
            finally:
                os._exit(code)
        os.close(jobs_r)
        os.close(res_w)
        self.pid, self.jobs_fd, self.answer = pid, jobs_w, answer
        self.results = os.fdopen(res_r, "rb")
        self.lock = threading.Lock()
        #: (dir, its staged copy or None, whether to stage it when the child takes it)
        self.queue: collections.deque[tuple[Path, Path | None, bool]] = collections.deque()
        self.current: tuple[Path, Path | None] | None = None
        self.finishing = self.in_place = self.killed = False

    def idle(self) -> bool:
        """The child would take a window sent now at once (so it is staged under the save's claim)."""
        with self.lock:
            return self.current is None and not self.queue and not self.in_place

    def send(self, path: Path, staged: Path | None, first: bool = False, later: bool = False) -> None:
        """Queue ``path`` (``staged``: its copy; ``later``: staged when the child takes it, so a
        window the training process analyses meanwhile is never copied)."""
        with self.lock:
            (self.queue.appendleft if first else self.queue.append)((path, staged, later))
            self._feed()

    def answered(self) -> None:
        """The child answered the current window."""
        with self.lock:
            self.current = None
            self._feed()

    def finish(self) -> None:
        """No more jobs from the training process: the child leaves once the queue is through; one
        analysing a window the training process analysed meanwhile is ended (its copy discarded)."""
        with self.lock:
            self.finishing = True
            self._feed()
            for job in [j for j in self.queue if (j[1] is not None or j[2]) and _analysis_claim.done(j[0])]:
                self.queue.remove(job)
                if job[1] is not None:
                    _discard(job[1])
                self.answer("taken", job[0])
            if self.current is not None and not self.queue and _analysis_claim.done(self.current[0]):
                self.killed = True
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except OSError:
                    pass

    def _feed(self) -> None:
        """Hand the child the next window not analysed yet (under ``lock``); close its input at the end."""
        while self.current is None and self.queue:
            path, staged, later = self.queue.popleft()
            if later and not self.in_place:
                todo, staged = _stage_now(path)
                if not todo:
                    self.answer("taken", path)
                    continue
            elif staged is not None and (_analysis_claim.done(path) or not path.is_dir()):  # (or removed)
                _discard(staged)
                self.answer("taken", path)
                continue
            line = orjson.dumps({"dir": os.fspath(path), "stage": os.fspath(staged) if staged else None}) + b"\n"
            view = memoryview(line)
            try:
                while view:  # (the child reads one line at a time: the pipe has room for it)
                    view = view[os.write(self.jobs_fd, view):]
            except OSError:
                return  # the child died: the worker leaves (``_publish_results``)
            self.current = (path, staged)
        if self.finishing and self.current is None and not self.queue and self.jobs_fd >= 0:
            os.close(self.jobs_fd)
            self.jobs_fd = -1


#: the stage dirs this worker used: kept while it runs (not made and removed again each window),
#: removed when it leaves (``_serve``); those of a killed worker go at the next ``sweep``
_roots: set[Path] = set()


def _discard(staged: Path) -> None:
    _roots.add(staged.parent)
    _analysis_stage.discard(staged, keep_root=True)


def _stage_now(path: Path) -> tuple[bool, Path | None]:
    """(still to analyse, its staged copy) of a queued window, staged under its claim when the
    child takes it; the copy is None where it cannot be staged (analysed in place).  Not to
    analyse: analysed already, removed, or being analysed by the training process (which holds
    a window's claim only to analyse it)."""
    try:
        if not path.is_dir():
            return False, None
        with _analysis_claim.claim(path) as mine:
            return (True, _analysis_stage.stage(path, os.getpid())) if mine else (False, None)
    except Exception:  # (no claim file: the child analyses in place and reports what fails)
        return True, None


def _save_jobs(lines: IO[bytes], answer: _Answers, analyser: _Analyser) -> None:
    """Save each window as its line arrives and stage it for the analysing child."""
    from openmsprof.torch.profiler import _window_files

    statics: dict[int, dict[str, Any]] = {}  # the profilers' static file parts, by key
    for raw in lines:
        try:
            job = orjson.loads(raw)
            if "dir" not in job and "static" in job:
                statics[int(job["static"])] = dict(job["files"])
                if len(statics) > MAX_STATICS:  # (the training side forgets them too, and resends)
                    del statics[next(iter(statics))]
                continue
            path = Path(job["dir"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            print(f"openmsprof: analysis worker: bad job line ({exc})", file=sys.stderr, flush=True)
            continue
        staged, todo, later = None, True, False
        try:  # (under the dir's claim: the training process may have taken the window over)
            with _analysis_claim.claim(path, wait_s=float("inf")) as todo_here:
                todo = bool(todo_here)
                if todo and "tmp" in job:
                    files = job["files"]
                    if job.get("static") is not None:  # (a key never sent: one line, "unsaved"; its temp trace stays for offline analyse)
                        if job["static"] not in statics:
                            raise ValueError(f"its profiler's config (key {job['static']!r}) was never sent")
                        files = {**statics[job["static"]], **files}
                    _window_files.save(path, Path(job["tmp"]), files, "worker", checked=True)
                if todo and job.get("analyse") and not analyser.in_place:
                    later = not analyser.idle()  # a queued window is staged when the child takes it
                    staged = None if later else _analysis_stage.stage(path, os.getpid())
        except Exception as exc:
            print(f"openmsprof: saving {path} failed: {exc}", file=sys.stderr, flush=True)
            answer("unsaved", path)
            continue
        if "tmp" in job:
            answer("saved", path)
        if job.get("analyse"):
            if todo:
                analyser.send(path, staged, later=later)
            else:
                answer("taken", path)


def _publish_results(analyser: _Analyser, answer: _Answers) -> None:
    """Publish what the child analysed and answer; the worker leaves if the child died."""
    for raw in analyser.results:
        res = orjson.loads(raw)
        path, staged, status = Path(res["dir"]), res["stage"], res["status"]
        done: bool | None = False
        if staged is not None:
            if status == "ok":
                try:
                    done = _analysis_stage.publish(Path(staged), path)
                except OSError as exc:
                    print(f"openmsprof: publishing {path} failed: {exc}", file=sys.stderr, flush=True)
                    done, status = False, "fail"
                if done is None:  # this file system cannot exchange dirs: analysed in place from now on
                    analyser.in_place = True
                    _discard(Path(staged))
                    analyser.answered()
                    analyser.send(path, None, first=True)
                    continue
                status = status if done or status == "fail" else "taken"
            if done:  # the copy's place now holds the raw tree it replaced: kept as a skeleton
                _roots.add(Path(staged).parent)
                _analysis_stage.recycle(Path(staged))
            else:
                _discard(Path(staged))
        answer(status, path)
        analyser.answered()
    with analyser.lock:
        left = [analyser.current] if analyser.current is not None else []
    if analyser.killed and left:  # ended at the end: its window was analysed by the training process
        path, staged = left[0]
        if staged is not None:
            _discard(staged)
        answer("taken", path)
    elif left:
        print("openmsprof: the analysing child of the worker died; its windows go back to the training process",
              file=sys.stderr, flush=True)
        os._exit(1)


def _serve(lines: IO[bytes], answers: IO[bytes]) -> None:
    answer = _Answers(answers)
    analyser = _Analyser(answer, close=[answers.fileno()])
    publisher = threading.Thread(target=_publish_results, args=(analyser, answer), name="openmsprof-publisher")
    publisher.start()
    try:
        _save_jobs(lines, answer, analyser)
    finally:
        analyser.finish()
        publisher.join()
        os.waitpid(analyser.pid, 0)
        _analysis_claim.tidy_all()  # (the claims files of the output roots, where no claim is held)
        for root in _roots:  # (one not empty, a copy the dying child left, ``sweep`` removes later)
            _analysis_stage.release(root)


def main() -> int:
    global _umask
    from openmsprof.torch.profiler import _window_files

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops training; queued windows finish
    _umask = os.umask(_window_files.EXACT_UMASK)
    _window_files.exact_umask = True
    answers = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing else may write into the answer pipe
    _serve(sys.stdin.buffer, answers)
    return 0
