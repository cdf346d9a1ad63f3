"""The flight recorder (issue 27): a bounded in-memory history of a Python AI program written as a
PROF job when a step is slow, the program hangs, a signal asks or an exception escapes."""

from openmsprof.flight.options import ENV, FlightOptions, parse_spec
from openmsprof.flight.recorder import FlightRecorder, flight_recorder

__all__ = ["ENV", "FlightOptions", "FlightRecorder", "flight_recorder", "parse_spec"]
