"""pyACL entry points never raise: an argument of any type gets the error code back.

:func:`guard_module` wraps every public function a pyACL module defines: an exception other
than a :class:`~openmsprof.config.errors.ProfilingError` (which the functions already turn into
codes) becomes ``ACL_ERROR_INVALID_PARAM`` with a one-line recent error, in the function's
return shape: ``ret`` for ``-> int``, ``(None, ret)`` for ``-> tuple[..., int]``, None for ``-> None``,
"" for ``-> str`` (as for an unknown handle).
Calls that answer with data and no code (``acl.util.ptr_to_bytes``) raise ``ValueError`` naming
themselves instead.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from openmsprof.acl._state import fail
from openmsprof.config.errors import ACL_ERROR_INVALID_PARAM, ProfilingError, from_signal_handler

__all__ = ["guard_module"]

#: what a call with no code in its return shape answers a bad argument with (as for an unknown handle)
_EMPTY: dict[str, Any] = {"None": None, "str": ""}


def _failure(fn: Callable[..., Any]) -> Callable[[int, str], Any] | None:
    ret = str(getattr(fn, "__annotations__", {}).get("return", ""))
    if ret == "int":
        return fail
    if ret.startswith("tuple[") and ret.endswith(", int]"):
        return lambda code, msg: (None, fail(code, msg))
    if ret in _EMPTY:  # (a destroy call, a name getter: the failure is the recent error)
        empty = _EMPTY[ret]

        def answer(code: int, msg: str) -> Any:
            fail(code, msg)
            return empty

        return answer
    return None


def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` that answers a bad argument with its error code instead of an exception."""
    on_error = _failure(fn)
    if on_error is None:
        return fn
    name = getattr(fn, "__qualname__", "call")

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ProfilingError as exc:
            return on_error(exc.code or ACL_ERROR_INVALID_PARAM, str(exc))
        except (TypeError, ValueError, OverflowError, RecursionError, AttributeError, KeyError,
                IndexError, MemoryError, UnicodeError) as exc:
            if from_signal_handler(exc):  # (a user's handler raised it inside the call: theirs)
                raise
            return on_error(ACL_ERROR_INVALID_PARAM,
                            f"{name}: invalid argument ({type(exc).__name__}: {str(exc)[:120]})")

    wrapper.__openmsprof_guarded__ = True  # type: ignore[attr-defined]
    return wrapper


def guard_module(namespace: dict[str, Any]) -> None:
    """Wrap the public functions defined in the module whose globals are ``namespace``."""
    mod = namespace.get("__name__")
    for key, value in list(namespace.items()):
        if (not key.startswith("_") and inspect.isfunction(value) and value.__module__ == mod
                and not getattr(value, "__openmsprof_guarded__", False)):
            namespace[key] = guard(value)
