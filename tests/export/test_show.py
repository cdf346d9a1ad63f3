"""show: rich tables rendered into a string (80 columns) and the CSV/JSON forms."""

from __future__ import annotations

from pathlib import Path

import orjson
from rich.console import Console

from openmsprof.export.jobdb import open_job
from openmsprof.export.msprof.show import render_rich, render_text, sections
from tests.export.dbfactory import BASE_NS, Builder


def render(job: Path, top: int = 20) -> str:
    console = Console(record=True, width=80, force_terminal=False, color_system=None)
    with open_job(job) as db:
        render_rich(job.name, sections(db, top), console)
    return console.export_text()


def test_tables_fit_80_columns_and_hold_the_numbers(job: Path) -> None:
    text = render(job)
    assert max(len(line) for line in text.splitlines()) <= 80
    for title in ("Top operators by total time", "Op statistics", "API statistics", "Steps",
                  "Host usage"):
        assert title in text
    conv = next(line for line in text.splitlines() if line.strip().startswith("conv1"))
    assert conv.split() == ["conv1", "Conv", "3", "600.000", "200.000", "27.273"]
    api = next(line for line in text.splitlines() if "aclmdlExecute" in line)
    assert api.split() == ["AscendCL", "aclmdlExecute", "3", "2370.000", "790.000", "790.000"]
    assert "Occupied Cpu Numbers" in text


def test_top_n_and_long_names(tmp_path: Path) -> None:
    b = Builder(tmp_path / "j" / "sqlite" / "msprof.db")
    b.meta(BASE_NS, BASE_NS + 10**9)
    long = "/encoder/layers.11/self_attention/query_key_value/MatMul"
    for i in range(30):
        b.task(BASE_NS + i * 1000, BASE_NS + i * 1000 + 10 + i, i + 1,
               long if i == 29 else f"op{i}", "MatMul")
    b.close()
    text = render(tmp_path / "j", top=5)
    assert max(len(line) for line in text.splitlines()) <= 80
    top_block = text.split("Op statistics")[0]
    assert "…" in top_block and "op28" in top_block and "op24" not in top_block
    assert sum(1 for line in top_block.splitlines() if "MatMul" in line) == 5


def test_empty_job_says_so(tmp_path: Path) -> None:
    b = Builder(tmp_path / "j" / "sqlite" / "msprof.db")
    b.meta(BASE_NS, None)
    b.close()
    assert "no statistics" in render(tmp_path / "j")


def test_machine_readable_forms(job: Path) -> None:
    with open_job(job) as db:
        secs = sections(db, 2)
    data = orjson.loads(render_text(secs, "json"))
    assert list(data) == ["top_operators_by_total_time", "op_statistics", "api_statistics",
                          "steps", "host_usage"]
    assert data["api_statistics"][0]["API Name"] == "aclmdlExecute"
    assert len(data["op_statistics"]) == 2
    csv_text = render_text(secs, "csv")
    assert csv_text.startswith("# top_operators_by_total_time\nOp Name,OP Type,Count,")
    assert "\n# host_usage\nResource,Metric,Value\n" in csv_text


def test_headers_never_truncated_at_80_columns(tmp_path: Path) -> None:
    """Long operator types and API names squeeze the name columns, never a header ("Cou…")."""
    b = Builder(tmp_path / "j" / "sqlite" / "msprof.db")
    b.meta(BASE_NS, BASE_NS + 10**9)
    long_type = "FusedMultiHeadAttentionWithRotaryEmbeddingAndKVCache"
    for i in range(5):
        b.task(BASE_NS + i * 1000, BASE_NS + i * 1000 + 500, i + 1, f"/model/layer{i}/{long_type}", long_type)
        b.api(BASE_NS + i * 1000, BASE_NS + i * 1000 + 900, 20000, 7, 100 + i, "aclmdlExecuteWithExtremelyLongName" * 2)
    b.close()
    text = render(tmp_path / "j")
    assert max(len(line) for line in text.splitlines()) <= 80
    header_lines = [line for line in text.splitlines() if "Count" in line]
    assert len(header_lines) == 3
    for line in header_lines:
        assert "…" not in line, line
    with open_job(tmp_path / "j") as db:
        for _title, header, _rows in sections(db):
            head = next((line for line in text.splitlines() if all(h in line for h in header)), None)
            assert head is not None, header
