"""torch_npu experimental_config and profiler_config.json (docs/formats.md §7.4): reset with a warning."""

from __future__ import annotations

import enum
import json
from pathlib import Path

import pytest

from openmsprof.config import (
    DynamicProfilerConfig,
    from_experimental,
    load_profiler_config,
    parse_profiler_config,
)


def test_defaults() -> None:
    cfg, warnings = from_experimental(None)
    assert warnings == []
    assert (cfg.profiler_level, cfg.task_time, cfg.aic_metrics, cfg.l2, cfg.op_attr,
            cfg.data_simplification, cfg.record_op_args, cfg.export_type, cfg.msproftx) == (
        "Level0", "l0", "AiCoreNone", False, False, True, False, ["text"], False)
    assert cfg.source == "torch" and cfg.unsupported == []


def test_level1_keeps_metric_and_maps_c_names() -> None:
    cfg, warnings = from_experimental({"profiler_level": "Level1",
                                       "aic_metrics": "ACL_AICORE_MEMORY_BANDWIDTH"})
    assert warnings == [] and cfg.aic_metrics == "Memory" and cfg.task_time == "l1"
    assert cfg.acl_api and not cfg.runtime_api
    assert cfg.unsupported[0].startswith("aic_metrics=Memory: AI Core PMU counters")
    cfg, _ = from_experimental({"profiler_level": "Level1"})
    assert cfg.aic_metrics == "PipeUtilization"  # code default, kept above Level0


class Level(enum.Enum):
    Level2 = "Level2"


class NpuStyleExperimental:
    """An _ExperimentalConfig-shaped object with torch_npu's private attribute names."""

    def __init__(self) -> None:
        self._profiler_level = Level.Level2
        self._l2_cache = True
        self._export_type = ["text", "db"]
        self._op_attr = True
        self._msprof_tx = True
        self._host_sys = ["cpu", "numa"]


def test_object_with_private_attributes_and_enums() -> None:
    cfg, warnings = from_experimental(NpuStyleExperimental())
    assert warnings == []
    assert (cfg.profiler_level, cfg.task_time, cfg.l2, cfg.export_type, cfg.op_attr, cfg.msproftx,
            cfg.runtime_api, cfg.aicpu, cfg.host_sys, cfg.host_sys_usage) == (
        "Level2", "l2", True, ["text", "db"], True, True, True, True, ["cpu", "numa"], ["cpu"])
    heads = {r.split(":")[0] for r in cfg.unsupported}
    assert {"task_time=l2", "l2=on", "aicpu=on", "host_sys=numa"} <= heads


@pytest.mark.parametrize(("values", "fragment", "check"), [
    ({"profiler_level": "Level9"}, "profiler_level='Level9' is invalid, reset to 'Level0'",
     lambda c: c.profiler_level == "Level0"),
    ({"aic_metrics": "PipelineExecuteUtilization", "profiler_level": "Level1"},
     "reset to 'PipeUtilization'", lambda c: c.aic_metrics == "PipeUtilization"),
    ({"aic_metrics": "MemoryUB"}, "aic_metrics='MemoryUB' needs Level1 or Level2; reset to 'AiCoreNone' at Level0",
     lambda c: c.aic_metrics == "AiCoreNone"),
    ({"l2_cache": "true"}, "l2_cache='true' is invalid, reset to False", lambda c: c.l2 is False),
    ({"op_attr": True}, None, lambda c: c.op_attr and any(
        "op_attr=True accepted; not supported here" in n and "only in the Db export" in n for n in c.notes)),
    ({"op_attr": True, "export_type": "db", "profiler_level": "Level_none"}, None, lambda c: c.op_attr and any(
        "op_attr=True accepted; at Level_none op_attr has no effect" in n for n in c.notes)),
    ({"export_type": "html"}, "export_type item 'html' is invalid and dropped",
     lambda c: c.export_type == ["text"]),
    ({"export_type": "db"}, None, lambda c: c.export_type == ["db"]),
    ({"profiler_level": "Level_none", "mstx": False}, "mstx=False reset to True",
     lambda c: c.msproftx and c.task_time == "off"),
    ({"profiler_level": "Level_none"}, None, lambda c: c.msproftx),
    ({"mstx_domain_include": ["a"], "mstx_domain_exclude": ["b"]}, "include wins",
     lambda c: c.mstx_domain_include == ["a"] and c.mstx_domain_exclude == []),
    ({"gc_detect_threshold": -2}, "gc_detect_threshold=-2 is invalid, reset to None",
     lambda c: c.gc_detect_threshold is None),
    ({"gc_detect_threshold": 5}, None, lambda c: c.gc_detect_threshold == 5.0),
    ({"host_sys": ["cpu", "gpu"]}, "host_sys item 'gpu' is invalid and dropped", lambda c: c.host_sys == ["cpu"]),
    ({"host_sys": 3}, "host_sys=3 is invalid, reset to []", lambda c: c.host_sys == []),
    ({"sys_io": True, "sys_interconnection": True}, None,
     lambda c: c.sys_io_sampling_freq == 100 and c.sys_interconnection_freq == 50),
    ({"record_op_args": 1}, "record_op_args=1 is invalid", lambda c: c.record_op_args is False),
    ({"bogus": 1}, "unknown key 'bogus' ignored", lambda c: True),
])
def test_invalid_values_reset_with_one_warning(values: dict[str, object], fragment: str | None,
                                               check: object) -> None:
    cfg, warnings = from_experimental(values)
    if fragment is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and fragment in warnings[0], warnings
        assert warnings[0].startswith("experimental_config: ") and "\n" not in warnings[0]
        assert warnings[0] in cfg.notes
    assert check(cfg)  # type: ignore[operator]


def test_profiler_config_json_defaults_and_values(tmp_path: Path) -> None:
    p = tmp_path / "profiler_config.json"
    p.write_text(json.dumps({
        "activities": ["CPU", "NPU"], "prof_dir": "./", "analyse": False, "async_mode": False,
        "record_shapes": False, "profile_memory": False, "with_stack": False, "with_flops": False,
        "with_modules": False, "active": 1, "warmup": 0, "start_step": 0, "is_rank": False,
        "rank_list": [], "metadata": {},
        "experimental_config": {"profiler_level": "Level0", "aic_metrics": "AiCoreNone",
                                "l2_cache": False, "op_attr": False, "gc_detect_threshold": None,
                                "data_simplification": True, "record_op_args": False,
                                "export_type": ["text"], "mstx": False, "mstx_domain_include": [],
                                "mstx_domain_exclude": [], "host_sys": [], "sys_io": False,
                                "sys_interconnection": False}}))
    dyn, warnings = load_profiler_config(p)
    assert warnings == []
    assert dyn is not None
    expected = DynamicProfilerConfig()
    assert {k: v for k, v in vars(dyn).items() if k != "config"} == \
        {k: v for k, v in vars(expected).items() if k != "config"}
    assert dyn.config.source == "profiler_config.json" and dyn.config.output == "./"
    dyn, warnings = parse_profiler_config('{"start_step": -1, "active": 3, "warmup": 2, '
                                          '"is_rank": true, "rank_list": [0, 2, 2], "prof_dir": "/tmp/pt"}')
    assert warnings == [] and dyn is not None
    assert (dyn.start_step, dyn.active, dyn.warmup, dyn.is_rank, dyn.rank_list, dyn.prof_dir) == (
        -1, 3, 2, True, [0, 2], "/tmp/pt")


@pytest.mark.parametrize(("doc", "fragment"), [
    ({"active": 0}, "active=0 is invalid, reset to 1"),
    ({"warmup": -1}, "warmup=-1 is invalid, reset to 0"),
    ({"start_step": -2}, "start_step=-2 is invalid, reset to 0"),
    ({"start_step": "1"}, "start_step='1'"),
    ({"analyse": "yes"}, "analyse='yes' is invalid, reset to False"),
    ({"activities": ["GPU"]}, "activities item 'GPU' is invalid and dropped"),
    ({"prof_dir": "/tmp/../x"}, "prof_dir='/tmp/../x' is invalid, reset to './'"),
    ({"prof_dir": "a\nb"}, "prof_dir='a\\nb'"),
    ({"rank_list": [0, -1]}, "rank_list=[0, -1] is invalid, reset to []"),
    ({"metadata": []}, "metadata=[] is invalid, reset to {}"),
    ({"experimental_config": 3}, "experimental_config=3 is invalid"),
    ({"experimental_config": {"profiler_level": "L1"}}, "experimental_config: profiler_level='L1'"),
    ({"unknown": 1}, "unknown key 'unknown' ignored"),
])
def test_profiler_config_json_resets(doc: dict[str, object], fragment: str) -> None:
    dyn, warnings = parse_profiler_config(json.dumps(doc))
    assert dyn is not None
    assert any(fragment in w for w in warnings), warnings
    assert all("\n" not in w for w in warnings)


@pytest.mark.parametrize(("text", "fragment"), [
    ("{", "invalid JSON at line 1 column 2"), ("[]", "top level is list"), ("", "invalid JSON"),
])
def test_profiler_config_json_unusable_file_ignored(tmp_path: Path, text: str, fragment: str) -> None:
    p = tmp_path / "profiler_config.json"
    p.write_text(text)
    dyn, warnings = load_profiler_config(p)
    assert dyn is None and len(warnings) == 1
    assert fragment in warnings[0] and warnings[0].endswith("file ignored")


def test_profiler_config_json_missing_or_symlink_never_raises(tmp_path: Path) -> None:
    dyn, warnings = load_profiler_config(tmp_path / "nope.json")
    assert dyn is None and "cannot read" in warnings[0]
    real = tmp_path / "real.json"
    real.write_text("{}")
    (tmp_path / "link.json").symlink_to(real)
    dyn, warnings = load_profiler_config(tmp_path / "link.json")
    assert dyn is None and "symbolic link" in warnings[0]
