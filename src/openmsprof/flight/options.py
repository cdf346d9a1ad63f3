"""Flight recorder options: the keyword arguments of :func:`openmsprof.flight_recorder` and the
``"slow_step=3,hang_s=60"`` text of ``collect --flight-recorder`` / ``OPENMSPROF_FLIGHT_RECORDER``.

:func:`check` returns one line per bad value (unknown trigger names, non-positive thresholds, a
signal that cannot be caught, an unwritable output); the recorder prints each and stays off.
"""

from __future__ import annotations

import os
import signal as _signal
from dataclasses import dataclass, fields
from pathlib import Path

__all__ = ["ENV", "FlightOptions", "check", "parse_spec"]

#: Environment variable read at interpreter start-up under ``openmsprof collect``.
ENV = "OPENMSPROF_FLIGHT_RECORDER"
_UNCATCHABLE = {"SIGKILL", "SIGSTOP"}
_BOOL = {"1": True, "true": True, "on": True, "yes": True, "0": False, "false": False, "off": False, "no": False}


@dataclass
class FlightOptions:
    """What the recorder keeps and what triggers a dump (see docs/flight-recorder.md)."""

    output: str = "."
    keep_s: float = 30.0
    slow_step: float | None = None
    hang_s: float | None = None
    on_exception: bool = True
    signal: str | None = "SIGUSR2"
    then_capture: int = 0
    memory_mb: float = 64.0
    step_range: str | None = None
    warmup: int = 5
    stack_hz: float = 20.0
    host_hz: float = 2.0


_NAMES = {f.name for f in fields(FlightOptions)}
_NUMBERS = {"keep_s": float, "slow_step": float, "hang_s": float, "then_capture": int,
            "memory_mb": float, "warmup": int, "stack_hz": float, "host_hz": float}


def parse_spec(text: str) -> tuple[FlightOptions, list[str]]:
    """``"slow_step=3,hang_s=60,output=DIR"`` → options and one line per bad item."""
    opts = FlightOptions()
    errors: list[str] = []
    for item in (p.strip() for p in text.split(",")):
        if not item or item in ("1", "on", "true"):
            continue
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq:
            errors.append(f"flight recorder: {key!r} has no value (write {key}=VALUE)")
        elif key not in _NAMES:
            errors.append(f"flight recorder: unknown trigger or option {key!r} "
                          f"(known: {', '.join(sorted(_NAMES))})")
        elif key in _NUMBERS:
            try:
                setattr(opts, key, None if value.lower() in ("none", "off") else _NUMBERS[key](value))
            except ValueError:
                errors.append(f"flight recorder: {key}={value!r} is not a number")
        elif key == "on_exception":
            if value.lower() not in _BOOL:
                errors.append(f"flight recorder: on_exception={value!r} is not on/off")
            else:
                opts.on_exception = _BOOL[value.lower()]
        elif key == "signal":
            opts.signal = None if value.lower() in ("none", "off", "") else value
        else:
            setattr(opts, key, value or None)
    return opts, errors


def signal_number(name: str | int | None) -> int | None:
    """The signal number named by ``name`` (``"SIGUSR2"``, ``"USR2"`` or a number)."""
    if name is None:
        return None
    if isinstance(name, int) or str(name).isdigit():
        return int(name)
    text = str(name).upper()
    text = text if text.startswith("SIG") else "SIG" + text
    sig = getattr(_signal, text, None)
    return int(sig) if isinstance(sig, _signal.Signals) else None


def check(opts: FlightOptions) -> list[str]:
    """One line per value the recorder cannot use; empty when it can arm."""
    errors: list[str] = []
    for key in ("keep_s", "memory_mb", "slow_step", "hang_s", "stack_hz", "host_hz"):
        value = getattr(opts, key)
        if value is not None and not (isinstance(value, int | float) and value > 0):
            errors.append(f"flight recorder: {key}={value!r} must be a positive number")
    for key in ("then_capture", "warmup"):
        value = getattr(opts, key)
        if not isinstance(value, int) or value < 0:
            errors.append(f"flight recorder: {key}={value!r} must be a whole number >= 0")
    if isinstance(opts.stack_hz, int | float) and 0 < opts.stack_hz < 20:
        errors.append(f"flight recorder: stack_hz={opts.stack_hz!r} is below the 20 Hz floor")
    if opts.signal is not None:
        num = signal_number(opts.signal)
        if num is None or not 0 < num < _signal.NSIG:
            errors.append(f"flight recorder: signal {opts.signal!r} is not a signal of this system")
        elif _signal.Signals(num).name in _UNCATCHABLE:
            errors.append(f"flight recorder: signal {opts.signal!r} cannot be caught; choose e.g. SIGUSR2")
    out = Path(opts.output or ".")
    probe = out if out.exists() else next((p for p in out.parents if p.exists()), Path("/"))
    if (out.exists() and not out.is_dir()) or out.is_symlink():
        errors.append(f"flight recorder: output {str(out)!r} is not a directory")
    elif not probe.is_dir():
        errors.append(f"flight recorder: output {str(out)!r} is not writable ({str(probe)!r} is not a directory)")
    elif not os.access(probe, os.W_OK | os.X_OK):
        errors.append(f"flight recorder: output {str(out)!r} is not writable")
    return errors
