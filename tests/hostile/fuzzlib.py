"""Seeded, deterministic fuzzing of jobs and configs (used by tests/hostile/test_fuzz.py and
benchmarks/fuzz.py).

Jobs: one real job (markers, API spans, tasks, steps, counters) is mutated per case (flipped
bits, truncation, random bytes, hostile JSON values, FIFOs, links to /dev/zero, directories,
deleted or duplicated files), then ``import``, one export and ``show`` run through the real CLI
entry point in this process.  Configs: acl.json, profiler_config.json and board ini files with
hostile values go through their loaders, ``acl.init`` and the dynamic_profile parser.

A case fails on a traceback (an exception other than the tool's own one-line errors, or
"Traceback" in what it printed) or a hang (over ``--case-timeout`` s, via SIGALRM).  Run as a
module: ``python -m tests.hostile.fuzzlib --jobs N --configs N --seed S``; prints one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


class Hang(Exception):
    """A case ran over its time limit."""


def _alarm(_sig: int, _frame: object) -> None:
    raise Hang()


# ----------------------------------------------------------------------------- base job
def make_base_job(out: Path) -> Path:
    import openmsprof
    from openmsprof import mstx
    from openmsprof.recorder.records import ApiLevel, Series, StepTag
    from openmsprof.sources import emit

    with openmsprof.profile(output=out, runtime_api=True) as prof:
        for i in range(60):
            t0 = emit.now_ns()
            mstx.mark(f"m{i % 5}", "dom")
            with mstx.mstx_range("step"):
                rid = mstx.range_start("cross")
                mstx.range_end(rid)
            emit.record_api("aclmdlExecute", ApiLevel.ACL, t0, emit.now_ns())
            emit.record_task(0, 1, f"Conv{i % 3}", t0, t0 + 500, i, op_type="Conv",
                             input_shapes="1,3,8,8", input_dtypes="FLOAT")
            emit.record_step(t0, i, StepTag.START, 1)
            emit.record_step(t0 + 600, i, StepTag.END, 1)
            emit.record_counter(t0, Series.DEVICE_MEM_USED_KB, 0, 100.0 + i, device_id=0)
    assert prof.job is not None
    return prof.job


# ----------------------------------------------------------------------------- mutations
HOSTILE_VALUES: list[Any] = [
    10**30, -(10**30), -1, 0, 2**63, 1e308, -1e308, "nan", "inf", "", "x" * 10_000, None, True,
    [], {}, [1, [2, [3]]], {"a": {"b": {}}}, "9" * 5000, 1.5, "\n\x00\x1b[2J", "-5",
]


def _deep(depth: int) -> Any:
    v: Any = 0
    for _ in range(depth):
        v = [v]
    return v


def _files(job: Path) -> list[Path]:
    return sorted(p for p in job.rglob("*") if p.is_file() and not p.is_symlink()
                  and "sqlite" not in p.parts and not p.name.startswith(".")
                  and p.stat().st_size < 16 * 1024 * 1024)  # not one this harness made huge


def _mutate_json_obj(obj: Any, rng: random.Random) -> Any:
    if not isinstance(obj, dict) or not obj:
        return rng.choice([*HOSTILE_VALUES, _deep(rng.randint(10, 900))])
    key = rng.choice(sorted(obj))
    r = rng.random()
    if r < 0.15:
        del obj[key]
    elif r < 0.3 and isinstance(obj[key], dict):
        obj[key] = _mutate_json_obj(obj[key], rng)
    elif r < 0.4:
        obj[key] = _deep(rng.randint(10, 900))
    else:
        obj[key] = rng.choice(HOSTILE_VALUES)
    return obj


def mutate_job(job: Path, rng: random.Random) -> str:
    """Apply one random mutation to ``job``; returns a short description."""
    files = _files(job)
    target = rng.choice(files)
    kind = rng.choice(["bitflip", "bitflip", "bitflip", "truncate", "randbytes", "json", "json",
                       "json", "fifo", "devzero", "dir", "delete", "duplicate", "bigsparse"])
    rel = target.relative_to(job)
    if kind == "json":
        jsons = [p for p in files if p.name.startswith(("info.json", "start_info", "end_info",
                                                         "sample.json", "openmsprof_overhead"))]
        target = rng.choice(jsons) if jsons else target
        rel = target.relative_to(job)
        try:
            obj = json.loads(target.read_bytes())
        except ValueError:
            obj = {}
        if rng.random() < 0.15:
            target.write_bytes(target.read_bytes()[: rng.randint(0, 40)])
        else:
            target.write_text(json.dumps(_mutate_json_obj(obj, rng)))
    elif kind == "bitflip":
        data = bytearray(target.read_bytes())
        for _ in range(rng.randint(1, 8)):
            if data:
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        target.write_bytes(bytes(data))
    elif kind == "truncate":
        with open(target, "r+b") as f:
            f.truncate(rng.randint(0, max(0, target.stat().st_size)))
    elif kind == "randbytes":
        data = bytearray(target.read_bytes())
        pos = rng.randrange(max(1, len(data)))
        data[pos:pos + 64] = rng.randbytes(64)
        target.write_bytes(bytes(data))
    elif kind == "fifo":
        target.unlink()
        os.mkfifo(target)
    elif kind == "devzero":
        target.unlink()
        os.symlink("/dev/zero", target)
    elif kind == "dir":
        target.unlink()
        target.mkdir()
    elif kind == "delete":
        target.unlink()
    elif kind == "duplicate":
        name = target.name.replace("slice_0", "slice_7")
        shutil.copy(target, target.with_name(name if name != target.name else target.name + "_x"))
    elif kind == "bigsparse":
        with open(target, "r+b") as f:
            f.truncate(3 * 1024**3)  # a sparse 3 GB file: over every reader's limit
    return f"{kind} {rel}"


# ----------------------------------------------------------------------------- running
def run_guarded(fn: Callable[[], Any], timeout: float) -> tuple[str, str]:
    """('ok'|'traceback'|'hang', detail) for one call; stdout/stderr captured."""
    from openmsprof.config.errors import ProfilingError

    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            fn()
    except Hang:
        return "hang", ""
    except (ProfilingError, SystemExit):
        pass
    except BaseException:
        return "traceback", traceback.format_exc(limit=6)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    text = out.getvalue() + err.getvalue()
    if "Traceback" in text:
        return "traceback", text[-2000:]
    STATS["runs"] += 1
    STATS["one_line_errors"] += "error:" in err.getvalue()
    return "ok", ""


#: Outcomes of the runs that passed: how many, and how many ended in a one-line error.
STATS = {"runs": 0, "one_line_errors": 0}


COMMANDS = (["import"], ["export", "timeline"], ["export", "summary"], ["show"])


def fuzz_jobs(n: int, seed: int, timeout: float, work: Path) -> list[dict[str, str]]:
    from openmsprof.cli.main import main

    base = make_base_job(work / "base")
    failures = []
    for i in range(n):
        rng = random.Random(seed * 1_000_003 + i)
        case = work / f"case{i % 4}" / base.name
        if case.parent.exists():
            shutil.rmtree(case.parent)
        shutil.copytree(base, case, symlinks=True)
        what = "; ".join(mutate_job(case, rng) for _ in range(rng.randint(1, 3)))
        cmds = [COMMANDS[0], COMMANDS[1 + i % 3]]
        for cmd in cmds:
            status, detail = run_guarded(lambda cmd=cmd, case=case: main([*cmd, "-dir", str(case)]), timeout)
            if status != "ok":
                failures.append({"case": f"job {i}", "mutation": what, "command": " ".join(cmd),
                                 "status": status, "detail": detail})
    return failures


def _acl_base() -> dict[str, Any]:
    return {"profiler": {"switch": "on", "output": "/tmp/x", "aicpu": "on", "acl_api": "on",
                         "task_time": "on", "aic_metrics": "PipeUtilization", "storage_limit": "500MB",
                         "sys_hardware_mem_freq": 50, "host_sys_usage": "cpu,mem"}}


def _dyn_base() -> dict[str, Any]:
    return {"activities": ["CPU", "NPU"], "prof_dir": "./", "analyse": False, "record_shapes": False,
            "active": 2, "warmup": 1, "start_step": 3, "is_rank": False, "rank_list": [],
            "experimental_config": {"profiler_level": "Level0", "aic_metrics": "AiCoreNone",
                                    "l2_cache": False, "op_attr": False}}


def fuzz_configs(n: int, seed: int, timeout: float, work: Path) -> list[dict[str, str]]:
    from openmsprof import acl
    from openmsprof.collector import board
    from openmsprof.config.acl_json import load_acl_json
    from openmsprof.torch.profiler import dynamic_profile

    log = logging.getLogger("openmsprof.fuzz")
    log.propagate = False
    failures = []
    work.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        rng = random.Random(seed * 7_000_001 + i)
        which = i % 3
        path = work / f"cfg{i % 8}"
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        r = rng.random()
        if r < 0.05:
            os.mkfifo(path)
        elif r < 0.08:
            os.symlink("/dev/zero", path)
        elif which == 0:
            doc = _acl_base()
            for _ in range(rng.randint(1, 3)):
                inner = doc.get("profiler")
                _mutate_json_obj(inner if isinstance(inner, dict) and rng.random() < 0.8 else doc, rng)
            text = json.dumps(doc)
            path.write_text(text[: rng.randint(0, len(text))] if rng.random() < 0.1 else text)
        elif which == 1:
            doc = _dyn_base()
            for _ in range(rng.randint(1, 3)):
                inner = doc.get("experimental_config")
                _mutate_json_obj(inner if isinstance(inner, dict) and rng.random() < 0.3 else doc, rng)
            path.write_text(json.dumps(doc))
        else:
            lines = ["[board]", "ip = 127.0.0.1", "user = u", "port = 22"]
            junk = rng.choice(["[", "=", "x" * 5000, "\x00", "port = 1e300", "[board]", "%(x)s", "ip"])
            lines.insert(rng.randrange(len(lines) + 1), junk)
            path.write_text("\n".join(lines))
            os.chmod(path, 0o600)

        def case(which: int = which, path: Path = path) -> None:
            if which == 0:
                load_acl_json(path)
            elif which == 1:
                from openmsprof.config.errors import ConfigError
                from openmsprof.fileio import fs

                try:
                    raw = json.loads(fs.read_regular(path, "profiler_config.json", 1 << 20, ConfigError))
                except ValueError:
                    return
                if isinstance(raw, dict):
                    dynamic_profile._parse(raw, log)
            else:
                board._parse(path)

        status, detail = run_guarded(case, timeout)
        if status == "ok" and which == 0:
            status, detail = run_guarded(lambda path=path: _acl_init_code(acl, path), timeout)
        if status != "ok":
            failures.append({"case": f"config {i}", "mutation": ["acl.json", "profiler_config", "ini"][which],
                             "command": "load", "status": status, "detail": detail})
    return failures


def _acl_init_code(acl: Any, path: Path) -> None:
    ret = acl.init(str(path))
    if not isinstance(ret, int):
        raise AssertionError(f"acl.init returned {ret!r}")
    if ret == 0:
        acl.finalize()


def _peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM: reset at exec, unlike ru_maxrss, which on Linux keeps
    the RSS of the parent that forked us)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--configs", type=int, default=500)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--case-timeout", type=float, default=20.0)
    ap.add_argument("--memory-mb", type=int, default=2048,
                    help="address-space limit: a case that needs more fails with MemoryError "
                         "(0: none, for AddressSanitizer's shadow memory)")
    args = ap.parse_args(argv)
    if args.memory_mb > 0:
        resource.setrlimit(resource.RLIMIT_AS, (args.memory_mb << 20, args.memory_mb << 20))
    logging.getLogger("openmsprof").setLevel(logging.ERROR)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as t:
        os.chdir(t)  # a mutated config's relative output ("-5", "inf") lands here, not in the checkout
        # a missing acl.json output falls back to the executable's directory (seed 002): make
        # that the temp dir too, not tests/hostile/ in the checkout
        sys.argv[0] = str(Path(t) / "fuzz_app.py")
        failures = fuzz_configs(args.configs, args.seed, args.case_timeout, Path(t) / "cfg")
        failures += fuzz_jobs(args.jobs, args.seed, args.case_timeout, Path(t))
    peak_mb = _peak_rss_mb()
    print(json.dumps({"jobs": args.jobs, "configs": args.configs, "seed": args.seed,
                      "tracebacks": sum(f["status"] == "traceback" for f in failures),
                      "hangs": sum(f["status"] == "hang" for f in failures), "peak_rss_mb": peak_mb,
                      **STATS,
                      "seconds": time.perf_counter() - t0, "failures": failures[:20]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
