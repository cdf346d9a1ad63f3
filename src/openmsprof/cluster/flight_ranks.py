"""``openmsprof cluster`` over flight recorder dumps: which rank stalled first, its last completed
step and collective, and the frame it waits in; PyTorch's own flight recorder dumps (ours taken
at the trigger, ``host/torch_fr.json``, or ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``-style files
``*trace_rank_N`` beside the jobs, JSON or pickle) add the collective sequence numbers."""

from __future__ import annotations

import io
import pickle
import re
from pathlib import Path
from typing import Any

import orjson

from openmsprof.analysis.flight_explain import load_flight, top_frame
from openmsprof.cluster.discover import find_flight_jobs
from openmsprof.config.errors import RawDataError
from openmsprof.fileio.read_guard import read_regular
from openmsprof.flight.dump import TORCH_FR_FILE

__all__ = ["COLLECTIVES", "diagnose", "find_flight_jobs", "read_torch_fr", "render"]

COLLECTIVES = {"all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
               "broadcast", "barrier", "reduce", "gather", "scatter", "all_to_all", "all_to_all_single",
               "send", "recv", "isend", "irecv", "wait", "monitored_barrier", "batch_isend_irecv"}
_FR_NAME = re.compile(r"trace_rank_?(\d+)(\.json)?$")
_LIMIT = 256 << 20


class _NoClasses(pickle.Unpickler):
    """PyTorch's trace dumps hold dicts, lists, strings and numbers only: no class is loaded."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"class {module}.{name} refused")


def read_torch_fr(path: Path) -> dict[str, Any] | None:
    """A PyTorch flight recorder dump (JSON or pickle), or None when it is not one."""
    data = read_regular(path, "torch flight recorder dump", _LIMIT, RawDataError)
    try:
        doc = orjson.loads(data) if data[:1] in (b"{", b"[") else _NoClasses(io.BytesIO(data)).load()
    except (orjson.JSONDecodeError, pickle.UnpicklingError, EOFError, ValueError, TypeError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("entries"), list) else None


def _collective(frames: list[list[Any]]) -> str | None:
    for fr in frames:
        if "torch/distributed" in str(fr[0]) and str(fr[1]).rsplit(".", 1)[-1] in COLLECTIVES:
            return str(fr[1]).rsplit(".", 1)[-1]
    return None


def _user_frame(frames: list[list[Any]]) -> list[Any] | None:
    rest = [f for f in frames if "torch/distributed" not in str(f[0]) and "/torch/" not in str(f[0])]
    return top_frame(rest) or top_frame(frames)


def _main_frames(doc: dict[str, Any]) -> list[list[Any]]:
    main = doc.get("main_tid")
    for t in doc.get("trigger_stacks", []):
        if t.get("tid") == main:
            return list(t.get("frames", []))
    return []


def _sample_history(doc: dict[str, Any]) -> tuple[str | None, int | None]:
    """From the main thread's samples: the last collective seen before the current wait began,
    and when the current wait began (epoch ns)."""
    frames = doc["stacks"]["frames"]
    main = doc.get("main_tid")
    samples = sorted((s for s in doc["stacks"]["samples"] if s[1] == main), key=lambda s: s[0])
    if not samples:
        return None, None
    def key(s: list[Any]) -> tuple[Any, ...]:
        fr = _user_frame([frames[i] for i in s[2]])
        return (fr[0], fr[1]) if fr else ()
    last = key(samples[-1])
    since = samples[-1][0]
    k = len(samples) - 1
    while k >= 0 and key(samples[k]) == last:
        since = samples[k][0]
        k -= 1
    previous = None
    while k >= 0 and previous is None:
        previous = _collective([frames[i] for i in samples[k][2]])
        k -= 1
    return previous, since


def _fr_summary(fr: dict[str, Any]) -> dict[str, Any]:
    ents = [e for e in fr["entries"] if isinstance(e, dict)]
    done = [e for e in ents if e.get("retired") or e.get("state") == "completed"]
    open_ = [e for e in ents if e not in done]
    last = max(done, key=lambda e: e.get("collective_seq_id", 0), default=None)
    return {"entries": len(ents),
            "last_completed_seq": last.get("collective_seq_id") if last else None,
            "last_completed": last.get("profiling_name") if last else None,
            "pending": [[e.get("collective_seq_id"), e.get("profiling_name"), e.get("state")] for e in open_]}


def _rank_row(job: Path, doc: dict[str, Any]) -> dict[str, Any]:
    steps = doc.get("steps", [])
    frames = _main_frames(doc)
    coll = _collective(frames)
    user = _user_frame(frames)
    prev, since = _sample_history(doc)
    row: dict[str, Any] = {"rank": doc.get("rank", -1), "job": str(job), "trigger": doc.get("trigger", {}).get("kind"),
                           "last_step": steps[-1][0] if steps else None, "last_step_end_ns": steps[-1][2] if steps else None,
                           "in_collective": coll, "last_collective": prev, "waiting_since_ns": since,
                           "waits_in": f"{user[1]} ({Path(str(user[0])).name}:{user[2]})" if user else "?"}
    fr_path = job / "host" / TORCH_FR_FILE
    if fr_path.is_file():
        fr = read_torch_fr(fr_path)
        if fr is not None:
            row["torch_fr"] = _fr_summary(fr)
    return row


def diagnose(root: Path) -> dict[str, Any] | None:
    """The stall diagnosis over every rank's flight dumps under ``root``; None when there are none."""
    jobs = find_flight_jobs(root)
    if not jobs:
        return None
    rows: dict[int, dict[str, Any]] = {}
    for job in jobs:
        doc = load_flight(job)
        if doc is None:
            continue
        row = _rank_row(job, doc)
        old = rows.get(row["rank"])
        # a rank's hang dump says most about a stall; else its newest dump
        if old is None or (row["trigger"] == "hang") > (old["trigger"] == "hang") or (
                (row["trigger"] == "hang") == (old["trigger"] == "hang") and row["job"] > old["job"]):
            rows[row["rank"]] = row
    for path in sorted(root.rglob("*trace_rank*")):
        m = _FR_NAME.search(path.name)
        if m and path.is_file() and not path.is_symlink():
            fr = read_torch_fr(path)
            if fr is not None and int(m.group(1)) in rows:
                rows[int(m.group(1))].setdefault("torch_fr", _fr_summary(fr))
    ranks = sorted(rows.values(), key=lambda r: r["rank"])

    def order(r: dict[str, Any]) -> tuple[Any, ...]:
        seq = (r.get("torch_fr") or {}).get("last_completed_seq")
        return (r["last_step"] if r["last_step"] is not None else -1, seq if seq is not None else 1 << 62,
                r["in_collective"] is not None, r["waiting_since_ns"] or 0)

    first = min(ranks, key=order) if ranks else None
    return {"ranks": ranks, "stalled_first": first}


def render(diag: dict[str, Any]) -> list[str]:
    """One line for the rank that stalled first, then one per rank."""
    out = []
    f = diag.get("stalled_first")
    if f:
        coll = f["last_collective"] or "none seen"
        fr = f.get("torch_fr")
        if fr and fr.get("last_completed"):
            coll = f"{fr['last_completed']} (seq {fr['last_completed_seq']})"
        where = f"in {f['in_collective']} called from {f['waits_in']}" if f["in_collective"] else f"in {f['waits_in']}"
        out.append(f"flight: rank {f['rank']} stalled first: last completed step {f['last_step']}, "
                   f"last completed collective {coll}; waits {where}")
    for r in diag["ranks"]:
        where = f"{r['in_collective']} from {r['waits_in']}" if r["in_collective"] else r["waits_in"]
        pend = (r.get("torch_fr") or {}).get("pending")
        extra = f"; torch FR pending {pend}" if pend else ""
        out.append(f"  rank {r['rank']}: {r['trigger']} dump, last step {r['last_step']}, waits in {where}{extra}")
    return out
