"""Running the seeds' samples as a user would: the sample's text in a script file, preceded by
what the seed elides ("# ......": devices, model load, datasets) and a recorder of every pyACL
return code, run by this Python in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

#: A pyACL inference application (seeds 002 and the round-two rows) with profiling from acl.json only (seed 002 "一键Profiling":
#: the application calls acl.init(acl.json path) and acl.finalize(); no profiling code).
ACL_JSON_APP = """\
import os, sys
from openmsprof import acl
assert acl.init(sys.argv[1] if len(sys.argv) > 1 else None) == 0
model_id, ret = acl.mdl.load_from_file(os.environ["SEED_MODEL"])
assert ret == 0
desc = acl.mdl.create_desc(); acl.mdl.get_desc(desc, model_id)
def dataset(sizes):
    ds = acl.mdl.create_dataset()
    for size in sizes:
        ptr, _ = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size))
    return ds
inp = dataset([acl.mdl.get_input_size_by_index(desc, i) for i in range(acl.mdl.get_num_inputs(desc))])
out = dataset([acl.mdl.get_output_size_by_index(desc, i) for i in range(acl.mdl.get_num_outputs(desc))])
for _ in range(4):
    assert acl.mdl.execute(model_id, inp, out) == 0
acl.mdl.unload(model_id)
assert acl.finalize() == 0
print("APP DONE")
"""


#: Wraps acl.prof.* and acl.mdl.* so the epilogue can report every call and its return code
#: (the samples never check ``ret`` themselves).
RECORDER = '''
import json as _json
import threading as _threading
from openmsprof import acl as _acl
_calls = []
_depth = _threading.local()

def _wrap(ns, name):
    fn = getattr(ns, name)
    def wrapper(*a, **k):
        level = getattr(_depth, "n", 0)
        _depth.n = level + 1
        try:
            r = fn(*a, **k)
        finally:
            _depth.n = level
        if level == 0:  # the application's own calls, not the facade's internal ones
            code = r[-1] if isinstance(r, tuple) and r and isinstance(r[-1], int) else r
            _calls.append([ns.__name__.rsplit(".", 1)[-1] + "." + name, code if isinstance(code, int) else None])
        return r
    setattr(ns, name, wrapper)

for _ns in (_acl.prof, _acl.mdl):
    for _n in dir(_ns):
        _f = getattr(_ns, _n)
        if not _n.startswith("_") and callable(_f) and not isinstance(_f, type) \
                and getattr(_f, "__module__", "").startswith("openmsprof.acl"):
            _wrap(_ns, _n)
'''

EPILOGUE = '''
print("CALLS=" + _json.dumps(_calls))
'''

#: The seeds' elided steps 1-3: device, context, stream, model load, input/output datasets.
SETUP = '''
import numpy as _np
assert acl.init() == 0
assert acl.rt.set_device(0) == 0
context, _ = acl.rt.create_context(0)
stream, _ = acl.rt.create_stream()
model_id, _ret = acl.mdl.load_from_file(MODEL_PATH)
assert _ret == 0
_desc = acl.mdl.create_desc()
assert acl.mdl.get_desc(_desc, model_id) == 0

def _dataset(sizes):
    ds = acl.mdl.create_dataset()
    for size in sizes:
        ptr, _r = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size))
    return ds

input = _dataset([acl.mdl.get_input_size_by_index(_desc, i) for i in range(acl.mdl.get_num_inputs(_desc))])
output = _dataset([acl.mdl.get_output_size_by_index(_desc, i) for i in range(acl.mdl.get_num_outputs(_desc))])
'''


def run_script(path: Path, text: str, cwd: Path, timeout: float = 240, **env: str) -> subprocess.CompletedProcess[str]:
    path.write_text(text)
    import os

    return subprocess.run([sys.executable, str(path)], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env})


def calls(stdout: str) -> list[tuple[str, int | None]]:
    line = next(ln for ln in stdout.splitlines() if ln.startswith("CALLS="))
    return [(n, c) for n, c in json.loads(line[len("CALLS="):])]
