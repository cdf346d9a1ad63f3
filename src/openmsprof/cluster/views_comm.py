"""``cluster_communication.json``, ``cluster_communication_matrix.json`` and
``communication_group.json``, with msprof-analyze's structure and arithmetic (its text mode):
ops grouped by the tuple of ranks of their group, per step, per op, per rank, plus a
``Total Op Info@{group}`` per step (times summed, ratios and bandwidths recomputed, rounded to 4).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import duckdb
import orjson

from openmsprof.cluster.rank_small import num
from openmsprof.cluster.sqlviews import has, memo
from openmsprof.parse.hccl_hash import double_hash

__all__ = ["communication_groups", "communication_json", "double_hash", "group_json", "matrix_json"]

RATIOS = ("Wait Time Ratio", "Synchronization Time Ratio")


def _ratio(a: float, b: float) -> float:
    return 0 if abs(b) < 1e-15 else round(a / b, 4)


def communication_groups(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, set[int]]]:
    """{'collective'|'p2p': {group_name: ranks}} from every op of every rank (comm and matrix),
    computed once per connection (the three files share it)."""
    known = memo(con)
    if "groups" in known:
        return known["groups"]  # type: ignore[no-any-return]
    groups: dict[str, dict[str, set[int]]] = {"collective": defaultdict(set), "p2p": defaultdict(set)}
    views = [v for v in ("comm", "matrix") if has(con, v)]
    if views:
        sql = " UNION ".join(f"SELECT DISTINCT type, split_part(op_key, '@', -1), rank FROM {v} "
                             "WHERE op_key NOT LIKE 'Total%'" for v in views) + " ORDER BY 1, 2, 3"
        for kind, group, rank in con.execute(sql).fetchall():
            if kind in groups:
                groups[kind][group].add(int(rank))
    known["groups"] = groups
    return groups


def _tuple_keys(groups: dict[str, dict[str, set[int]]]) -> dict[tuple[str, str], str]:
    """(kind, group) → the key of its ranks' tuple, ``"(0, 1)"`` (``"()"`` for an unknown group)."""
    return {(kind, name): str(tuple(sorted(ranks))) for kind, g in groups.items() for name, ranks in g.items()}


def _n(v: Any) -> float:
    """A rank file's time or size as a number: numbers as they are (an int stays an int in the
    sums), anything else as the store reads it (:func:`.rank_small.num`: numeric text parsed,
    the rest 0; a hand-edited or foreign file must not end the run)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    return float(num(v))


def _total(ops: dict[str, dict[str, Any]]) -> None:
    totals: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for key, per_rank in list(ops.items()):
        group = key.split("@")[-1]
        for rank, info in per_rank.items():
            tot = totals[group].setdefault(rank, {"Communication Time Info": defaultdict(float),
                                                  "Communication Bandwidth Info": {}})
            times = info.get("Communication Time Info") if isinstance(info, dict) else None
            for k, v in (times.items() if isinstance(times, dict) else ()):
                if k not in RATIOS and k != "Start Timestamp(us)":
                    tot["Communication Time Info"][k] += _n(v)
            bands = info.get("Communication Bandwidth Info") if isinstance(info, dict) else None
            for transport, b in (bands.items() if isinstance(bands, dict) else ()):
                if not isinstance(b, dict):
                    continue
                t = tot["Communication Bandwidth Info"].setdefault(
                    transport, {"Transit Time(ms)": 0, "Transit Size(MB)": 0, "Size Distribution": defaultdict(lambda: [0, 0])})
                t["Transit Time(ms)"] += _n(b.get("Transit Time(ms)", 0))
                t["Transit Size(MB)"] += _n(b.get("Transit Size(MB)", 0))
                dist = b.get("Size Distribution")
                for size, pair in (dist.items() if isinstance(dist, dict) else ()):
                    count, ms = pair if isinstance(pair, (list, tuple)) and len(pair) == 2 else (0, 0)
                    t["Size Distribution"][size][0] += _n(count)
                    t["Size Distribution"][size][1] += _n(ms)
    for group, per_rank in totals.items():
        for tot in per_rank.values():
            ti = tot["Communication Time Info"]
            ti["Wait Time Ratio"] = _ratio(ti.get("Wait Time(ms)", 0), ti.get("Wait Time(ms)", 0) + ti.get("Transit Time(ms)", 0))
            ti["Synchronization Time Ratio"] = _ratio(
                ti.get("Synchronization Time(ms)", 0), ti.get("Synchronization Time(ms)", 0) + ti.get("Transit Time(ms)", 0))
            for b in tot["Communication Bandwidth Info"].values():
                b["Bandwidth(GB/s)"] = _ratio(b["Transit Size(MB)"], b["Transit Time(ms)"])
        ops[f"Total Op Info@{group}"] = per_rank


def communication_json(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The content of cluster_communication.json (empty when no rank has communication data)."""
    if not has(con, "comm"):
        return {}
    keys = _tuple_keys(communication_groups(con))
    out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    rows = con.execute("SELECT rank, step, type, op_key, info FROM comm ORDER BY rank, seq").fetchall()
    for rank, step, kind, key, info in rows:
        out.setdefault(keys.get((kind, key.split("@")[-1]), "()"), {}).setdefault(step, {}).setdefault(key, {}).setdefault(
            str(rank), orjson.loads(info))
    for steps in out.values():
        for ops in steps.values():
            _total(ops)
    return out


def _merge_links(ops: dict[str, dict[str, dict[str, Any]]]) -> None:
    local_to_global: dict[str, dict[str, str]] = {}
    for key, per_rank in ops.items():
        group = key.split("@")[-1]
        for rank, links in per_rank.items():
            for link in links:
                src, _, dst = link.partition("-")
                if src == dst:
                    local_to_global.setdefault(group, {}).setdefault(src, rank)
    for key, per_rank in list(ops.items()):
        merged: dict[str, dict[str, Any]] = defaultdict(
            lambda: {"Transport Type": "", "Transit Time(ms)": 0, "Transit Size(MB)": 0, "Op Name": ""})
        for links in per_rank.values():
            for link, v in links.items():
                m = merged[link]
                m["Transport Type"] = v.get("Transport Type")
                m["Op Name"] = v.get("Op Name", "")
                m["Transit Time(ms)"] += v.get("Transit Time(ms)", 0)
                m["Transit Size(MB)"] += v.get("Transit Size(MB)", 0)
        rank_map = local_to_global.get(key.split("@")[-1], {})
        out = {}
        for link, m in merged.items():
            src, _, dst = link.partition("-")
            if src in rank_map and dst in rank_map:
                m["Bandwidth(GB/s)"] = _ratio(m["Transit Size(MB)"], m["Transit Time(ms)"])
                out[f"{rank_map[src]}-{rank_map[dst]}"] = m
        ops[key] = out  # type: ignore[assignment]


def _matrix_total(ops: dict[str, Any]) -> None:
    totals: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for key, links in list(ops.items()):
        name = key.split("@")[0]
        if any(s in name for s in ("middle", "top", "bottom")) and "total" not in name:
            continue
        for link, v in (links.items() if isinstance(links, dict) else ()):
            if not isinstance(v, dict):
                continue
            t = totals[key.split("@")[-1]].setdefault(
                link, {"Transport Type": "", "Transit Time(ms)": 0, "Transit Size(MB)": 0, "Op Name": ""})
            t["Transport Type"] = v.get("Transport Type")
            t["Op Name"] = v.get("Op Name", "")
            t["Transit Time(ms)"] += _n(v.get("Transit Time(ms)", 0))
            t["Transit Size(MB)"] += _n(v.get("Transit Size(MB)", 0))
    for group, links in totals.items():
        for t in links.values():
            t["Bandwidth(GB/s)"] = _ratio(t["Transit Size(MB)"], t["Transit Time(ms)"])
        ops[f"Total Op Info@{group}"] = links


def matrix_json(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The content of cluster_communication_matrix.json (links mapped to global ranks by self links)."""
    if not has(con, "matrix"):
        return {}
    keys = _tuple_keys(communication_groups(con))
    out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for rank, step, kind, key, link, info in con.execute(
            "SELECT rank, step, type, op_key, link, info FROM matrix ORDER BY rank, seq").fetchall():
        per_rank = out.setdefault(keys.get((kind, key.split("@")[-1]), "()"), {}).setdefault(step, {}).setdefault(key, {})
        per_rank.setdefault(str(rank), {})[link] = orjson.loads(info)
    for steps in out.values():
        for ops in steps.values():
            _merge_links(ops)
            _matrix_total(ops)
    return out


def group_json(con: duckdb.DuckDBPyConnection, parallel_group_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """communication_group.json: rank sets per kind, and each group's id and pg name when the
    ``@group`` suffix is the hash of a ``parallel_group_info`` id (profiler_metadata.json)."""
    groups = communication_groups(con)
    named = {str(double_hash(str(gid))): (str(gid), info) for gid, info in (parallel_group_info or {}).items()
             if isinstance(info, dict)}
    out: dict[str, Any] = {kind: [sorted(r) for r in g.values()] for kind, g in groups.items()}
    rows = []
    for kind, g in groups.items():
        for name, ranks in g.items():
            gid, info = named.get(name, ("", {}))
            ranks_out = sorted(info.get("global_ranks") or ranks) if info else sorted(ranks)
            rows.append({"type": kind, "rank_set": ranks_out, "group_name": name, "group_id": gid,
                         "pg_name": info.get("group_name", "") if info else ""})
    out["comm_group_parallel_info"] = rows
    return out
