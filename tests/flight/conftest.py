"""Helpers for the flight recorder tests: real child processes with this tree on PYTHONPATH."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")
PROGS = Path(__file__).resolve().parents[2] / "examples" / "flight"


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["OPENMSPROF_PEAKS"] = "off"
    env.update(extra)
    return env


def run_code(code: str, tmp: Path, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (dedented) as a script in a fresh interpreter."""
    script = tmp / "prog.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script), *args], env=child_env(**env), capture_output=True,
                          text=True, timeout=timeout)


def jobs(out: Path) -> list[Path]:
    return sorted(p for p in out.glob("PROF_*") if p.is_dir())


def info(job: Path) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads((job / "host" / "info.json").read_bytes())
    return doc


def flight_doc(job: Path) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads((job / "host" / "flight.json").read_bytes())
    return doc


def functions_in_samples(job: Path) -> set[str]:
    doc = flight_doc(job)
    frames = doc["stacks"]["frames"]
    return {frames[i][1] for s in doc["stacks"]["samples"] for i in s[2]}


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openmsprof", *args], env=child_env(), capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def out(tmp_path: Path) -> Path:
    d = tmp_path / "out"
    d.mkdir()
    return d
