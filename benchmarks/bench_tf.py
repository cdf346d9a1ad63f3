"""TensorFlow profiling cost (issue 10): per-step time of a small Keras model.

    python benchmarks/bench_tf.py [--rounds 5] [--steps 200] [--ops 1000000] [--corunner both]

Sides, interleaved round by round, each a fresh Python process doing the same ``fit`` of a small
Keras MLP (a warm-up fit first, so tracing is outside the timer):

* ``plain``  — TensorFlow alone;
* ``off``    — openmsprof's TF2 facade imported, ``npu_device.open().as_default()`` called with
               profiling disabled, the sess.run shim installed (what a ported script runs when
               profiling is off);
* ``bare``   — ``tf.profiler.experimental.start``/``stop`` around the timed fit, with the same
               options openmsprof uses (TensorFlow's defaults: host tracer level 2, no Python tracer);
* ``omsp``   — the seed 003 TF2 sample's switches (``enable_profiling`` + options),
               ``as_default()`` before and ``close()`` after the timed fit;
* ``roll``   — ``omsp`` with ``OPENMSPROF_TF_ROLL_S=1`` (TensorFlow's tracer rolled every second
               so a SIGKILL loses at most a second of ops; off by default).

The window (start → timed fit → stop) is the same for bare and omsp; stop/harvest time is
reported apart.  Last: a tf.function of many tiny ops called until ~``--ops`` ops ran under
openmsprof; time to harvest (at stop), then ``openmsprof export summary`` + ``timeline``.
Prints the load average beside every figure.  Every part runs with and without the co-runner
(``--corunner {off,on,both}``, one busy process per core, ``benchmarks/corunner.py``), the
conditions interleaved round by round; CPU is the child's (all its threads; it has no children),
and "window CPU" counts start + fit + stop (the harvest at stop included: nothing untimed).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.corunner import CoRunner, add_corunner_arg, corunner_modes

CHILD = r'''
import os, sys, time, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
side, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
import numpy as np, tensorflow as tf
if side == "off":
    from openmsprof.tensorflow import npu_device
    from openmsprof.tensorflow.npu_bridge import npu_init  # noqa: F401 - installs the shim
    npu_device.open().as_default()
if side in ("omsp", "roll"):
    from openmsprof.tensorflow import npu_device
    pc = npu_device.global_options().profiling_config
    pc.enable_profiling = True
    pc.profiling_options = json.dumps({"output": out, "training_trace": "on", "task_trace": "on",
                                       "fp_point": "", "bp_point": ""})
rng = np.random.default_rng(0)
x = rng.random((64 * steps, 64), np.float32); y = rng.random((64 * steps, 10), np.float32)
m = tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(128, activation="relu"),
                         tf.keras.layers.Dense(128, activation="relu"), tf.keras.layers.Dense(10)])
m.compile(optimizer="sgd", loss="mse")
m.fit(x[:640], y[:640], batch_size=64, epochs=1, verbose=0)  # warm-up: tracing outside the timer
t_start = time.perf_counter(); c_start = time.process_time()
if side == "bare":
    tf.profiler.experimental.start(out, options=tf.profiler.experimental.ProfilerOptions(
        host_tracer_level=2, python_tracer_level=0))
elif side in ("omsp", "roll"):
    npu_device.open().as_default()
t0 = time.perf_counter(); c0 = time.process_time()
m.fit(x, y, batch_size=64, epochs=1, verbose=0)
t1 = time.perf_counter(); c1 = time.process_time()
if side == "bare":
    tf.profiler.experimental.stop()
elif side in ("omsp", "roll"):
    npu_device.close()
t2 = time.perf_counter(); c2 = time.process_time()
print(json.dumps({"step_us": (t1 - t0) / steps * 1e6, "cpu_us": (c1 - c0) / steps * 1e6,
                  "win_cpu_us": (c2 - c_start) / steps * 1e6, "start_s": t0 - t_start, "stop_s": t2 - t1}))
'''

PAIRED = r'''
import os, sys, time, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
rounds, steps, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
import numpy as np, tensorflow as tf
from openmsprof.tensorflow import npu_device
pc = npu_device.global_options().profiling_config
rng = np.random.default_rng(0)
x = rng.random((64 * steps, 64), np.float32); y = rng.random((64 * steps, 10), np.float32)
m = tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(128, activation="relu"),
                         tf.keras.layers.Dense(128, activation="relu"), tf.keras.layers.Dense(10)])
m.compile(optimizer="sgd", loss="mse")
m.fit(x[:640], y[:640], batch_size=64, epochs=1, verbose=0)
opts = tf.profiler.experimental.ProfilerOptions(host_tracer_level=2, python_tracer_level=0)
def fit():
    t0 = time.perf_counter(); c0 = time.process_time()
    m.fit(x, y, batch_size=64, epochs=1, verbose=0)
    cpu[side].append((time.process_time() - c0) / steps * 1e6)
    return (time.perf_counter() - t0) / steps * 1e6
res = {"plain": [], "bare": [], "omsp": [], "roll": []}
cpu = {"plain": [], "bare": [], "omsp": [], "roll": []}
win = {"plain": [], "bare": [], "omsp": [], "roll": []}
for r in range(rounds):
    for side in (("plain", "bare", "omsp", "roll") if r % 2 == 0 else ("roll", "omsp", "bare", "plain")):
        cw = time.process_time()
        if side == "plain":
            res[side].append(fit())
        elif side == "bare":
            tf.profiler.experimental.start(os.path.join(out, f"bare{r}"), options=opts)
            res[side].append(fit())
            tf.profiler.experimental.stop()
        else:
            if side == "roll":
                os.environ["OPENMSPROF_TF_ROLL_S"] = "1"
            else:
                os.environ.pop("OPENMSPROF_TF_ROLL_S", None)
            pc.enable_profiling = True
            pc.profiling_options = json.dumps({"output": out, "training_trace": "on"})
            npu_device.open().as_default()
            res[side].append(fit())
            npu_device.close()
        win[side].append((time.process_time() - cw) / steps * 1e6)
print(json.dumps({"wall": res, "cpu": cpu, "window cpu": win}))
'''

BIG = r'''
import os, sys, json, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
ops, out = int(sys.argv[1]), sys.argv[2]
import tensorflow as tf
from openmsprof.tensorflow import npu_device
pc = npu_device.global_options().profiling_config
pc.enable_profiling = True
pc.profiling_options = json.dumps({"output": out, "training_trace": "on"})
@tf.function
def many(a):
    for _ in range(250):  # sin + add: 500 ops grappler cannot fold
        a = tf.sin(a) + a
    return a
v = tf.constant(0.0); many(v)
npu_device.open().as_default()
for _ in range(ops // 500):
    v = many(v)
t0 = time.perf_counter(); job = npu_device.close(); t1 = time.perf_counter()
log = open(os.path.join(job, "host", "collection.log")).read()
print(json.dumps({"job": job, "harvest_s": t1 - t0, "log": [l for l in log.splitlines() if "TensorFlow trace" in l]}))
'''


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def child(side: str, steps: int, out: str) -> dict[str, float]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("PROFILING_MODE", None)
    env.pop("OPENMSPROF_TF_ROLL_S", None)
    if side == "roll":
        env["OPENMSPROF_TF_ROLL_S"] = "1"
    r = subprocess.run([sys.executable, "-c", CHILD, side, str(steps), out], capture_output=True,
                       text=True, env=env, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"{side} failed: {r.stderr[-2000:]}")
    return orjson.loads(r.stdout.strip().splitlines()[-1])


def fmt(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.1f} (min {min(xs):.1f}, max {max(xs):.1f})"


def per_step(rounds: int, steps: int, modes: list[bool]) -> None:
    sides = ("plain", "off", "bare", "omsp", "roll")
    by: dict[bool, dict[str, list[dict[str, float]]]] = {m: {s: [] for s in sides} for m in modes}
    loads: dict[bool, list[float]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            order = sides if r % 2 == 0 else tuple(reversed(sides))
            for busy in (modes if r % 2 == 0 else modes[::-1]):
                res = by[busy]
                with CoRunner(enabled=busy):
                    for s in order:
                        res[s].append(child(s, steps, os.path.join(tmp, f"{s}{r}{busy:d}")))
                loads[busy].append(os.getloadavg()[0])
                print(f"round {r + 1}, co-runner {'on' if busy else 'off'}: "
                      + ", ".join(f"{s} {res[s][-1]['step_us']:.0f} us" for s in sides) + f"  [{load()}]", flush=True)
    for busy in modes:
        print(f"-- co-runner {'on (one busy process per core)' if busy else 'off'}:")
        _print_steps(by[busy], sides, loads[busy])


def _print_steps(res: dict[str, list[dict[str, float]]], sides: tuple[str, ...], loads: list[float]) -> None:
    step = {s: [d["step_us"] for d in res[s]] for s in sides}
    for s in sides:
        print(f"{s:6s} per step (us): {fmt(step[s])}")
    ratio = [o / b for o, b in zip(step["omsp"], step["bare"], strict=True)]
    roll = [o / b for o, b in zip(step["roll"], step["bare"], strict=True)]
    print(f"roll / bare tf.profiler per step: median {statistics.median(roll):.3f} "
          f"(min {min(roll):.3f}, max {max(roll):.3f})")
    off = [(o / p - 1) * 100 for o, p in zip(step["off"], step["plain"], strict=True)]
    print(f"omsp / bare tf.profiler per step: median {statistics.median(ratio):.3f} "
          f"(min {min(ratio):.3f}, max {max(ratio):.3f}) [goal <= 1.10]")
    print(f"  ratios: {', '.join(f'{x:.3f}' for x in ratio)}; best vs best "
          f"{min(step['omsp']) / min(step['bare']):.3f}")
    print(f"off vs plain: {', '.join(f'{x:+.1f}%' for x in off)} (median {statistics.median(off):+.1f}%) "
          f"[goal <= 1 %]; best vs best {(min(step['off']) / min(step['plain']) - 1) * 100:+.1f}%")
    for key, what in (("cpu_us", "CPU per step of the fit"), ("win_cpu_us", "window CPU per step (start+fit+stop)")):
        cpu = {s: [d[key] for d in res[s]] for s in sides}
        for s in sides:
            print(f"{s:6s} {what} (us, all threads): {fmt(cpu[s])}")
        for a, b in (("omsp", "bare"), ("roll", "bare"), ("off", "plain")):
            rr = [x / y for x, y in zip(cpu[a], cpu[b], strict=True)]
            print(f"{what}, {a} / {b} per round: median {statistics.median(rr):.3f} "
                  f"(min {min(rr):.3f}, max {max(rr):.3f})")
    print(f"stop time (s): bare {fmt([d['stop_s'] for d in res['bare']])}, "
          f"omsp (stop + harvest) {fmt([d['stop_s'] for d in res['omsp']])}")
    print(f"load average (1 min) during rounds: {min(loads):.2f}-{max(loads):.2f}")


def paired(rounds: int, steps: int, modes: list[bool]) -> None:
    """bare and omsp windows alternating in one warm process (paired ratios, less noise); the
    co-runner conditions interleave in chunks of two rounds (one warm process each)."""
    got: dict[bool, dict[str, dict[str, list[float]]]] = {}
    l0 = load()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        for c in range(max(1, rounds // 2)):
            for busy in (modes if c % 2 == 0 else modes[::-1]):
                with CoRunner(enabled=busy):
                    r = subprocess.run([sys.executable, "-c", PAIRED, "2", str(steps), os.path.join(tmp, f"{c}{busy:d}")],
                                       capture_output=True, text=True, env=env, timeout=1200)
                if r.returncode != 0:
                    raise SystemExit(f"paired failed: {r.stderr[-2000:]}")
                part = orjson.loads(r.stdout.strip().splitlines()[-1])
                into = got.setdefault(busy, {})
                for kind, sides in part.items():
                    for side, xs in sides.items():
                        into.setdefault(kind, {}).setdefault(side, []).extend(xs)
    for busy in modes:
        print(f"-- in-process, co-runner {'on (one busy process per core)' if busy else 'off'}:")
        for kind in ("wall", "cpu", "window cpu"):
            res = got[busy][kind]
            for side in ("plain", "bare", "omsp", "roll"):
                print(f"in-process {side:5s} {kind} per step (us): {fmt(res[side])}")
            for side in ("omsp", "roll"):
                ratio = [o / b for o, b in zip(res[side], res["bare"], strict=True)]
                print(f"in-process {side} / bare ({kind}): median {statistics.median(ratio):.3f} "
                      f"(min {min(ratio):.3f}, max {max(ratio):.3f}), best vs best "
                      f"{min(res[side]) / min(res['bare']):.3f} [goal <= 1.10]  [{l0} -> {load()}]")


def _child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def export_big(ops: int, modes: list[bool]) -> None:
    for busy in modes:
        print(f"-- co-runner {'on (one busy process per core)' if busy else 'off'}:")
        with CoRunner(enabled=busy):
            _export_big(ops)


def _export_big(ops: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        r = subprocess.run([sys.executable, "-c", BIG, str(ops), tmp], capture_output=True,
                           text=True, env=env, timeout=1200)
        if r.returncode != 0:
            raise SystemExit(f"big trace failed: {r.stderr[-2000:]}")
        info = orjson.loads(r.stdout.strip().splitlines()[-1])
        job = Path(info["job"])
        print(f"{ops} ops asked: {info['log']}; harvest at stop {info['harvest_s']:.2f} s  [{load()}]")
        for what in ("import", "summary", "timeline"):
            args = ["import", "-dir", str(job)] if what == "import" else ["export", what, "-dir", str(job)]
            t0, c0 = time.perf_counter(), _child_cpu()
            subprocess.run([sys.executable, "-m", "openmsprof", *args], check=True,
                           capture_output=True, timeout=1200)
            print(f"  {what}: {time.perf_counter() - t0:.2f} s wall, {_child_cpu() - c0:.2f} s CPU"
                  f"  [{load()}]", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--skip-export", action="store_true")
    ap.add_argument("--only-paired", action="store_true")
    add_corunner_arg(ap)
    a = ap.parse_args()
    modes = corunner_modes(a.corunner)
    if not a.only_paired:
        per_step(a.rounds, a.steps, modes)
    paired(a.rounds * 2, a.steps, modes)
    if not a.skip_export:
        export_big(a.ops, modes)


if __name__ == "__main__":
    main()
