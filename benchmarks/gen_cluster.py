"""Synthetic multi-rank torch output in openmsprof's real ``*_ascend_pt`` formats, with a planted
slow rank, for the cluster tests and benchmark.

Every rank runs ``steps`` steps of ``segments`` segments: ``ops`` operators from a realistic mix
(matmul, conv, elementwise, copies, softmax…), then an all_reduce of the segment's gradients.
The collective starts on each rank when its operators end and finishes on all ranks together,
after the last rank arrived plus a transfer time — the semantics of a real collective.  On the
slow rank one operator (``SLOW_OP``) of one segment per step runs ``slow_ms`` longer, so every
other rank waits for it in the following all_reduce.

    python benchmarks/gen_cluster.py OUT --ranks 8 --events 20000 [--slow-rank 5]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.csv as pacsv

SLOW_OP = "aten::convolution_backward"
MIX = [  # name, type, mean µs, weight
    ("aten::mm", "aten::mm", 180.0, 6), ("aten::addmm", "aten::addmm", 150.0, 4),
    ("aten::convolution", "aten::convolution", 260.0, 3), (SLOW_OP, SLOW_OP, 420.0, 2),
    ("aten::relu", "aten::relu", 12.0, 5), ("aten::add", "aten::add", 9.0, 8), ("aten::mul", "aten::mul", 9.0, 5),
    ("aten::copy_", "aten::copy_", 25.0, 4), ("aten::_log_softmax", "aten::_log_softmax", 40.0, 1),
    ("aten::native_layer_norm", "aten::native_layer_norm", 35.0, 2), ("aten::fill_", "aten::fill_", 4.0, 3),
]
GROUP = str((48 << 32) | 48)  # HCCL hash of group id "0"
HEAD = ["Step Id", "Device_id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State", "Accelerator Core",
        "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Num", "Mix Block Num", "HF32 Eligible",
        "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types", "Output Formats",
        "Context ID"]
STEP_HEAD = ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free",
             "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
T0_US = 1_795_000_000_000_000.0


def _op_info(start: float, elapse_ms: float, transit_ms: float, wait_ms: float, size_mb: float) -> dict:
    bw = round(size_mb / transit_ms, 4) if transit_ms else 0
    return {"Communication Time Info": {
        "Start Timestamp(us)": start, "Elapse Time(ms)": elapse_ms, "Transit Time(ms)": transit_ms,
        "Wait Time(ms)": wait_ms, "Synchronization Time(ms)": 0.0, "Idle Time(ms)": 0.0,
        "Wait Time Ratio": round(wait_ms / (wait_ms + transit_ms), 4) if wait_ms + transit_ms else 0,
        "Synchronization Time Ratio": 0.0},
        "Communication Bandwidth Info": {"LOCAL": {
            "Transit Size(MB)": size_mb, "Transit Time(ms)": transit_ms, "Bandwidth(GB/s)": bw,
            "Large Packet Ratio": 0.0, "Size Distribution": {str(size_mb): [1, transit_ms]}}}}


def _total(ops: dict) -> dict:
    t = {k: sum(o["Communication Time Info"][k] for o in ops.values()) for k in
         ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)", "Idle Time(ms)")}
    t["Wait Time Ratio"] = round(t["Wait Time(ms)"] / (t["Wait Time(ms)"] + t["Transit Time(ms)"]), 4) \
        if t["Wait Time(ms)"] + t["Transit Time(ms)"] else 0
    t["Synchronization Time Ratio"] = 0.0
    size = sum(o["Communication Bandwidth Info"]["LOCAL"]["Transit Size(MB)"] for o in ops.values())
    return {"Communication Time Info": t, "Communication Bandwidth Info": {"LOCAL": {
        "Transit Size(MB)": size, "Transit Time(ms)": t["Transit Time(ms)"],
        "Bandwidth(GB/s)": round(size / t["Transit Time(ms)"], 4) if t["Transit Time(ms)"] else 0,
        "Large Packet Ratio": 0.0, "Size Distribution": {}}}}


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    os.chmod(path, 0o640)


def generate(out: Path, ranks: int = 4, events: int = 20_000, steps: int = 4, segments: int = 10,
             slow_rank: int | None = 1, slow_ms: float = 30.0, seed: int = 7, host: str = "node0") -> list[Path]:
    """Write ``ranks`` rank dirs of about ``events`` kernels each under ``out``; returns them."""
    rng = np.random.default_rng(seed)
    ops = max(1, events // (steps * segments))
    names = np.array([m[0] for m in MIX])
    means = np.array([m[2] for m in MIX])
    weights = np.array([m[3] for m in MIX], float)
    kinds = rng.choice(len(MIX), size=(steps, segments, ops), p=weights / weights.sum())  # same program on all ranks
    dur = means[kinds][None] * rng.lognormal(0.0, 0.08, size=(ranks, steps, segments, ops))
    if slow_rank is not None and 0 <= slow_rank < ranks:
        slow_at = np.argmax(names[kinds] == SLOW_OP, axis=2)  # first SLOW_OP of each segment
        seg = segments // 2
        for s in range(steps):
            if names[kinds[s, seg, slow_at[s, seg]]] == SLOW_OP:
                dur[slow_rank, s, seg, slow_at[s, seg]] += slow_ms * 1000
    gap = 1.5  # µs between operators (launch): Free time
    size_mb = rng.uniform(1, 64, size=(steps, segments)).round(3)
    transfer = size_mb / 10.0 * 1000  # µs at 10 GB/s
    clock = np.full(ranks, T0_US)
    starts = np.empty_like(dur)
    comm = np.empty((ranks, steps, segments, 2))  # start, end
    step_rows: list[list[list]] = [[] for _ in range(ranks)]
    for s in range(steps):
        step_start = clock.copy()
        for g in range(segments):
            st = clock[:, None] + np.cumsum(np.concatenate([np.zeros((ranks, 1)), dur[:, s, g, :-1] + gap], 1), 1)
            starts[:, s, g] = st
            arrive = st[:, -1] + dur[:, s, g, -1] + gap
            end = arrive.max() + transfer[s, g] * rng.uniform(0.98, 1.02)
            comm[:, s, g] = np.stack([arrive, np.full(ranks, end)], 1)
            clock = np.full(ranks, end + gap)
        for r in range(ranks):
            comp = float(dur[r, s].sum())
            c = float((comm[r, s, :, 1] - comm[r, s, :, 0]).sum())
            stage = float(clock[r] - step_start[r])
            step_rows[r].append([r, s + 1, comp, c, 0.0, c, stage - comp - c, stage, 0.0, c, 0.0])
    paths = []
    for r in range(ranks):
        d = out / f"{host}_{1000 + r}_{20261124000000000 + r}_ascend_pt"
        o = d / "ASCEND_PROFILER_OUTPUT"
        o.mkdir(parents=True, exist_ok=True)
        paths.append(d)
        _write(d / f"profiler_info_{r}.json", orjson.dumps({
            "config": {"common_config": {}, "experimental_config": {"_profiler_level": "Level1", "_export_type": ["text"]}},
            "start_info": {"syscnt_enable": False, "freq": 1000000000, "start_cnt": 0, "start_monotonic": 0},
            "end_info": {"collectionTimeEnd": int(clock[r] * 1000), "MonotonicTimeEnd": int((clock[r] - T0_US) * 1000)},
            "rank_id": r}, option=orjson.OPT_INDENT_2))
        _write(d / "profiler_metadata.json", orjson.dumps({
            "distributed_args": {"world_size": ranks, "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1,
                                 "data_parallel_size": ranks, "context_parallel_size": 1, "expert_model_parallel_size": 1},
            "parallel_group_info": {"0": {"group_name": "default_pg", "group_rank": r, "global_ranks": list(range(ranks))}}}))
        lines = [",".join(STEP_HEAD)] + [",".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row)
                                          for row in step_rows[r]]
        _write(o / "step_trace_time.csv", ("\n".join(lines) + "\n").encode())
        cj: dict = {}
        mj: dict = {}
        for s in range(steps):
            coll = {}
            mat = {}
            for g in range(segments):
                a, e = comm[r, s, g]
                wait = max(comm[:, s, g, 0].max() - a, 0.0) / 1000
                key = f"hcom_allReduce__{s}_{g}_1@{GROUP}"
                coll[key] = _op_info(float(a), float((e - a) / 1000), float(transfer[s, g] / 1000), float(wait),
                                     float(size_mb[s, g]))
                mat[f"allreduce-total-{g}@{GROUP}"] = {f"{r}-{r}": {
                    "Transport Type": "LOCAL", "Transit Size(MB)": float(size_mb[s, g]),
                    "Transit Time(ms)": float(transfer[s, g] / 1000),
                    "Bandwidth(GB/s)": round(float(size_mb[s, g] / transfer[s, g] * 1000), 4),
                    "Op Name": key.split("@")[0]}}
            coll["Total Op Info"] = _total(coll)
            cj[f"step{s + 1}"] = {"collective": coll, "p2p": {}}
            mj[f"step{s + 1}"] = {"collective": mat, "p2p": {}}
        _write(o / "communication.json", orjson.dumps(cj))
        _write(o / "communication_matrix.json", orjson.dumps(mj))
        n = steps * segments * ops
        k = kinds.reshape(-1)
        start = starts[r].reshape(-1)
        table = pa.table({
            "Step Id": np.repeat(np.arange(1, steps + 1), segments * ops), "Device_id": np.zeros(n, np.int64),
            "Model ID": np.full(n, 4294967295), "Task ID": np.arange(n), "Stream ID": np.zeros(n, np.int64),
            "Name": names[k], "Type": names[k], "OP State": np.full(n, "N/A"), "Accelerator Core": np.full(n, "CPU"),
            "Start Time(us)": np.char.add(np.char.mod("%.3f", start), "\t"),
            "Duration(us)": np.char.mod("%.3f", dur[r].reshape(-1)), "Wait Time(us)": np.full(n, "0.000"),
            **{h: np.full(n, "N/A") for h in HEAD[12:15]},
            "Input Shapes": np.full(n, "64,128;128,256"), "Input Data Types": np.full(n, "float;float"),
            **{h: np.full(n, "N/A") for h in HEAD[17:]},
        })
        pacsv.write_csv(table, o / "kernel_details.csv")  # strings quoted: same values as ours once parsed
        os.chmod(o / "kernel_details.csv", 0o640)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--events", type=int, default=20_000, help="kernels per rank")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--segments", type=int, default=10, help="all_reduces per step")
    ap.add_argument("--slow-rank", type=int, default=1)
    ap.add_argument("--slow-ms", type=float, default=30.0)
    a = ap.parse_args()
    generate(a.out, a.ranks, a.events, a.steps, a.segments, a.slow_rank, a.slow_ms)


if __name__ == "__main__":
    main()
