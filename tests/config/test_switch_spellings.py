"""Every key each entry point accepts, per spelling, does what it says or is reported "not
supported here" (issue 23).  The keys come from each entry point's own table, so a key added
later without an effect check or a report fails here:

* acl.json's profiler section and TF's profiling_options: ``profiler_options.option_table``;
* the msprof command line: ``cli_flags.FLAGS``, in both spellings (``--aic_metrics``,
  ``--aic-metrics``), parsed by the real argparse parser;
* pyACL ``create_config``: every ``ACL_PROF_*`` bit and every ``ACL_AICORE_*`` metric value;
* torch_npu: every argument of ``_ExperimentalConfig`` (which must be the keys of the
  profiler_config.json spelling, ``torch_config.EXPERIMENTAL_KEYS``).

The first four map onto ProfileConfig: each key, given each of its values, must change at least
one field (a key that changes nothing is accepted with no effect), every field it changes must
be one tests/config/test_every_switch.py runs in a real session (its EFFECTS or REPORTED), and
where the spelling can say the value that test reports, the loader's ``unsupported`` lines name
it (the session writes each as a "not supported here" warning).  The torch facade applies its
own switches: :data:`TORCH` names, per argument, the test of its effect or the value it reports.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest

from openmsprof.config import acl_mask as m
from openmsprof.config import cli_flags
from openmsprof.config.acl_json import parse_profiler_section
from openmsprof.config.errors import ConfigError
from openmsprof.config.model import AICORE_METRICS, SWITCH_FIELDS, ProfileConfig
from openmsprof.config.profiler_options import Dialect, option_table
from openmsprof.config.tf_options import parse_profiling_options
from openmsprof.config.torch_config import EXPERIMENTAL_KEYS
from openmsprof.torch.profiler import AiCMetrics, ProfilerLevel, _ExperimentalConfig
from tests.config.test_every_switch import EFFECTS, REPORTED, VALUES

CHECKED = set(EFFECTS) | REPORTED


def _spell(value: Any) -> str | None:
    """VALUES' value in the option files' spelling (None when it has none)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, (int, str)):
        return str(value)
    return None


def _candidates(kind: str, field: str, tmp: Path) -> list[Any]:
    """Every value of an option kind worth trying (its table's choices, its range's ends) plus
    VALUES' value of its field."""
    name, _, arg = kind.partition(":")
    out: list[Any] = {
        "onoff": ["on", "off"], "choice": arg.split("|"), "list": [*arg.split("|"), arg.replace("|", ",")],
        "int": arg.split(":"), "freq": arg.split(":"), "storage": ["200MB", "4096MB"],
        "metrics": [*AICORE_METRICS, "Custom:0x1"], "s2metrics": ["ArithmeticUtilization", "Memory"],
        "path": [str(tmp)], "text": ["conv1", "scope/grad"]}[name]
    spelled = _spell(VALUES[field])
    return out + ([spelled] if spelled is not None else [])


def _changed(cfg: ProfileConfig, base: ProfileConfig) -> set[str]:
    return {f for f in SWITCH_FIELDS if getattr(cfg, f) != getattr(base, f)}


def _check(spelling: str, key: str, results: list[tuple[Any, ProfileConfig]], base: ProfileConfig) -> None:
    """The three rules of the module docstring for one key's parsed values."""
    fields = set().union(*(_changed(c, base) for _v, c in results))
    assert fields, f"{spelling} {key}: accepted, and no value of it changes the configuration"
    assert fields <= CHECKED, f"{spelling} {key} sets {sorted(fields - CHECKED)}, which no session test checks"
    for field in fields & REPORTED:
        for value, cfg in results:
            if field in APPLIED_BY_SOURCE and any(s in cfg.source for s in APPLIED_BY_SOURCE[field][0]):
                continue  # applied by this entry point (its effect test is named there)
            if field == "aic_metrics" and not cfg.task_time_on:
                continue  # metrics count only with task time (docs/formats.md §7.2): nothing asked
            if getattr(cfg, field) == VALUES[field] and getattr(base, field) != VALUES[field]:
                assert any(line.startswith(f"{field}=") for line in cfg.unsupported), \
                    f"{spelling} {key}={value!r}: {field} is not reported: {cfg.unsupported}"


#: fields a plain session reports that some entry points apply: field → (their config
#: sources, the test of the effect there)
APPLIED_BY_SOURCE = {
    "interval": (("acl.json", "command line", "collect"),
                 "tests/acl/test_acl_json.py::test_interval_profiles_exactly_every_nth_execute")}


def test_applied_by_source_tests_exist() -> None:
    root = Path(__file__).resolve().parents[2]
    for _sources, node in APPLIED_BY_SOURCE.values():
        path, name = node.split("::")
        assert f"def {name}(" in (root / path).read_text(), node


def _parse(dialect: Dialect, section: dict[str, Any]) -> ProfileConfig:
    if dialect == "acl":
        return parse_profiler_section({"switch": "on", **section})
    return parse_profiling_options(section or {"switch": "on"})


@pytest.mark.parametrize("dialect", ["acl", "tf"])
def test_option_file_keys(dialect: Dialect, tmp_path: Path) -> None:
    base = _parse(dialect, {})
    table = option_table(dialect)
    assert len(table) >= 25  # the table itself, not an empty import
    for key, (field, kind) in table.items():
        results = []
        for value in _candidates(kind, field, tmp_path):
            try:
                results.append((value, _parse(dialect, {key: value})))
            except ConfigError:
                continue  # a value this spelling refuses (one line, tested elsewhere)
        assert results, f"{dialect} {key}: no value accepted"
        _check(f"{dialect} option", key, results, base)


def _cli(argv: list[str]) -> ProfileConfig:
    parser = argparse.ArgumentParser(exit_on_error=False)
    cli_flags.add_arguments(parser)
    return cli_flags.from_args(parser.parse_args(argv))


def test_command_line_flags_in_both_spellings(tmp_path: Path) -> None:
    base = _cli([])
    table = option_table("cli")
    assert set(cli_flags.FLAGS) == set(table), "a flag without an option key, or a key without a flag"
    for key in cli_flags.FLAGS:
        field, kind = table[key]
        spellings = [f"--{key}"] + ([f"--{key.replace('_', '-')}"] if "_" in key else [])
        for flag in spellings:
            results = []
            for value in _candidates(kind, field, tmp_path):
                try:
                    results.append((value, _cli([flag, str(value)])))
                except ConfigError:
                    continue
            assert results, f"{flag}: no value accepted"
            _check("command line", flag, results, base)


def test_pyacl_data_type_bits_and_metrics() -> None:
    none = m.ACL_AICORE_NONE
    base = m.from_mask([0], none, 0, 0)
    assert len(m.ACL_PROF_BITS) >= 18
    for name, bit in m.ACL_PROF_BITS.items():
        results = [(hex(bit), m.from_mask([0], metric, 0, bit))
                   for metric in (none, m.ACL_AICORE_PIPE_UTILIZATION)]
        _check("pyACL", name, results, base)
    mask = m.ACL_PROF_AICORE_METRICS | m.ACL_PROF_TASK_TIME
    with_task = m.from_mask([0], none, 0, mask)
    for value, metric in m.AICORE_METRIC_NAMES.items():
        if value == none:
            continue  # the "off" value: changes nothing, by definition
        _check("pyACL aicore_metrics", metric, [(value, m.from_mask([0], value, 0, mask))], with_task)


#: torch _ExperimentalConfig argument → how it is checked: ("effect", test node) for a switch the
#: facade applies, ("reported", kwargs) for a value it reports in its ``unsupported`` lines (the
#: window writes them "not supported here"), ("alias", other argument).
TORCH: dict[str, list[tuple[str, Any]]] = {
    "profiler_level": [("effect", "tests/conformance/test_seed_rows_round2.py::test_row08_level_none_writes_no_level_files"),
                       ("effect", "tests/conformance/test_seed_rows_round2.py::test_row20_analyze_level1_rank_dir_counts_api_calls"),
                       ("reported", {"profiler_level": ProfilerLevel.Level2})],
    "aic_metrics": [("reported", {"profiler_level": ProfilerLevel.Level1, "aic_metrics": AiCMetrics.PipeUtilization})],
    "l2_cache": [("reported", {"l2_cache": True})],
    "msprof_tx": [("effect", "tests/torch/test_modes.py::test_mstx_markers_land_in_trace_and_job")],
    "mstx": [("alias", "msprof_tx")],
    "data_simplification": [("effect", "tests/torch/test_analyse_repeat.py::test_analyse_twice_without_simplification_writes_the_same_files"),
                            ("effect", "tests/conformance/test_seed_004.py::test_start_stop_and_simplification")],
    "record_op_args": [("reported", {"record_op_args": True})],
    "op_attr": [("reported", {"op_attr": True})],
    "gc_detect_threshold": [("effect", "tests/torch/test_gc_detect.py::test_long_collections_are_gc_events_in_trace_view")],
    "export_type": [("effect", "tests/torch/test_modes.py::test_export_type_db")],
    "host_sys": [("effect", "tests/torch/test_experimental_effects.py::test_host_sys_cpu_mem_sample_the_host"),
                 ("reported", {"host_sys": ["disk"]})],
    "mstx_domain_include": [("effect", "tests/torch/test_experimental_effects.py::test_filtered_domains_are_not_recorded")],
    "mstx_domain_exclude": [("effect", "tests/torch/test_experimental_effects.py::test_filtered_domains_are_not_recorded")],
    "sys_io": [("reported", {"sys_io": True})],
    "sys_interconnection": [("reported", {"sys_interconnection": True})],
}


def test_torch_experimental_config_arguments() -> None:
    params = [p for p in inspect.signature(_ExperimentalConfig.__init__).parameters if p != "self"]
    assert set(params) == set(EXPERIMENTAL_KEYS), "the class and profiler_config.json spell different keys"
    assert set(params) == set(TORCH), sorted(set(params) ^ set(TORCH))
    assert _ExperimentalConfig().unsupported == []
    root = Path(__file__).resolve().parents[2]
    for key, checks in TORCH.items():
        for how, what in checks:
            if how == "effect":
                path, name = what.split("::")
                module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
                assert callable(getattr(module, name, None)) and (root / path).is_file(), (key, what)
            elif how == "reported":
                lines = _ExperimentalConfig(**what).unsupported
                assert any(line.startswith(key.replace("_cache", "_cache")) or key in line for line in lines), \
                    (key, what, lines)
            else:
                a, b = _ExperimentalConfig(**{key: True}), _ExperimentalConfig(**{what: True})
                assert a.to_dict() == b.to_dict() and a.to_dict() != _ExperimentalConfig().to_dict(), key
