"""``own_failure``: a facade call's own failure (answered with a code or a warning) against an
exception a user's signal handler raised inside the call (which goes on to the caller)."""

from __future__ import annotations

import errno

from openmsprof.config.errors import StorageError, own_failure


class Tick(Exception):
    pass


class FakeNative(Exception):
    pass


def test_the_calls_own_failures() -> None:
    for exc in (ValueError("x"), TypeError("x"), RuntimeError("x"), MemoryError(), KeyError("k"),
                OSError(errno.ENOSPC, "full"), StorageError("disk full")):
        assert own_failure(exc), exc


def test_a_native_librarys_errors_by_module() -> None:
    FakeNative.__module__ = "onnxruntime.capi.onnxruntime_pybind11_state"
    assert own_failure(FakeNative())
    assert not own_failure(FakeNative(), libraries=("tensorflow",))
    FakeNative.__module__ = "tensorflow.python.framework.errors_impl"
    assert own_failure(FakeNative())


def test_a_users_exceptions_go_on() -> None:
    assert not own_failure(Tick())
    assert not own_failure(TimeoutError())  # (an OSError: a timer's, never the call's own)
    assert not own_failure(InterruptedError())


def test_an_exception_raised_in_an_installed_signal_handler_is_the_users() -> None:
    """A ValueError is a call's own failure, except where a Python signal handler raised it."""
    import signal

    def on_alarm(signum: int, frame: object) -> None:
        raise ValueError("a serving loop's timeout")

    old = signal.signal(signal.SIGALRM, on_alarm)
    try:
        try:
            on_alarm(signal.SIGALRM, None)  # (its frame in the traceback, as at a real delivery)
        except ValueError as exc:
            assert not own_failure(exc)
        try:
            int("x")
        except ValueError as exc:
            assert own_failure(exc)  # raised elsewhere: the call's own
    finally:
        signal.signal(signal.SIGALRM, old)
    try:
        on_alarm(signal.SIGALRM, None)
    except ValueError as exc:
        assert own_failure(exc)  # no longer installed: nothing marks it as the user's
