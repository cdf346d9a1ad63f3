"""PROFILING_OPTIONS / TF profiling_options (docs/formats.md §7.3)."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from openmsprof.config import (
    ConfigError,
    PathError,
    from_env,
    from_tf_config,
    parse_profiling_options,
    to_profiling_options,
)

#: seeds/003, TF1 Estimator sample.
SEED_OPTIONS = ('{"output":"/tmp/profiling","training_trace":"on","task_trace":"on",'
                '"fp_point":"","bp_point":"","aic_metrics":"PipeUtilization"}')


def test_seed_sample_through_env() -> None:
    cfg = from_env({"PROFILING_MODE": "true", "PROFILING_OPTIONS": SEED_OPTIONS})
    assert cfg is not None
    assert (cfg.output, cfg.training_trace, cfg.task_time, cfg.fp_point, cfg.bp_point,
            cfg.aic_metrics) == ("/tmp/profiling", True, "on", "", "", "PipeUtilization")
    assert cfg.runtime_api is False and cfg.aicpu is False and cfg.hccl is False
    assert cfg.source == "env:PROFILING_MODE=true"
    assert cfg.explicit == ["aic_metrics", "bp_point", "fp_point", "output", "task_time", "training_trace"]


@pytest.mark.parametrize("options", [None, "", "  ", "{}"])
def test_enabled_without_options_s3_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             options: str | None) -> None:
    monkeypatch.chdir(tmp_path)
    env = {"PROFILING_MODE": "true"} | ({} if options is None else {"PROFILING_OPTIONS": options})
    cfg = from_env(env)
    assert cfg is not None
    assert (cfg.training_trace, cfg.task_time, cfg.hccl, cfg.aicpu, cfg.aic_metrics) == (
        True, "on", True, True, "PipeUtilization")
    assert cfg.output == str(tmp_path) and "current directory" in cfg.notes[0]
    assert cfg.runtime_api is False
    assert {r.split("=")[0] for r in cfg.unsupported} == {"aic_metrics", "hccl", "aicpu"}


@pytest.mark.parametrize("mode", [None, "", "false", "FALSE"])
def test_not_enabled(mode: str | None) -> None:
    env = {"PROFILING_OPTIONS": SEED_OPTIONS} | ({} if mode is None else {"PROFILING_MODE": mode})
    assert from_env(env) is None


def test_dynamic_mode_and_real_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFILING_MODE", "dynamic")
    monkeypatch.setenv("PROFILING_OPTIONS", '{"output":"/tmp/p","msproftx":"on","runtime_api":"on"}')
    cfg = from_env()
    assert cfg is not None and cfg.msproftx and cfg.runtime_api
    assert cfg.source == "env:PROFILING_MODE=dynamic" and "dynamic" in cfg.notes[-1]


def test_bad_mode() -> None:
    with pytest.raises(ConfigError, match=r"environment: PROFILING_MODE='yes' is invalid; allowed: true, false, dynamic"):
        from_env({"PROFILING_MODE": "yes"})


@pytest.mark.parametrize(("options", "fragment"), [
    ('{"output": "/tmp/p",', "environment PROFILING_OPTIONS: invalid JSON at line 1 column 21"),
    ('["on"]', "profiling_options=['on'] is invalid; allowed: a JSON object"),
    ('{"task_trace": "l3"}', "task_trace='l3' is invalid; allowed: on, off, l0, l1"),
    ('{"training_trace": true}', "training_trace=True is invalid; allowed: on, off"),
    ('{"aic_metrics": "Custom:0x6F"}', "[0x1, 0x6e]"),
    ('{"storage_limit": "300"}', 'storage_limit=\'300\' is invalid; allowed: "{N}MB"'),
    ('{"fp_point": 3}', "fp_point=3 is invalid; allowed: an operator name"),
    ('{"fp_point": "a\\nb"}', "fp_point='a\\nb'"),
    ('{"task_time": "on", "task_trace": "off"}', "the same value as task_time"),
    ('{"trace": "on"}', "unknown key 'trace'; allowed keys: aac_metrics"),
])
def test_bad_options(options: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as e:
        from_env({"PROFILING_MODE": "true", "PROFILING_OPTIONS": options})
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_custom_registers_in_tf_range() -> None:
    cfg = parse_profiling_options('{"aic_metrics": "Custom:0x6E,1", "output": "/tmp/p"}')
    assert cfg.aic_metrics == "Custom:0x6e,0x1"


def test_hostile_output_is_path_error() -> None:
    with pytest.raises(PathError, match=re.escape("PROFILING_OPTIONS: output '/tmp/../etc'")):
        parse_profiling_options('{"output": "/tmp/../etc"}')


def test_tf1_profiling_config() -> None:
    assert from_tf_config(False, SEED_OPTIONS) is None
    cfg = from_tf_config(True, SEED_OPTIONS)
    assert cfg is not None and cfg.training_trace
    with pytest.raises(ConfigError, match="enable_profiling='yes'"):
        from_tf_config("yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"ProfilingConfig\.profiling_options: unknown key"):
        from_tf_config(True, '{"nope": "on"}')


def test_round_trip_through_json_text() -> None:
    cfg = parse_profiling_options({"output": "/tmp/p", "training_trace": "on", "task_trace": "l0",
                                   "fp_point": "conv1", "bp_point": "grad/conv1", "l2": "on",
                                   "host_sys": "cpu,mem", "storage_limit": "1024MB",
                                   "aic_metrics": "Custom:1,2", "dvpp_freq": 10})
    text = to_profiling_options(cfg)
    assert orjson.loads(text)["task_trace"] == "l0"
    again = parse_profiling_options(text)
    assert again.to_dict() | {"explicit": []} == cfg.to_dict() | {"explicit": []}
