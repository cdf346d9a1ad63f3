"""Process-wide state of the pyACL facade, handles, error reporting and API-span tracing.

pyACL never raises for misuse: calls return a code.  :func:`fail` records the one-line reason
(``acl.get_recent_err_msg()`` returns it, the ``openmsprof`` logger gets it) and returns the
code.  :func:`traced` wraps a facade function so that, with API profiling on, each call becomes
an API span named as the C API it mirrors (``aclmdlLoadFromFile`` ...).
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from openmsprof.config.errors import own_failure
from openmsprof.recorder import session
from openmsprof.recorder.records import ApiLevel
from openmsprof.sources import emit

log = logging.getLogger("openmsprof")
F = TypeVar("F", bound=Callable[..., Any])

_tls = threading.local()
_handles = itertools.count(0x1000, 16)


def new_handle() -> int:
    """An opaque non-zero handle, unique across every kind of object."""
    return next(_handles)


class State:
    """What acl.init / acl.prof.* have set up."""

    def __init__(self) -> None:
        self.initialized = False
        #: Session driven by acl.json / OPENMSPROF_ACL_JSON (profiling from acl.init).
        self.json_session: session.Session | None = None
        self.json_adopted = False
        self.interval = 0
        #: acl.prof.init path; None when not initialised.
        self.prof_path: str | None = None
        self.prof_config: int = 0
        self.prof_session: session.Session | None = None
        self.prof_adopted = False
        self.set_configs: dict[int, str] = {}
        self.lock = threading.RLock()

    @property
    def json_profiling(self) -> bool:
        return self.json_session is not None

    def profiling_session(self) -> session.Session | None:
        """The session this facade feeds (acl.json or prof.start), if collecting."""
        s = self.json_session or self.prof_session
        return s if s is not None and session.current() is s else None


STATE = State()


#: an error line longer than this is cut (a value the caller passed may be a whole model)
MAX_ERROR_CHARS = 400


def fail(code: int, message: str) -> int:
    """Record ``message`` as the recent error of this thread and return ``code``; the message
    is one printable line of at most ``MAX_ERROR_CHARS`` characters, whatever values it quotes."""
    message = " ".join(message.split()) if not message.isprintable() else message
    if len(message) > MAX_ERROR_CHARS:
        message = message[:MAX_ERROR_CHARS - 30] + f"... ({len(message)} characters)"
    _tls.msg = message
    log.warning("openmsprof.acl: %s (error %d)", message, code)
    return code


def recent_error() -> str:
    return getattr(_tls, "msg", "")


def own(exc: BaseException) -> bool:
    """Whether ``exc``, caught inside a pyACL call, is that call's own failure (ONNX Runtime's
    errors, bad data, the file system), answered with a code; else it is a user's signal
    handler's, which goes on to the caller (``config.errors.own_failure``)."""
    return own_failure(exc, ("onnxruntime",))


def traced(name: str, level: ApiLevel = ApiLevel.ACL) -> Callable[[F], F]:
    """Record each call of the wrapped function as an API span ``name`` when API profiling is
    on (one flag test otherwise)."""
    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not emit._api_on:  # the source's own fast flag (see sources.emit)
                return fn(*args, **kwargs)
            t0 = emit.now_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                emit.record_api(name, level, t0, emit.now_ns())
        return wrapper  # type: ignore[return-value]
    return deco
