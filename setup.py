"""Build of the optional native code: the recorder core (``openmsprof.recorder._ring``), the
export task loop (``openmsprof.export.msprof._task_lines``), the import writer
(``openmsprof.parse._bulk_insert``), the ONNX Runtime profile scan
(``openmsprof.sources._ort_scan``), the Kineto trace scan (``openmsprof.sources._kineto_scan``), the
torch analysis' operator nesting sweep (``openmsprof.export.ascend_pt._nest_sweep``), the torch
views' row texts (``openmsprof.export.ascend_pt._row_text``) and trace_view's Perfetto fit
(``openmsprof.export.ascend_pt._perfetto_fit``).

``pip install`` compiles them with the system C compiler.  Without a compiler (or with
``OPENMSPROF_NO_NATIVE=1``) the build is skipped with a warning and openmsprof runs on the
pure-Python fallbacks, which pass the same functional tests.
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that never fails the install: a missing compiler means the Python fallback."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler at all, broken toolchain
            print(f"openmsprof: native code not built ({exc}); using the pure-Python fallbacks",
                  file=sys.stderr)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            what = {"_ring": "recorder", "_task_lines": "export task loop",
                    "_bulk_insert": "import writer", "_ort_scan": "ONNX Runtime profile scan",
                    "_kineto_scan": "Kineto trace scan", "_nest_sweep": "operator nesting sweep",
                    "_row_text": "row formatter", "_perfetto_fit": "Perfetto fit",
                    "_summary_cols": "summary columns"}.get(ext.name.rsplit(".", 1)[-1], ext.name)
            print(f"openmsprof: native {what} not built ({exc}); using its pure-Python fallback",
                  file=sys.stderr)


#: the operator nesting sweep both torch-analysis extensions include
SWEEP_H = "src/openmsprof/export/ascend_pt/_sweep.h"

ext_modules = [] if os.environ.get("OPENMSPROF_NO_NATIVE") else [
    Extension("openmsprof.recorder._ring", ["src/openmsprof/recorder/_ring.c"],
              depends=["src/openmsprof/recorder/_pack.h"],
              extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-unused-parameter"],
              libraries=["pthread"], optional=True),
    # the task pass's per-row loop (export summary); summary_task_pass.py is its fallback
    Extension("openmsprof.export.msprof._task_lines", ["src/openmsprof/export/msprof/_task_lines.c"],
              extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-unused-parameter"], optional=True),
    # the import's bulk inserts through the SQLite Python's sqlite3 has loaded; parse/db_builder.py's
    # executemany is its fallback
    Extension("openmsprof.parse._bulk_insert", ["src/openmsprof/parse/_bulk_insert.c"],
              extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-unused-parameter"],
              libraries=["dl"], optional=True),
    # the ONNX Runtime profile scan of the acl harvest; ort_profile.py's regex is its fallback
    Extension("openmsprof.sources._ort_scan", ["src/openmsprof/sources/_ort_scan.c"],
              extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-unused-parameter"], optional=True),
    # the Kineto trace's operator columns for the torch analysis; columns.Columns.add is its fallback
    Extension("openmsprof.sources._kineto_scan", ["src/openmsprof/sources/_kineto_scan.c"],
              extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wno-unused-parameter"], optional=True),
    # the operator nesting sweep of the torch analysis; nesting.sweep is its fallback
    Extension("openmsprof.export.ascend_pt._nest_sweep", ["src/openmsprof/export/ascend_pt/_nest_sweep.c"],
              depends=[SWEEP_H], extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-unused-parameter"], optional=True),
    # the torch views' rows (trace_view.json, kernel_details / operator_details.csv); text.py's
    # ``%`` templates are its fallback
    Extension("openmsprof.export.ascend_pt._row_text", ["src/openmsprof/export/ascend_pt/_row_text.c"],
              extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-unused-parameter"], optional=True),
    # the torch summary CSVs' columns (kernel codes, step sums, op groups); summary_cols.py's numpy
    # code is its fallback
    Extension("openmsprof.export.ascend_pt._summary_cols", ["src/openmsprof/export/ascend_pt/_summary_cols.c"],
              depends=[SWEEP_H], extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-unused-parameter"], optional=True),
    # trace_view's Perfetto fit (the lane sweep and Perfetto's reading of the µs text, which must
    # round as numpy's long double does: no contraction); perfetto_fit.fit's Python is its fallback
    Extension("openmsprof.export.ascend_pt._perfetto_fit", ["src/openmsprof/export/ascend_pt/_perfetto_fit.c"],
              extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-unused-parameter", "-ffp-contract=off"],
              optional=True),
]

setup(ext_modules=ext_modules, cmdclass={"build_ext": OptionalBuildExt})
