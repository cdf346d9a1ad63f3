"""ProfileConfig validation and the Python keyword entry point."""

from __future__ import annotations

import dataclasses

import pytest

from openmsprof.config import ConfigError, PathError, ProfileConfig, from_kwargs, validate
from openmsprof.config.model import SWITCH_FIELDS


def test_defaults_validate_unchanged() -> None:
    cfg = ProfileConfig()
    assert validate(cfg) == cfg
    assert cfg.runtime_api is False  # decision 6


def test_from_kwargs_records_explicit_and_source() -> None:
    cfg = from_kwargs(task_time="l0", host_sys="cpu,mem", aicpu=True, storage_limit_mb=1)
    assert cfg.source == "python"
    assert cfg.explicit == ["aicpu", "host_sys", "storage_limit_mb", "task_time"]
    assert cfg.host_sys == ["cpu", "mem"]
    assert cfg.storage_limit_mb == 1  # small limits allowed from Python
    assert any(r.startswith("aicpu=on") for r in cfg.unsupported)


def test_duplicates_dropped_and_custom_metrics_normalised() -> None:
    cfg = from_kwargs(host_sys=["mem", "cpu", "mem"], aic_metrics="Custom:16, 0x2,0X7fffffff")
    assert cfg.host_sys == ["mem", "cpu"]
    assert cfg.aic_metrics == "Custom:0x10,0x2,0x7fffffff"


@pytest.mark.parametrize(("key", "value", "allowed"), [
    ("task_time", "l9", "on, off, l0, l1, l2, l3"),
    ("task_time", 1, "on, off"),
    ("aicpu", "on", "True or False"),
    ("aicpu", 1, "True or False"),
    ("aic_metrics", "PipeUtilisation", "PipeUtilization"),
    ("aic_metrics", "Custom:", "registers"),
    ("aic_metrics", "Custom:0x80000000", "0x7fffffff"),
    ("aic_metrics", "Custom:1,2,3,4,5,6,7,8,9", "1 to 8"),
    ("aic_metrics", "Custom:zz", "hex or decimal"),
    ("ge_api", "l2", "off, l0, l1"),
    ("llc_profiling", "both", "read, write"),
    ("host_sys", ["cpu", "gpu"], "cpu, mem, disk"),
    ("host_sys_usage", ["disk"], "cpu, mem"),
    ("host_sys_usage_freq", 0, "[1, 50]"),
    ("host_sys_usage_freq", 51, "[1, 50]"),
    ("host_sys_usage_freq", True, "[1, 50]"),
    ("sys_hardware_mem_freq", 101, "[1, 100]"),
    ("sys_interconnection_freq", 51, "[1, 50]"),
    ("instr_profiling_freq", 299, "[300, 30000]"),
    ("storage_limit_mb", 0, "[1, 4294967295]"),
    ("storage_limit_mb", 4294967296, "[1, 4294967295]"),
    ("interval", -1, "[0, 4294967295]"),
    ("interval", 1.5, "[0, 4294967295]"),
    ("devices", [0, 0], "distinct"),
    ("devices", [-1], "[0, 65535]"),
    ("devices", "0", "a list"),
    ("export_type", [], "non-empty"),
    ("export_type", ["html"], "text, db"),
    ("profiler_level", "Level3", "Level0"),
    ("gc_detect_threshold", -1.0, ">= 0"),
    ("gc_detect_threshold", float("nan"), ">= 0"),
    ("fp_point", None, "operator name"),
    ("mstx_domain_include", "dom", "list of strings"),
])
def test_bad_values_name_key_value_and_allowed(key: str, value: object, allowed: str) -> None:
    with pytest.raises(ConfigError) as e:
        from_kwargs(**{key: value})
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("Python switches: ")
    assert f"{key}=" in msg
    shown = value if not isinstance(value, list) or not value else value[-1]  # lists: the bad item
    assert repr(shown) in msg or repr(value) in msg
    assert allowed in msg


def test_unknown_switch_lists_allowed() -> None:
    with pytest.raises(ConfigError, match=r"unknown profiling switch 'aic_metric'; allowed: .*aic_metrics"):
        from_kwargs(aic_metric="PipeUtilization")
    with pytest.raises(ConfigError, match="unknown"):
        from_kwargs(unsupported=["x"])  # result fields are not switches


@pytest.mark.parametrize("bad", ["a/../b", "..", "x\ny", "a;b", "a|b", "`id`", "$HOME", "a\x7fb",
                                 "a\\b", "\"q\"", "a%b", "a>b"])
def test_hostile_output_text_refused(bad: str) -> None:
    with pytest.raises(PathError) as e:
        from_kwargs(output=bad)
    assert isinstance(e.value, ConfigError)  # ConfigPathError: catchable as either
    assert "\n" not in str(e.value) and "output" in str(e.value)


def test_long_output_refused() -> None:
    with pytest.raises(PathError, match="longer than 255"):
        from_kwargs(output="a" * 256)
    with pytest.raises(PathError, match="longer than 4096"):
        from_kwargs(output="/".join(["b" * 200] * 21))


def test_validate_every_switch_field_is_checked() -> None:
    """Each switch field rejects a value of a wrong type (no field left unchecked)."""
    junk = object()
    unchecked = []
    for name in SWITCH_FIELDS:
        try:
            validate(dataclasses.replace(ProfileConfig(), **{name: junk}))
        except ConfigError:
            continue
        unchecked.append(name)
    assert unchecked == []
