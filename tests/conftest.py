"""Shared fixtures: every test leaves no session running and writes under tmp_path.  At the end
of a run, one line says what was skipped and the command that provides what it needed."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from openmsprof.recorder import session


@pytest.fixture(autouse=True)
def _no_leftover_session() -> Iterator[None]:
    yield
    if session.current() is not None:
        session.stop()


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    """A fresh output directory for a job."""
    d = tmp_path / "out"
    d.mkdir()
    return d


@pytest.fixture(autouse=True)
def _umask_wide() -> Iterator[None]:
    """Run with a permissive umask so the 0640/0750 guarantees are really tested."""
    old = os.umask(0o002)
    yield
    os.umask(old)


BACKENDS = ["native", "python"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test on the native recorder core and on the pure-Python fallback (the marker
    entry points of ``sources.markers`` and ``openmsprof.mstx`` rebound for the test)."""
    from openmsprof import mstx
    from openmsprof.recorder import core
    from openmsprof.sources import markers

    name = request.param
    if name == "native" and core.ring is None:
        pytest.skip("the native recorder core was not built (no compiler at install time)")
    fns = {"mark": markers.py_mark, "push": markers.py_push, "pop": markers.py_pop,
           "range_start": markers.py_range_start, "range_end": markers.py_range_end}
    if name == "native":
        assert core.ring is not None
        fns = {k: getattr(core.ring, k) for k in fns}
    monkeypatch.setattr(core, "BACKEND", name)
    monkeypatch.setattr(markers, "BACKEND", name)
    for k, f in fns.items():
        monkeypatch.setattr(markers, k, f)
    for k, alias in (("mark", "mark"), ("push", "range_push"), ("pop", "range_pop"),
                     ("range_start", "range_start"), ("range_end", "range_end")):
        monkeypatch.setattr(mstx, alias, fns[k])
    return name


#: skip reason (regex) → what the test needed, and the command that provides it
SKIP_HINTS: tuple[tuple[str, str, str], ...] = (
    (r"sshd|ssh-keygen|openssh", "an OpenSSH server", "make test-deps: apt-get install -y openssh-server openssh-client"),
    (r"[Cc]hromium", "Chromium", "make test-deps: apt-get install -y chromium"),
    (r"TensorFlow 2\.15 venv", "the TensorFlow 2.15 venv", "make .venv-tf215/.installed"),
    (r"shared|FORMATS\.md|OPENMSPROF_SEEDS", "the seed documents in ../shared",
     "lay shared/ beside the clone or set OPENMSPROF_SEEDS"),
    (r"CUDA|GPU", "a CUDA GPU", "nothing to install: run on a machine with an NVIDIA GPU"),
    (r"root reads|root ignores", "a non-root user", "run the suite as a non-root user"),
    (r"needs root|mount|setpriv|useradd", "root", "run the suite as root"),
    (r"not installed|No module named|could not import|not built|compiler", "packages or a built extension",
     "make -B .venv/.installed (pip install -e '.[dev]' with a C compiler)"),
)


def skip_summary(reasons: list[str]) -> str:
    """One line: how many tests were skipped, grouped by what they needed, each with its command."""
    if not reasons:
        return "openmsprof: no test skipped"
    groups: dict[tuple[str, str], int] = {}
    other: dict[str, int] = {}
    for reason in reasons:
        hint = next(((what, how) for rx, what, how in SKIP_HINTS if re.search(rx, reason)), None)
        if hint is None:
            other[reason] = other.get(reason, 0) + 1
        else:
            groups[hint] = groups.get(hint, 0) + 1
    parts = [f"{n} need {what} ({how})" for (what, how), n in groups.items()]
    parts += [f"{n} other ({reason})" for reason, n in other.items()]
    return f"openmsprof: {len(reasons)} skipped: " + "; ".join(parts)


def _reason(rep: pytest.TestReport) -> str:
    longrepr = rep.longrepr
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


#: the session's own temp dir (set in the environment, so subprocesses and xdist workers share it)
TEMP_ENV = "OPENMSPROF_TEST_TMPDIR"
TEMP_PREFIX = "openmsprof-tests-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pytest_configure(config: pytest.Config) -> None:
    """Every temp file of the run (pytest's tmp_path, ``tempfile`` in the tests and in every
    process they start) goes into one directory of the session's own, removed at the end when the
    run passed, so nothing piles up in the machine's temp dir. Dirs of dead earlier runs go first."""
    if os.environ.get(TEMP_ENV):  # an xdist worker or a nested run: the controller's dir
        tempfile.tempdir = os.environ["TMPDIR"] = os.environ[TEMP_ENV]
        return
    base = Path(tempfile.gettempdir())
    for old in base.glob(TEMP_PREFIX + "*"):
        pid = old.name.removeprefix(TEMP_PREFIX)
        if pid.isdigit() and not old.is_symlink() and not _pid_alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    root = base / f"{TEMP_PREFIX}{os.getpid()}"
    root.mkdir(exist_ok=True)
    root.chmod(0o711)  # other users pass through (the ssh tests' users have their homes in it)
    os.environ[TEMP_ENV] = os.environ["TMPDIR"] = tempfile.tempdir = str(root)
    config.stash[_TEMP_KEY] = root


_TEMP_KEY = pytest.StashKey[Path]()


#: name prefixes of what others leave in $TMPDIR (``import onnxruntime``'s ``.ses``, TensorFlow's
#: autograph sources, Dask's scratch space, torch's inductor cache and CUDA's debug log), and
#: the kernel databases ``analyze`` builds in this process when a rank dir is read-only (its
#: atexit hook removes them, after this report)
FOREIGN_TEMP = (".ses", "__autograph_generated_file", "dask-scratch-space", "torchinductor_", "mat-debug-",
                "openmsprof-kernels-")


def temp_litter(root: Path) -> list[str]:
    """What the run left in its temp dir besides pytest's own tmp_path tree and FOREIGN_TEMP."""
    return sorted(p.name for p in root.iterdir()
                  if not p.name.startswith(("pytest-of-", *FOREIGN_TEMP)))


_PASSED_KEY = pytest.StashKey[bool]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_PASSED_KEY] = exitstatus == 0


def pytest_unconfigure(config: pytest.Config) -> None:
    root = config.stash.get(_TEMP_KEY, None)
    if root is not None and config.stash.get(_PASSED_KEY, False):
        shutil.rmtree(root, ignore_errors=True)


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: after the short test summary
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> Iterator[None]:
    yield
    reasons = [_reason(rep) for rep in terminalreporter.stats.get("skipped", [])
               if getattr(rep, "when", "") in ("setup", "call", "teardown")]
    terminalreporter.write_line(skip_summary(reasons), yellow=bool(reasons), green=not reasons)
    root = config.stash.get(_TEMP_KEY, None)
    if root is not None:
        left = temp_litter(root)
        if left:
            terminalreporter.write_line(f"openmsprof: {len(left)} temp entries left outside tmp_path "
                                        f"(removed with {root} when the run passes): {', '.join(left[:8])}",
                                        yellow=True)
        if exitstatus != 0:
            terminalreporter.write_line(f"openmsprof: the run's temp files are kept in {root}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``fork_policy`` run first, while this process has no other thread: the
    exporters fork only then (export/fork_worker.py), and many tests leave idle daemon threads
    behind (the torch facade's writer and analysis reader, ONNX Runtime's harvester, Dask's
    offload executor)."""
    first = [i for i in items if i.get_closest_marker("fork_policy")]
    if first:
        items[:] = first + [i for i in items if not i.get_closest_marker("fork_policy")]
    if os.environ.get(PURE_PYTHON_OFF_ENV):  # ``make sanitize``: the pure-Python cases run no C code
        pure = [i for i in items if _pure_python_case(i)]
        if pure:
            config.hook.pytest_deselected(items=pure)
            items[:] = [i for i in items if not _pure_python_case(i)]


#: set by ``tests/sanitize.py``: leave out the cases parametrized to the pure-Python path
PURE_PYTHON_OFF_ENV = "OPENMSPROF_TESTS_NO_PURE_PYTHON"


def _pure_python_case(item: pytest.Item) -> bool:
    """A case whose parametrization id names the pure-Python path (``[python]``, ``[...-python]``)."""
    spec = getattr(item, "callspec", None)
    return spec is not None and "python" in spec.id.split("-")


@pytest.fixture(autouse=True)
def _fork_policy_precondition(request: pytest.FixtureRequest) -> None:
    """A ``fork_policy`` test states its precondition: no thread but this one."""
    if request.node.get_closest_marker("fork_policy"):
        others = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
        assert not others, f"a fork_policy test needs a single-threaded process; running: {others}"

