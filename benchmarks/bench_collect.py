"""Cost of ``openmsprof collect``: start-up overhead locally, and the remote copy-back speed.

Peers measured in the same run:
* local: the same tiny program run plainly vs under ``collect`` vs ``collect --all``;
* remote (needs sshd; a throw-away loopback server is started like the tests do): a whole
  ``collect --config`` run, and bringing back a synthetic job of ``--mb`` MB with our
  ``sftpcopy.fetch_jobs`` vs paramiko's plain ``SFTPClient.get`` per file vs a local
  ``shutil.copytree`` (the disk-only floor).

Sides and co-runner conditions interleaved round by round (``benchmarks/corunner.py``): wall
and process-tree CPU (the collect and program processes are waited-for children, so their CPU
is counted), median (min–max), per-round ratios, load average.

    .venv/bin/python benchmarks/bench_collect.py [--repeat 5] [--mb 64] [--corunner both]
"""

from __future__ import annotations

import argparse
import os
import posixpath
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.corunner import add_corunner_arg, corunner_modes, interleaved, report

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
TINY = "import time\nfrom openmsprof import mstx\nmstx.mark('x')\ntime.sleep(0.05)\n"


def run(cmd: list[str], cwd: Path) -> None:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"benchmark command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")


def bench_local(work: Path, repeat: int, modes: list[bool]) -> None:
    prog = work / "tiny.py"
    prog.write_text(TINY)
    out = work / "out"
    res = interleaved({
        "plain python program": lambda: run([PY, str(prog)], work),
        "openmsprof collect": lambda: run([PY, "-m", "openmsprof", "collect", "--output", str(out), "-m", str(prog)],
                                          work),
        "openmsprof collect --all": lambda: run([PY, "-m", "openmsprof", "collect", "--output", str(out), "--all",
                                                 "-m", str(prog)], work),
    }, repeat, modes, cleanup=lambda: shutil.rmtree(out, ignore_errors=True))
    print(f"local ({repeat} rounds)")
    report(res, [("openmsprof collect", "plain python program"), ("openmsprof collect --all", "plain python program")])


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


def bench_remote(work: Path, repeat: int, mb: int, modes: list[bool]) -> None:
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
        print("remote over loopback sshd (the sshd and its sessions are this process's children: counted)")
        res = interleaved({"collect --config (tiny prog)": lambda: run(
            [PY, "-m", "openmsprof", "collect", "--config", str(ini), "--output", str(work / "rout"), "-m", str(prog)],
            work)}, repeat, modes, cleanup=lambda: shutil.rmtree(work / "rout", ignore_errors=True))
        report(res, [])
        bench_bundle(work, repeat, sshd, prog, ini, modes)
        src = work / "boardjobs"
        job = _synthetic_job(src, mb)
        size = sum(p.stat().st_size for p in job.rglob("*") if p.is_file())
        client = ssh.connect(board.load(ini))
        sftp = client.open_sftp()
        dest = work / "copy"

        def ours() -> None:
            dest.mkdir()
            sftpcopy.fetch_jobs(sftp, str(src), dest)

        def naive() -> None:
            for p in job.rglob("*"):
                local = dest / p.relative_to(src)
                if p.is_dir():
                    local.mkdir(parents=True, exist_ok=True)
                else:
                    local.parent.mkdir(parents=True, exist_ok=True)
                    sftp.get(posixpath.join(str(src), str(p.relative_to(src))), str(local))

        def disk() -> None:
            shutil.copytree(job, dest / job.name)

        reps = max(1, repeat // 2)
        res = interleaved({"sftpcopy.fetch_jobs": ours, "paramiko sftp.get per file": naive,
                           "local shutil.copytree (disk floor)": disk}, reps, modes,
                          cleanup=lambda: shutil.rmtree(dest, ignore_errors=True))
        client.close()
        mbs = size / (1 << 20)
        print(f"  copy back {mbs:.0f} MB, 200+ files ({reps} rounds; MB/s = {mbs:.0f} / wall)")
        report(res, [("sftpcopy.fetch_jobs", "paramiko sftp.get per file"),
                     ("sftpcopy.fetch_jobs", "local shutil.copytree (disk floor)")])


def bench_bundle(work: Path, repeat: int, sshd: object, prog: Path, ini: Path, modes: list[bool]) -> None:
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
    res = interleaved({
        f"collect --config, openmsprof {name}": (
            lambda cfg=cfg: run([PY, "-m", "openmsprof", "collect", "-m", str(prog), "--config", str(cfg), "--output",
                                 str(work / "bout")], work))
        for name, cfg in (("installed", ini), ("uploaded", bare_ini))}, repeat, modes)
    print(f"  board without openmsprof: bundle {size / 1e6:.1f} MB built in {build * 1000:.0f} ms; "
          f"load average {os.getloadavg()[0]:.2f}")
    report(res, [("collect --config, openmsprof uploaded", "collect --config, openmsprof installed")])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--mb", type=int, default=64, help="size of the synthetic job copied back")
    add_corunner_arg(ap)
    args = ap.parse_args()
    modes = corunner_modes(args.corunner)
    work = Path(tempfile.mkdtemp(prefix="bench_collect_"))
    try:
        bench_local(work, args.repeat, modes)
        bench_remote(work, args.repeat, args.mb, modes)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
