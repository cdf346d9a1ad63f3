"""Benchmark of the pyACL facade against bare ONNX Runtime, measured in the same run.

1. Profiling off: ``acl.mdl.execute`` vs bare ``InferenceSession.run`` (and vs the bare
   ``run_with_iobinding`` path it uses) on the same inputs of a tiny MLP — target ≤ +2 µs/call.
2. Profiling on (API + task time): per-execute wall time of n executes plus the harvest of
   their ORT profile (incl. freeing the ended session) and the flush of the task records, vs a
   bare InferenceSession with ORT's own ``enable_profiling`` running n runs, then
   ``end_profiling`` and freeing the session (peers: ``session.run``; the same through an
   IOBinding, as our executes run; ``session.run`` + reading the JSON) — target ≤ +10 %.
   Bare, ORT and ours are interleaved in sub-blocks and the minimum of each part over the
   rounds is compared (the machine may be shared and noisy).  Also a steady-state figure with
   the harvests on the background thread (one window: noisy).
3. Subscription: subscribed vs unsubscribed execute, and ORT's floor for per-execute profile
   data (a pre-built profiling session per run + end_profiling + reading it, and building that
   session); the records must be in the reader's pipe when execute returns.
4. Steady state as users run it (the headline): profiling on for the whole run, the background
   harvester running with its real policy; ours (executes + the last harvest, next session and
   flush, on this thread) vs ORT's own ``enable_profiling`` (runs + ``end_profiling`` + freeing the
   session), interleaved blocks, per-round ratio: tiny MLP, small CNN and a ~10 ms CNN.

    python benchmarks/bench_acl.py [--quick] [--n 20000] [--block 0.25] [--rounds 8] [--only 1234] [--corunner both]
"""

from __future__ import annotations

import argparse
import os
import select
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import models
from corunner import CoRunner, corunner_modes, summary

from openmsprof import acl
from openmsprof.recorder import session
from openmsprof.sources import ort_trash

PROVIDERS = ["CPUExecutionProvider"]
WARM = 10


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


def _profiling_session(path: str, prefix: str) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = prefix
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=PROVIDERS)


def _timed(fn, n: int) -> int:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return time.perf_counter_ns() - t0


def one_round(path: str, x: np.ndarray, plain: ort.InferenceSession, mid: int, inp: int, out: int,
              n: int, prefix: str, parts: int = 8) -> dict[str, int]:
    """One round, ns: n bare runs, n runs of ONNX Runtime's own profiling on a bare session
    (built beforehand) and n of our executes with API + task profiling on, interleaved in
    ``parts`` sub-blocks (load drifts hit all three alike); then ORT's ``end_profiling`` (its
    JSON write), freeing its session (ORT frees the recorded events then: ms for thousands of
    runs) and reading the JSON; and our harvest of the n executes (what the background thread
    does once a second: swap sessions, end_profiling, parse, task records, free the ended
    session) with the flusher's encoding and writing of the records, here on this thread."""
    sess = _profiling_session(path, prefix)
    feeds = {"input": x}
    for _ in range(WARM):
        sess.run(None, feeds)
    sess_io = _profiling_session(path, prefix + "io")  # the same through an IOBinding, as ours
    y = np.zeros(plain.run(None, feeds)[0].shape, np.float32)
    io = sess_io.io_binding()
    io.bind_input("input", "cpu", 0, np.float32, list(x.shape), x.ctypes.data)
    io.bind_output(sess_io.get_outputs()[0].name, "cpu", 0, np.float32, list(y.shape), y.ctypes.data)
    for _ in range(WARM):
        sess_io.run_with_iobinding(io)
    model = acl.mdl.models()[mid]
    free = ort_trash.empty_trash
    t = dict.fromkeys(("bare", "run", "run_io", "exec"), 0)
    for k in range(parts):
        m = n // parts + (k < n % parts)
        t["bare"] += _timed(lambda: plain.run(None, feeds), m)
        t0 = time.perf_counter_ns()
        for _ in range(m):
            sess.run(None, feeds)
        t["run"] += time.perf_counter_ns() - t0
        t0 = time.perf_counter_ns()
        for _ in range(m):
            sess_io.run_with_iobinding(io)
        t["run_io"] += time.perf_counter_ns() - t0
        t["exec"] += _timed(lambda: acl.mdl.execute(mid, inp, out), m)
    t0 = time.perf_counter_ns()
    os.unlink(sess_io.end_profiling())
    del io, sess_io
    t["endfree_io"] = time.perf_counter_ns() - t0
    t0 = time.perf_counter_ns()
    prof = sess.end_profiling()
    t1 = time.perf_counter_ns()
    del sess
    t2 = time.perf_counter_ns()
    with open(prof, "rb") as f:
        assert orjson.loads(f.read())
    t3 = time.perf_counter_ns()
    os.unlink(prof)
    model.harvest(keep_running=True)
    session.current().stream.flusher.drain()
    free()
    t4 = time.perf_counter_ns()
    t.update(end=t1 - t0, free=t2 - t1, read=t3 - t2, harvest=t4 - t3)
    return t


def ours_steady(mid: int, inp: int, out: int, periods: int = 2) -> float:
    """ns per execute in steady state: harvests on the background thread at their normal period;
    the window runs from the start of one background harvest to the start of the ``periods``-th
    after it (so it holds exactly ``periods`` harvests, each with its parse and session free)."""
    runner = acl.mdl.models()[mid].runner
    h0 = runner.harvests
    while runner.harvests == h0:
        acl.mdl.execute(mid, inp, out)
    h1, k = runner.harvests, 0
    t0 = time.perf_counter_ns()
    while runner.harvests < h1 + periods:
        acl.mdl.execute(mid, inp, out)
        k += 1
    return (time.perf_counter_ns() - t0) / k


def bench_on(paths: dict[str, Path], rounds: int, block_s: float, steady: bool) -> None:
    from openmsprof.acl import _harvester

    print("2. profiling on (API + task time) vs ONNX Runtime's own profiling, µs per execute")
    print(f"   rounds of ~{block_s:g} s of executes (bare, ORT and ours interleaved in 8 sub-blocks), min of each")
    print(f"   part over {rounds} rounds.  ORT = bare")
    print("   session.run with enable_profiling: runs + end_profiling + freeing the session (+ reading its")
    print("   JSON: ORT+read).  ours = executes + harvest (incl. freeing the session) + flush, all on the")
    print("   application thread (periodic harvests paused: no credit for overlap with the executes).")
    print("   overhead ratio = (ours - bare) / (ORT - bare).  steady state: executes between background")
    print("   harvests (1 s period), which run on the harvester thread meanwhile")
    period = _harvester.HARVESTER.period
    _harvester.HARVESTER.period = 1e9
    try:
        for name in ("tiny_mlp", "resnet_mish"):
            _bench_on_model(str(paths[name]), name, rounds, block_s, steady)
    finally:
        _harvester.HARVESTER.period = period


def _bench_on_model(path: str, name: str, rounds: int, block_s: float, with_steady: bool) -> None:
    from openmsprof.acl import _harvester

    mid, inp, out, x = load(path)
    plain = ort.InferenceSession(path, providers=PROVIDERS)
    feeds = {"input": x}
    probe = _profiling_session(path, os.path.join(tempfile.mkdtemp(), "probe"))
    per = best_per_call(lambda: probe.run(None, feeds), 20, rounds=3)
    os.unlink(probe.end_profiling())
    n = max(10, min(20000, int(block_s * 1e9 / per)))
    res: dict[str, list[int]] = {k: [] for k in ("bare", "run", "run_io", "endfree_io", "end", "free", "read",
                                                  "exec", "harvest")}
    with tempfile.TemporaryDirectory() as d:
        acl.prof.init(os.path.join(d, "job"))
        cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0, acl.ACL_PROF_ACL_API | acl.ACL_PROF_TASK_TIME)
        acl.prof.start(cfg)
        for _ in range(WARM):
            acl.mdl.execute(mid, inp, out)
        steady = 0.0
        if with_steady and hasattr(acl.mdl.models()[mid].runner, "harvests"):
            _harvester.HARVESTER.period = 1.0
            steady = min(ours_steady(mid, inp, out, 1) for _ in range(3))
            _harvester.HARVESTER.period = 1e9
        # the warm-up's and the steady figure's executes are no round's: harvested here, once; each
        # round ends with its own harvest and drain timed, so the next starts empty (nothing of a
        # measured block is drained untimed)
        acl.mdl.models()[mid].harvest(keep_running=True)
        session.current().stream.flusher.drain()
        ort_trash.empty_trash()
        for i in range(rounds):
            for k, v in one_round(path, x, plain, mid, inp, out, n, os.path.join(d, f"o{i}")).items():
                res[k].append(v)
        acl.prof.stop(cfg)
        acl.prof.destroy_config(cfg)
        acl.prof.finalize()
    acl.mdl.unload(mid)
    m = {k: min(v) / n / 1e3 for k, v in res.items()}
    own = m["run"] + m["end"] + m["free"]
    ours = m["exec"] + m["harvest"]
    bare = m["bare"]
    print(f"   {name} (n={n} per block): bare {bare:.1f}")
    print(f"     ORT      {own:8.1f} = run {m['run']:.1f} + end_profiling {m['end']:.1f} + free session "
          f"{m['free']:.1f}   ORT+read {own + m['read']:8.1f}")
    print(f"     ours     {ours:8.1f} = execute {m['exec']:.1f} + harvest, flush, free {m['harvest']:.1f}")
    own_io = m["run_io"] + m["endfree_io"]
    print(f"     ORT-io   {own_io:8.1f} = run_with_iobinding (as ours runs) {m['run_io']:.1f} + end_profiling and free "
          f"{m['endfree_io']:.1f}")
    print(f"     ours/ORT {ours / own:5.2f}   ours/(ORT+read) {ours / (own + m['read']):5.2f}   "
          f"overhead ratio {(ours - bare) / (own - bare):5.2f}   (target <= 1.10)")
    print(f"     ours/ORT-io {ours / own_io:5.2f}   overhead ratio vs ORT-io {(ours - bare) / (own_io - bare):5.2f}")
    if steady:
        print(f"     steady state, harvests in the background: ours {steady / 1e3:.1f}   ours/ORT {steady / 1e3 / own:5.2f}"
              f"   overhead ratio {(steady / 1e3 - bare) / (own - bare):5.2f}   (min of 3 one-period windows)")


def _mm(v: list[float]) -> str:
    return f"median {statistics.median(v):7.3f}  min-max {min(v):.3f}-{max(v):.3f}"


def settle(limit_s: float = 2.0) -> None:
    """Wait until this process's other threads are quiet (under 10 % of a core for 20 ms): the
    worker threads of an ONNX Runtime session spin for work for ~35 ms of CPU each once they
    start, after the session is built."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        c = time.process_time()
        time.sleep(0.02)
        if time.process_time() - c < 0.002:
            return


def steady_round(path: str, x: np.ndarray, mid: int, inp: int, out: int, n: int, prefix: str,
                 ort_first: bool = True) -> dict[str, float]:
    """One interleaved pair, µs per execute (``ort_first``: which side runs first; rounds
    alternate it so that drift and the other side's after-effects hit both alike).  ORT as users
    write it: a session with ``enable_profiling`` (built and warmed outside the timer), n
    ``session.run`` + its own ``end_profiling`` + freeing the session (where ORT frees the
    events).  Ours as users write it: profiling started once (acl.prof.start with task time) long
    before, the background harvester running with its real policy; n executes (whatever harvests
    fall inside run concurrently), then the harvest of what is left, the next session built and
    the flusher drained, on this thread (so every harvest's work is inside ours' time, none left
    for the next block).  Process CPU of either side is read once the process is quiet (see
    :func:`settle`): ORT's session's thread-pool start before its block (built once, outside the
    timer), the spare session's after ours (a harvest's fixed cost, counted to ours)."""
    res: dict[str, float] = {}

    def ort_side() -> None:
        feeds = {"input": x}
        sess = _profiling_session(path, prefix)
        for _ in range(WARM):
            sess.run(None, feeds)
        settle()  # the session's thread pool start is not a cost per run (built once, before)
        c0 = time.process_time()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            sess.run(None, feeds)
        t1 = time.perf_counter_ns()
        prof = sess.end_profiling()
        del sess
        t2 = time.perf_counter_ns()
        c1 = time.process_time()
        os.unlink(prof)
        res.update(ort=(t2 - t0) / n / 1e3, ort_run=(t1 - t0) / n / 1e3, ort_cpu=(c1 - c0) / n * 1e6)

    def ours_side() -> None:
        model = acl.mdl.models()[mid]
        runner = model.runner
        h0 = runner.harvests
        c2 = time.process_time()
        t3 = time.perf_counter_ns()
        for _ in range(n):
            acl.mdl.execute(mid, inp, out)
        t4 = time.perf_counter_ns()
        model.harvest(keep_running=True)
        ort_trash.empty_trash()  # as the harvester does: the old session freed before the next is built
        runner.prepare_spare()
        session.current().stream.flusher.drain()
        t5 = time.perf_counter_ns()
        settle()  # the next session's pool start is a harvest's cost: inside ours' CPU, not the next block's
        c3 = time.process_time()
        res.update(ours=(t5 - t3) / n / 1e3, ours_cpu=(c3 - c2) / n * 1e6, ours_exec=(t4 - t3) / n / 1e3,
                   harvests=runner.harvests - h0 - 1)

    for side in ((ort_side, ours_side) if ort_first else (ours_side, ort_side)):
        side()
    return res


STEADY_MODELS = ("tiny", "small", "10ms")


def bench_steady(paths: dict[str, Path], rounds: int, block_s: float, conditions: list[bool],
                 which: tuple[str, ...] = STEADY_MODELS) -> None:
    print("4. steady state as users run it, µs per execute: ORT = session.run with enable_profiling + its")
    print("   end_profiling + freeing the session; ours = executes with the background harvester on (its")
    print("   real policy) + the final harvest, next session and flush on this thread.  Sides interleaved,")
    print(f"   {rounds} rounds of ~{block_s:g} s blocks; per-round ratio ours/ORT (goal <= 1.10); co-runner")
    print("   off / on (one busy process per core), the conditions interleaved too")
    big = Path(tempfile.mkdtemp()) / "cnn_10ms.onnx"
    import onnx

    from openmsprof.demo.models import resnet_like

    onnx.save(resnet_like("mish", channels=32, blocks=3, size=64), big)
    chosen = {"tiny": ("tiny_mlp", paths["tiny_mlp"]), "small": ("small CNN (resnet_mish)", paths["resnet_mish"]),
              "10ms": ("~10 ms CNN (resnet 32ch x3, 64x64)", big)}
    for name, path in (chosen[w] for w in STEADY_MODELS if w in which):
        mid, inp, out, x = load(str(path))
        probe = _profiling_session(str(path), os.path.join(tempfile.mkdtemp(), "probe"))
        per = best_per_call(lambda p=probe, f={"input": x}: p.run(None, f), 20, rounds=3)
        os.unlink(probe.end_profiling())
        n = max(20, int(block_s * 1e9 / per))
        res: dict[bool, dict[str, list[float]]] = {c: {} for c in conditions}
        loads: dict[bool, list[float]] = {c: [] for c in conditions}
        with tempfile.TemporaryDirectory() as d:
            acl.prof.init(os.path.join(d, "job"))
            cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0, acl.ACL_PROF_ACL_API | acl.ACL_PROF_TASK_TIME)
            acl.prof.start(cfg)
            for _ in range(max(WARM, n // 10)):
                acl.mdl.execute(mid, inp, out)
            for i in range(rounds):
                for cond in (conditions if i % 2 == 0 else conditions[::-1]):
                    with CoRunner(cond):
                        one = steady_round(str(path), x, mid, inp, out, n, os.path.join(d, f"s{i}{cond:d}"),
                                           ort_first=i % 2 == 0)
                        loads[cond].append(os.getloadavg()[0])
                    for k, v in one.items():
                        res[cond].setdefault(k, []).append(v)
            acl.prof.stop(cfg)
            acl.prof.destroy_config(cfg)
            acl.prof.finalize()
        acl.mdl.unload(mid)
        print(f"   {name}: n={n} per block")
        for cond in conditions:
            r = res[cond]
            ratio = [o / b for o, b in zip(r["ours"], r["ort"], strict=True)]
            cpu_ratio = [o / b for o, b in zip(r["ours_cpu"], r["ort_cpu"], strict=True)]
            print(f"    co-runner {'on ' if cond else 'off'}: load avg {min(loads[cond]):.1f}-{max(loads[cond]):.1f}")
            print(f"     ORT  {_mm(r['ort'])}   (runs alone {_mm(r['ort_run'])})")
            print(f"     ours {_mm(r['ours'])}   (executes alone {_mm(r['ours_exec'])}; "
                  f"background harvests inside a block: {_mm(r['harvests'])})")
            print(f"     ours/ORT per round: wall {summary(ratio)}; process CPU {summary(cpu_ratio)} (goal <= 1.10)")
            print(f"     process CPU µs per execute: ORT {_mm(r['ort_cpu'])}  ours {_mm(r['ours_cpu'])}")


def ort_fresh_session_floor(path: str, x: np.ndarray, n: int, prefix: str) -> tuple[float, float]:
    """What per-execute profile data costs on bare ORT (it cannot restart profiling): best ns of
    (a profiling session built beforehand: run + end_profiling + reading the JSON), and of
    building that session."""
    feeds = {"input": x}
    best = build = float("inf")
    for i in range(n):
        t0 = time.perf_counter_ns()
        s = _profiling_session(path, f"{prefix}{i}")
        t1 = time.perf_counter_ns()
        s.run(None, feeds)
        prof = s.end_profiling()
        with open(prof, "rb") as f:
            orjson.loads(f.read())
        best = min(best, time.perf_counter_ns() - t1)
        build = min(build, t1 - t0)
        os.unlink(prof)
    return best, build


def bench_subscription(paths: dict[str, Path], n: int) -> None:
    print("3. subscription, µs per execute (best / median); 'in pipe' = the execute's records were in the")
    print("   pipe when execute returned; ORT floor = a pre-built profiling session per run: run + end_profiling")
    print("   + reading it, plus building that session (ORT cannot restart profiling on a session)")
    for name in ("tiny_mlp", "resnet_mish"):
        path = str(paths[name])
        plain_mid, pin, pout, x = load(path)
        plain = best_per_call(lambda m=plain_mid, i=pin, o=pout: acl.mdl.execute(m, i, o), max(n, 50), rounds=3)
        acl.mdl.unload(plain_mid)
        with tempfile.TemporaryDirectory() as d:
            floor, build = ort_fresh_session_floor(path, x, min(n, 30), os.path.join(d, "f"))
        mid, inp, out, _ = load(path)
        r, w = os.pipe()
        cfg = acl.prof.create_subscribe_config(1, acl.ACL_AICORE_NONE, w)
        acl.prof.model_subscribe(mid, cfg)
        dur, in_pipe, sizes = [], 0, set()
        for _ in range(n):
            t0 = time.perf_counter_ns()
            acl.mdl.execute(mid, inp, out)
            dur.append(time.perf_counter_ns() - t0)
            ready = select.select([r], [], [], 0)[0]
            in_pipe += bool(ready)
            if ready:
                sizes.add(len(os.read(r, 1 << 20)))
            time.sleep(0.001)  # the application between executes
        acl.prof.model_un_subscribe(mid)
        os.close(r)
        acl.mdl.unload(mid)
        med = statistics.median(dur)
        print(f"   {name:12s} not subscribed {plain / 1e3:7.1f}  subscribed {min(dur) / 1e3:7.1f} / {med / 1e3:7.1f}"
              f"  ORT floor {floor / 1e3:7.1f} + build {build / 1e3:7.1f}  in pipe {in_pipe / n:.0%} "
              f"({sorted(sizes)[:3]} bytes)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000, help="calls per round, profiling off")
    ap.add_argument("--block", type=float, default=0.25, help="seconds of executes per profiling-on block")
    ap.add_argument("--rounds", type=int, default=8, help="interleaved rounds, profiling on")
    ap.add_argument("--no-steady", action="store_true", help="skip the steady-state (background harvest) figure")
    ap.add_argument("--n-sub", type=int, default=100, help="subscribed executes")
    ap.add_argument("--only", default="1234", help="sections to run, e.g. 23")
    ap.add_argument("--steady-rounds", type=int, default=5, help="interleaved rounds, steady state")
    ap.add_argument("--steady-block", type=float, default=2.0, help="seconds of executes per steady-state block")
    ap.add_argument("--steady-models", default=",".join(STEADY_MODELS),
                    help=f"section 4's models, comma-separated among {','.join(STEADY_MODELS)}")
    ap.add_argument("--corunner", choices=("off", "on", "both"), default="both",
                    help="section 4 without / with one busy process per core (both: interleaved)")
    ap.add_argument("--quick", action="store_true",
                    help="about 2 minutes: the steady-state headline (section 4) only, 5 rounds of 1 s blocks")
    args = ap.parse_args()
    if args.quick:
        args.only, args.steady_rounds, args.steady_block = "4", 5, 1.0
    with tempfile.TemporaryDirectory(prefix="bench_acl_") as root:
        tempfile.tempdir = root  # every model, probe and profile directory below goes in it, removed at the end
        try:
            run(args)
        finally:
            tempfile.tempdir = None


def run(args: argparse.Namespace) -> None:
    print(f"load avg {' '.join(f'{v:.2f}' for v in os.getloadavg())} at the start")
    paths = models.save_all(tempfile.mkdtemp(prefix="bench_acl_"))
    acl.init()
    t = time.perf_counter()
    if "1" in args.only:
        bench_off(paths, args.n)
    if "2" in args.only:
        bench_on(paths, args.rounds, args.block, not args.no_steady)
    if "3" in args.only:
        bench_subscription(paths, args.n_sub)
    if "4" in args.only:
        bench_steady(paths, args.steady_rounds, args.steady_block, corunner_modes(args.corunner),
                     tuple(args.steady_models.split(",")))
    acl.finalize()
    print(f"(onnxruntime {ort.__version__}, {os.cpu_count()} cpus, {time.perf_counter() - t:.1f} s; "
          f"load avg {' '.join(f'{v:.2f}' for v in os.getloadavg())} at the end)")


if __name__ == "__main__":
    main()
