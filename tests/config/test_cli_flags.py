"""msprof command-line flags and the CLI > acl.json > API precedence."""

from __future__ import annotations

import argparse

import pytest

from openmsprof.config import (
    ConfigError,
    PathError,
    add_arguments,
    from_args,
    from_kwargs,
    merge,
    parse_profiler_section,
)


def _parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="openmsprof collect")
    p.add_argument("-m", "--main")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    add_arguments(p)
    return p.parse_args(list(argv))


@pytest.mark.parametrize(("underscore", "dash"), [
    ("--acl_api", "--acl-api"), ("--aic_metrics", "--aic-metrics"), ("--task_time", "--task-time"),
    ("--host_sys", "--host-sys"), ("--storage_limit", "--storage-limit"),
    ("--runtime_api", "--runtime-api"), ("--aac_metrics", "--aac-metrics"),
])
def test_both_spellings_parse_the_same(underscore: str, dash: str) -> None:
    value = {"--acl_api": "off", "--aic_metrics": "MemoryUB", "--task_time": "l0",
             "--host_sys": "cpu,mem", "--storage_limit": "300MB", "--runtime_api": "on",
             "--aac_metrics": "ArithmeticUtilization"}[underscore]
    a = from_args(_parse(underscore, value, "-m", "main"))
    b = from_args(_parse(dash, value, "-m", "main"))
    assert a == b and len(a.explicit) == 1


def test_s2_command_line() -> None:
    """seeds/002 table 1 flags: --interval --acl_api --aacpu --switch --aac_metrics --output."""
    cfg = from_args(_parse("-m", "main", "--interval", "2", "--acl_api", "on", "--aacpu", "on",
                           "--switch", "on", "--aac_metrics", "ArithmeticUtilization",
                           "--output", "/tmp/jobs"))
    assert (cfg.interval, cfg.acl_api, cfg.aicpu, cfg.switch, cfg.aic_metrics, cfg.output) == (
        2, True, True, True, "ArithmeticUtilization", "/tmp/jobs")
    assert cfg.source == "command line"


def test_bare_switch_means_on_and_unset_is_not_explicit() -> None:
    ns = _parse("--aicpu", "--msproftx", "-m", "main", "arg1")
    cfg = from_args(ns)
    assert cfg.aicpu and cfg.msproftx and ns.main == "main" and ns.rest == ["arg1"]
    assert cfg.explicit == ["aicpu", "msproftx"]
    assert cfg.output is None  # left to the collect command / acl.json
    assert from_args(_parse()).explicit == []


@pytest.mark.parametrize(("argv", "fragment"), [
    (("--aicpu", "yes"), "command line: --aicpu='yes' is invalid; allowed: on, off"),
    (("--interval", "-3"), "--interval='-3'"),
    (("--interval", "x"), "allowed: an integer in [0, 4294967295]"),
    (("--storage-limit", "100MB"), '"{N}MB" with N in [200, 4294967295]'),
    (("--host-sys-usage-freq", "60"), "[1, 50]"),
    (("--aic-metrics", "Fast"), "allowed: ArithmeticUtilization"),
    (("--task-time", "l2"), "allowed: on, off, l0, l1"),
    (("--acl_api", "on", "--ascendcl", "off"), "the same value as --acl_api"),
])
def test_bad_flag_values(argv: tuple[str, ...], fragment: str) -> None:
    with pytest.raises(ConfigError) as e:
        from_args(_parse(*argv))
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_hostile_output_flag() -> None:
    with pytest.raises(PathError, match=r"command line: --output '/tmp/a;b' contains a forbidden character"):
        from_args(_parse("--output", "/tmp/a;b"))


def test_precedence_cli_over_acl_json_over_api() -> None:
    api = from_kwargs(msproftx=True, interval=5, aicpu=False, host_sys_usage=["cpu"], storage_limit_mb=1)
    acl = parse_profiler_section({"switch": "on", "output": "/tmp/from_acl", "interval": "7",
                                  "aicpu": "on", "l2": "on"}, "acl.json x")
    cli = from_args(_parse("--aicpu", "off", "--output", "/tmp/from_cli"))
    cfg = merge(merge(api, acl), cli)
    assert cfg.output == "/tmp/from_cli"        # CLI wins
    assert cfg.aicpu is False                   # CLI over acl.json's on
    assert cfg.interval == 7                    # acl.json over API
    assert cfg.l2 is True                       # acl.json only
    assert cfg.msproftx is True and cfg.host_sys_usage == ["cpu"] and cfg.storage_limit_mb == 1
    assert cfg.source == "command line > acl.json > python"
    # unsupported recomputed: aicpu turned off by the CLI is no longer reported, l2 still is
    heads = {r.split("=")[0] for r in cfg.unsupported}
    assert "aicpu" not in heads and "l2" in heads
    assert set(cfg.explicit) >= {"output", "aicpu", "interval", "l2", "msproftx"}
