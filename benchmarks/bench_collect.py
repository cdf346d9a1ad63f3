"""Cost of ``openmsprof collect``: start-up overhead locally, and the remote copy-back speed.

Peers measured in the same run:
* local: the same tiny program run plainly vs under ``collect`` vs ``collect --all``;
* remote (needs sshd; a throw-away loopback server is started like the tests do): a whole
  ``collect --config`` run, and bringing back a synthetic job of ``--mb`` MB with our
  ``sftpcopy.fetch_jobs`` vs paramiko's plain ``SFTPClient.get`` per file vs a local
  ``shutil.copytree`` (the disk-only floor).

    .venv/bin/python benchmarks/bench_collect.py [--repeat 5] [--mb 64]
"""

from __future__ import annotations

import argparse
import os
import posixpath
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PY = sys.executable
TINY = "import time\nfrom openmsprof import mstx\nmstx.mark('x')\ntime.sleep(0.05)\n"


def timed(fn: Callable[[], object], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def run(cmd: list[str], cwd: Path) -> None:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"benchmark command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")


def bench_local(work: Path, repeat: int) -> None:
    prog = work / "tiny.py"
    prog.write_text(TINY)
    out = work / "out"
    plain = timed(lambda: run([PY, str(prog)], work), repeat)
    coll = timed(lambda: run([PY, "-m", "openmsprof", "collect", "--output", str(out), "-m", str(prog)], work), repeat)
    allp = timed(lambda: run([PY, "-m", "openmsprof", "collect", "--output", str(out), "--all", "-m", str(prog)], work), repeat)
    print(f"local (median of {repeat} runs)")
    print(f"  plain python program          {plain * 1000:8.1f} ms")
    print(f"  openmsprof collect            {coll * 1000:8.1f} ms   x{coll / plain:5.2f} of plain, +{(coll - plain) * 1000:.0f} ms")
    print(f"  openmsprof collect --all      {allp * 1000:8.1f} ms   x{allp / plain:5.2f} of plain")


def _synthetic_job(root: Path, mb: int) -> Path:
    job = root / "PROF_000001_20260101000000000_00000001ABCDEFGH"
    data = job / "host" / "data"
    data.mkdir(parents=True)
    block = os.urandom(1 << 20)
    for i in range(mb // 4):
        with open(data / f"Api.records.host.slice_{i}", "wb") as f:
            for _ in range(4):
                f.write(block)
    for i in range(200):  # many small files too, like config/info files
        (job / "host" / f"small_{i}.json").write_text("{}" * 100)
    return job


def bench_remote(work: Path, repeat: int, mb: int) -> None:
    from tests.collector import conftest as C

    exe = C.find_sshd()
    if exe is None or shutil.which("ssh-keygen") is None:
        print("remote: skipped (no sshd / ssh-keygen)")
        return
    with C.loopback_sshd(exe) as sshd:
        from openmsprof.collector import board, sftpcopy, ssh

        prog = work / "tiny.py"
        ini = C.write_ini(work / "board.ini", {"ip": "127.0.0.1", "port": sshd.port, "username": sshd.user,
                                               "key_file": sshd.key, "known_hosts": sshd.known_hosts(work)},
                          {"python": PY, "workdir": work / "board"})
        whole = timed(lambda: run([PY, "-m", "openmsprof", "collect", "--config", str(ini), "--output",
                                   str(work / "rout"), "-m", str(prog)], work), repeat)
        print("remote over loopback sshd")
        print(f"  collect --config (tiny prog)  {whole * 1000:8.1f} ms")
        bench_bundle(work, repeat, sshd, prog, ini)
        src = work / "boardjobs"
        job = _synthetic_job(src, mb)
        size = sum(p.stat().st_size for p in job.rglob("*") if p.is_file())
        client = ssh.connect(board.load(ini))
        sftp = client.open_sftp()
        n = [0]

        def ours() -> None:
            n[0] += 1
            dest = work / f"ours{n[0]}"
            dest.mkdir()
            sftpcopy.fetch_jobs(sftp, str(src), dest)

        def naive() -> None:
            n[0] += 1
            dest = work / f"naive{n[0]}"
            for p in job.rglob("*"):
                local = dest / p.relative_to(src)
                if p.is_dir():
                    local.mkdir(parents=True, exist_ok=True)
                else:
                    local.parent.mkdir(parents=True, exist_ok=True)
                    sftp.get(posixpath.join(str(src), str(p.relative_to(src))), str(local))

        def disk() -> None:
            n[0] += 1
            shutil.copytree(job, work / f"disk{n[0]}" / job.name)

        reps = max(1, repeat // 2)
        t_ours, t_naive, t_disk = timed(ours, reps), timed(naive, reps), timed(disk, reps)
        client.close()
        mbs = size / (1 << 20)
        print(f"  copy back {mbs:.0f} MB, 200+ files (median of {reps})")
        print(f"    sftpcopy.fetch_jobs         {t_ours * 1000:8.1f} ms  {mbs / t_ours:7.1f} MB/s")
        print(f"    paramiko sftp.get per file  {t_naive * 1000:8.1f} ms  {mbs / t_naive:7.1f} MB/s  (time ratio plain/ours {t_naive / t_ours:.2f})")
        print(f"    local shutil.copytree       {t_disk * 1000:8.1f} ms  {mbs / t_disk:7.1f} MB/s  (disk floor)")


def bench_bundle(work: Path, repeat: int, sshd: object, prog: Path, ini: Path) -> None:
    """A board with openmsprof installed vs a bare Python (a venv without pip: openmsprof and
    its packages are uploaded for the run), interleaved; median and min-max."""
    from tests.collector import conftest as C

    from openmsprof.collector import bundle

    bare = work / "bare"
    subprocess.run([getattr(sys, "_base_executable", PY), "-m", "venv", "--without-pip", str(bare)], check=True)
    bare_ini = C.write_ini(work / "bare.ini", {"ip": "127.0.0.1", "port": sshd.port, "username": sshd.user,  # type: ignore[attr-defined]
                                              "key_file": sshd.key, "known_hosts": sshd.known_hosts(work)},  # type: ignore[attr-defined]
                           {"python": bare / "bin" / "python", "workdir": work / "board"})
    t0 = time.perf_counter()
    size = len(bundle.bundle_bytes(bundle.needed()))
    build = time.perf_counter() - t0
    sides: dict[str, list[float]] = {"installed": [], "uploaded": []}
    for _ in range(repeat):  # interleaved
        for name, cfg in (("installed", ini), ("uploaded", bare_ini)):
            t0 = time.perf_counter()
            run([PY, "-m", "openmsprof", "collect", "-m", str(prog), "--config", str(cfg), "--output", str(work / "bout")], work)
            sides[name].append(time.perf_counter() - t0)
    print(f"  board without openmsprof: bundle {size / 1e6:.1f} MB built in {build * 1000:.0f} ms; "
          f"load average {os.getloadavg()[0]:.2f}")
    for name, runs in sides.items():
        print(f"    collect --config, openmsprof {name:9} median {statistics.median(runs) * 1000:7.0f} ms "
              f"(min {min(runs) * 1000:.0f}, max {max(runs) * 1000:.0f}, {len(runs)} runs)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--mb", type=int, default=64, help="size of the synthetic job copied back")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_collect_"))
    try:
        bench_local(work, args.repeat)
        bench_remote(work, args.repeat, args.mb)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
