"""``show --layout svp``: seed 002's four screens — AI Core metrics, op statistic, ACL
statistic and frequency — as :data:`~openmsprof.export.msprof.show.Section` tables.

The numbers are those of ``export summary --layout svp``; only the columns that fit 80
terminal columns are shown (all of them are in the CSV files).
"""

from __future__ import annotations

from typing import Any

from openmsprof.export.jobdb import JobDB
from openmsprof.export.msprof import summary_host as host
from openmsprof.export.msprof.show import Section
from openmsprof.export.msprof.svp_names import svp_models
from openmsprof.export.msprof.svp_summary import layer_rows, op_statistic_rows

__all__ = ["svp_sections"]


def _frequency(db: JobDB) -> list[list[Any]]:
    info = db.info_json()
    clock = info.get("sysClockFreq", "N/A")
    rows = []
    for cpu in info.get("CPU", []) or []:
        if isinstance(cpu, dict):
            rows.append([cpu.get("Id", "N/A"), cpu.get("Name", "N/A") or "N/A",
                         cpu.get("Frequency", "") or "N/A", clock])
    return rows


def svp_sections(db: JobDB, top: int = 20) -> list[Section]:
    """The four seed 002 tables (per device and model for the first two); empty ones left out."""
    out: list[Section] = []
    for m in svp_models(db):
        where = f"device {m.dev}, model {m.file_name} {m.id_text}, {m.batch_num} batch(es)"
        layers = sorted(layer_rows(db, m)[:-1], key=lambda r: -float(r[4]))[:top]
        if layers:
            out.append((f"AI Core metrics ({where})",
                        ["Layer Id", "Layer Name", "Layer Type", "Time(us)", "Time Ratio"],
                        [[r[0], r[2], r[3], str(r[4]), str(r[5])] for r in layers]))
        ops = op_statistic_rows(db, m)[:top]
        if ops:
            out.append((f"Op statistic ({where})",
                        ["OP Name", "Task Type", "Count", "Total(us)", "Avg(us)", "Max(us)", "Ratio(%)"],
                        [[r[2], r[3], r[6], str(r[5]), str(r[7]), str(r[8]), str(r[4])] for r in ops]))
    acl = [row for t in host.acl_statistic(db) for row in t.rows][:top]
    if acl:
        out.append(("Acl statistic", ["Name", "Type", "Count", "Total(us)", "Avg(us)", "Max(us)", "Ratio(%)"],
                    [[r[3], r[2], r[6], str(r[5]), str(r[7]), str(r[8]), str(r[4])] for r in acl]))
    freq = _frequency(db)
    if freq:
        out.append(("Frequency", ["CPU Id", "CPU", "Frequency(MHz)", "Clock(Hz)"], freq))
    return out
