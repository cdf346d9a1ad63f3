"""board.ini loading: required keys, permissions, and no secret in any message."""

from __future__ import annotations

from pathlib import Path

import pytest

from openmsprof.cli.main import main
from openmsprof.collector.board import load
from openmsprof.config.errors import ConfigError
from tests.collector.conftest import write_ini

SECRET = "S3cret-pw-value"


def test_full_ini(tmp_path: Path) -> None:
    key = tmp_path / "id_test"
    key.write_text("not checked here")
    ini = write_ini(tmp_path / "b.ini", {"ip": "10.0.0.7", "username": "hw", "pwd": SECRET, "port": 2022,
                                         "key_file": "id_test", "known_hosts": "kh", "timeout": 3},
                    {"python": "/opt/py/bin/python3", "workdir": "~/runs"})
    b = load(ini)
    assert (b.ip, b.username, b.port, b.password, b.timeout) == ("10.0.0.7", "hw", 2022, SECRET, 3.0)
    assert b.key_file == key and b.known_hosts == tmp_path / "kh"  # relative to the ini's folder
    assert (b.python, b.workdir, b.where) == ("/opt/py/bin/python3", "~/runs", "hw@10.0.0.7:2022")
    assert SECRET not in repr(b)


def test_defaults(tmp_path: Path) -> None:
    b = load(write_ini(tmp_path / "b.ini", {"ip": "h", "username": "u", "pwd": "p"}))
    assert (b.port, b.python, b.workdir, b.key_file) == (22, "python3", "~", None)
    assert b.known_hosts == Path.home() / ".ssh" / "known_hosts"


@pytest.mark.parametrize(("ssh", "text"), [
    ({"username": "u", "pwd": "p"}, "[ssh_config] is missing 'ip'"),
    ({"ip": "h", "pwd": "p"}, "[ssh_config] is missing 'username'"),
    ({"ip": "h", "username": "u"}, "needs 'key_file' (preferred) or 'pwd'"),
    ({"ip": "h", "username": "u", "pwd": "p", "port": "ssh"}, "port 'ssh' is not a port number"),
    ({"ip": "h", "username": "u", "pwd": "p", "port": 70000}, "port '70000' is not a port number"),
    ({"ip": "h", "username": "u", "key_file": "/no/such/key"}, "key_file '/no/such/key' not found"),
    ({"ip": "h", "username": "u", "passwd": SECRET}, "unknown key 'passwd' in [ssh_config]"),
])
def test_bad_ini(tmp_path: Path, ssh: dict[str, object], text: str) -> None:
    ini = write_ini(tmp_path / "b.ini", ssh)
    with pytest.raises(ConfigError) as e:
        load(ini)
    msg = str(e.value)
    assert text in msg and str(ini) in msg and "\n" not in msg and SECRET not in msg


def test_no_section(tmp_path: Path) -> None:
    ini = tmp_path / "b.ini"
    ini.write_text("[other]\nx = 1\n")
    ini.chmod(0o600)
    with pytest.raises(ConfigError, match=r"has no \[ssh_config\] section"):
        load(ini)


@pytest.mark.parametrize("text", [f"pwd = {SECRET}\n[ssh_config]\n", f"[ssh_config]\nip = h\n{SECRET}\n",
                                  f"[ssh_config]\npwd = {SECRET}\npwd = {SECRET}\n"])
def test_parse_errors_never_quote_the_file(tmp_path: Path, text: str) -> None:
    ini = tmp_path / "b.ini"
    ini.write_text(text)
    ini.chmod(0o600)
    with pytest.raises(ConfigError) as e:
        load(ini)
    assert SECRET not in str(e.value) and "line" in str(e.value)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620])
def test_ini_open_to_others_refused(tmp_path: Path, mode: int, capsys: pytest.CaptureFixture[str]) -> None:
    ini = write_ini(tmp_path / "b.ini", {"ip": "127.0.0.1", "username": "u", "pwd": SECRET}, mode=mode)
    prog = tmp_path / "p.py"
    prog.write_text("print('ran')\n")
    assert main(["collect", "--config", str(ini), "--output", str(tmp_path / "o"), "-m", str(prog)]) == 1
    err = capsys.readouterr().err
    assert err == (f"openmsprof: error: board config {str(ini)!r} is accessible by group/others "
                   f"(mode {mode:04o}); it may hold a password: run 'chmod 600 {ini}'\n")


def test_missing_ini(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load(tmp_path / "none.ini")


def test_inline_comments_are_not_values(tmp_path: Path) -> None:
    """docs/collect.md's template writes ``port = 22   ; comment``: the comment is dropped."""
    ini = tmp_path / "b.ini"
    ini.write_text("[ssh_config]\nip = 10.0.0.7        ; the board\nusername = hw ; user\n"
                   f"pwd = {SECRET}   ; used when there is no key_file\nport = 2022          ; ssh port\n"
                   "[remote]\npython = python3 ; board python\n")
    ini.chmod(0o600)
    b = load(ini)
    assert (b.ip, b.username, b.password, b.port, b.python) == ("10.0.0.7", "hw", SECRET, 2022, "python3")


def test_seed_ini_four_keys(tmp_path: Path) -> None:
    """Seed 002's ini: ``[ssh_config] ip, username, pwd, port`` and nothing else."""
    b = load(write_ini(tmp_path / "b.ini", {"ip": "192.168.1.10", "username": "HwHiAiUser", "pwd": SECRET, "port": 22}))
    assert (b.ip, b.username, b.password, b.port, b.key_file) == ("192.168.1.10", "HwHiAiUser", SECRET, 22, None)
