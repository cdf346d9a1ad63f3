"""A training-like loop with one planted slow step: ``python slow_step.py OUT``."""

import sys
import time

import numpy as np

import openmsprof
from openmsprof import mstx


class DataLoader:
    def __init__(self, slow_at: int) -> None:
        self.i, self.slow_at = 0, slow_at

    def __next__(self) -> np.ndarray:
        self.i += 1
        if self.i == self.slow_at:
            time.sleep(0.4)  # a stalled read
        return np.ones((64, 64))


def forward_backward(x: np.ndarray) -> float:
    with mstx.mstx_range("forward_backward"):
        y = x
        for _ in range(20):
            y = np.tanh(y @ x) / 64
        time.sleep(0.02)
        return float(y.sum())


def main(out: str) -> None:
    loader = DataLoader(slow_at=41)
    with openmsprof.flight_recorder(out, slow_step=3) as fr:
        for _step in range(60):
            with mstx.mstx_range("data"):
                x = next(loader)
            forward_backward(x)
            fr.step()


if __name__ == "__main__":
    main(sys.argv[1])
