"""The ``board.ini`` of remote collection (seed 002: ``[ssh_config] ip, username, pwd, port``).

```
[ssh_config]
ip = 192.168.1.10
username = HwHiAiUser
port = 22
key_file = ~/.ssh/id_ed25519     ; preferred over pwd (relative paths: to the ini's folder)
pwd = ...                        ; used when there is no key_file, or when the key is refused
known_hosts = ~/.ssh/known_hosts ; default
timeout = 10                     ; seconds to connect
[remote]
python = python3                 ; the board's Python (openmsprof is uploaded if it lacks it)
workdir = ~                      ; where the run folder is created on the board
```
The file may hold a password, so one readable (or writable) by group or others is refused, as
ssh refuses such key files.  No message ever quotes a value from the file.
"""

from __future__ import annotations

import configparser
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from openmsprof.config.errors import ConfigError
from openmsprof.fileio.read_guard import read_regular

SSH_KEYS = ("ip", "username", "pwd", "port", "key_file", "known_hosts", "timeout")
REMOTE_KEYS = ("python", "workdir")


@dataclass(frozen=True)
class Board:
    """A parsed board.ini.  ``password`` is kept out of ``repr``."""

    path: Path
    ip: str
    username: str
    port: int = 22
    password: str | None = field(default=None, repr=False)
    key_file: Path | None = None
    known_hosts: Path = field(default_factory=lambda: Path.home() / ".ssh" / "known_hosts")
    timeout: float = 10.0
    python: str = "python3"
    workdir: str = "~"

    @property
    def where(self) -> str:
        return f"{self.username}@{self.ip}:{self.port}"


def check_private(path: Path) -> None:
    """Refuse an ini that group or others may read or write (it may hold a password)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ConfigError(f"board config {str(path)!r} not found") from None
    except OSError as exc:
        raise ConfigError(f"board config {str(path)!r} cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"board config {str(path)!r} is not a regular file")
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise ConfigError(f"board config {str(path)!r} is accessible by group/others (mode {mode:04o}); "
                          f"it may hold a password: run 'chmod 600 {path}'")


def _parse(path: Path) -> configparser.ConfigParser:
    # "port = 22   ; comment": the comment is not part of the value (the template below writes so)
    parser = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=(";",))
    try:
        text = read_regular(path, "board config", 1024 * 1024, ConfigError).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"board config {str(path)!r} cannot be read: {exc}") from None
    try:
        parser.read_string(text, source=str(path))
    except configparser.MissingSectionHeaderError as exc:
        raise ConfigError(f"board config {str(path)!r}: line {exc.lineno} comes before any [section]") from None
    except configparser.ParsingError as exc:  # its own message quotes the line: never show it
        lines = ", ".join(str(n) for n, _ in exc.errors)
        raise ConfigError(f"board config {str(path)!r}: cannot parse line {lines}") from None
    except (configparser.DuplicateOptionError, configparser.DuplicateSectionError) as exc:
        raise ConfigError(f"board config {str(path)!r}: duplicate entry at line {exc.lineno}") from None
    except configparser.Error as exc:
        raise ConfigError(f"board config {str(path)!r} is not a valid ini file ({type(exc).__name__})") from None
    return parser


def _local_path(value: str, base: Path) -> Path:
    p = Path(os.path.expanduser(value))
    return p if p.is_absolute() else (base / p)


def load(path: str | os.PathLike[str]) -> Board:
    """Read and check ``path``; every problem is a one-line :class:`ConfigError`."""
    ini = Path(os.path.abspath(os.path.expanduser(os.fspath(path))))
    check_private(ini)
    parser = _parse(ini)
    where = f"board config {str(ini)!r}"
    if not parser.has_section("ssh_config"):
        raise ConfigError(f"{where} has no [ssh_config] section (needs ip, username, pwd or key_file, port)")
    ssh = parser["ssh_config"]
    for key in ssh:
        if key not in SSH_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} in [ssh_config]; allowed: {', '.join(SSH_KEYS)}")
    remote = parser["remote"] if parser.has_section("remote") else {}
    for key in remote:
        if key not in REMOTE_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} in [remote]; allowed: {', '.join(REMOTE_KEYS)}")
    for key in ("ip", "username"):
        if not ssh.get(key, "").strip():
            raise ConfigError(f"{where}: [ssh_config] is missing {key!r}")
    password = ssh.get("pwd") or None
    key_file = _local_path(ssh["key_file"].strip(), ini.parent) if ssh.get("key_file", "").strip() else None
    if password is None and key_file is None:
        raise ConfigError(f"{where}: [ssh_config] needs 'key_file' (preferred) or 'pwd'")
    if key_file is not None and not key_file.is_file():
        raise ConfigError(f"{where}: key_file {str(key_file)!r} not found")
    port_text = ssh.get("port", "22").strip() or "22"
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ConfigError(f"{where}: port {port_text!r} is not a port number (1-65535)")
    try:
        timeout = float(ssh.get("timeout", "10"))
    except ValueError:
        raise ConfigError(f"{where}: timeout {ssh.get('timeout')!r} is not a number of seconds") from None
    known = ssh.get("known_hosts", "").strip()
    return Board(
        path=ini, ip=ssh["ip"].strip(), username=ssh["username"].strip(), port=int(port_text),
        password=password, key_file=key_file,
        known_hosts=_local_path(known, ini.parent) if known else Path.home() / ".ssh" / "known_hosts",
        timeout=max(timeout, 0.1), python=(remote.get("python") or "python3").strip(),
        workdir=(remote.get("workdir") or "~").strip(),
    )
