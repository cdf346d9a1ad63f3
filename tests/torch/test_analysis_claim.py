"""A window's claim (``_analysis_claim``): one byte-range lock per rank dir on one claims file per
output root — no file made per claim, exclusive across processes while ``tidy`` removes the file,
and a claim held at a fork stays the parent's."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from openmsprof.torch.profiler import _analysis_claim

SRC = Path(__file__).resolve().parents[2] / "src"
pytestmark = pytest.mark.skipif(not _analysis_claim._ofd, reason="no OFD locks here: a lock file per claim")

_CLAIMER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from openmsprof.torch.profiler import _analysis_claim as c

    rd, log, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    me = os.getpid()
    for _ in range(n):
        with c.claim(rd, wait_s=600) as mine:
            assert mine is True, mine
            os.write(fd, f"in {me}\\n".encode())
            time.sleep(0.0002)
            os.write(fd, f"out {me}\\n".encode())
""")

_TIDIER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from openmsprof.torch.profiler import _analysis_claim as c

    root, n = Path(sys.argv[1]), int(sys.argv[2])
    print(sum(c.tidy(root) for _ in range(n)), flush=True)
""")


def test_claims_exclude_each_other_while_the_claims_file_is_removed_and_made_again(tmp_path: Path) -> None:
    rd = tmp_path / "out" / "w_ascend_pt"
    rd.mkdir(parents=True)
    log = tmp_path / "log"
    log.write_bytes(b"")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    claimers = [subprocess.Popen([sys.executable, "-c", _CLAIMER, str(rd), str(log), "300"], env=env,
                                 stderr=subprocess.PIPE) for _ in range(2)]
    tidier = subprocess.run([sys.executable, "-c", _TIDIER, str(rd.parent), "3000"], env=env,
                            capture_output=True, text=True, timeout=600)
    for p in claimers:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
    assert tidier.returncode == 0, tidier.stderr
    lines = log.read_text().splitlines()
    assert len(lines) == 4 * 300
    for a, b in zip(lines[::2], lines[1::2], strict=True):  # never two holders at once
        assert a.startswith("in ") and b == "out " + a[3:], (a, b)
    assert _analysis_claim.tidy(rd.parent)
    assert sorted(p.name for p in rd.parent.iterdir()) == ["w_ascend_pt"]


def test_a_claim_makes_no_file_per_dir_and_tidy_leaves_a_held_one(tmp_path: Path) -> None:
    dirs = [tmp_path / f"w{i}_ascend_pt" for i in range(5)]
    for d in dirs:
        d.mkdir()
    for d in dirs:
        with _analysis_claim.claim(d) as mine:
            assert mine is True
            assert not _analysis_claim.tidy(tmp_path)  # held: the file stays
    assert sorted(p.name for p in tmp_path.iterdir()) == [_analysis_claim.CLAIMS_FILE, *sorted(d.name for d in dirs)]
    assert _analysis_claim.claim_path(dirs[0]) == tmp_path / _analysis_claim.CLAIMS_FILE
    assert _analysis_claim.tidy(tmp_path)
    assert not (tmp_path / _analysis_claim.CLAIMS_FILE).exists()


_FORKER = textwrap.dedent("""
    import os, subprocess, sys
    from pathlib import Path
    from openmsprof.torch.profiler import _analysis_claim as c

    rd, probe = Path(sys.argv[1]), [sys.executable, "-c", sys.argv[2], sys.argv[1]]
    r, w = os.pipe()
    with c.claim(rd) as mine:
        assert mine is True
        pid = os.fork()
        if pid == 0:  # a DataLoader worker forked meanwhile: lives on after the parent's release
            os.close(w)
            os.read(r, 1)
            os._exit(0)
        print("held", subprocess.run(probe, capture_output=True, text=True, timeout=120).stdout.strip(), flush=True)
    print("released", subprocess.run(probe, capture_output=True, text=True, timeout=120).stdout.strip(), flush=True)
    os.close(w)
    os.waitpid(pid, 0)
""")
_PROBE = ("import sys; from pathlib import Path; from openmsprof.torch.profiler import _analysis_claim as c\n"
          "with c.claim(Path(sys.argv[1])) as mine: print(mine)")


def test_a_claim_held_at_a_fork_stays_the_parents(tmp_path: Path) -> None:
    """(In a fresh process: a fork of the test process, with its threads, is not what is tested.)"""
    rd = tmp_path / "w_ascend_pt"
    rd.mkdir()
    out = subprocess.run([sys.executable, "-c", _FORKER, str(rd), _PROBE], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    # held while the parent holds it; free once the parent released it, though the child lives on
    assert out.stdout.split("\n")[:2] == ["held None", "released True"], out.stdout + out.stderr[-2000:]


def test_a_claims_file_removed_between_open_and_lock_is_not_the_one_locked(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The race with ``tidy`` made certain: the file a claimer opened is removed before it locks
    it; the claim it then holds is on the file at the path, which another process sees held."""
    rd = tmp_path / "w_ascend_pt"
    rd.mkdir()
    real, raced = _analysis_claim._open, []

    def opened(path: Path) -> int:
        fd = real(path)
        if not raced:  # (a tidy removed it right after this open)
            raced.append(path)
            os.unlink(path)
        return fd

    monkeypatch.setattr(_analysis_claim, "_open", opened)
    probe = [sys.executable, "-c", "import sys; from pathlib import Path; from openmsprof.torch.profiler "
             "import _analysis_claim as c\nwith c.claim(Path(sys.argv[1])) as mine: print(mine)", str(rd)]
    with _analysis_claim.claim(rd) as mine:
        assert mine is True and raced
        out = subprocess.run(probe, env={**os.environ, "PYTHONPATH": str(SRC)}, capture_output=True, text=True,
                             timeout=120)
        assert out.stdout == "None\n", out.stderr
