"""README's table of optional extensions: every extension setup.py builds (but the recorder core and
the two export/import loops described above it) is listed, and each listed switch makes its
module take the Python path although the extension is built."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROWS = re.findall(r"^\| `([\w/]+)\.c` \| [^|]+ \| `(OPENMSPROF_\w+_PYTHON)=1` \|$",
                  (ROOT / "README.md").read_text(), re.M)
#: where each extension is loaded, and the attribute that is None on the Python path
LOADED = {"sources/_kineto_scan": ("openmsprof.sources.kineto_trace", "_ext"),
          "export/ascend_pt/_nest_sweep": ("openmsprof.export.ascend_pt.nesting", "_ext"),
          "export/ascend_pt/_row_text": ("openmsprof.export.ascend_pt.text", "NATIVE"),
          "export/ascend_pt/_summary_cols": ("openmsprof.export.ascend_pt.summary_cols", "NATIVE"),
          "export/ascend_pt/_perfetto_fit": ("openmsprof.export.ascend_pt.perfetto_fit", "_ext")}


def test_the_table_lists_every_optional_extension() -> None:
    built = set(re.findall(r'Extension\("openmsprof\.([\w.]+)"', (ROOT / "setup.py").read_text()))
    described_above = {"recorder._ring", "export.msprof._task_lines", "parse._bulk_insert"}
    assert {c.replace("/", ".") for c, _ in ROWS} == built - described_above


@pytest.mark.parametrize(("ext", "switch"), [r for r in ROWS if r[0] in LOADED])
def test_each_switch_forces_the_python_path(ext: str, switch: str) -> None:
    module, attr = LOADED[ext]
    code = f"import {module} as m; print(getattr(m, {attr!r}) is None)"
    on = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                        env={**_env(), switch: "1"})
    off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env())
    assert on.stdout.strip() == "True", on.stderr
    if off.stdout.strip() != "False":
        pytest.skip(f"{ext}.c is not built here")


def test_the_ort_switch_is_read_by_the_scan() -> None:
    (row,) = [s for c, s in ROWS if c == "sources/_ort_scan"]
    from openmsprof.sources import ort_profile

    assert row == ort_profile.PY_SCAN_ENV


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.endswith("_PYTHON")}
