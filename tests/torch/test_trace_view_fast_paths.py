"""The per-window shortcuts of trace_view.json give the bytes of the general paths: the Overlap
Analysis tracks formatted in one call (and fitted in one) equal one call per track and chunk, the
metadata and vocabularies kept between windows equal fresh ones, the CANN APIs taken as they come
equal ``np.unique``'s, the one-thread window's fwdbwd shortcut equals the pairing it skips, and
the communication group is read from profiler_metadata.json only when used."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import orjson
import pytest

from openmsprof.export.ascend_pt import (
    cann,
    communication,
    framework,
    perfetto_fit,
    rank_analyse,
    text,
    trace_tracks,
    trace_view,
)
from openmsprof.export.ascend_pt.overlap import Overlap
from openmsprof.parse.hccl_hash import double_hash
from openmsprof.torch.profiler import analysis
from tests.torch.conftest import Trainer, raw_window

OUT = "ASCEND_PROFILER_OUTPUT"


def _level(rank: Path, level: str) -> None:
    info = next(rank.glob("profiler_info*.json"))
    doc = orjson.loads(info.read_bytes())
    doc["config"]["experimental_config"]["_profiler_level"] = level
    info.write_bytes(orjson.dumps(doc))


@pytest.mark.parametrize("level", ["Level0", "Level1"])
def test_one_call_per_view_equals_one_per_track_and_chunk(trainer: Trainer, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch, level: str) -> None:
    raw = raw_window(trainer, tmp_path / "raw")
    fast, kept, ref = (tmp_path / n / raw.name for n in ("fast", "kept", "ref"))
    for d in (fast, kept, ref):
        shutil.copytree(raw, d)
        _level(d, level)
    trace_tracks._metadata_texts.cache_clear()
    trace_view._json_vocab.cache_clear()
    analysis.analyse_dir(fast, parallel=False)
    analysis.analyse_dir(kept, parallel=False)  # the metadata and vocabularies kept from ``fast``
    assert trace_tracks._metadata_texts.cache_info().hits >= 1

    # the reference: every view in chunks of one row (each track alone), nothing kept, each
    # Overlap Analysis track fitted by its own call
    def per_track(fw: object, ov: object) -> trace_tracks.TraceFit:
        got = real_fit_trace(fw, ov)  # type: ignore[arg-type]
        tracks = []
        for name, (starts, ends) in ov.tracks():  # type: ignore[attr-defined]
            tf = perfetto_fit.fit(starts, ends - starts, np.zeros(len(starts), np.int64), np.ones(len(starts), np.int8))
            tracks.append((name, (starts, starts + tf.dur)))
        got.tracks = tracks
        return got

    real_fit_trace = trace_tracks.fit_trace
    monkeypatch.setattr(trace_tracks, "fit_trace", per_track)
    monkeypatch.setattr(text, "CHUNK", 1)
    trace_tracks._metadata_texts.cache_clear()
    trace_view._json_vocab.cache_clear()
    analysis.analyse_dir(ref, parallel=False)

    want = (ref / OUT / "trace_view.json").read_bytes()
    assert (fast / OUT / "trace_view.json").read_bytes() == want
    assert (kept / OUT / "trace_view.json").read_bytes() == want
    events = orjson.loads(want)
    pid = next(e["pid"] for e in events if e["name"] == "process_name" and e["args"]["name"] == "Overlap Analysis")
    lanes = {e["tid"]: e["args"]["name"] for e in events if e["pid"] == pid and e["name"] == "thread_name"}
    assert lanes == dict(enumerate(["Computing", "Communication", "Communication(Not Overlapped)", "Free"]))
    spans = [e for e in events if e["pid"] == pid and e["ph"] == "X"]
    assert {e["name"] for e in spans} == {"Computing", "Free"}  # (no communication in the window)
    assert all(lanes[e["tid"]] == e["name"] for e in spans)


def _kernels(op: list[int]) -> SimpleNamespace:
    k = SimpleNamespace(op=np.asarray(op, np.int64), comm=np.zeros(len(op), bool), event=np.zeros(0, np.int64))
    return SimpleNamespace(kernels=type("K", (), {"__len__": lambda self: len(op), **vars(k)})())


@pytest.mark.parametrize("op", [[], [-1, -1], [0, 1, 2, 5], [-1, 3, -1, 4, 9], [2, 2, 3], [5, 1, -1, 3], [4, 4, 4, 1]])
def test_cann_apis_in_launch_order_equal_unique(op: list[int]) -> None:
    apis = cann.build(_kernels(op))  # type: ignore[arg-type]
    sel = np.asarray([o for o in op if o >= 0], np.int64)
    event, first = np.unique(sel, return_index=True)
    assert apis.event.tolist() == event.tolist()
    assert apis.level.tolist() == [0] * len(event) and apis.conn.tolist() == op
    assert len(first) == len(apis.event)


def test_fwdbwd_flows_on_one_thread_are_left_out_and_across_threads_kept() -> None:
    ids = np.asarray([1, 1, 2, 2, 3, 3], np.int64)
    start = np.asarray([True, False, True, False, True, False])
    one = SimpleNamespace(flow_ts=ids * 10, flow_id=ids, flow_start=start, flow_tid=np.full(6, 7, np.int64))
    assert trace_view._cross_thread(one).tolist() == []
    two = SimpleNamespace(flow_ts=ids * 10, flow_id=ids, flow_start=start,
                          flow_tid=np.asarray([7, 7, 7, 8, 8, 8], np.int64))
    assert trace_view._cross_thread(two).tolist() == [2, 3]


def test_the_group_is_read_at_its_first_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """profiler_metadata.json is read once, when a field of the group is first used (a window
    without communication never reads it), and gives the group it describes."""
    reads: list[Path] = []
    real = communication.read_json
    monkeypatch.setattr(communication, "read_json", lambda p, *a, **k: (reads.append(p), real(p, *a, **k))[1])
    (tmp_path / "profiler_metadata.json").write_bytes(orjson.dumps(
        {"parallel_group_info": {"7": {"global_ranks": [3, 1, 2], "group_rank": 2}}}))
    group = communication.group_of(tmp_path, 1)
    assert reads == []
    assert (group.gid, group.local_rank, group.ranks) == ("7", 2, [1, 2, 3])
    assert group.hashed == str(double_hash("7")) and reads == [tmp_path / "profiler_metadata.json"]
    assert dataclasses.astuple(group) == ("7", str(double_hash("7")), 2, [1, 2, 3]) and len(reads) == 1
    none = communication.group_of(tmp_path / "absent", 4)
    assert (none.gid, none.local_rank, none.ranks) == ("0", 4, [4])


def test_a_window_without_communication_never_reads_the_metadata(trainer: Trainer, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    raw = raw_window(trainer, tmp_path / "raw")
    reads: list[Path] = []
    real = communication.read_json
    monkeypatch.setattr(communication, "read_json", lambda p, *a, **k: (reads.append(p), real(p, *a, **k))[1])
    analysis.analyse_dir(raw, parallel=False)
    assert (raw / OUT / "analyse.done").is_file() and reads == []


@pytest.mark.parametrize("some", [False, True])
def test_kernels_with_and_without_operators_carry_their_own_flows(trainer: Trainer, tmp_path: Path,
                                                                  some: bool) -> None:
    """A chunk where every kernel, or only some, have a source operator: each kernel event keeps
    its own times, and exactly those with one carry the torch_to_npu pair (s at the operator, f at
    the kernel, id the base plus the kernel's index)."""
    raw = raw_window(trainer, tmp_path / "raw")
    info, _rank = rank_analyse.read_info(raw)
    fw = framework.load(raw, info, parallel=False)
    k = fw.kernels
    assert len(k) >= 4 and (k.op >= 0).all()
    k.op = k.op.copy()
    if some:
        k.op[1::3] = -1  # some kernels lose their operator
    k.ts = k.ts + 1234  # and start apart from it (a CPU kernel is its operator: the same start)
    lay = trace_tracks.Layout(fw, 0)
    fit = trace_tracks.fitted(fw, Overlap(fw), lay)
    events = orjson.loads(b"[" + b",".join(t for group in trace_view._kernels(fw, lay, fit) for t in group) + b"]")
    per_kernel: list[list[dict]] = []
    for e in events:  # a kernel's X event, then its flow pair if it has one
        if e["ph"] == "X":
            per_kernel.append([e])
        else:
            per_kernel[-1].append(e)
    assert len(per_kernel) == len(k)
    for j, evs in enumerate(per_kernel):
        assert evs[0]["ts"] == text.ts_text(int(k.ts[j])) and evs[0]["tid"] == int(fit.k_tid[j])
        assert evs[0]["dur"] == int(fit.k_dur[j]) / 1000 and evs[0]["args"]["Task Id"] == j
        if k.op[j] < 0:
            assert len(evs) == 1
            continue
        s, f = evs[1:]
        assert (s["ph"], f["ph"], s["id"], f["id"]) == ("s", "f", str(trace_view.TO_NPU_ID_BASE + j),
                                                        str(trace_view.TO_NPU_ID_BASE + j))
        assert s["ts"] == text.ts_text(int(fw.op_ts[k.op[j]])) and s["tid"] == int(fit.op_tid[k.op[j]])
        assert f["ts"] == evs[0]["ts"] and f["tid"] == evs[0]["tid"]
