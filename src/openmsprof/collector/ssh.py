"""SSH connection to a board (paramiko): host keys verified, key or password auth, clear errors.

Host keys are checked against the board's ``known_hosts`` file.  An unknown host is refused
unless ``accept_new`` (``--accept-new-host-key``), which records the key there — like OpenSSH's
``StrictHostKeyChecking=accept-new``; a *changed* key is always refused.  The password is handed
to paramiko in memory only: never on a command line, in the environment or in a message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openmsprof.collector.board import Board
from openmsprof.config.errors import ProfilingError
from openmsprof.fileio import fs


class SSHError(ProfilingError):
    """Connecting, authenticating or talking to the board failed."""


def _paramiko() -> Any:
    try:
        import paramiko
    except ImportError:
        raise SSHError("remote collection needs paramiko: pip install 'openmsprof[ssh]'") from None
    return paramiko


def _append_known_host(path: Path, name: str, key: Any) -> None:
    line = f"{name} {key.get_name()} {key.get_base64()}\n".encode()
    try:
        old = path.read_bytes()
    except FileNotFoundError:
        old = b""
        fs.make_dir(path.parent)
    if old and not old.endswith(b"\n"):
        old += b"\n"
    fs.write_file_atomic(path, old + line)


def _policy(board: Board, accept_new: bool) -> Any:
    paramiko = _paramiko()

    class Policy(paramiko.MissingHostKeyPolicy):  # type: ignore[misc, name-defined]
        def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
            if not accept_new:
                print_ = getattr(key, "fingerprint", None) or key.get_name()
                raise SSHError(
                    f"host key of {hostname} ({print_}) "
                    f"is not in {str(board.known_hosts)!r}; check it and add it "
                    f"(ssh-keyscan -p {board.port} {board.ip} >> {board.known_hosts}) or pass --accept-new-host-key")
            client.get_host_keys().add(hostname, key.get_name(), key)
            _append_known_host(board.known_hosts, hostname, key)

    return Policy()


def connect(board: Board, *, accept_new: bool = False) -> Any:
    """An authenticated ``paramiko.SSHClient``; raises :class:`SSHError` with a one-line reason."""
    paramiko = _paramiko()
    client = paramiko.SSHClient()
    where = board.where
    try:
        if board.known_hosts.is_file():
            client.load_host_keys(str(board.known_hosts))
    except (OSError, paramiko.SSHException) as exc:
        raise SSHError(f"known_hosts {str(board.known_hosts)!r} cannot be read: {exc}") from None
    client.set_missing_host_key_policy(_policy(board, accept_new))
    kwargs: dict[str, Any] = {
        "hostname": board.ip, "port": board.port, "username": board.username,
        "timeout": board.timeout, "banner_timeout": board.timeout, "auth_timeout": board.timeout,
        "allow_agent": False, "look_for_keys": False,
    }
    if board.key_file is not None:
        kwargs["key_filename"] = str(board.key_file)
    if board.password is not None:
        kwargs["password"] = board.password
    how = "key_file" if board.key_file is not None else "pwd"
    if board.key_file is not None and board.password is not None:
        how = "key_file and pwd"
    try:
        client.connect(**kwargs)
    except ProfilingError:
        client.close()
        raise
    except paramiko.BadHostKeyException as exc:
        client.close()
        raise SSHError(f"host key of {where} does not match {str(board.known_hosts)!r} "
                       f"(got {exc.key.get_name()}): possible man-in-the-middle; refused") from None
    except paramiko.PasswordRequiredException:  # pragma: no cover - encrypted key without pwd
        client.close()
        raise SSHError(f"key_file {str(board.key_file)!r} is encrypted; give its passphrase as pwd") from None
    except paramiko.AuthenticationException:
        client.close()
        raise SSHError(f"authentication to {where} failed with the {how} of {str(board.path)!r}") from None
    except TimeoutError:
        client.close()
        raise SSHError(f"cannot connect to {where}: timed out after {board.timeout:g} s") from None
    except paramiko.ssh_exception.NoValidConnectionsError as exc:
        client.close()
        reason = next(iter(exc.errors.values())).strerror if exc.errors else "no address"
        raise SSHError(f"cannot connect to {where}: {reason}") from None
    except (paramiko.SSHException, OSError, EOFError) as exc:
        client.close()
        text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise SSHError(f"cannot connect to {where}: {text}") from None
    return client
