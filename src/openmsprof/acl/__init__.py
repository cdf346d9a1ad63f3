"""``openmsprof.acl`` — the pyACL surface on ONNX Runtime (docs/guide.md §2).

``from openmsprof import acl`` in place of ``import acl``: ``acl.init([config_path])``,
``acl.finalize()``, ``acl.rt``, ``acl.mdl``, ``acl.util``, ``acl.prof`` with pyACL's names and
return conventions (``ret`` codes, ``(value, ret)`` tuples, int handles), models run on a real
ONNX Runtime session, and the profiling data the seed documents promise: API spans, per-operator
tasks, msproftx stamps, step info and the subscription pipe.  ``acl.init(path)`` honours the
``"profiler"`` section of an acl.json (and ``$OPENMSPROF_ACL_JSON`` from ``openmsprof collect``).
"""

from __future__ import annotations

from openmsprof.acl import mdl, prof, rt, util
from openmsprof.acl._acl_session import config_for_init, finalize_all, start_json
from openmsprof.acl._codes import *  # noqa: F403  (pyACL constants at top level, as the seeds use them)
from openmsprof.acl._codes import ACL_ERROR_REPEAT_INITIALIZE, ACL_ERROR_UNINITIALIZE, ACL_SUCCESS
from openmsprof.acl._data import (
    create_data_buffer,
    destroy_data_buffer,
    get_data_buffer_addr,
    get_data_buffer_size,
    update_data_buffer,
)
from openmsprof.acl._guard import guard_module
from openmsprof.acl._state import STATE, fail, recent_error, traced
from openmsprof.config.errors import ProfilingError

get_data_buffer_size_v2 = get_data_buffer_size

__all__ = [
    "create_data_buffer", "destroy_data_buffer", "finalize", "get_data_buffer_addr",
    "get_data_buffer_size", "get_data_buffer_size_v2", "get_recent_err_msg", "get_soc_name",
    "get_version", "init", "mdl", "prof", "rt", "update_data_buffer", "util",
]


@traced("aclInit")
def init(config_path: str | None = None) -> int:
    """Initialise; with an acl.json whose ``"profiler"`` switch is on, profiling starts here."""
    if STATE.initialized:
        return fail(ACL_ERROR_REPEAT_INITIALIZE, "acl.init: already initialised")
    try:
        cfg = config_for_init(config_path)
    except ProfilingError as exc:
        return fail(exc.code, str(exc))
    STATE.initialized = True
    if cfg is not None and cfg.switch:
        ret = start_json(cfg)
        if ret != ACL_SUCCESS:
            return ret
    return ACL_SUCCESS


@traced("aclFinalize")
def finalize() -> int:
    """Release everything; acl.json profiling ends here and its job is closed."""
    if not STATE.initialized:
        return fail(ACL_ERROR_UNINITIALIZE, "acl.finalize: acl.init was not called")
    finalize_all()
    STATE.initialized = False
    return ACL_SUCCESS


def get_recent_err_msg() -> str:
    """The one-line reason of this thread's last failed call."""
    return recent_error()


def get_soc_name() -> str:
    return "CPU (ONNX Runtime)"


def get_version() -> tuple[int, int, int, int]:
    """(major, minor, patch, ret) of this pyACL surface."""
    return 1, 0, 0, ACL_SUCCESS


guard_module(globals())  # every entry point answers bad arguments with a code (acl/_guard.py)
