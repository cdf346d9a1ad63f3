"""Summary headers equal docs/formats.md §4 exactly (golden file, itself checked against it)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import orjson

from openmsprof.export.msprof import headers as H
from openmsprof.export.msprof.summary_export import export_summary

GOLDEN = orjson.loads((Path(__file__).parent / "golden" / "headers.json").read_bytes())
#: the format reference carried in the repository (its §4 table)
FORMATS_MD = Path(__file__).resolve().parents[2] / "docs" / "formats.md"
#: golden key → (row label in the §4 table, index of the backticked group)
ROWS = {
    "op_summary": ("op_summary", 0), "op_summary_tensor": ("op_summary", 1),
    "op_statistic": ("op_statistic", 0), "api_statistic": ("api_statistic", 0),
    "acl_statistic": ("acl_statistic (S2, SVP compat)", 0),
    "op_statistic_s2": ("op_statistic (S2 form)", 0), "task_time": ("task_time", 0),
    "step_trace": ("step_trace", 0), "msprof_tx": ("msprof_tx", 0),
    "host_cpu_usage": ("host_cpu_usage", 0), "host_mem_usage": ("host_mem_usage", 0),
}


def test_code_headers_equal_golden() -> None:
    code = dict(H.ALL, op_summary_tensor=H.OP_SUMMARY_TENSOR)
    assert code == GOLDEN


def test_golden_equals_formats_md() -> None:
    rows = {}
    for line in FORMATS_MD.read_text().splitlines():
        m = re.match(r"^\| ([^|]+?) \| (.+) \| (Req|Opt)[^|]*\|$", line)
        if m:
            rows.setdefault(m.group(1), m.group(2))
    for key, (label, group) in ROWS.items():
        groups = re.findall(r"`([^`]+)`", rows[label])
        assert [c.strip() for c in groups[group].split(", ")] == GOLDEN[key], key


def test_written_csv_headers_equal_golden(job: Path) -> None:
    paths = export_summary(job, s2=True)
    seen = set()
    for p in paths:
        name = re.sub(r"_(\d+|host)(_slice_\d+)?$", "", p.stem)
        with p.open() as f:
            header = next(csv.reader(f))
        # op_summary: + tensor columns + the cost model's columns (like the seed's metric labels)
        expected = GOLDEN[name] + (GOLDEN["op_summary_tensor"] + H.OP_SUMMARY_COST
                                   if name == "op_summary" else [])
        assert header == expected, p.name
        seen.add(name)
    assert seen == set(H.ALL)
