"""Pattern rules on real torch CPU runs (the torch half of the seed pair): the hand-written Mish
is found as decomposed Mish with its aten nodes, its predicted gain is positive and no more than
the time the pattern itself takes, and ``F.mish`` (one op) yields no finding.  How close the
prediction comes to what ``compare`` measures against the LeakyReLU twin (within 1.5x idle) is
a timing comparison of two runs: benchmarks/bench_pattern_gain.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from openmsprof.analysis import advisor
from openmsprof.analysis.compare import DEVICE_TIME, OVERALL, compare_jobs
from openmsprof.cli.main import main

from .torch_models import ACTIVE, profile_cnn


@pytest.fixture(scope="module")
def torch_jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("torch_seed_pair")
    jobs = {k: profile_cnn(k, root / k) for k in ("mish", "leakyrelu", "fmish")}
    jobs["mish_db"] = profile_cnn("mish", root / "mish_db", "db")
    return jobs


def test_torch_mish_top_finding_predicts_the_measured_gain(torch_jobs: dict[str, Path]) -> None:
    top = advisor.analyze(torch_jobs["mish"])[0]
    assert top.rule == "patterns" and top.evidence["pattern"] == "decomposed_mish"
    assert top.severity == "critical"
    assert top.evidence["nodes"] == ["aten::softplus → aten::tanh → aten::mul"]
    assert top.evidence["occurrences"] == 5 * ACTIVE and top.evidence["iterations"] == ACTIVE
    assert [e.name for e in top.events] == ["aten::softplus", "aten::tanh", "aten::mul"]
    predicted = float(top.evidence["predicted_gain_us_per_iteration"])
    own = float(top.evidence["measured_us_per_iteration"])  # the three ops' time, this same run
    assert 0 < predicted <= own, (predicted, own)  # removing ops cannot save more than they take
    cmp = compare_jobs(torch_jobs["mish"], torch_jobs["leakyrelu"])
    assert cmp.base_iterations == cmp.new_iterations == ACTIVE
    assert cmp.row(OVERALL, DEVICE_TIME).test.n_base == ACTIVE


def test_fused_mish_is_not_decomposed(torch_jobs: dict[str, Path]) -> None:
    found = advisor.analyze(torch_jobs["fmish"], "patterns")
    assert [f.evidence.get("pattern") for f in found] == []
    types = {f.evidence.get("op_type") for f in advisor.analyze(torch_jobs["fmish"], "top_ops")}
    assert "aten::mish" in types  # the op ran, as one kernel


def test_cli_takes_rank_dirs_and_their_parent(torch_jobs: dict[str, Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "-dir", str(torch_jobs["mish"].parent), "--rule", "patterns"]) == 0
    out = capsys.readouterr().out
    assert "[CRITICAL] patterns: decomposed Mish" in out and "aten::softplus" in out
    assert main(["compare", "-dir", str(torch_jobs["mish"]), "-dir",
                 str(torch_jobs["leakyrelu"]), "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert '"aten::leaky_relu"' in out and '"faster"' in out
    html = torch_jobs["mish"].parent / "report.html"
    assert main(["analyze", "-dir", str(torch_jobs["mish"]), "--html", str(html), "--base",
                 str(torch_jobs["leakyrelu"])]) == 0
    page = html.read_text(encoding="utf-8")
    assert "decomposed Mish" in page and "aten::softplus" in page and "<svg" in page


def test_db_only_export_is_read_the_same_way(torch_jobs: dict[str, Path]) -> None:
    rank = torch_jobs["mish_db"]
    assert not (rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").exists()
    top = advisor.analyze(rank)[0]
    assert top.evidence["pattern"] == "decomposed_mish"
    assert top.evidence["nodes"] == ["aten::softplus → aten::tanh → aten::mul"]
    assert top.evidence["occurrences"] == 5 * ACTIVE and top.evidence["iterations"] == ACTIVE


def test_load_gives_the_roofline_of_torch_ops(torch_jobs: dict[str, Path]) -> None:
    import openmsprof

    rows = openmsprof.load(torch_jobs["mish"].parent).rows("roofline")
    sp = [r for r in rows if r["OP Type"] == "aten::softplus"]
    assert len(sp) == 1 and sp[0]["Count"] == 5 * ACTIVE
    assert (sp[0]["Kind"], sp[0]["FLOPs"], sp[0]["Bytes"]) == ("transcendental", 16384, 131080)
