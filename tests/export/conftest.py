"""Fixtures for the export tests: small realistic jobs built with the importer's schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.export.dbfactory import make_job


@pytest.fixture
def job(tmp_path: Path) -> Path:
    return make_job(tmp_path)
