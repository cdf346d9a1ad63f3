"""Load a run directory through the TensorBoard Ascend plugin's own loader and print, as JSON, what
each view it offers holds (run as a subprocess by test_tb_plugin.py: the loader forks workers and
installs absl logging).  Usage: ``python tb_plugin_load.py RUN_DIR CACHE_DIR``."""

from __future__ import annotations

import json
import sys
from typing import Any


def _count(table: Any) -> int:
    """Rows of a view's table: a list, or the ``rows`` (or ``data``) of a dict; a dict of devices
    or steps sums its parts."""
    if isinstance(table, list):
        return len(table)
    if not isinstance(table, dict):
        return 0
    for key in ("rows", "data"):
        if key in table:
            return _count(table[key])
    return sum(_count(v) for v in table.values())


def main(run_dir: str, cache_dir: str) -> None:
    from torch_tb_profiler import io
    from torch_tb_profiler.profiler.loader import RunLoader

    run = RunLoader("run", run_dir, io.Cache(cache_dir), "Ascend").load()
    out: dict[str, Any] = {"views": [v.display_name for v in run.views], "workers": {}}
    for p in run.get_profiles():
        if not hasattr(p, "tid2tree"):
            out["distributed"] = {"overlap": _count(p.steps_to_overlap), "wait": _count(p.steps_to_wait),
                                  "comm_ops": _count(p.comm_ops)}
            continue
        mem = p.memory_all_curve or {}
        total, pta_ge = mem.get("total", {}), mem.get("ptaGe", {})
        events = p.memory_events or {}
        component = events.get("component", {}).get("rows", {})
        out["workers"][p.worker] = {
            "views": [v.display_name for v in p.views],
            "operators": _count(p.operation_table_by_name), "operator_pie": _count(p.operation_pie_by_name),
            "operators_by_shape": _count(p.operation_table_by_name_input),
            "kernels": _count(p.kernel_table), "kernel_pie": _count(p.kernel_pie), "tc_pie": _count(p.tc_pie),
            "trace": p.trace_file_path, "tree_threads": len(p.tid2tree or {}),
            "memory_total": {d: {k: len(v) for k, v in rows.items()} for d, rows in total.get("rows", {}).items()},
            "memory_total_peaks": total.get("metadata", {}).get("peaks", {}),
            "memory_components": {d: sorted(rows) for d, rows in pta_ge.get("rows", {}).items()},
            "component_peak": {d: [[r[0], float(r[1])] for r in rows] for d, rows in component.items()},
            "memory_events": _count(events.get("operator", {}).get("rows", {})),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
