"""``profile(activities=...)`` with something that is not a list of activities: one warning line
and the defaults (the training goes on), never a TypeError traceback; a single activity is taken
as a list of one."""

from __future__ import annotations

import logging

import pytest

import openmsprof.torch.profiler as tp
from openmsprof.torch.profiler import _window_info


@pytest.mark.parametrize("bad", [5, 2.5, object()])
def test_a_non_list_activities_is_one_warning_and_the_defaults(bad: object, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="openmsprof"):
        prof = tp.profile(activities=bad)
    assert prof.activity_names == ["CPU", "NPU"]
    lines = [r.getMessage() for r in caplog.records if "activities=" in r.getMessage()]
    assert len(lines) == 1 and "is not a list of ProfilerActivity; using CPU and NPU" in lines[0]
    assert "\n" not in lines[0]


def test_one_activity_outside_a_list_is_a_list_of_one() -> None:
    names, _acts, _notes = _window_info.torch_activities(tp.ProfilerActivity.CPU)
    assert names == ["CPU"]
    assert _window_info.torch_activities("NPU")[0] == ["NPU"]
