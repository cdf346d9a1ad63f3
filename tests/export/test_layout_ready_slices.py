"""``export summary``'s tool-facing half copies a host/one-device summary it has just written
rather than rendering it again from the db, sliced ones too (issue 26: at 10 M records msprof_tx
passes 1,000,000 rows, and rendering its 1.5 M rows again cost a quarter of the export)."""

from __future__ import annotations

from pathlib import Path

import pytest

from openmsprof.export.msprof import merged_output, tables
from openmsprof.export.msprof import msprof_analyze_layout as layout
from openmsprof.export.msprof.msprof_analyze_layout import export_summary_and_layout
from tests.export.dbfactory import make_job


def test_sliced_summary_is_copied_as_the_layouts_slices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = make_job(tmp_path, iterations=6)
    monkeypatch.setattr(tables.write_csv, "__defaults__", (2,))  # 2 data rows a slice: msprof_tx slices
    rendered: list[str] = []
    merged = merged_output.merged_tables
    monkeypatch.setattr(merged_output, "merged_tables",
                        lambda db, stamp, names: rendered.extend(names) or merged(db, stamp, names))
    summary, paths = export_summary_and_layout(job, ("summary",))
    tx = sorted(p for p in summary if p.name.startswith("msprof_tx_host_slice_"))
    assert len(tx) >= 3
    out = job / layout.OUTPUT_DIR
    stamp = next(p.name for p in job.iterdir() if p.name.startswith("msprof_") and p.suffix == ".db")[7:21]
    for k, source in enumerate(sorted(tx, key=lambda p: int(p.stem.rsplit("_", 1)[1]))):
        twin = out / f"msprof_tx_slice_{k}_{stamp}.csv"
        assert twin in paths and twin.read_bytes() == source.read_bytes()
    assert "msprof_tx" not in rendered
    assert not list(out.glob(f"msprof_tx_{stamp}*"))


@pytest.mark.parametrize(("names", "want"), [
    (["msprof_tx_host.csv"], ["msprof_tx_S.csv"]),
    (["msprof_tx_host_slice_1.csv", "msprof_tx_host_slice_0.csv"], ["msprof_tx_slice_0_S.csv", "msprof_tx_slice_1_S.csv"]),
    (["msprof_tx_host_slice_0.csv", "msprof_tx_host_slice_2.csv"], None),  # a slice missing
    (["msprof_tx_0.csv", "msprof_tx_1.csv"], None),  # two devices: the merged file has both
    (["msprof_tx_host_slice_0.csv", "msprof_tx_host.csv"], None),
    (["op_summary_0.csv"], None),  # its task types differ in the tool-facing db
])
def test_ready_sources(tmp_path: Path, names: list[str], want: list[str] | None) -> None:
    ready = [tmp_path / "summary" / n for n in names]
    name = "op_summary" if names[0].startswith("op_") else "msprof_tx"
    got = merged_output.ready_sources(name, ready, "S")
    assert (None if got is None else [t for _, t in got]) == want
