"""The read guard's nesting bound counts brackets without numpy for texts of up to a million
brackets (importing numpy cost more than a cluster rank's parse: issue 26): it must give what
the running bracket count gives, on both paths, and still refuse documents nested too deep."""

from __future__ import annotations

import random

import numpy as np
import orjson
import pytest

from openmsprof.fileio import read_guard
from openmsprof.fileio.read_guard import JSONTooDeep, parse_bounded


def _running_max(data: bytes) -> int:
    raw = np.frombuffer(data, dtype=np.uint8)
    steps = np.isin(raw, list(b"[{")).astype(np.int64) - np.isin(raw, list(b"]}")).astype(np.int64)
    return int(np.cumsum(steps).max())


@pytest.mark.parametrize("python_path", [True, False])
def test_bracket_bound_is_the_running_bracket_count(python_path: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not python_path:
        monkeypatch.setattr(read_guard, "_PY_MARKS", 0)
    rnd = random.Random(26)
    checked = 0
    for _ in range(400):
        alphabet = rnd.choice([b"[]{}", b'[]{}ab",:', b"[[{{]}a"])
        data = bytes(rnd.choice(alphabet) for _ in range(rnd.randint(1, 4000)))
        if data.count(b"[") + data.count(b"{") <= 128:
            continue
        assert read_guard._bracket_bound(data, 128) == _running_max(data), data[:80]
        checked += 1
    assert checked > 100
    for data in (b"x" + b"]" * 300 + b"[" * 200, b"]" * 300 + b"[" * 200):  # never above its start
        assert read_guard._bracket_bound(data, 128) == _running_max(data)


def test_deep_documents_are_refused_and_wide_ones_read() -> None:
    wide = orjson.dumps({"ops": [{"t": [i, {"x": [1, 2]}]} for i in range(2000)], "s": "]]]]{{{{"})
    assert parse_bounded(wide) == orjson.loads(wide)
    deep = b"[" * 200 + b"]" * 200
    with pytest.raises(JSONTooDeep):
        parse_bounded(b"[1, " + deep + b"]")
    assert parse_bounded(b"[" * 100 + b"]" * 100, 128) is not None
