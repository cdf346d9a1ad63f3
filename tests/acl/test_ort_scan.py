"""The native ONNX Runtime profile scan (sources/_ort_scan.c) finds exactly the events, names and
numbers of the regex it replaces (``ort_profile._EVENT``) in real ORT profiles, reports every line
that starts like an event but breaks the layout (the parser then falls back to orjson), and is
memory-safe on cut and mutated files and on any buffer type."""

from __future__ import annotations

import mmap
import os
import random
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from openmsprof.sources import ort_profile
from openmsprof.sources.ort_profile import NodeTable
from tests.acl.test_ort_profile import _escaped_model, _profile, _rows, _runs

native = ort_profile._native
pytestmark = pytest.mark.skipif(native is None, reason="the C extension was not built (no compiler)")


def _regex(data: bytes) -> list[tuple[bytes, int, int, int]]:
    """(name, tid, dur, ts) of every event the regex pass finds."""
    return [(nm, int(tid), int(dur), int(ts)) for _, tid, dur, ts, nm in ort_profile._EVENT.findall(data)]


def _native(data: object) -> tuple[list[tuple[bytes, int, int, int]], int]:
    names, raw, bad = native.scan(data)
    rows = np.frombuffer(raw, np.int64).reshape(-1, 4)
    assert len(set(names)) == len(names)  # each distinct name once
    return [(names[i], int(tid), int(dur), int(ts)) for i, tid, dur, ts in rows.tolist()], bad


@pytest.fixture(scope="module")
def profiles(models, tmp_path_factory) -> dict[str, bytes]:
    tmp = tmp_path_factory.mktemp("ortscan")
    rng = np.random.default_rng(0)
    out = {}
    out["tiny_mlp"], _ = _profile(models["tiny_mlp"], tmp, [{"input": rng.random((1, 16), dtype=np.float32)}] * 5)
    out["resnet"], _ = _profile(models["resnet_leakyrelu"], tmp,
                                [{"input": rng.random((1, 3, 32, 32), dtype=np.float32)}] * 2)
    out["escaped"], _ = _profile(_escaped_model(tmp / "odd.onnx"), tmp, [{"input": np.ones((1, 4), np.float32)}] * 2)
    return out


@pytest.mark.parametrize("name", ["tiny_mlp", "resnet", "escaped"])
def test_scan_finds_what_the_regex_finds(profiles, name):
    data = profiles[name]
    events, bad = _native(data)
    assert bad == 0
    assert events == _regex(data)
    assert len(events) == data.count(b'\n{"cat" : "Node"') + data.count(b'\n{"cat" : "Session"') >= 10
    if name == "escaped":  # raw bytes, escapes kept (the name cache is keyed by them)
        assert b'relu \\"odd\\" \\\\name_kernel_time' in {e[0] for e in events}


def test_parse_on_either_path_gives_the_same_profile(profiles, monkeypatch):
    data, start = profiles["resnet"], 1_700_000_000_000_000_000
    fast, regex = NodeTable(), NodeTable()
    a = fast.parse(data, start)
    monkeypatch.setenv(ort_profile.PY_SCAN_ENV, "1")
    b = regex.parse(data, start)
    assert _rows(a, fast) == _rows(b, regex) and len(a.node_ts) > 10
    assert _runs(a) == _runs(b) and a.runs == 2


def test_every_cut_inside_an_event_head_is_reported(profiles):
    data = profiles["tiny_mlp"]
    line = data.index(b'\n{"cat" : "Node"')
    name_end = data.index(b'_kernel_time"', line) + len(b'_kernel_time"')
    whole = len(_regex(data[:line]))
    for cut in range(line + len(b'\n{"cat" : "Node"'), name_end):
        events, bad = _native(data[:cut])
        assert (len(events), bad) == (whole, 1), cut
    events, bad = _native(data[:name_end])
    assert (len(events), bad) == (whole + 1, 0)


@pytest.mark.parametrize("change", [
    (b'"tid" :', b'"tid":'),  # another spacing
    (b'"dur" :', b'"dur" :0000000000000000000'),  # a number of 19+ digits (same value)
    (b'"ph" : "X"', b'"ph" : "B"'),  # another phase
])
def test_a_line_off_the_layout_is_counted_bad(profiles, change):
    data = profiles["tiny_mlp"]
    i = data.index(b'\n{"cat" : "Node"')
    j = data.index(change[0], i)
    odd = data[:j] + change[1] + data[j + len(change[0]):]
    events, bad = _native(odd)
    assert bad == 1 and len(events) == len(_regex(data)) - 1
    if change[1].endswith(b"000"):
        return  # leading zeros: not JSON either (orjson refuses it; the harvest logs one line)
    t = NodeTable()
    t._checked = True  # past the first profile's layout check: the scan's own count must catch it
    p = t.parse(odd, 0)
    assert len(p.node_ts) == data.count(b'_kernel_time"') and p.runs == 5  # the orjson parse: none lost


def test_mutated_profiles_agree_with_the_regex_or_report_bad(profiles):
    """Random byte edits, cuts and splices: no crash; every mutated file either scans to exactly
    the regex's events or has a line counted bad."""
    rng = random.Random(26)
    base = profiles["resnet"]
    alphabet = b'0123456789"\\\n{}:, abcXNS'
    agreed = 0
    for _ in range(400):
        m = bytearray(base[: rng.randrange(len(base) + 1)] if rng.random() < 0.2 else base)
        for _ in range(rng.randint(1, 8)):
            pos = rng.randrange(len(m) + 1)
            op = rng.random()
            if op < 0.4 and pos < len(m):
                m[pos] = rng.choice(alphabet)
            elif op < 0.7:
                m[pos:pos] = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 4)))
            else:
                del m[pos:pos + rng.randint(1, 40)]
        data = bytes(m)
        events, bad = _native(data)
        if not bad:
            assert events == _regex(data)
            agreed += 1
    assert agreed > 50


def test_any_buffer_type(profiles, tmp_path):
    data = profiles["tiny_mlp"]
    want = _native(data)
    assert _native(bytearray(data)) == _native(memoryview(data)) == want
    path = tmp_path / "p.json"
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        assert _native(mm) == want
    assert native.scan(b"") == ([], b"", 0)
    assert native.scan(b"[\n]\n") == ([], b"", 0)
    with pytest.raises(TypeError):
        native.scan("not a buffer")


def test_the_harvest_parses_an_mmap_of_a_large_profile(models, tmp_path, monkeypatch):
    """A profile from MMAP_FROM on is scanned from an mmap (no copy): the same columns as the regex."""
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "big")
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(models["tiny_mlp"]), so, providers=["CPUExecutionProvider"])
    feeds = {"input": np.ones((1, 16), np.float32)}
    for _ in range(800):
        sess.run(None, feeds)
    start = sess.get_profiling_start_time_ns()
    path = Path(sess.end_profiling())
    assert path.stat().st_size >= 1 << 20
    t1, t2 = NodeTable(), NodeTable()
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        a = t1.parse(mm, start)
    monkeypatch.setenv(ort_profile.PY_SCAN_ENV, "1")
    b = t2.parse(path.read_bytes(), start)
    os.unlink(path)
    assert a.runs == b.runs == 800 and _rows(a, t1) == _rows(b, t2)
