"""Fixtures for the collect tests: a real OpenSSH server on a loopback port, board.ini writers,
and small profiled programs.

The sshd runs as the current user (root in CI) with a throw-away host key and user key made by
ssh-keygen in a temporary folder: ``sshd -D -e -f <config>``, ``UsePAM no``, ``StrictModes no``,
keys-only login for the current user.  For password tests a dedicated throw-away account is
created (root only) and removed afterwards.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PYTHON = sys.executable
REPO = Path(__file__).resolve().parents[2]


def find_sshd() -> str | None:
    for cand in (shutil.which("sshd"), "/usr/sbin/sshd", "/usr/local/sbin/sshd"):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "openmsprof-test", "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL)
    return (path.with_suffix(".pub") if path.suffix else Path(str(path) + ".pub")).read_text().strip()


@dataclass
class Sshd:
    """A running loopback sshd and what a test needs to reach it."""

    root: Path
    port: int
    user: str
    key: Path  # authorized user key
    other_key: Path  # a valid key the server does not know
    host_pub: str  # "ssh-ed25519 AAAA..."
    proc: subprocess.Popen[bytes]

    @property
    def known_hosts_line(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.host_pub}\n"

    def known_hosts(self, folder: Path) -> Path:
        path = folder / "known_hosts"
        path.write_text(self.known_hosts_line)
        return path

    def session_pids(self) -> list[int]:
        """Per-connection sshd processes (children of the listener)."""
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(self.proc.pid)], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]


def write_ini(path: Path, ssh: dict[str, object], remote: dict[str, object] | None = None, mode: int = 0o600) -> Path:
    lines = ["[ssh_config]", *(f"{k} = {v}" for k, v in ssh.items())]
    if remote:
        lines += ["[remote]", *(f"{k} = {v}" for k, v in remote.items())]
    path.write_text("\n".join(lines) + "\n")
    os.chmod(path, mode)
    return path


def _wait_banner(port: int, proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with {proc.returncode}: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                if s.recv(4).startswith(b"SSH-"):
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("sshd did not come up")


@contextlib.contextmanager
def loopback_sshd(exe: str) -> Iterator[Sshd]:
    """Start ``exe`` (an OpenSSH sshd) on a free 127.0.0.1 port with throw-away keys."""
    root = Path(tempfile.mkdtemp(prefix="omsp_sshd_"))
    host_key, user_key, other_key = root / "host_key", root / "user_key", root / "other_key"
    host_pub = keygen(host_key)
    user_pub = keygen(user_key)
    keygen(other_key)
    (root / "authorized_keys").write_text(user_pub + "\n")
    if os.geteuid() == 0 and not os.path.isdir("/run/sshd"):
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation dir
    port = free_port()
    config = root / "sshd_config"
    config.write_text(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile {root}/sshd.pid
AuthorizedKeysFile {root}/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication yes
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 64
MaxSessions 64
LogLevel ERROR
Subsystem sftp internal-sftp
""")
    proc = subprocess.Popen([exe, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_banner(port, proc)
        yield Sshd(root, port, getpass.getuser(), user_key, other_key, " ".join(host_pub.split()[:2]), proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def sshd() -> Iterator[Sshd]:
    exe = find_sshd()
    if exe is None:
        pytest.skip("sshd not found (install openssh-server; .ci/run does)")
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen not found (install openssh-client)")
    with loopback_sshd(exe) as server:
        yield server


@dataclass
class PasswordUser:
    name: str
    password: str
    home: Path


@pytest.fixture(scope="session")
def password_user() -> Iterator[PasswordUser]:
    """A throw-away account with a random password (root only); removed at the end."""
    if os.geteuid() != 0 or not (shutil.which("useradd") and shutil.which("chpasswd") and shutil.which("userdel")):
        pytest.skip("password login needs root to create a throw-away user (useradd/chpasswd)")
    name = f"omsp{secrets.token_hex(4)}"
    password = "Pw-" + secrets.token_urlsafe(18)
    base = Path(tempfile.mkdtemp(prefix="omsp_pwhome_"))
    os.chmod(base, 0o755)
    home = base / name
    subprocess.run(["useradd", "-M", "-d", str(home), "-s", "/bin/sh", name], check=True)
    try:
        home.mkdir()
        shutil.chown(home, name, name)
        subprocess.run(["chpasswd"], input=f"{name}:{password}\n".encode(), check=True)
        yield PasswordUser(name, password, home)
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def key_ini(sshd: Sshd, tmp_path: Path) -> Path:
    """A board.ini for key login to the loopback sshd, remote python = this venv."""
    return write_ini(tmp_path / "board.ini",
                     {"ip": "127.0.0.1", "port": sshd.port, "username": sshd.user, "key_file": sshd.key,
                      "known_hosts": sshd.known_hosts(tmp_path)},
                     {"python": PYTHON, "workdir": tmp_path / "board"})


def run_cli(args: list[str], cwd: Path, timeout: float = 120, **kw: object) -> subprocess.CompletedProcess[str]:
    """``python -m openmsprof ARGS`` as a real subprocess, output captured."""
    return subprocess.run([PYTHON, "-m", "openmsprof", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, **kw)  # type: ignore[call-overload]
