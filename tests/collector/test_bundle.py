"""What a board lacks and what gets shipped to it (the probe's answer → the upload plan)."""

from __future__ import annotations

import io
import platform
import sys
import tarfile

import pytest

from openmsprof._version import __version__
from openmsprof.collector import bundle
from openmsprof.config.errors import ProfilingError

HERE = (sys.implementation.cache_tag, platform.machine())


def test_board_with_this_openmsprof_needs_nothing() -> None:
    b = bundle.BoardPython(*HERE, have={"openmsprof": __version__})
    assert bundle.plan(b, "u@h:22") == []


def test_missing_or_other_version_ships_what_is_missing() -> None:
    assert bundle.plan(bundle.BoardPython(*HERE, have={}), "u@h:22") == ["openmsprof", *bundle.BOARD_NEEDS]
    other = bundle.BoardPython(*HERE, have={"openmsprof": "0.0.1", "numpy": "1.26.0", "orjson": "3.9.0"})
    assert bundle.plan(other, "u@h:22") == ["openmsprof"]  # pure Python: any board


def test_other_interpreter_gets_one_line_naming_pip_install() -> None:
    b = bundle.BoardPython("cpython-38", "aarch64", have={"numpy": "1.24.0"})
    with pytest.raises(ProfilingError) as exc:
        bundle.plan(b, "u@h:22")
    text = str(exc.value)
    assert "\n" not in text and "pip install orjson" in text and "cpython-38/aarch64" in text
    # with every compiled package present, only openmsprof (pure Python) is shipped
    b.have["orjson"] = "3.9.0"
    assert bundle.plan(b, "u@h:22") == ["openmsprof"]


def test_probe_answer_parsing() -> None:
    b = bundle.parse_probe('noise\n{"tag": "cpython-311", "machine": "x86_64", "have": {"numpy": "2.0"}}\n', "w")
    assert (b.tag, b.machine, b.have) == ("cpython-311", "x86_64", {"numpy": "2.0"})
    with pytest.raises(ProfilingError, match="did not answer the probe"):
        bundle.parse_probe("Python 2.7 says hello", "w")


def test_bundle_holds_the_package_without_caches() -> None:
    data = bundle.bundle_bytes(["openmsprof"])
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = tar.getnames()
        modes = {m.mode & 0o022 for m in tar.getmembers()}
    assert "openmsprof/__init__.py" in names and "openmsprof/_bootstrap/sitecustomize.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert modes == {0}  # nothing group/other-writable


def test_bundle_is_cached_and_repacked_on_change(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = bundle.bundle_bytes(["openmsprof"])
    (cached,) = (tmp_path / "cache" / "openmsprof").glob("bundle-*.tar.gz")
    assert cached.read_bytes() == first and oct(cached.stat().st_mode & 0o777) == oct(0o640)
    assert bundle.bundle_bytes(["openmsprof"]) == first  # served from the cache
    real = bundle._package_files

    def one_more() -> list:
        extra = tmp_path / "extra.py"
        extra.write_text("x = 1\n")
        return [*real(), (extra, "openmsprof/extra.py")]

    monkeypatch.setattr(bundle, "_package_files", one_more)
    second = bundle.bundle_bytes(["openmsprof"])
    with tarfile.open(fileobj=io.BytesIO(second)) as tar:
        assert "openmsprof/extra.py" in tar.getnames()
    assert len(list((tmp_path / "cache" / "openmsprof").glob("bundle-*.tar.gz"))) == 1  # the old one went


def test_facade_runtime_found_in_the_sources(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A pyACL program (``from openmsprof import acl``) needs ONNX Runtime on the board."""
    acl_app = tmp_path / "main.py"
    acl_app.write_text("import os\nfrom openmsprof import acl\nacl.init()\n")
    dotted = tmp_path / "b.py"
    dotted.write_text("import openmsprof.acl as acl\n")
    plain = tmp_path / "c.py"
    plain.write_text("from openmsprof import mstx\nprint('aclx')\n")
    assert bundle.facade_needs([acl_app]) == ["onnxruntime"]
    assert bundle.facade_needs([dotted]) == ["onnxruntime"]
    assert bundle.facade_needs([plain]) == []


def test_facade_runtime_shipped_or_refused_in_one_line() -> None:
    b = bundle.BoardPython(*HERE, have={"openmsprof": __version__, "numpy": "2.0", "orjson": "3.9"})
    assert bundle.plan(b, "u@h:22", ["onnxruntime"]) == ["onnxruntime"]  # this openmsprof kept
    b.have["onnxruntime"] = "1.20"
    assert bundle.plan(b, "u@h:22", ["onnxruntime"]) == []
    other = bundle.BoardPython("cpython-38", "aarch64", have={"numpy": "1.24.0", "orjson": "3.9"})
    with pytest.raises(ProfilingError) as exc:
        bundle.plan(other, "u@h:22", ["onnxruntime"])
    text = str(exc.value)
    assert "\n" not in text and "lacks onnxruntime" in text and "pip install onnxruntime" in text
