"""Small programs profiled by the collect tests (written into tmp folders), and job readers."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import numpy as np

from openmsprof.recorder.rawread import ReadReport, read_all_records, read_strings
from openmsprof.recorder.records import Kind

#: Prints to stdout and stderr, marks, runs long enough for host samples, exits with argv[1].
BASIC = """\
import json, os, sys, time
from openmsprof import mstx
print("out:", json.dumps(sys.argv[1:]), flush=True)
print("err: to stderr", file=sys.stderr, flush=True)
mstx.mark("basic-mark")
time.sleep(0.4)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0)
"""

#: A plain program with no openmsprof import at all: reports what it sees of the environment.
PLAIN_ENV = """\
import json, os, sys
acl = os.environ.get("OPENMSPROF_ACL_JSON")
doc = json.load(open(acl)) if acl else None
print(json.dumps({"acl": doc, "pythonpath": os.environ.get("PYTHONPATH"),
                  "autostart": os.environ.get("OPENMSPROF_AUTOSTART"),
                  "bootstrap_on_path": any("_bootstrap" in p for p in sys.path),
                  "user_sc": os.environ.get("USER_SC")}))
"""

def sigint_as_at_a_terminal() -> None:
    """``preexec_fn`` of a test that sends SIGINT: a process started in the background by a shell
    without job control (as CI runners may start jobs) inherits SIGINT *ignored*, and so would the
    program under collect; a user at a terminal has it at its default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


#: Marks every 20 ms for up to 30 s, printing "ready" after the first mark (stopped by a signal).
LOOP = """\
import sys, time
from openmsprof import mstx
for i in range(1500):
    mstx.mark(f"tick {i}")
    if i == 0:
        print("ready", flush=True)  # after the first mark: a signal can no longer pre-empt it
    time.sleep(0.02)
print("loop ended without a signal", flush=True)
"""

#: Marks, lets the flusher write, then SIGKILLs itself mid-run.
CRASH = """\
import os, signal, time
from openmsprof import mstx
for i in range(20):
    mstx.mark(f"before crash {i}")
time.sleep(0.6)
os.kill(os.getpid(), signal.SIGKILL)
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def only_job(output: Path) -> Path:
    jobs = [p for p in output.iterdir() if p.name.startswith("PROF_")]
    assert len(jobs) == 1, jobs
    return jobs[0]


def marks(job: Path) -> list[str]:
    """Messages of the MARK records of a job's host data."""
    data = job / "host" / "data"
    recs = read_all_records(data, ReadReport())
    strings = read_strings(data, ReadReport())
    sel = recs[recs["kind"] == int(Kind.MARK)] if len(recs) else np.zeros(0, recs.dtype)
    return [strings.get(int(a), "") for a in sel["a"]]


def host_files(job: Path) -> list[str]:
    return sorted(p.name for p in (job / "host" / "data").iterdir())


def job_config(job: Path) -> dict[str, object]:
    sample = json.loads((job / "host" / "sample.json").read_text())
    return dict(sample["openmsprof"])
