"""Fixtures of the seed conformance suite: the example ONNX models, built once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conformance.helpers import EXAMPLES, SEEDS


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    import models as example_models  # examples/models.py

    return example_models.save_all(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def seed_text() -> dict[str, str]:
    """The five seed documents by number ("000" ...); the suite checks its samples against them."""
    if not SEEDS.is_dir():
        pytest.skip("../shared/seeds is not beside the repository")
    return {p.name[:3]: p.read_text() for p in SEEDS.glob("*.txt")}
