"""The per-window fast paths of the torch analysis give the bytes of the reference paths: a fresh
``ASCEND_PROFILER_OUTPUT/`` (made in two syscalls, ``analyse.done`` created at once) ends as one
re-analysed over an existing output dir, with the native nesting sweep as with its Python
reference, whatever the umask, at every level, with and without data_simplification, stacks,
shapes and memory; the machine peaks kept from window to window follow a changed cache file."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from openmsprof.export.ascend_pt import cost_cells, nesting
from openmsprof.machine import peaks
from openmsprof.torch.profiler import analysis
from tests.torch.conftest import Trainer, file_tree, raw_window, read_csv, window_variant

OUT = "ASCEND_PROFILER_OUTPUT"


@pytest.fixture
def raw(trainer: Trainer, tmp_path: Path) -> Path:
    """One saved, unanalysed window with shapes, stacks and memory."""
    return raw_window(trainer, tmp_path / "raw")


@pytest.fixture
def own_peaks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private peaks cache (``OPENMSPROF_CACHE``), the kept copies forgotten before and after."""
    monkeypatch.setenv("OPENMSPROF_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    peaks._kept = None
    cost_cells._values.clear()
    yield peaks.cache_path()
    peaks._kept = None
    cost_cells._values.clear()


def _variant(src: Path, dst: Path, level: str, simplify: bool, stack: bool, memory: bool) -> Path:
    return window_variant(src, dst, level, simplify, with_stack=stack, profile_memory=memory)


@pytest.mark.parametrize(("level", "simplify", "stack", "memory"), [
    ("Level0", True, False, False), ("Level0", False, True, True), ("Level1", True, True, False),
    ("Level1", False, False, True), ("Level2", True, False, True), ("Level_none", True, False, False)])
def test_a_fresh_output_dir_ends_as_a_reanalysed_one(raw: Path, tmp_path: Path, own_peaks: Path,
                                                     monkeypatch: pytest.MonkeyPatch, level: str, simplify: bool,
                                                     stack: bool, memory: bool) -> None:
    own_peaks.write_bytes(orjson.dumps({"stream": {"copy": 9.5}, "gemm": {"numpy float32": 40.0}}))
    fresh = _variant(raw, tmp_path / "fresh" / raw.name, level, simplify, stack, memory)
    again = _variant(raw, tmp_path / "again" / raw.name, level, simplify, stack, memory)
    old = os.umask(0o077)  # the modes are set whatever the umask
    try:
        analysis.analyse_dir(fresh, parallel=False)
    finally:
        os.umask(old)
    # the reference: an output dir that exists (a stale analyse.done in it) and the Python sweep
    (again / OUT).mkdir(mode=0o750)
    (again / OUT / "analyse.done").write_bytes(b"")
    monkeypatch.setattr(nesting, "_native", None)
    monkeypatch.setattr(nesting, "_tree", None)
    monkeypatch.setattr(nesting, "_kernels", None)
    analysis.analyse_dir(again, parallel=False)

    tree = file_tree(fresh)
    assert tree == file_tree(again)
    assert tree[OUT] == (stat.S_IFDIR | 0o750, "")
    assert tree[f"{OUT}/analyse.done"] == (stat.S_IFREG | 0o640, hashlib.sha256(b"").hexdigest())
    assert all(m & 0o777 == (0o750 if stat.S_ISDIR(m) else 0o640) for m, _ in tree.values())
    if level != "Level_none":
        _, rows = read_csv(fresh / OUT / "kernel_details.csv")  # (the peaks were read: ratios)
        assert any(r["Memory Bound Ratio"] != "N/A" for r in rows)


def test_kept_peaks_follow_the_cache_file(raw: Path, tmp_path: Path, own_peaks: Path) -> None:
    """The peaks (and the cost model) kept between windows are read again once the cache file
    changes, and dropped once it is gone: every window's ratios are those of the file it saw."""

    def ratios(n: int) -> list[str]:
        d = _variant(raw, tmp_path / f"w{n}" / raw.name, "Level0", True, False, False)
        analysis.analyse_dir(d, parallel=False)
        _, rows = read_csv(d / OUT / "kernel_details.csv")
        return [r["Memory Bound Ratio"] for r in rows if r["FLOPs"] != "N/A"]

    own_peaks.write_bytes(orjson.dumps({"stream": {"copy": 9.5}, "gemm": {"numpy float32": 40.0}}))
    slow = ratios(1)
    assert any(x != "N/A" for x in slow)
    assert ratios(2) == slow  # kept: the same figures
    own_peaks.write_bytes(orjson.dumps({"stream": {"copy": 950.0}, "gemm": {"numpy float32": 40.0}}))
    fast = ratios(3)  # 100x the bandwidth: every ratio the model gives changes
    assert [x == "N/A" for x in fast] == [x == "N/A" for x in slow]
    assert all(a != b for a, b in zip(fast, slow, strict=True) if a != "N/A")
    peaks._kept = None  # a process that never kept anything reads the same
    cost_cells._values.clear()
    assert ratios(4) == fast
    own_peaks.unlink()
    assert set(ratios(5)) == {"N/A"}


@pytest.mark.parametrize("logs", ["note", "link", "absent"])
def test_only_an_empty_logs_dir_becomes_the_output_dir(raw: Path, tmp_path: Path, own_peaks: Path,
                                                       logs: str) -> None:
    """With data_simplification the empty leftover ``logs/`` is renamed into the fresh output dir;
    a ``logs/`` that holds a note, a link in its place, or none at all leave the same output, the
    note and the link kept where they were (the link's target untouched)."""
    ref = _variant(raw, tmp_path / "ref" / raw.name, "Level0", True, False, False)
    assert (ref / "logs").is_dir() and not any((ref / "logs").iterdir())
    d = _variant(raw, tmp_path / "d" / raw.name, "Level0", True, False, False)
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o750)
    (d / "logs").rmdir()
    if logs == "note":
        (d / "logs").mkdir(mode=0o750)
        (d / "logs" / "collection.log").write_text("not supported here: x\n")
    elif logs == "link":
        (d / "logs").symlink_to(target, target_is_directory=True)
    analysis.analyse_dir(ref, parallel=False)
    analysis.analyse_dir(d, parallel=False)
    tree = file_tree(d)
    assert {k: v for k, v in tree.items() if not k.startswith("logs")} == file_tree(ref)
    assert "logs" not in file_tree(ref) and target.is_dir() and not any(target.iterdir())
    if logs == "note":
        assert (d / "logs" / "collection.log").read_text() == "not supported here: x\n"
    elif logs == "link":
        assert (d / "logs").is_symlink()
    else:
        assert not (d / "logs").exists()


def test_a_private_copy_writes_its_fresh_output_in_place(raw: Path, tmp_path: Path, own_peaks: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``private`` (the worker's staged copy): the views of a fresh output dir are created where
    they end, no temp file renamed, and are the bytes of the atomic path; over an existing output
    dir (its files may be hard links into the published dir) every file is still replaced by a
    rename, and a linked file's other name keeps its bytes."""
    ref = _variant(raw, tmp_path / "ref" / raw.name, "Level1", True, False, True)
    mine = _variant(raw, tmp_path / "mine" / raw.name, "Level1", True, False, True)
    again = _variant(raw, tmp_path / "again" / raw.name, "Level1", True, False, True)
    analysis.analyse_dir(ref, parallel=False)
    real_replace = os.replace
    into: list[str] = []

    def replace(src: object, dst: object, **kw: object) -> None:
        into.append(os.path.basename(os.path.dirname(os.fspath(dst))))  # type: ignore[arg-type]
        real_replace(src, dst, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", replace)
    analysis.analyse_dir_info(mine, parallel=False, private=True)
    assert OUT not in into, into
    assert file_tree(mine) == file_tree(ref)

    (again / OUT).mkdir(mode=0o750)  # a published dir's file, hard-linked into the copy
    published = tmp_path / "published_trace_view.json"
    published.write_bytes(b"[]")
    os.link(published, again / OUT / "trace_view.json")
    analysis.analyse_dir_info(again, parallel=False, private=True)
    assert into.count(OUT) >= 5, into
    assert published.read_bytes() == b"[]"
    assert file_tree(again) == file_tree(ref)
