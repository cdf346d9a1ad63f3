"""One local worker process of the rank pool (:mod:`.rank_pool` is the parent's side): it takes
one rank at a time from its pipe, parses it into the store and answers with one message.

The answer is ``("ok", rank, partial)`` without the small tables' bytes (the parent reads them
from the same store): a message that fits one atomic pipe write, so a worker killed while it
answers leaves either the whole message or none.  A parse that raises answers
``("error", rank, exception)``; the parent raises it.  The worker ignores SIGINT (the parent
handles Ctrl-C and ends its workers), runs no signal handler of the process it was forked from
(default actions), dies with its parent (``PR_SET_PDEATHSIG``), closes the
pipe ends of its siblings it inherited by fork, and leaves on end of file or ``None``.

Test-only: ``OPENMSPROF_TEST_WORKER_SIGNAL="RANKS:FILE:ACTION"`` (e.g. ``"1,3:communication.json:SIGKILL"``)
makes a worker parsing one of RANKS act when the parse opens a file named FILE: ACTION is a
signal it sends itself (a real death, or a stop, at a controlled point in the middle of a parse),
``sleepN`` (sleep N seconds there: a slow rank) or ``hang`` (sleep for ever, alive: a hung
parse), for tests/cluster/.  It installs an audit hook in the worker only; it is never set in
production.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from openmsprof.cluster.discover import RankSource
from openmsprof.cluster.store import parse_rank

__all__ = ["SIGNAL_ENV", "parse_for_pool", "worker_main"]

SIGNAL_ENV = "OPENMSPROF_TEST_WORKER_SIGNAL"


def parse_for_pool(src: RankSource, store: Path, kernels: bool) -> dict[str, Any]:
    """``parse_rank`` in a local worker, its result without the small tables' bytes (the parent
    reads them from the same store): a result that fits one atomic pipe write."""
    partial = parse_rank(src, store, kernels=kernels)
    partial.pop("small", None)
    return partial


def _die_with(parent: int) -> None:
    """Linux: have the kernel kill this worker when the pool's process dies (no orphan parses on)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before that took effect
        os._exit(0)


def _test_action(text: str) -> Callable[[], None]:
    """What ACTION of SIGNAL_ENV does: send a signal, sleep N seconds, or hang."""
    if text == "hang":
        def hang() -> None:
            while True:
                time.sleep(3600)
        return hang
    if text.startswith("sleep"):
        seconds = float(text[5:])
        if not 0 <= seconds < 1e6:
            raise ValueError(text)
        return lambda: time.sleep(seconds)
    sig = signal.Signals[text]
    return lambda: os.kill(os.getpid(), sig)


def _arm_test_signal(spec: str, current: list[int]) -> None:
    """The test-only action of SIGNAL_ENV (module docstring): an audit hook on ``open``."""
    try:
        ranks_text, name, action_text = spec.split(":")
        doomed = {int(r) for r in ranks_text.split(",") if r}
        action = _test_action(action_text)
    except (ValueError, KeyError):
        print(f"openmsprof: warning: {SIGNAL_ENV}={spec!r}: not RANKS:FILE:ACTION; ignored", file=sys.stderr)
        return

    def hook(event: str, args: tuple[Any, ...]) -> None:
        path = args[0] if event == "open" and args else None
        if current and current[0] in doomed and isinstance(path, (str, os.PathLike)) and \
                str(path).endswith(name):
            action()

    sys.addaudithook(hook)


def _answer(conn: Connection, msg: tuple[str, int, Any]) -> bool:
    """Send ``msg`` (an exception that does not pickle goes as its text); False when the pipe is gone."""
    try:
        try:
            conn.send(msg)
        except OSError:
            raise
        except Exception:  # pickling an exception can fail in its own ways
            exc = msg[2]
            conn.send(("error", msg[1], RuntimeError(f"{type(exc).__name__}: {str(exc)[:300]}")))
    except OSError:  # the parent is gone
        return False
    return True


def _own_signals() -> None:
    """Default actions for the signals the forking process handled in Python (its handlers, the
    profiled application's perhaps, are not the worker's: SIGTERM ends a worker), SIGINT ignored."""
    for sig in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError):
            if callable(signal.getsignal(sig)):
                signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def worker_main(conn: Connection, parent: int, inherited: Iterable[Connection] = ()) -> None:
    """The worker's loop: ``(src, store, kernels)`` in, one answer out, until None or end of file."""
    _own_signals()
    for other in inherited:  # the parent's ends (ours and the siblings'): only the parent holds them
        other.close()
    _die_with(parent)
    current: list[int] = []
    spec = os.environ.get(SIGNAL_ENV)
    if spec:
        _arm_test_signal(spec, current)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        src, store, kernels = job
        current[:] = [src.rank]
        try:
            msg: tuple[str, int, Any] = ("ok", src.rank, parse_for_pool(src, store, kernels))
        except Exception as exc:  # raised in the parent, as the executor did
            msg = ("error", src.rank, exc)
        current.clear()
        if not _answer(conn, msg):
            return
