"""Error types shared by every layer.

All openmsprof errors derive from :class:`ProfilingError` and carry a one-line message that
names what was wrong and where.  ``code`` is the pyACL error code the facades return for it.
"""

from __future__ import annotations

import functools
import signal

# pyACL error codes (docs/formats.md §7.1).
ACL_SUCCESS = 0
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_WRITE_FILE = 100004
ACL_ERROR_INVALID_PROFILING_CONFIG = 100010
ACL_ERROR_INVALID_MODEL_ID = 100011
ACL_ERROR_PROF_ALREADY_RUN = 100042
ACL_ERROR_PROF_NOT_RUN = 100043
ACL_ERROR_PROF_REPEAT_SUBSCRIBE = 148046
ACL_ERROR_PROF_API_CONFLICT = 148047
ACL_ERROR_FEATURE_UNSUPPORTED = 200006
ACL_ERROR_PROF_MODULES_UNSUPPORTED = 200007
ACL_ERROR_STORAGE_OVER_LIMIT = 300000
ACL_ERROR_PROFILING_FAILURE = 500005


class ProfilingError(Exception):
    """Base class: a clear, one-line, user-facing error."""

    code: int = ACL_ERROR_PROFILING_FAILURE

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class ConfigError(ProfilingError, ValueError):
    """A configuration key or value is invalid (names key, value and what is allowed)."""

    code = ACL_ERROR_INVALID_PROFILING_CONFIG


class PathError(ProfilingError, ValueError):
    """A path is unsafe (forbidden characters, symlink, too long) or unusable."""

    code = ACL_ERROR_WRITE_FILE


class SessionError(ProfilingError, RuntimeError):
    """Session state misuse: start twice, stop without start, output in use."""


class StorageError(ProfilingError, OSError):
    """The storage limit or free-space floor was reached."""

    code = ACL_ERROR_STORAGE_OVER_LIMIT


class RawDataError(ProfilingError):
    """Raw data that cannot be read at all (bad magic, not a job)."""


class AlreadySimplified(RawDataError):
    """A rank dir analysed before whose raw framework data data_simplification removed: nothing
    to analyse again; its output folder ``output`` stands as it is (not an error for the caller)."""

    def __init__(self, message: str, output: object) -> None:
        super().__init__(message)
        self.output = output


class ConfigPathError(ConfigError, PathError):
    """An unsafe path inside a configuration (acl.json output, CLI flag): both a
    :class:`ConfigError` and a :class:`PathError`."""

    code = ACL_ERROR_INVALID_PROFILING_CONFIG


#: what a profiling call's own work raises (bad data, the file system, the native library's
#: errors by module, see ``own_failure``)
_OWN_FAILURES = (ValueError, TypeError, RuntimeError, MemoryError, OverflowError, IndexError, KeyError,
                 AttributeError, UnicodeError, RecursionError, OSError)


def own_failure(exc: BaseException, libraries: tuple[str, ...] = ("onnxruntime", "tensorflow")) -> bool:
    """Whether ``exc``, caught inside a facade call, is that call's own failure (to be answered
    with a code or a warning).  Anything else (a timer's ``TimeoutError``, a user's own exception
    class, any exception raised in an installed Python signal handler, a ``ValueError`` included)
    was raised by the user's signal handler at a bytecode boundary inside the call and goes on to
    the caller, as it would after a native call returned."""
    if isinstance(exc, (TimeoutError, InterruptedError)):
        return False
    if not (isinstance(exc, _OWN_FAILURES) or type(exc).__module__.startswith(libraries)):
        return False
    return not from_signal_handler(exc)


def from_signal_handler(exc: BaseException) -> bool:
    """Whether ``exc`` was raised in (or below) a Python function installed as a signal handler:
    one of its traceback's frames runs a handler's code."""
    codes = set()
    for signum in signal.valid_signals():
        try:
            handler = signal.getsignal(signum)
        except (OSError, ValueError):
            continue
        while isinstance(handler, functools.partial):
            handler = handler.func
        code = getattr(getattr(handler, "__func__", handler), "__code__", None)
        if code is not None:
            codes.add(code)
    tb = exc.__traceback__
    while tb is not None and codes:
        if tb.tb_frame.f_code in codes:
            return True
        tb = tb.tb_next
    return False
