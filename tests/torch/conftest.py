"""Shared pieces for the torch facade tests: small real models trained on random data."""

from __future__ import annotations

import csv
import hashlib
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

torch = pytest.importorskip("torch")

DIR_RE = re.compile(r"^.+_\d+-[a-z0-9]{6}_\d{17}_ascend_pt$")


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        return self.fc(x.flatten(1))


class Trainer:
    def __init__(self, kind: str = "mlp") -> None:
        torch.manual_seed(0)
        self.model = MLP() if kind == "mlp" else CNN()
        self.shape = (16, 32) if kind == "mlp" else (4, 3, 16, 16)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)

    def step(self) -> None:
        x = torch.randn(*self.shape)
        y = torch.randint(0, 10, (self.shape[0],))
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad()


@pytest.fixture
def trainer() -> Trainer:
    return Trainer("mlp")


@pytest.fixture
def cnn() -> Trainer:
    return Trainer("cnn")


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("ASCEND_WORK_PATH", raising=False)
    yield


def rank_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.name.endswith("_ascend_pt"))


def analysed_dirs(root: Path) -> list[Path]:
    """The rank dirs under ``root`` whose analysis finished (analyse.done, kernel_details.csv)."""
    return [d for d in rank_dirs(root) if (d / "ASCEND_PROFILER_OUTPUT" / "analyse.done").is_file()
            and (d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").is_file()]


def saved_window(root: Path) -> Path:
    """The one rank dir under ``root`` of a window handed over with ``analyse_flag=False``, once
    the analysis worker answered its save and released its claim (``stop()`` does not wait for
    that: it may save the window itself, and the worker's late try must not run beside the
    test's own work on the dir), still unanalysed."""
    from openmsprof.torch.profiler import _analysis_claim, _analysis_worker

    (rd,) = rank_dirs(root)
    c = _analysis_worker._client  # the worker's late save of a window stop() saved itself: answered first
    if c is not None and c.alive():  # (wait_for reads the answers: no thread reads them as they come)
        assert c.wait_for(lambda: os.fspath(rd) not in c.pending, 120), f"the worker never answered {rd}"
    with _analysis_claim.claim(rd, wait_s=120) as mine:
        assert mine is True
    assert not (rd / "ASCEND_PROFILER_OUTPUT").exists()
    return rd


def raw_window(trainer: Trainer, root: Path) -> Path:
    """One saved, unanalysed window of ``trainer`` with shapes, stacks and memory."""
    import openmsprof.torch.profiler as tp

    with tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=0, warmup=0, active=2, repeat=1),
                    on_trace_ready=tp.tensorboard_trace_handler(str(root), analyse_flag=False),
                    record_shapes=True, with_stack=True, profile_memory=True) as prof:
        for _ in range(3):
            trainer.step()
            prof.step()
    return saved_window(root)


def window_variant(src: Path, dst: Path, level: str, simplify: bool, **common: bool) -> Path:
    """A copy of the saved window ``src`` at ``dst`` whose profiler_info asks for ``level`` (Level2
    with the db export too), ``data_simplification=simplify`` and the ``common_config`` flags
    ``common`` (with_stack, profile_memory, record_shapes)."""
    shutil.copytree(src, dst)
    info = next(dst.glob("profiler_info*.json"))
    doc = orjson.loads(info.read_bytes())
    doc["config"]["experimental_config"].update(_profiler_level=level, _data_simplification=simplify,
                                                _export_type=["text", "db"] if level == "Level2" else ["text"])
    doc["config"]["common_config"].update(common)
    info.write_bytes(orjson.dumps(doc))
    os.chmod(info, 0o640)
    return dst


def file_tree(d: Path) -> dict[str, tuple[int, str]]:
    """Mode and sha256 (a directory: "") of every path under ``d``, by its path relative to ``d``."""
    return {str(p.relative_to(d)): (os.lstat(p).st_mode,
                                    hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "")
            for p in sorted(d.rglob("*"))}


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as f:
        r = csv.reader(f)
        header = next(r)
        return header, [dict(zip(header, row, strict=False)) for row in r]


def trace(out: Path) -> list[dict]:
    return orjson.loads((out / "trace_view.json").read_bytes())


def modes_ok(path: Path) -> bool:
    for dirpath, dirnames, filenames in os.walk(path):
        for d in dirnames:
            if os.stat(os.path.join(dirpath, d)).st_mode & 0o777 != 0o750:
                return False
        for f in filenames:
            if os.stat(os.path.join(dirpath, f)).st_mode & 0o777 != 0o640:
                return False
    return True


# the msprof-analyze jobs, made once per session (issue 25's matrix)
from tests.torch.ma_jobs import ma_four, ma_one, ma_pyacl, ma_tf, ma_two, peaks_cache  # noqa: E402, F401
