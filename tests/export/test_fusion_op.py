"""fusion_op_{dev}.csv from a job's ``host/tf_fusion.json``: msprof's columns, N/A where
TensorFlow reports nothing, one warning (no file) for a malformed fusion file."""

from __future__ import annotations

import csv
import logging
from pathlib import Path

import orjson

from openmsprof.export.msprof.fusion_op import HEADER
from openmsprof.export.msprof.summary_export import export_summary

ROW = {"model": "__inference_step_7", "name": "dense/Relu", "type": "_FusedMatMul",
       "original": ["dense/MatMul", "dense/BiasAdd", "dense/Relu"], "input_bytes": 2048,
       "output_bytes": 1024, "weight_bytes": 512}


def _fusion(job: Path) -> list[dict[str, str]]:
    with (job / "summary" / "fusion_op_0.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def test_rows_and_columns(job: Path) -> None:
    unknown = {**ROW, "name": "x/Relu", "input_bytes": None, "model": None}
    (job / "host" / "tf_fusion.json").write_bytes(orjson.dumps([ROW, unknown]))
    assert job / "summary" / "fusion_op_0.csv" in export_summary(job)
    with (job / "summary" / "fusion_op_0.csv").open(newline="") as f:
        assert next(csv.reader(f)) == HEADER
    known, partial = _fusion(job)
    assert known["Device_id"] == "0" and known["Model Name"] == "__inference_step_7"
    assert known["Model ID"] == "N/A" and known["Fusion Op"] == "dense/Relu(_FusedMatMul)"
    assert known["Original Ops"] == "dense/MatMul,dense/BiasAdd,dense/Relu"
    assert (known["Memory Input(KB)"], known["Memory Output(KB)"], known["Memory Weight(KB)"]) == \
        ("2.000", "1.000", "0.500")
    assert known["Memory Workspace(KB)"] == "N/A" and known["Memory Total(KB)"] == "3.500"
    # an unknown input size: no total is invented
    assert partial["Memory Input(KB)"] == "N/A" and partial["Memory Total(KB)"] == "N/A"
    assert partial["Model Name"] == "N/A" and partial["Memory Output(KB)"] == "1.000"


def test_no_fusion_file_no_csv(job: Path) -> None:
    export_summary(job)
    assert not (job / "summary" / "fusion_op_0.csv").exists()


def test_malformed_fusion_file_warns_once(job: Path, caplog) -> None:
    (job / "host" / "tf_fusion.json").write_text("[{")
    with caplog.at_level(logging.WARNING, logger="openmsprof"):
        export_summary(job)
    (msg,) = [r.getMessage() for r in caplog.records if "fusion_op" in r.getMessage()]
    assert "tf_fusion.json" in msg and "not JSON" in msg
    assert not (job / "summary" / "fusion_op_0.csv").exists()
