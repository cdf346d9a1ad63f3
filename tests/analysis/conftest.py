"""Real jobs for the comparison tests: the bundled CNN profiled through the pyACL facade."""

from __future__ import annotations

import os
from pathlib import Path

import onnx
import pytest

from openmsprof.cli.cmd_demo import profile_model
from openmsprof.demo.models import resnet_like

EXECUTES = 20


def _profile(root: Path, name: str, model: onnx.ModelProto) -> Path:
    path = root / f"{name}.onnx"
    onnx.save(model, os.fspath(path))
    out = root / name
    out.mkdir()
    return profile_model(path, out, EXECUTES)


@pytest.fixture(scope="session")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``mish`` and ``leakyrelu`` (the case study) and ``wide`` (LeakyReLU, 4x the channels)."""
    root = tmp_path_factory.mktemp("compare_jobs")
    return {
        "mish": _profile(root, "mish", resnet_like("mish")),
        "leakyrelu": _profile(root, "leakyrelu", resnet_like("leakyrelu")),
        "wide": _profile(root, "wide", resnet_like("leakyrelu", channels=64)),
    }
