"""Seed 002's (SVP ``msprof.pyc``) file names: one set of files per device and model.

``{model_file_name}`` is the stem of the file the model was loaded from (``JOB/host/
extra_info.json``, written by the pyACL facade; ``model`` when unknown), ``{batch_num}`` the
number of profiled executions of the model (distinct launching API calls of its tasks).  What
this machine cannot know is written ``NA`` (a file name cannot hold ``N/A``): the icache miss
rate always, the frequency when the job's info.json has none.  ``{iter_id}`` is ``0``: each
file covers every profiled iteration (docs/conformance.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import orjson

from openmsprof.export.fmt import INVALID
from openmsprof.export.jobdb import JobDB

__all__ = ["SvpModel", "frequency_text", "svp_models"]

NA_NAME = "NA"
ITER_ID = 0
_SAFE = re.compile(r"[^A-Za-z0-9_\-]+")


@dataclass(frozen=True)
class SvpModel:
    """One (device, model) pair of a job and the name parts seed 002 builds from it."""

    dev: int
    model_id: int
    file_name: str
    batch_num: int
    frequency: str

    @property
    def id_text(self) -> str:
        return NA_NAME if self.model_id in (INVALID, -1) else str(self.model_id)

    def task_time(self) -> str:
        return f"task_time_{self.dev}.{self.file_name}.{self.id_text}.{self.batch_num}.json"

    def acl(self) -> str:
        return f"acl_{self.dev}.{self.file_name}.{self.id_text}.{self.batch_num}.json"

    def op_summary(self) -> str:
        """``op_summary_{dev}.{model_file_name}.{model_id}.{batch_num}.{input_pic_num}.
        {current_pic_count}.{icache_miss_rate}.{frequency}.csv`` (pictures = executions)."""
        n = self.batch_num
        return (f"op_summary_{self.dev}.{self.file_name}.{self.id_text}.{n}.{n}.{n}."
                f"{NA_NAME}.{self.frequency}.csv")

    def op_statistic(self) -> str:
        return f"op_statistic_{self.dev}_{self.id_text}_{self.batch_num}_{ITER_ID}.csv"

    def acl_statistic(self) -> str:
        return f"acl_statistic_{self.dev}_{self.id_text}_{ITER_ID}.csv"


def _model_files(job: Path | None) -> dict[int, str]:
    if job is None:
        return {}
    try:
        data = orjson.loads((job / "host" / "extra_info.json").read_bytes())
        models = data.get("acl_models", {})
        return {int(k): Path(str(v.get("path", ""))).stem for k, v in models.items() if isinstance(v, dict)}
    except (OSError, orjson.JSONDecodeError, AttributeError, ValueError):
        return {}


def frequency_text(db: JobDB) -> str:
    """The CPU frequency (MHz) the job's info.json recorded, else ``NA``."""
    for cpu in db.info_json().get("CPU", []) or []:
        freq = str(cpu.get("Frequency", "") if isinstance(cpu, dict) else "").strip()
        if freq:
            return _SAFE.sub("_", freq)
    return NA_NAME


def svp_models(db: JobDB) -> list[SvpModel]:
    """Every (device, model) with tasks, in device then model order."""
    if not db.has("TASK"):
        return []
    files = _model_files(db.job)
    freq = frequency_text(db)
    rows = db.query("SELECT deviceId, modelId, COUNT(DISTINCT connectionId) FROM TASK"
                    " WHERE deviceId >= 0 GROUP BY deviceId, modelId ORDER BY deviceId, modelId")
    out = []
    for dev, model, launches in rows:
        name = _SAFE.sub("_", files.get(int(model), "")) or "model"
        out.append(SvpModel(int(dev), int(model), name, max(1, int(launches)), freq))
    return out
