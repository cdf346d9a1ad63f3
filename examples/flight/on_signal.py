"""Runs until SIGUSR2 asks for a dump: ``python on_signal.py OUT & kill -USR2 $!``."""

import sys
import time

import openmsprof


def serve_request() -> None:
    time.sleep(0.05)


def main(out: str) -> None:
    with openmsprof.flight_recorder(out) as fr:  # signal="SIGUSR2" is the default
        print("armed", flush=True)
        while not fr.dumps:
            serve_request()
            fr.step()


if __name__ == "__main__":
    main(sys.argv[1])
