"""schedule(): the exact action sequence of docs/formats.md §7.4 and validation of bad numbers."""

from __future__ import annotations

import logging

import pytest

from openmsprof.torch.profiler import ProfilerAction, schedule

N, W, R, S = ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE


@pytest.mark.parametrize(("kwargs", "expected"), [
    # seed 004 first snippet: skip 1, then one saved step, once
    ({"wait": 0, "warmup": 0, "active": 1, "repeat": 1, "skip_first": 1}, [N, S, N, N, N]),
    # seed 004 mstx snippet
    ({"wait": 1, "warmup": 1, "active": 2, "repeat": 2, "skip_first": 1},
     [N, N, W, R, S, N, W, R, S, N, N]),
    # repeat 0 = forever
    ({"wait": 1, "warmup": 0, "active": 1}, [N, S, N, S, N, S]),
    # skip_first_wait shifts the first cycle past its wait
    ({"wait": 2, "warmup": 1, "active": 1, "repeat": 2, "skip_first_wait": 1}, [W, S, N, N, W, S, N, N]),
])
def test_action_sequence(kwargs: dict, expected: list[ProfilerAction]) -> None:
    s = schedule(**kwargs)
    assert [s(i) for i in range(len(expected))] == expected


def test_repeat_uses_true_division() -> None:
    # n = 3, repeat 1: step 2 → s/n = 0.67 < 1 → still in the cycle
    s = schedule(wait=0, warmup=0, active=3, repeat=1)
    assert [s(i) for i in range(4)] == [R, R, S, N]


def test_negative_step_raises_value_error() -> None:
    with pytest.raises(ValueError, match="negative"):
        schedule(wait=0, active=1)(-1)


def test_bad_numbers_are_reset_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="openmsprof"):
        s = schedule(wait=-1, active=0, warmup=-3, repeat=-2, skip_first="x")  # type: ignore[arg-type]
    assert (s.wait, s.active, s.warmup, s.repeat, s.skip_first) == (0, 1, 0, 0, 0)
    assert sum("schedule" in r.getMessage() for r in caplog.records) == 5
    assert [s(i) for i in range(3)] == [S, S, S]
