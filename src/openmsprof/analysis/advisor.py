"""The advisor (``openmsprof analyze``): run rules over a job and report evidence-linked findings.

``analyze(job, rules=None)`` → findings, most severe first.  Rules live in
:mod:`openmsprof.analysis.rules` and :mod:`openmsprof.analysis.rules_time`; each one reads the
job database and returns findings whose events name the rows behind them.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from openmsprof.analysis import rules as R
from openmsprof.analysis import rules_time as T
from openmsprof.analysis.findings import Finding, severity_rank
from openmsprof.analysis.rules_patterns import patterns, use_peaks
from openmsprof.config.errors import ConfigError, RawDataError
from openmsprof.export.jobdb import JobDB, find_jobs, open_job
from openmsprof.fileio.read_guard import escape, read_regular
from openmsprof.machine.peaks import load_peaks

Rule = Callable[[JobDB], list[Finding]]
#: Rules in report order.
RULES: dict[str, Rule] = {
    "patterns": patterns,
    "top_ops": R.top_ops,
    "long_api": R.long_api,
    "host_gaps": T.host_gaps,
    "step_interval": T.step_interval,
    "unsupported": R.unsupported,
}
FORMATS = ("text", "json")
MAX_API_STATISTIC_BYTES = 64 * 1024 * 1024


def select_rules(names: Iterable[str] | str | None) -> list[str]:
    """Rule names to run: all for None/empty; ``"a,b"`` or a list; unknown → ConfigError."""
    if names is None:
        return list(RULES)
    items = names.split(",") if isinstance(names, str) else [
        p for n in names for p in str(n).split(",")]
    chosen = [n.strip() for n in items if n.strip()]
    if not chosen:
        return list(RULES)
    bad = [n for n in chosen if n not in RULES]
    if bad:
        raise ConfigError(f"--rule {bad[0]!r} is not a rule; choose from {', '.join(RULES)}")
    return list(dict.fromkeys(chosen))


def run_rules(db: JobDB, rules: Iterable[str] | str | None = None) -> list[Finding]:
    """Findings of the chosen rules on an open database, most severe first (stable)."""
    found: list[Finding] = []
    for name in select_rules(rules):
        found.extend(RULES[name](db))
    found.sort(key=lambda f: severity_rank(f.severity))
    return found


def _one_job(job: Path | str) -> Path:
    jobs = find_jobs(Path(job))
    if len(jobs) != 1:
        raise ConfigError(f"-dir {str(job)!r} holds {len(jobs)} jobs; give one job directory")
    return jobs[0]


def apply_peaks(db: JobDB, peaks: str | Path | None) -> None:
    """Use the override file ``peaks`` (a target machine's ceilings) for ``db``'s rules."""
    if peaks is not None:
        use_peaks(db, load_peaks(peaks))


def analyze(job: Path | str, rules: Iterable[str] | str | None = None,
            peaks: str | Path | None = None) -> list[Finding]:
    """Import ``job`` if needed and run the advisor rules on it."""
    select_rules(rules)  # bad names fail before any import work
    if peaks is not None:
        load_peaks(peaks)
    with open_job(_one_job(job)) as db:
        apply_peaks(db, peaks)
        return run_rules(db, rules)


def job_summary(db: JobDB) -> dict[str, Any]:
    """Name, host, duration and row counts of the job (the report's header)."""
    out: dict[str, Any] = {"job": db.meta.get("JOB_NAME", db.job.name),
                           "host": db.meta.get("HOSTNAME", ""), "pid": db.pid}
    if db.has("SESSION_TIME_INFO"):
        s, e = db.query("SELECT MIN(startTimeNs), MAX(endTimeNs) FROM SESSION_TIME_INFO")[0]
        out["duration_ms"] = round((e - s) / 1e6, 3) if s is not None and e is not None else None
    for table, key in (("TASK", "tasks"), ("CANN_API", "api_calls"), ("STEP_TIME", "steps"),
                       ("MSTX_EVENTS", "mstx_events")):
        out[key] = db.query(f"SELECT COUNT(*) FROM {table}")[0][0] if table in db.tables else 0
    if not out["api_calls"] and (Path(db.job) / "ASCEND_PROFILER_OUTPUT").is_dir():  # a torch rank dir:
        # its API calls are api_statistic.csv's counts (its kernel database has no CANN_API rows)
        out["api_calls"] = torch_api_calls(db.job)
    return out


def torch_api_calls(rank_dir: Path) -> int:
    """The sum of ``Count`` in a torch rank dir's ``ASCEND_PROFILER_OUTPUT/api_statistic.csv``
    (Level1+); 0 without one.  Unreadable or malformed: a one-line RawDataError."""
    path = Path(rank_dir) / "ASCEND_PROFILER_OUTPUT" / "api_statistic.csv"
    if not path.is_file():
        return 0
    data = read_regular(path, "api_statistic", MAX_API_STATISTIC_BYTES, RawDataError)
    rows = csv.DictReader(io.StringIO(data.decode("utf-8", "replace")))
    total = 0
    for n, row in enumerate(rows, 2):
        count = (row.get("Count") or "").strip()
        if not count.isdigit():
            raise RawDataError(f"api_statistic {str(path)!r} line {n}: Count={escape(count)[:40]!r} "
                               "is not a count")
        total += int(count)
    return total


def report(job: Path | str, rules: Iterable[str] | str | None = None,
           peaks: str | Path | None = None) -> dict[str, Any]:
    """The JSON document of ``analyze --format json``: job summary, rules run, findings."""
    chosen = select_rules(rules)
    if peaks is not None:
        load_peaks(peaks)
    with open_job(_one_job(job)) as db:
        apply_peaks(db, peaks)
        found = run_rules(db, chosen)
        return {"summary": job_summary(db), "rules": chosen,
                "findings": [f.to_dict(db.base_ns) for f in found]}


def render_json(doc: dict[str, Any]) -> str:
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"


def render_text(doc: dict[str, Any]) -> str:
    """Plain text: one block per finding with its evidence and event links."""
    s = doc["summary"]
    lines = [f"openmsprof analyze: {s['job']} — {s.get('tasks', 0)} tasks, "
             f"{s.get('api_calls', 0)} API calls, {s.get('steps', 0)} steps; "
             f"{len(doc['findings'])} finding(s) from rules {', '.join(doc['rules'])}"]
    for f in doc["findings"]:
        lines.append(f"[{f['severity'].upper()}] {f['rule']}: {f['summary']}")
        ev = ", ".join(f"{k}={_short(v)}" for k, v in f["evidence"].items())
        if ev:
            lines.append(f"    evidence: {ev}")
        for e in f["events"]:
            lines.append(f"    -> {e['table']} id={e['id']} {e['name']!r} ts={e['ts_us']} us "
                         f"(start {e['start_us']} us), dur {e['dur_us']} us")
    if not doc["findings"]:
        lines.append("no findings")
    return "\n".join(lines) + "\n"


def _short(value: Any) -> str:
    if isinstance(value, list):
        return "; ".join(str(v) for v in value)
    return str(value)
