"""Starting and stopping the session for the facade: ``acl.init`` (acl.json /
``OPENMSPROF_ACL_JSON``), ``acl.prof.start/stop`` and the exit hook.

Precedence (S2): CLI (``OPENMSPROF_ACL_JSON``, written by ``openmsprof collect``) > the
application's acl.json > API.  A session already running in the process (started by collect's
bootstrap or ``openmsprof.start``) is adopted, never replaced; adopted sessions are left to
their owner to stop.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import Any

from openmsprof.acl import _harvester, _model
from openmsprof.acl._codes import ACL_SUCCESS
from openmsprof.acl._state import STATE, fail
from openmsprof.config.acl_json import load_acl_json
from openmsprof.config.errors import ProfilingError
from openmsprof.config.model import ProfileConfig
from openmsprof.config.validate import validate
from openmsprof.recorder import held_signals, session
from openmsprof.sources import emit, gc_watch, host_sampler, markers  # noqa: F401  (register listeners)

ACL_JSON_ENV = "OPENMSPROF_ACL_JSON"


def models() -> dict[int, Any]:
    from openmsprof.acl import _data
    return _data.MODELS


def _refresh(stopping: bool = False) -> None:
    from openmsprof.acl import mdl
    mdl.refresh_all(stopping)


def _checked(cfg: ProfileConfig) -> ProfileConfig:
    try:
        from openmsprof.config.capabilities import check
    except ImportError:
        return cfg
    return cfg if cfg.unsupported else check(cfg)


def merge(app: ProfileConfig | None, cli: ProfileConfig | None) -> ProfileConfig | None:
    """CLI settings over the application's acl.json (keys the CLI set explicitly win)."""
    if cli is None or app is None:
        return cli or app
    try:
        from openmsprof.config.cli_flags import merge as config_merge
        return config_merge(app, cli)
    except ImportError:
        pass
    keys = cli.explicit or [k for k in cli.to_dict() if k not in ("unsupported", "notes", "explicit", "source")]
    return app.replace(**{k: getattr(cli, k) for k in keys})


def config_for_init(config_path: str | None) -> ProfileConfig | None:
    """The profiling config acl.init must honour (None = no profiling); raises ProfilingError."""
    app = load_acl_json(config_path) if config_path else None
    env = os.environ.get(ACL_JSON_ENV)
    cli = load_acl_json(env) if env else None
    return merge(app, cli)


def _start_or_adopt(cfg: ProfileConfig, who: str) -> tuple[session.Session, bool]:
    """The session a profiling entry point uses: the one already running in the process
    (adopted, left for its owner to stop) or a new one.  Raises ProfilingError."""
    cur = session.current()
    if cur is not None:
        cur.note(f"{who}: adopting the session already running in this process")
        return cur, True
    return session.start(_checked(cfg)), False


def executable_dir() -> str:
    """The directory of the running program (its main script; the working directory for
    ``python -c`` and the interactive interpreter)."""
    main = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else ""
    return os.path.dirname(os.path.abspath(main)) if main else os.getcwd()


def output_fallback(cfg: ProfileConfig) -> ProfileConfig:
    """Seed 002: an acl.json ``output`` directory that does not exist → the executable's
    directory, said in the job log."""
    out = cfg.output
    if not out or os.path.isdir(out):
        return cfg
    here = executable_dir()
    line = (f"acl.json output {out!r} does not exist; writing to the executable's directory "
            f"{here!r} instead (create the directory to write there)")
    _model.log.warning("openmsprof.acl: %s", line)
    return cfg.replace(output=here, notes=[*cfg.notes, line])


def start_json(cfg: ProfileConfig) -> int:
    """Profiling from acl.init: start a session (or adopt the running one)."""
    cfg = output_fallback(cfg)
    try:
        STATE.json_session, STATE.json_adopted = _start_or_adopt(cfg, "acl.init (acl.json)")
    except ProfilingError as exc:
        return fail(exc.code, f"acl.init: profiling could not start: {exc}")
    if not STATE.json_adopted:
        STATE.json_session.note(f"acl.init: profiling from acl.json (interval {cfg.interval})")
    _refresh()
    return ACL_SUCCESS


def stop_json() -> None:
    s = STATE.json_session
    if s is None:
        return
    with held_signals.held():  # (a raising signal handler waits until the harvest and stop are through)
        _refresh(stopping=True)
        STATE.json_session = None
        if not STATE.json_adopted and session.current() is s:
            session.stop()
        _refresh()


def start_prof(cfg: ProfileConfig) -> int:
    """Profiling from acl.prof.start: start a session (or adopt the running one)."""
    try:
        STATE.prof_session, STATE.prof_adopted = _start_or_adopt(cfg, "acl.prof.start")
    except ProfilingError as exc:
        return fail(exc.code, f"acl.prof.start: {exc}")
    _refresh()
    return ACL_SUCCESS


def stop_prof(before_close: Any = None) -> int:
    """Harvest, call ``before_close()`` (the last moment a record can be written), stop."""
    s = STATE.prof_session
    with held_signals.held():  # (a raising signal handler waits until the harvest and stop are through)
        _refresh(stopping=True)
        if before_close is not None:
            before_close()
        STATE.prof_session = None
        STATE.prof_config = 0
        if s is not None and not STATE.prof_adopted and session.current() is s:
            session.stop()
        _refresh()
    return ACL_SUCCESS


def base_config() -> ProfileConfig:
    return ProfileConfig(source="pyacl")


def apply_set_configs(cfg: ProfileConfig, values: dict[int, str] | None = None) -> ProfileConfig:
    """``cfg`` with the acl.prof.set_config values applied and validated (ConfigError)."""
    from openmsprof.acl import _codes as c
    changes: dict[str, Any] = {}
    for kind, value in (values if values is not None else STATE.set_configs).items():
        v = value.strip()
        if kind == c.ACL_PROF_STORAGE_LIMIT:
            digits = v[:-2] if v.upper().endswith("MB") else v
            changes["storage_limit_mb"] = int(digits) if digits.isdigit() else v
        elif kind == c.ACL_PROF_HOST_SYS:
            changes["host_sys"] = [x.strip() for x in v.split(",") if x.strip()]
        elif kind == c.ACL_PROF_HOST_SYS_USAGE:
            changes["host_sys_usage"] = [x.strip() for x in v.split(",") if x.strip()]
        elif kind == c.ACL_PROF_HOST_SYS_USAGE_FREQ:
            changes["host_sys_usage_freq"] = int(v) if v.isdigit() else v
        elif kind == c.ACL_PROF_SYS_HARDWARE_MEM_FREQ:
            changes["sys_hardware_mem_freq"] = int(v) if v.isdigit() else v
    return validate(cfg.replace(**changes), "acl.prof.set_config", min_storage_mb=200) if changes else cfg


def finalize_all() -> None:
    """acl.finalize: deliver pending data, end subscriptions, stop facade-owned sessions."""
    from openmsprof.acl import _subscribe
    for m in list(models().values()):
        if m.writer is not None:
            _subscribe.drop_model(m)
    if STATE.prof_session is not None:
        stop_prof()
    STATE.prof_path = None
    stop_json()


def _at_exit() -> None:
    """Registered after the session module's own hook, so it runs first: harvest the ONNX
    Runtime profiles of a run that never called finalize before the session stops.  The
    harvester thread is stopped first: a daemon thread still inside ONNX Runtime once the
    interpreter finalizes is ended by pthread_exit inside C++ frames, which aborts the process."""
    if not _harvester.HARVESTER.stop():
        _model.log.warning("openmsprof.acl: the harvester thread did not stop within 10 s at exit")
    try:
        if STATE.profiling_session() is not None:
            _refresh(stopping=True)
    except Exception as exc:  # pragma: no cover - exit path
        _model.log.warning("openmsprof.acl: exit harvest failed: %s", exc)
    _harvester.cleanup()


atexit.register(_at_exit)
