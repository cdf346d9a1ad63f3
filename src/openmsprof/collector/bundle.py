"""What a board lacks to run ``python -m openmsprof collect``, and the bundle that supplies it.

Seed 002's board needs only Python and the application's packages.  Before a remote run the
board's Python is probed once (:data:`PROBE`: interpreter tag, machine, and the versions of
openmsprof and of each distribution it needs).  When openmsprof is missing there, or another
version, this installed copy is packed (the ``openmsprof`` package folder, plus those of
:data:`BOARD_NEEDS` the board lacks, taken from this environment's installed files) into one
``.tar.gz``, uploaded into the run folder, unpacked there with ``python -m tarfile`` and put on
``PYTHONPATH`` for that run only; the run folder (bundle included) is removed afterwards unless
``--keep-remote``.  Compiled distributions (numpy, orjson, ...) are shipped only to a board with
the same interpreter tag and machine; otherwise the run stops with one line naming what to
``pip install`` there.  The runtime a facade of the program needs on the board
(:data:`FACADE_NEEDS`: ONNX Runtime for ``openmsprof.acl``, found in the uploaded sources) is
shipped the same way when the board lacks it, or named in that one line.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import io
import json
import os
import platform
import re
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from openmsprof._version import __version__
from openmsprof.config.errors import ProfilingError
from openmsprof.fileio import fs

__all__ = ["FACADE_NEEDS", "PROBE", "BoardPython", "bundle_bytes", "facade_needs", "needed", "parse_probe", "plan"]

_SKIP_PARTS = {"__pycache__"}


#: What the board side of ``collect`` imports beyond the standard library (the recorder and the
#: bootstrap; import, export, show and their packages run on this side).  A test runs a board
#: that has exactly these.
BOARD_NEEDS = ("numpy", "orjson")


#: What a facade the program uses imports on the board (its runtime), found by :func:`facade_needs`.
FACADE_NEEDS: dict[str, tuple[re.Pattern[str], str]] = {
    # pyACL (seed 001/002 apps): ``from openmsprof import acl``, ``import openmsprof.acl``
    "onnxruntime": (re.compile(r"\bopenmsprof\.acl\b|\bfrom\s+openmsprof\s+import\s+[^\n]*\bacl\b"), "the pyACL facade"),
}
#: Source files of the upload read for :func:`facade_needs` (a project's first ones, each capped).
SCAN_FILES, SCAN_BYTES = 2000, 1 << 20


def facade_needs(sources: list[Path]) -> list[str]:
    """The runtimes (FACADE_NEEDS keys) the uploaded program's Python files use."""
    found: list[str] = []
    for path in sources[:SCAN_FILES]:
        try:
            with path.open("rb") as fh:
                text = fh.read(SCAN_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        found += [d for d, (pattern, _what) in FACADE_NEEDS.items() if d not in found and pattern.search(text)]
    return found


def needed(extra: list[str] | None = None) -> list[str]:
    return ["openmsprof", *BOARD_NEEDS, *(extra or [])]


#: Python source run on the board with the distribution names as argv; prints one JSON line.
PROBE = ("import sys, json, platform, importlib.metadata as m\n"
         "have = {}\n"
         "for n in sys.argv[1:]:\n"
         "    try: have[n] = m.version(n)\n"
         "    except Exception: pass\n"
         "print(json.dumps({'tag': sys.implementation.cache_tag, 'machine': platform.machine(), 'have': have}))\n")


@dataclass
class BoardPython:
    """What the probe found on the board."""

    tag: str
    machine: str
    have: dict[str, str] = field(default_factory=dict)


def parse_probe(text: str, where: str) -> BoardPython:
    try:
        data = json.loads(text.strip().splitlines()[-1])
        return BoardPython(str(data["tag"]), str(data["machine"]), dict(data["have"]))
    except (ValueError, KeyError, IndexError, TypeError):
        raise ProfilingError(f"the board's Python on {where} did not answer the probe "
                             "(is [remote] python a Python 3 interpreter?)") from None


def plan(board: BoardPython, where: str, extra: list[str] | None = None) -> list[str]:
    """The distributions to ship (empty: the board has this openmsprof and all it needs).
    ``extra``: the runtimes the program's facades need (:func:`facade_needs`); one the board
    lacks is shipped from this environment (same interpreter and machine), else the run stops
    before anything runs with one line naming it."""
    runtimes = [d for d in extra or [] if d not in board.have]
    same = board.tag == sys.implementation.cache_tag and board.machine == platform.machine()
    for dist in runtimes:
        if not same or not _installed(dist):
            why = "is not installed here either" if same else (
                f"cannot be shipped from here ({sys.implementation.cache_tag}/{platform.machine()}, "
                f"the board runs {board.tag}/{board.machine})")
            raise ProfilingError(f"the board {where} lacks {dist}, which {FACADE_NEEDS[dist][1]} of the "
                                 f"program needs, and it {why}; run there: pip install {dist}")
    if board.have.get("openmsprof") == __version__ and not runtimes:
        return []
    missing = [d for d in BOARD_NEEDS if d not in board.have]
    if missing and not same:
        raise ProfilingError(
            f"the board {where} lacks {', '.join(missing)} and runs {board.tag}/{board.machine} "
            f"(here {sys.implementation.cache_tag}/{platform.machine()}), so this copy cannot be "
            f"shipped; run there: pip install {' '.join(missing)}")
    head = [] if board.have.get("openmsprof") == __version__ else ["openmsprof"]
    return [*head, *missing, *runtimes]


def _installed(dist: str) -> bool:
    try:
        md.distribution(dist)
    except md.PackageNotFoundError:
        return False
    return True


def _package_files() -> list[tuple[Path, str]]:
    import openmsprof

    root = Path(openmsprof.__file__).resolve().parent
    return [(p, "openmsprof/" + p.relative_to(root).as_posix()) for p in sorted(root.rglob("*"))
            if p.is_file() and not _SKIP_PARTS & set(p.parts) and p.suffix != ".pyc"]


def _dist_files(name: str) -> list[tuple[Path, str]]:
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        raise ProfilingError(f"{name} is needed on the board but is not installed here either") from None
    out = []
    for f in dist.files or []:
        rel = f.as_posix()
        if rel.startswith("..") or rel.startswith("/") or _SKIP_PARTS & set(f.parts) or rel.endswith(".pyc"):
            continue
        path = Path(str(dist.locate_file(f)))
        if path.is_file():
            out.append((path, rel))
    return out


def _files(dists: list[str]) -> list[tuple[Path, str]]:
    return [f for dist in dists for f in (_package_files() if dist == "openmsprof" else _dist_files(dist))]


def _pack(files: list[tuple[Path, str]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        for path, arc in files:
            info = tar.gettarinfo(str(path), arcname=arc)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode &= 0o755
            with path.open("rb") as fh:
                tar.addfile(info, fh)
    return buf.getvalue()


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "openmsprof"


def bundle_bytes(dists: list[str], cache: bool = True) -> bytes:
    """A ``.tar.gz`` of the installed files of ``dists`` (``openmsprof``: its package folder).

    Packing numpy takes seconds, so the result is kept in ``~/.cache/openmsprof/`` under a key of
    every packed file's name, size and mtime (any change packs afresh); ``cache=False`` skips it."""
    files = _files(dists)
    if not cache:
        return _pack(files)
    key = hashlib.sha256()
    for path, arc in files:
        st = path.stat()
        key.update(f"{arc}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    target = cache_dir() / f"bundle-{__version__}-{key.hexdigest()[:20]}.tar.gz"
    try:
        if target.is_file() and not target.is_symlink():
            return target.read_bytes()
    except OSError:
        pass
    data = _pack(files)
    try:
        fs.make_dir(target.parent)
        for old in target.parent.glob("bundle-*.tar.gz"):  # one bundle kept: the newest
            if old != target and not old.is_symlink():
                old.unlink(missing_ok=True)
        fs.write_file_atomic(target, data)
    except (OSError, ProfilingError):  # no cache (read-only home, ...): packed each time
        pass
    return data
