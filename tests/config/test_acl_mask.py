"""pyACL create_config bit masks (docs/formats.md §7.1)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openmsprof.config import ConfigError, from_mask, to_mask
from openmsprof.config import acl_mask as m


def test_constants_match_formats_7_1() -> None:
    assert (m.ACL_PROF_ACL_API, m.ACL_PROF_TASK_TIME, m.ACL_PROF_AICORE_METRICS, m.ACL_PROF_AICPU,
            m.ACL_PROF_L2CACHE, m.ACL_PROF_HCCL_TRACE, m.ACL_PROF_TRAINING_TRACE,
            m.ACL_PROF_MSPROFTX, m.ACL_PROF_RUNTIME_API, m.ACL_PROF_GE_API_L0,
            m.ACL_PROF_TASK_TIME_L0, m.ACL_PROF_TASK_MEMORY, m.ACL_PROF_TASK_TIME_L2,
            m.ACL_PROF_OP_ATTR, m.ACL_PROF_TASK_TIME_L3, m.ACL_PROF_GE_API_L1,
            m.ACL_PROF_API_STATS, m.ACL_PROF_AICORE_SHAPE) == (
        0x1, 0x2, 0x4, 0x8, 0x10, 0x20, 0x40, 0x80, 0x100, 0x200, 0x800, 0x1000, 0x2000, 0x4000,
        0x8000, 0x01000000, 0x400000000, 0x800000000)
    assert m.ACL_PROF_KNOWN_MASK == 0xC0100FBFF
    assert m.ACL_AICORE_NONE == 0xFF and m.ACL_AICORE_MEMORY_ACCESS == 8
    assert m.AICORE_METRIC_NAMES[m.ACL_AICORE_L0B_AND_WIDTH] == "MemoryL0"


def test_seed_sample_mask() -> None:
    """seeds/001: ACL_API | TASK_TIME | AICPU_TRACE | AICORE_METRICS | L2CACHE | HCCL, metrics 0."""
    mask = (m.ACL_PROF_ACL_API | m.ACL_PROF_TASK_TIME | m.ACL_PROF_AICPU_TRACE
            | m.ACL_PROF_AICORE_METRICS | m.ACL_PROF_L2CACHE | m.ACL_PROF_HCCL)
    cfg = from_mask([0], 0, 0, mask)
    assert (cfg.acl_api, cfg.task_time, cfg.aicpu, cfg.l2, cfg.hccl) == (True, "on", True, True, True)
    assert cfg.aic_metrics == "ArithmeticUtilization"
    assert cfg.training_trace is True  # TASK_TIME implies TRAINING_TRACE
    assert cfg.msproftx is False and cfg.runtime_api is False
    assert cfg.source == "pyacl" and cfg.devices == [0]
    assert {r.split("=")[0] for r in cfg.unsupported} >= {"aic_metrics", "l2", "hccl", "aicpu"}


def test_metrics_count_only_with_the_metrics_bit() -> None:
    cfg = from_mask([1, 2], m.ACL_AICORE_PIPE_UTILIZATION, 0, m.ACL_PROF_TASK_TIME)
    assert cfg.aic_metrics == "AiCoreNone" and cfg.devices == [1, 2]
    assert "ACL_PROF_AICORE_METRICS not set" in cfg.notes[0]
    cfg = from_mask([0], m.ACL_AICORE_MEMORY_BANDWIDTH, 0, m.ACL_PROF_TASK_TIME | m.ACL_PROF_AICORE_METRICS)
    assert cfg.aic_metrics == "Memory"


@pytest.mark.parametrize(("bits", "level"), [
    (0, "off"), (m.ACL_PROF_TASK_TIME_L0, "l0"), (m.ACL_PROF_TASK_TIME, "on"),
    (m.ACL_PROF_TASK_TIME_L2, "l2"), (m.ACL_PROF_TASK_TIME_L3 | m.ACL_PROF_TASK_TIME_L0, "l3"),
])
def test_task_time_levels_and_training_trace(bits: int, level: str) -> None:
    cfg = from_mask([0], m.ACL_AICORE_NONE, 0, bits | m.ACL_PROF_ACL_API)
    assert cfg.task_time == level
    assert cfg.training_trace is (level != "off")


def test_other_bits() -> None:
    cfg = from_mask([], m.ACL_AICORE_NONE, None, m.ACL_PROF_MSPROFTX | m.ACL_PROF_RUNTIME_API
                    | m.ACL_PROF_GE_API_L1 | m.ACL_PROF_OP_ATTR | m.ACL_PROF_TASK_MEMORY
                    | m.ACL_PROF_AICORE_SHAPE | m.ACL_PROF_TRAINING_TRACE)
    assert (cfg.msproftx, cfg.runtime_api, cfg.ge_api, cfg.op_attr, cfg.task_memory,
            cfg.aicore_shape, cfg.training_trace, cfg.acl_api, cfg.devices) == (
        True, True, "l1", True, True, True, True, False, [])


def test_api_stats_disables_the_others() -> None:
    cfg = from_mask([0], m.ACL_AICORE_PIPE_UTILIZATION, 0,
                    m.ACL_PROF_API_STATS | m.ACL_PROF_ACL_API | m.ACL_PROF_AICPU | m.ACL_PROF_AICORE_METRICS)
    assert cfg.api_stats is True
    assert (cfg.acl_api, cfg.aicpu, cfg.task_time, cfg.aic_metrics, cfg.msproftx) == (
        False, False, "off", "AiCoreNone", False)
    assert [r.split(":")[0] for r in cfg.unsupported] == ["api_stats=True"]  # not collected here
    assert "0xd" in cfg.notes[0]


@pytest.mark.parametrize(("mask", "named"), [
    (0x400, "0x400"), (1 << 63, "0x8000000000000000"), (0x2 | 0x10000 | 0x20000, "0x10000, 0x20000"),
])
def test_unknown_bits_named_in_hex(mask: int, named: str) -> None:
    with pytest.raises(ConfigError) as e:
        from_mask([0], m.ACL_AICORE_NONE, 0, mask)
    assert f"unknown bits {named};" in str(e.value)
    assert str(e.value).startswith("acl.prof.create_config: ")


@pytest.mark.parametrize(("args", "key"), [
    (([0], 9, 0, 1), "aicore_metrics=9"),
    (([0], True, 0, 1), "aicore_metrics=True"),
    (([0], 0xFF, 5, 1), "aicore_events=5"),
    (([0], 0xFF, 0, -1), "data_type_config=-1"),
    (([0], 0xFF, 0, 1 << 64), "data_type_config="),
    (([0], 0xFF, 0, "1"), "data_type_config='1'"),
    ((None, 0xFF, 0, 1), "device_list=None"),
    (("0", 0xFF, 0, 1), "device_list='0'"),
    (([0, 0], 0xFF, 0, 1), "devices=[0, 0]"),
    (([-1], 0xFF, 0, 1), "devices=-1"),
    ((["a"], 0xFF, 0, 1), "devices='a'"),
])
def test_bad_arguments(args: tuple, key: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigError) as e:
        from_mask(*args)
    assert key in str(e.value) and "allowed" in str(e.value)


@settings(max_examples=300, deadline=None)
@given(bits=st.sets(st.sampled_from([b for n, b in m.ACL_PROF_BITS.items()
                                     if n not in ("ACL_PROF_API_STATS", "ACL_PROF_AICORE_METRICS")])),
       metric=st.sampled_from(sorted(m.AICORE_METRIC_NAMES)))
def test_mask_round_trip(bits: set[int], metric: int) -> None:
    mask = sum(bits)
    if metric != m.ACL_AICORE_NONE:
        mask |= m.ACL_PROF_AICORE_METRICS
    cfg = from_mask([0, 3], metric, 0, mask)
    devices, metric2, mask2 = to_mask(cfg)
    again = from_mask(devices, metric2, 0, mask2)
    assert again.to_dict() == cfg.to_dict()
    # the mask only loses what the rules imply: lower task-time levels and GE L0 under L1
    if not mask & (m.ACL_PROF_TASK_TIME | m.ACL_PROF_TASK_TIME_L2 | m.ACL_PROF_TASK_TIME_L3) \
            and not mask & m.ACL_PROF_GE_API_L1 and mask & m.ACL_PROF_TRAINING_TRACE:
        assert mask2 == mask
