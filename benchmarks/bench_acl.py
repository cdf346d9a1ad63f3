"""Benchmark of the pyACL facade against bare ONNX Runtime, measured in the same run.

1. Profiling off: ``acl.mdl.execute`` vs bare ``InferenceSession.run`` (and vs the bare
   ``run_with_iobinding`` path it uses) on the same inputs of a tiny MLP — target ≤ +2 µs/call.
2. Profiling on (API + task time): per-execute cost vs ONNX Runtime's own profiling
   (``enable_profiling`` + ``end_profiling`` + reading its JSON) — target ≤ +10 %.
3. Subscription: time from the start of an execute until the reader thread has that execute's
   op records, vs the execute time itself ("within one execute").

    python benchmarks/bench_acl.py [--n 20000] [--n-prof 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import models

from openmsprof import acl


def best_per_call(fn, n: int, rounds: int = 5) -> float:
    """Best-of-rounds ns per call."""
    for _ in range(min(n, 2000)):
        fn()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def dataset(sizes: list[int]) -> tuple[int, list[int]]:
    ds = acl.mdl.create_dataset()
    ptrs = []
    for size in sizes:
        ptr, _ = acl.rt.malloc(size, 0)
        acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size))
        ptrs.append(ptr)
    return ds, ptrs


def load(path: str) -> tuple[int, int, int, np.ndarray]:
    mid, ret = acl.mdl.load_from_file(path)
    assert ret == 0, acl.get_recent_err_msg()
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, mid)
    inp, iptr = dataset([acl.mdl.get_input_size_by_index(desc, 0)])
    out, _ = dataset([acl.mdl.get_output_size_by_index(desc, 0)])
    dims, _ = acl.mdl.get_input_dims(desc, 0)
    x = np.random.default_rng(0).random(dims["dims"], dtype=np.float32)
    acl.rt.memcpy(iptr[0], x.nbytes, acl.util.numpy_to_ptr(x), x.nbytes, 1)
    return mid, inp, out, x


def bench_off(paths: dict[str, Path], n: int) -> None:
    path = str(paths["tiny_mlp"])
    mid, inp, out, x = load(path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {"input": x}
    y = np.zeros((1, 8), np.float32)
    io = sess.io_binding()
    io.bind_input("input", "cpu", 0, np.float32, list(x.shape), x.ctypes.data)
    io.bind_output("output", "cpu", 0, np.float32, [1, 8], y.ctypes.data)
    bare_run = best_per_call(lambda: sess.run(None, feeds), n)
    bare_io = best_per_call(lambda: sess.run_with_iobinding(io), n)
    ours = best_per_call(lambda: acl.mdl.execute(mid, inp, out), n)
    print("1. profiling off, tiny MLP (ns per call, best of 5)")
    print(f"   bare InferenceSession.run          {bare_run:9.0f}")
    print(f"   bare run_with_iobinding            {bare_io:9.0f}")
    print(f"   acl.mdl.execute                    {ours:9.0f}")
    print(f"   execute - bare run                 {ours - bare_run:+9.0f} ns  (target <= +2000)")
    print(f"   execute - bare iobinding           {ours - bare_io:+9.0f} ns  (facade cost on the same ORT path)")
    acl.mdl.unload(mid)


def ort_own_profile(path: str, x: np.ndarray, n: int) -> float:
    """ns per run of ONNX Runtime's own profiling: runs + end_profiling + reading the JSON."""
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ortprof")
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = {"input": x}
    for _ in range(10):
        sess.run(None, feeds)
    t0 = time.perf_counter_ns()
    for _ in range(n):
        sess.run(None, feeds)
    prof = sess.end_profiling()
    with open(prof, "rb") as f:
        events = orjson.loads(f.read())
    assert events
    os.unlink(prof)
    return (time.perf_counter_ns() - t0) / n


def ours_profiled(path: str, out_dir: str, n: int) -> float:
    mid, inp, out, _ = load(path)
    acl.prof.init(out_dir)
    cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0, acl.ACL_PROF_ACL_API | acl.ACL_PROF_TASK_TIME)
    acl.prof.start(cfg)
    for _ in range(10):
        acl.mdl.execute(mid, inp, out)
    t0 = time.perf_counter_ns()
    for _ in range(n):
        acl.mdl.execute(mid, inp, out)
    acl.prof.stop(cfg)  # includes harvesting the last ORT profile into task records
    per = (time.perf_counter_ns() - t0) / n
    acl.prof.destroy_config(cfg)
    acl.prof.finalize()
    acl.mdl.unload(mid)
    return per


def bench_on(paths: dict[str, Path], n: int) -> None:
    print("2. profiling on (API + task time) vs ONNX Runtime's own profiling (ns per execute)")
    for name in ("tiny_mlp", "resnet_mish"):
        path = str(paths[name])
        _, _, _, x = load(path)
        plain = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        bare = best_per_call(lambda p=plain, x=x: p.run(None, {"input": x}), n, rounds=3)
        own = min(ort_own_profile(path, x, n) for _ in range(3))
        with tempfile.TemporaryDirectory() as d:
            ours = min(ours_profiled(path, os.path.join(d, str(i)), n) for i in range(3))
        print(f"   {name:12s} bare {bare:9.0f}  ORT profiling {own:9.0f}  openmsprof {ours:9.0f}  "
              f"ratio {ours / own:5.2f} (target <= 1.10)")


def bench_subscription(paths: dict[str, Path], n: int) -> None:
    path = str(paths["resnet_mish"])
    mid, inp, out, _ = load(path)
    r, w = os.pipe()
    cfg = acl.prof.create_subscribe_config(1, acl.ACL_AICORE_NONE, w)
    acl.prof.model_subscribe(mid, cfg)
    arrivals: list[int] = []

    def reader() -> None:
        while True:
            data = os.read(r, 1 << 16)
            if not data:
                return
            arrivals.append(time.perf_counter_ns())

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    lat, dur = [], []
    for _ in range(n):
        k = len(arrivals)
        t0 = time.perf_counter_ns()
        acl.mdl.execute(mid, inp, out)
        t1 = time.perf_counter_ns()
        while len(arrivals) == k:
            time.sleep(0)
        lat.append(arrivals[k] - t0)
        dur.append(t1 - t0)
    acl.prof.model_un_subscribe(mid)
    th.join(5)
    os.close(r)
    acl.mdl.unload(mid)
    plain_mid, pin, pout, _ = load(path)
    plain = best_per_call(lambda: acl.mdl.execute(plain_mid, pin, pout), n, rounds=3)
    acl.mdl.unload(plain_mid)
    print("3. subscription, ResNet-like Mish CNN (µs)")
    print(f"   execute, not subscribed            {plain / 1e3:9.1f}")
    print(f"   execute, subscribed (median)       {statistics.median(dur) / 1e3:9.1f}")
    print(f"   execute start → reader has records {statistics.median(lat) / 1e3:9.1f} median, "
          f"{max(lat) / 1e3:.1f} max; within one execute: "
          f"{sum(a <= d for a, d in zip(lat, dur, strict=False)) / len(lat):.0%} (records written before execute returns)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000, help="calls per round, profiling off")
    ap.add_argument("--n-prof", type=int, default=300, help="executes per round, profiling on")
    ap.add_argument("--n-sub", type=int, default=100, help="subscribed executes")
    args = ap.parse_args()
    paths = models.save_all(tempfile.mkdtemp(prefix="bench_acl_"))
    acl.init()
    t = time.perf_counter()
    bench_off(paths, args.n)
    bench_on(paths, args.n_prof)
    bench_subscription(paths, args.n_sub)
    acl.finalize()
    print(f"(onnxruntime {ort.__version__}, {os.cpu_count()} cpus, {time.perf_counter() - t:.1f} s)")


if __name__ == "__main__":
    main()
