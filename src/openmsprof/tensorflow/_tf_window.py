"""One profiled window per process for the three TensorFlow modes (Estimator, sess.run, TF2).

:func:`begin` turns a profiling_options value into a :class:`ProfileConfig`, starts the
openmsprof session and TensorFlow's tracer; :func:`end` harvests the trace and stops the session.
Faults never reach the training program: malformed options found while training starts give one
warning and the seed's defaults, an unusable output gives one warning and no profiling, a second
enable while a window is open gives one warning and is ignored, and a window still open at exit
(a session closed without the profiler's stop, a script that never calls stop) is closed then.
"""

from __future__ import annotations

import atexit
import logging
import threading
from typing import Any

from openmsprof.config.errors import ConfigError, ProfilingError
from openmsprof.config.model import ProfileConfig
from openmsprof.config.tf_options import default_enabled, from_env, parse_profiling_options
from openmsprof.recorder import held_signals, session
from openmsprof.sources import emit, gc_watch, host_sampler, markers  # noqa: F401  (register listeners)
from openmsprof.tensorflow.tf_graph_collect import SessionGraphs
from openmsprof.tensorflow.tf_trace import TfTracer

__all__ = ["active", "begin", "config_from", "end", "env_config", "owner", "session_graphs", "setup_run",
           "tie"]

log = logging.getLogger("openmsprof")
_lock = threading.RLock()
_state: dict[str, Any] = {"owner": None, "mode": "", "tracer": None, "warned_twice": False, "closer": None}


def config_from(options: str | bytes | None, where: str) -> ProfileConfig:
    """The config for ``options``; malformed options → one warning and the seed's defaults."""
    try:
        return parse_profiling_options(options, where)
    except ConfigError as exc:
        log.warning("openmsprof: %s; profiling goes on with the default options", exc)
        cfg = default_enabled(where)
        cfg.notes.append(f"ignored malformed options: {exc}")
        return cfg


def env_config(where: str) -> ProfileConfig | None:
    """The config enabled by PROFILING_MODE/PROFILING_OPTIONS (malformed → warning + defaults)."""
    try:
        return from_env()
    except ConfigError as exc:
        log.warning("openmsprof: %s; profiling goes on with the default options", exc)
        cfg = default_enabled(where)
        cfg.notes.append(f"ignored malformed environment: {exc}")
        return cfg


def active() -> bool:
    return _state["owner"] is not None


def owner() -> Any:
    return _state["owner"]


def tie(owner: object, closer: object) -> None:
    """Closing ``closer`` (a ``tf.compat.v1.Session``) also ends ``owner``'s window: an Estimator's
    session closed on an exception (a ``predict`` generator closed early) calls no hook's ``end``."""
    with _lock:
        if _state["owner"] is owner:
            _state["closer"] = closer


def session_graphs() -> SessionGraphs | None:
    """Where ``sess.run`` hands its partition graphs while a window is open (else None)."""
    tracer = _state["tracer"]
    return tracer.session_graphs if tracer is not None and tracer.running else None


def setup_run(t0_ns: int, t1_ns: int) -> None:
    """A sess.run of initializers only ran in this wall window: not an iteration."""
    tracer = _state["tracer"]
    if tracer is not None:
        tracer.setup_runs.append((t0_ns, t1_ns))


def begin(cfg: ProfileConfig, owner: object, mode: str, *, adopt: bool = False) -> bool:
    """Open the profiled window for ``owner``; False when not started (reason logged once).
    ``adopt``: a window already open (the Estimator's own session, opened by the environment
    route) is not a second enable, so no warning."""
    with _lock, held_signals.held():  # (a raising signal handler waits until the window is open)
        if _state["owner"] is not None:
            if not adopt and _state["owner"] is not owner and not _state["warned_twice"]:
                _state["warned_twice"] = True
                s = session.current()
                where = f" (job {str(s.root)!r})" if s is not None else ""
                log.warning("openmsprof: profiling is already enabled by %s%s; the second enable "
                            "by %s is ignored", _state["mode"], where, mode)
            return False
        try:
            s = session.start(cfg)
        except (ProfilingError, OSError) as exc:
            log.warning("openmsprof: profiling not started for %s: %s; training goes on", mode, exc)
            return False
        s.extra_info["framework"] = "tensorflow"
        s.extra_info["tensorflow_mode"] = mode
        s.note(f"TensorFlow profiling enabled by {mode}")
        tracer = TfTracer(s)
        try:
            tracer.start()
        except Exception as exc:
            s.note(f"TensorFlow's profiler is unavailable: {exc}", warn=True)
        _state.update(owner=owner, mode=mode, tracer=tracer)
        return True


def end(owner: object | None = None) -> str | None:
    """Close the window (only ``owner``'s, when given).  Returns the job dir, or None."""
    with _lock, held_signals.held():  # (a Ctrl-C meanwhile is raised once TF's trace is read and the job ended)
        if _state["owner"] is None or (owner is not None and owner is not _state["owner"]
                                       and owner is not _state["closer"]):
            return None
        tracer: TfTracer = _state["tracer"]
        _state.update(owner=None, mode="", tracer=None, closer=None)
        try:
            tracer.stop()
        except Exception as exc:
            tracer.session.note(f"reading TensorFlow's trace failed: {exc}", warn=True)
        try:
            return str(session.stop().root)
        except ProfilingError as exc:
            log.warning("openmsprof: %s", exc)
            return None


def _end_at_exit() -> None:
    try:
        end()
    except Exception as exc:  # pragma: no cover - interpreter shutdown
        log.warning("openmsprof: stopping TensorFlow profiling at exit failed: %s", exc)


# Registered after openmsprof.recorder.session's own handler, so it runs first (LIFO).
atexit.register(_end_at_exit)
