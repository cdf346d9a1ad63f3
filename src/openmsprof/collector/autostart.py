"""Child side of ``openmsprof collect``: start the process-level session at interpreter start-up.

Called by ``openmsprof/_bootstrap/sitecustomize.py`` with the ``OPENMSPROF_AUTOSTART`` value (a
JSON ProfileConfig, or a path to one).  The session stops at interpreter exit (the collect core's
atexit hook), on an uncaught KeyboardInterrupt (SIGINT), and on SIGTERM/SIGHUP when the program
left those signals at their default action: the job is saved, then the signal takes its usual
effect, so the exit status still says "killed by SIGTERM".
"""

from __future__ import annotations

import importlib
import os
import signal
import types
from pathlib import Path

import orjson

from openmsprof.collector.collect_switches import config_from_dict
from openmsprof.recorder import session
from openmsprof.sources import emit, gc_watch, host_sampler, markers  # noqa: F401  (register listeners)

#: Optional instrumentation modules enabled when present (API spans of instrumented libraries).
AUTO_INSTRUMENT: tuple[str, ...] = ()
_STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


def start_from_spec(spec: str) -> session.Session | None:
    """Start the session described by ``spec``; None when its switch is off."""
    text = spec.strip()
    data = orjson.loads(text if text.startswith("{") else Path(text).read_bytes())
    config = config_from_dict(data)
    if not config.switch:
        return None
    import openmsprof.profile_api  # noqa: F401  (registers the markers / emit / host sampler sources)

    for name in AUTO_INSTRUMENT:
        _instrument(name)
    s = session.start(config)
    s.note(f"session started by openmsprof collect (pid {os.getpid()})")
    _install_stop_handlers()
    return s


def _instrument(name: str) -> None:
    """Import an optional instrumentation module and call its ``install()`` if it has one."""
    try:
        module = importlib.import_module(name)
    except ImportError:
        return
    install = getattr(module, "install", None)
    if callable(install):
        install()


def _stop_then_die(signum: int, _frame: types.FrameType | None) -> None:
    try:
        if session.current() is not None:
            session.stop()
    finally:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _install_stop_handlers() -> None:
    for sig in _STOP_SIGNALS:
        try:
            if signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, _stop_then_die)
        except (ValueError, OSError):  # not the main thread, or not allowed
            pass
