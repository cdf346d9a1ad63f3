"""The seed facts the conformance suite reads (``seed_facts/*.json``) are in the repository, and
still say what the seed documents say whenever those are beside it (``../shared/seeds``)."""

from __future__ import annotations

import json

import pytest

from tests.conformance.facts import SEED_FILES, SEEDS, dump, extract, facts, facts_path


@pytest.mark.parametrize("seed", sorted(SEED_FILES))
def test_facts_are_carried_in_the_repository(seed: str) -> None:
    doc = json.loads(facts_path(seed).read_text(encoding="utf-8"))
    assert doc["seed"] == seed and doc["document"] == SEED_FILES[seed]
    assert doc["calls"] and all(f["text"] for f in doc["calls"])
    assert all(f["section"] for key in ("apis", "commands") for f in doc.get(key, []))


def test_the_facts_each_module_needs_are_there() -> None:
    assert len(facts("000")["apis"]) >= 20
    assert [s["section"] for s in facts("001")["samples"]] == ["示例代码1", "示例代码2"]
    assert {" ".join(c["text"].split()[:4]) for c in facts("002")["commands"]} >= {
        "python3.7.5 msprof.pyc collect -m", "python3.7.5 msprof.pyc import [-h]",
        "python3.7.5 msprof.pyc import -dir", "python3.7.5 msprof.pyc export timeline",
        "python3.7.5 msprof.pyc export summary", "python3.7.5 msprof.pyc show [-h]"}
    assert set(facts("002")["tables"]) == {"acl_statistic", "op_summary", "op_statistic"}
    assert len(facts("002")["tables"]["op_summary"]["columns"]) == 18
    assert "host_sys_usage" in facts("003")["table1"]
    assert facts("004")["profiler_config"]["json"]["experimental_config"]["profiler_level"] == "Level0"


@pytest.mark.parametrize("seed", sorted(SEED_FILES))
def test_facts_match_the_seeds(seed: str) -> None:
    """Re-extracted from the seed document, the facts equal the stored ones (skipped only where
    the seeds are not beside the repository: a plain clone)."""
    path = SEEDS / SEED_FILES[seed]
    if not path.is_file():
        pytest.skip(f"{SEEDS} is not beside the repository (set OPENMSPROF_SEEDS to check the facts)")
    fresh = dump(extract(seed, path.read_text(encoding="utf-8")))
    assert fresh == facts_path(seed).read_text(encoding="utf-8"), (
        f"seed {seed} changed: run python -m tests.conformance.facts --write and review the diff")
