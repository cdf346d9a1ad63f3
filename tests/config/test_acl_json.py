"""acl.json "profiler" section (docs/formats.md §7.2): golden files, every bad input, fuzzing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openmsprof.config import (
    ConfigError,
    PathError,
    load_acl_json,
    parse_profiler_section,
    to_acl_json,
)
from openmsprof.config.acl_json import MAX_ACL_JSON_BYTES, parse_acl_json_bytes

GOLDEN = Path(__file__).parent / "golden"


def _write(tmp_path: Path, doc: object, name: str = "acl.json") -> Path:
    p = tmp_path / name
    p.write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    return p


def _section(**keys: object) -> dict[str, object]:
    return {"switch": "on", "output": "/tmp/openmsprof_x", **keys}


def test_golden_full_file_and_round_trip() -> None:
    cfg = load_acl_json(GOLDEN / "acl_full.json")
    assert cfg is not None
    expected = json.loads((GOLDEN / "acl_full.config.json").read_text())
    got = cfg.to_dict()
    assert {k: got[k] for k in expected} == expected
    assert cfg.explicit == sorted({"switch", "output", "storage_limit_mb", "task_time", "aic_metrics",
                                   "aicpu", "l2", "msproftx", "hccl", "ge_api", "acl_api",
                                   "runtime_api", "sys_hardware_mem_freq", "sys_io_sampling_freq",
                                   "sys_interconnection_freq", "dvpp_freq", "instr_profiling_freq",
                                   "llc_profiling", "host_sys", "host_sys_usage",
                                   "host_sys_usage_freq", "interval"})
    # every Ascend-only switch is reported, once each
    heads = [r.split(":")[0] for r in cfg.unsupported]
    assert heads == ["aic_metrics=MemoryUB", "l2=on", "aicpu=on", "sys_hardware_mem_freq=100",
                     "sys_io_sampling_freq=1", "sys_interconnection_freq=50", "dvpp_freq=20",
                     "instr_profiling_freq=300", "ge_api=l0", "host_sys=disk", "llc_profiling=write"]
    written = to_acl_json(cfg)
    assert written == {"profiler": orjson.loads((GOLDEN / "acl_full.json").read_bytes())["profiler"]}
    again = parse_profiler_section(written["profiler"], "round trip")
    assert again.to_dict() | {"source": "x"} == cfg.to_dict() | {"source": "x"}


def test_golden_s2_sample() -> None:
    """seeds/002 acl.json verbatim: S2 spellings aacpu / aac_metrics / acl_api / interval."""
    cfg = load_acl_json(GOLDEN / "acl_s2.json")
    assert cfg is not None
    assert (cfg.aicpu, cfg.aic_metrics, cfg.interval, cfg.acl_api, cfg.switch) == (
        True, "ArithmeticUtilization", 0, True, True)
    assert cfg.output == "/root/AscendProjects/MyAppTest/profiling"
    assert cfg.runtime_api is False  # decision 6


def test_defaults_of_a_minimal_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = load_acl_json(_write(tmp_path, {"profiler": {"switch": "on"}}))
    assert cfg is not None
    assert (cfg.task_time, cfg.aic_metrics, cfg.aicpu, cfg.l2, cfg.msproftx, cfg.hccl,
            cfg.acl_api, cfg.runtime_api, cfg.ge_api, cfg.storage_limit_mb, cfg.interval) == (
        "on", "PipeUtilization", False, False, False, False, True, False, "off", None, 0)
    assert cfg.output == str(tmp_path)  # decision 10: cwd, and said so
    assert "no output given" in cfg.notes[0] and str(tmp_path) in cfg.notes[0]
    assert cfg.explicit == ["switch"]
    # S2 spelling present: aicpu defaults on, metrics off unless asked
    s2 = parse_profiler_section(_section(aacpu="on"))
    assert s2.aicpu is True and s2.aic_metrics == "AiCoreNone"
    s2off = parse_profiler_section(_section(aac_metrics="AiCoreNone", aacpu="off"))
    assert s2off.aicpu is False


@pytest.mark.parametrize("doc", [{}, {"dump": {}}, {"profiler": {"switch": "off", "aicpu": "on"}},
                                 {"profiler": {"aicpu": "on"}}])
def test_not_enabled_gives_none(tmp_path: Path, doc: dict[str, object]) -> None:
    assert load_acl_json(_write(tmp_path, doc)) is None


def test_empty_file_gives_none(tmp_path: Path) -> None:
    assert load_acl_json(_write(tmp_path, b"  \n")) is None


def test_switch_off_still_validates_as_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert load_acl_json(_write(tmp_path, {"profiler": {"switch": "off", "aicpu": "yes"}})) is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "profiler.aicpu='yes'" in lines[0] and "profiling is off" in lines[0]


@pytest.mark.parametrize("value", ["ON", "On", True, 1, "x" * 5000])
def test_switch_not_on_means_off(tmp_path: Path, caplog: pytest.LogCaptureFixture, value: object) -> None:
    """Seed 002: "如果缺失该参数或参数值不为on,则表示关闭Profiling" -- off, said in one short line."""
    assert load_acl_json(_write(tmp_path, {"profiler": {"switch": value, "aicpu": "on"}})) is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "profiler.switch=" in lines[0] and "profiling off" in lines[0]
    assert len(lines[0]) < 400


@pytest.mark.parametrize("value", ["PipeUtilization", "Memory", 7])
def test_aac_metrics_other_value_collects_nothing(tmp_path: Path, value: object) -> None:
    """Seed 002: "配置为ArithmeticUtilization代表采集..., 否则为不采集" -- no error, no metrics."""
    cfg = load_acl_json(_write(tmp_path, {"profiler": _section(aac_metrics=value)}))
    assert cfg is not None and cfg.aic_metrics == "AiCoreNone"
    assert any(f"aac_metrics={value!r} is not ArithmeticUtilization" in n for n in cfg.notes)
    kept = load_acl_json(_write(tmp_path, {"profiler": _section(aac_metrics="ArithmeticUtilization")}))
    assert kept is not None and kept.aic_metrics == "ArithmeticUtilization"


@pytest.mark.parametrize(("text", "line", "col"), [
    (b'{"profiler": {"switch": "on",}}', 1, 29),
    (b'{\n  "profiler": {\n    "switch" "on"\n  }\n}', 3, 14),
    (b'{"profiler": ', 1, 14),
    (b"\xff\xfe{}", 1, 1),
])
def test_malformed_json_names_file_line_column(tmp_path: Path, text: bytes, line: int, col: int) -> None:
    p = _write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_acl_json(p)
    msg = str(e.value)
    assert msg.startswith(f"acl.json {p}: invalid JSON at line {line} column {col}: ")
    assert "\n" not in msg


@pytest.mark.parametrize(("doc", "fragment"), [
    ([1, 2], "top level='list'"),
    ({"profiler": "on"}, "profiler='on' is invalid; allowed: a JSON object"),
    ({"profiler": _section(aicpu=1)}, "profiler.aicpu=1 is invalid; allowed: on, off"),
    ({"profiler": _section(aicpu=None)}, "profiler.aicpu=None"),
    ({"profiler": _section(l2=["on"])}, "profiler.l2=['on']"),
    ({"profiler": _section(task_time="l2")}, "profiler.task_time='l2' is invalid; allowed: on, off, l0, l1"),
    ({"profiler": _section(aic_metrics="Pipe")}, "allowed: ArithmeticUtilization, PipeUtilization"),
    ({"profiler": _section(aic_metrics="Custom:0x80000000")}, "[0x1, 0x7fffffff]"),
    ({"profiler": _section(ge_api="on")}, "allowed: off, l0, l1"),
    ({"profiler": _section(host_sys="cpu,gpu")}, "a comma list of cpu, mem, disk, network, osrt"),
    ({"profiler": _section(host_sys=["cpu"])}, "profiler.host_sys=['cpu']"),
    ({"profiler": _section(host_sys_usage="disk")}, "comma list of cpu, mem"),
    ({"profiler": _section(interval="-1")}, "profiler.interval='-1' is invalid; allowed: an integer in [0, 4294967295]"),
    ({"profiler": _section(interval=1.0)}, "profiler.interval=1.0"),
    ({"profiler": _section(interval=True)}, "profiler.interval=True"),
    ({"profiler": _section(output=5)}, "profiler.output=5 is invalid; allowed: a directory path"),
    ({"profiler": _section(llc_profiling="rw")}, "allowed: read, write"),
    ({"profiler": _section(acl_api="on", ascendcl="off")}, "the same value as profiler.acl_api"),
    ({"profiler": _section(aicpu="on", aacpu="off")}, "the same value as profiler.aicpu"),
    ({"profiler": _section(aicpu_trace="on")}, "unknown key 'profiler.aicpu_trace'; allowed keys: aac_metrics"),
    ({"profiler": _section(training_trace="on")}, "unknown key 'profiler.training_trace'"),
])
def test_wrong_types_unknown_keys_bad_values(tmp_path: Path, doc: object, fragment: str) -> None:
    p = _write(tmp_path, doc)
    with pytest.raises(ConfigError) as e:
        load_acl_json(p)
    msg = str(e.value)
    assert msg.startswith(f"acl.json {p}: ") and "\n" not in msg
    assert fragment in msg


@pytest.mark.parametrize(("value", "ok"), [
    ("200MB", 200), ("4294967295MB", 4294967295), ("199MB", None), ("4294967296MB", None),
    ("0MB", None), ("500", None), ("500mb", None), ("500 MB", None), (500, None), ("-300MB", None),
    ("1e3MB", None), ("", None),
])
def test_storage_limit_range(value: object, ok: int | None) -> None:
    if ok is not None:
        assert parse_profiler_section(_section(storage_limit=value)).storage_limit_mb == ok
        return
    with pytest.raises(ConfigError, match=r'storage_limit=.* allowed: "\{N\}MB" with N in \[200, 4294967295\]'):
        parse_profiler_section(_section(storage_limit=value))


@pytest.mark.parametrize(("key", "lo", "hi"), [
    ("sys_hardware_mem_freq", 1, 100), ("sys_io_sampling_freq", 1, 100), ("dvpp_freq", 1, 100),
    ("sys_interconnection_freq", 1, 50), ("host_sys_usage_freq", 1, 50),
    ("instr_profiling_freq", 300, 30000),
])
def test_frequency_ranges(key: str, lo: int, hi: int) -> None:
    assert getattr(parse_profiler_section(_section(**{key: str(lo)})), key) == lo
    assert getattr(parse_profiler_section(_section(**{key: hi})), key) == hi
    for bad in (lo - 1, hi + 1, str(hi + 1), "fast"):
        with pytest.raises(ConfigError, match=rf"profiler.{key}={bad!r} is invalid; allowed: an integer in \[{lo}, {hi}\]"):
            parse_profiler_section(_section(**{key: bad}))


@pytest.mark.parametrize("bad", ["/tmp/x/../etc", "../up", "/tmp/a\nb", "/tmp/a\tb", "/tmp/a\x08",
                                 "/tmp/a\x7f", '/tmp/"x', "/tmp/'x", "/tmp/a\\b", "/tmp/50%",
                                 "/tmp/a>b", "/tmp/a<b", "/tmp/a|b", "/tmp/a&b", "/tmp/$x",
                                 "/tmp/a;b", "/tmp/`x`", ""])
def test_hostile_output_paths(tmp_path: Path, bad: str) -> None:
    p = _write(tmp_path, {"profiler": {"switch": "on", "output": bad}})
    with pytest.raises(PathError) as e:
        load_acl_json(p)
    assert isinstance(e.value, ConfigError)
    msg = str(e.value)
    assert msg.startswith(f"acl.json {p}: ") and "profiler.output" in msg and "\n" not in msg


def test_symlinked_output_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(PathError, match="symbolic link"):
        parse_profiler_section(_section(output=str(tmp_path / "link" / "jobs")), "acl.json t")


def test_relative_output_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = parse_profiler_section(_section(output="prof_out"))
    assert cfg.output == str(tmp_path / "prof_out")


def test_unreadable_inputs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"acl.json '.*missing.json': cannot read: No such file"):
        load_acl_json(tmp_path / "missing.json")
    with pytest.raises(ConfigError, match="is a directory"):
        load_acl_json(tmp_path)
    real = _write(tmp_path, {"profiler": {"switch": "on"}}, "real.json")
    (tmp_path / "link.json").symlink_to(real)
    with pytest.raises(PathError, match="symbolic link"):
        load_acl_json(tmp_path / "link.json")
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(MAX_ACL_JSON_BYTES + 1)
    with pytest.raises(ConfigError, match="larger than the 10485760 byte limit"):
        load_acl_json(big)
    with pytest.raises(ConfigError, match="forbidden character"):
        load_acl_json(str(tmp_path / "a;b.json"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_permissions(tmp_path: Path) -> None:
    p = _write(tmp_path, {"profiler": {"switch": "on"}})
    p.chmod(0)
    with pytest.raises(ConfigError, match="Permission denied"):
        load_acl_json(p)


_KEYS = ["switch", "output", "storage_limit", "task_time", "aic_metrics", "aicpu", "l2", "msproftx",
         "hccl", "ge_api", "ascendcl", "acl_api", "runtime_api", "interval", "host_sys", "aacpu",
         "aac_metrics", "host_sys_usage_freq", "sys_interconnection_freq", "bogus"]
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True)
    | st.text(max_size=20) | st.sampled_from(["on", "off", "l0", "l1", "200MB", "cpu,mem", "/tmp/x",
                                             "Custom:0x1,2", "PipeUtilization", "50"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=8), _VALUES, max_size=6))
def test_fuzz_sections_only_config_errors(section: dict[str, object]) -> None:
    for attempt in (lambda: parse_acl_json_bytes(json.dumps({"profiler": section}).encode()),
                    lambda: parse_profiler_section(section, "fuzz")):
        try:
            attempt()
        except ConfigError as exc:
            assert "\n" not in str(exc)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_fuzz_raw_bytes_only_config_errors(data: bytes) -> None:
    try:
        parse_acl_json_bytes(b'{"profiler":' + data + b"}")
        parse_acl_json_bytes(data)
    except ConfigError as exc:
        assert "\n" not in str(exc)
