"""Arming from the environment: ``OPENMSPROF_FLIGHT_RECORDER="slow_step=3,hang_s=60"`` (set by
``openmsprof collect --flight-recorder``) arms a recorder at interpreter start-up, in every Python
process of the program that starts with the variable (each rank of a launcher).  A bad spec is
one line per problem on stderr; the program runs on unprofiled."""

from __future__ import annotations

import os

from openmsprof.flight.capture import say
from openmsprof.flight.options import ENV, parse_spec
from openmsprof.flight.recorder import FlightRecorder

__all__ = ["arm_from_env", "with_output"]

_armed: FlightRecorder | None = None


def with_output(spec: str, output: str) -> str:
    """``spec`` with ``output=...`` added unless it names one."""
    items = [p.strip() for p in spec.split(",") if p.strip()]
    if not any(p.partition("=")[0].strip() == "output" for p in items):
        items.append(f"output={output}")
    return ",".join(items)


def arm_from_env(environ: dict[str, str] | None = None) -> FlightRecorder | None:
    """Arm the process's recorder from :data:`ENV`; None when unset or refused."""
    global _armed
    spec = (environ if environ is not None else os.environ).get(ENV, "").strip()
    if not spec or _armed is not None:
        return _armed
    opts, errors = parse_spec(spec)
    if errors:
        for line in errors:
            say(line)
        return None
    fr = FlightRecorder(**vars(opts)).start()
    _armed = fr if fr.armed else None
    return _armed
