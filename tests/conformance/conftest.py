"""Fixtures of the seed conformance suite: the example ONNX models, built once.

What the seeds print is read from ``seed_facts/`` (tests/conformance/facts.py), never from
``../shared``: a plain clone runs the whole suite."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conformance.helpers import EXAMPLES


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    import models as example_models  # examples/models.py

    return example_models.save_all(tmp_path_factory.mktemp("models"))

