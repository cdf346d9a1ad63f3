"""``acl.prof``: profiling control (init/start/stop/finalize, configs), step info, the stamp API
(msproftx on the collection core's markers, ``_stamps``) and the subscription calls (``_subscribe``).

State rules (docs/formats.md §7.1 error codes): prof calls before ``acl.init`` or start/stop/finalize
before ``acl.prof.init`` → ACL_ERROR_UNINITIALIZE; a second start → PROF_ALREADY_RUN; stop
without start → PROF_NOT_RUN; ``acl.prof.init`` while acl.json profiling is on, or while a
model is subscribed → PROF_API_CONFLICT.  The application always keeps running.
"""

from __future__ import annotations

import os
from typing import Any

from openmsprof.acl import _acl_session as _control
from openmsprof.acl._codes import (
    ACL_ERROR_INVALID_DEVICE,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_PROF_ALREADY_RUN,
    ACL_ERROR_PROF_API_CONFLICT,
    ACL_ERROR_PROF_NOT_RUN,
    ACL_ERROR_REPEAT_INITIALIZE,
    ACL_ERROR_UNINITIALIZE,
    ACL_PROF_HOST_SYS,
    ACL_PROF_HOST_SYS_USAGE,
    ACL_PROF_HOST_SYS_USAGE_FREQ,
    ACL_PROF_STORAGE_LIMIT,
    ACL_PROF_SYS_HARDWARE_MEM_FREQ,
    ACL_STEP_END,
    ACL_STEP_START,
    ACL_SUCCESS,
)
from openmsprof.acl._guard import guard_module
from openmsprof.acl._stamps import (
    create_stamp,
    destroy_stamp,
    mark,
    pop,
    push,
    range_start,
    range_stop,
    set_stamp_trace_message,
)
from openmsprof.acl._state import STATE, fail, new_handle, traced
from openmsprof.acl._subscribe import (
    create_subscribe_config,
    destroy_subscribe_config,
    dropped_records,
    get_model_id,
    get_op_desc_size,
    get_op_duration,
    get_op_end,
    get_op_name,
    get_op_name_len,
    get_op_num,
    get_op_start,
    get_op_thread_id,
    get_op_type,
    get_op_type_len,
    model_subscribe,
    model_un_subscribe,
    model_unsubscribe,
)
from openmsprof.acl.rt import DEVICE_COUNT
from openmsprof.config.acl_mask import from_mask
from openmsprof.config.errors import ProfilingError
from openmsprof.config.paths import resolve_output
from openmsprof.recorder.records import StepTag
from openmsprof.sources import emit

__all__ = [  # the pyACL acl.prof calls (seeds 001/002)
    "Create_Step_Info", "Destroy_Step_Info", "create_config", "create_stamp", "create_step_info",
    "create_subscribe_config", "destroy_config", "destroy_stamp", "destroy_step_info", "destroy_subscribe_config",
    "dropped_records", "finalize", "get_model_id", "get_op_desc_size", "get_op_duration", "get_op_end",
    "get_op_name", "get_op_name_len", "get_op_num", "get_op_start", "get_op_thread_id", "get_op_type",
    "get_op_type_len", "get_step_timestamp", "init", "mark", "model_subscribe", "model_un_subscribe",
    "model_unsubscribe", "pop", "push", "range_start", "range_stop", "set_config", "set_stamp_trace_message",
    "start", "stop",
]

_configs: dict[int, Any] = {}
_steps: dict[int, list[int]] = {}  # info → [step index, tags seen bitmask]
_step_index = [0]
_MAX_PATH = 4096


@traced("aclprofInit")
def init(profiler_result_path: str) -> int:
    """Set where prof.start writes its job (``PROF_*`` directories)."""
    if not STATE.initialized:
        return fail(ACL_ERROR_UNINITIALIZE, "acl.prof.init: call acl.init() first")
    if STATE.json_profiling:
        return fail(ACL_ERROR_PROF_API_CONFLICT, "acl.prof.init: profiling is already on through acl.json "
                    "(or openmsprof collect); the API cannot be used at the same time")
    if any(m.writer is not None for m in _control.models().values()):
        return fail(ACL_ERROR_PROF_API_CONFLICT, "acl.prof.init: a model is subscribed; unsubscribe first")
    if STATE.prof_path is not None:
        return fail(ACL_ERROR_REPEAT_INITIALIZE, "acl.prof.init: already initialised (call acl.prof.finalize)")
    if not isinstance(profiler_result_path, (str, os.PathLike)) or not os.fspath(profiler_result_path) \
            or len(os.fsencode(profiler_result_path)) > _MAX_PATH:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.init: bad path {profiler_result_path!r} (1..4096 bytes)")
    try:
        STATE.prof_path = str(resolve_output(os.fspath(profiler_result_path), "acl.prof.init path"))
    except ProfilingError as exc:
        return fail(exc.code, str(exc))
    return ACL_SUCCESS


@traced("aclprofFinalize")
def finalize() -> int:
    if STATE.prof_path is None:
        return fail(ACL_ERROR_UNINITIALIZE, "acl.prof.finalize: acl.prof.init was not called")
    if STATE.prof_session is not None:
        _control.stop_prof()
    STATE.prof_path = None
    STATE.set_configs.clear()
    return ACL_SUCCESS


@traced("aclprofCreateConfig")
def create_config(device_list: list[int], aicore_metrics: int, aicore_events: Any,
                  data_type_config: int) -> int:
    """A config handle for ``start``; 0 on bad arguments or a device that does not exist (the
    reason: one logged line with ACL_ERROR_INVALID_DEVICE, kept for acl.get_recent_err_msg)."""
    try:
        cfg = from_mask(device_list, aicore_metrics, aicore_events, data_type_config)
    except ProfilingError as exc:
        fail(exc.code, str(exc))
        return 0
    missing = [d for d in cfg.devices if not 0 <= d < DEVICE_COUNT]
    if missing:  # as acl.rt.set_device says it: no handle for a device that does not exist
        fail(ACL_ERROR_INVALID_DEVICE, f"acl.prof.create_config: device {missing[0]!r} does not exist "
             f"(devices 0..{DEVICE_COUNT - 1}: the CPU)")
        return 0
    h = new_handle()
    _configs[h] = cfg
    return h


@traced("aclprofDestroyConfig")
def destroy_config(prof_config: int) -> int:
    if prof_config == STATE.prof_config and STATE.prof_session is not None:
        return fail(ACL_ERROR_INVALID_PARAM, "acl.prof.destroy_config: the config is in use (call acl.prof.stop)")
    if _configs.pop(prof_config, None) is None:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.destroy_config: unknown config {prof_config!r}")
    return ACL_SUCCESS


def start(prof_config: int) -> int:
    """Start collecting with the config's switches into the acl.prof.init path."""
    t_call = emit.now_ns()
    if STATE.prof_path is None:
        return fail(ACL_ERROR_UNINITIALIZE, "acl.prof.start: acl.prof.init was not called")
    cfg = _configs.get(prof_config) if isinstance(prof_config, int) else None
    if cfg is None:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.start: unknown config {prof_config!r}")
    if STATE.prof_session is not None:
        return fail(ACL_ERROR_PROF_ALREADY_RUN, "acl.prof.start: profiling already started (call acl.prof.stop)")
    try:
        cfg = _control.apply_set_configs(cfg.replace(output=STATE.prof_path))
    except ProfilingError as exc:
        return fail(exc.code, str(exc))
    ret = _control.start_prof(cfg)
    if ret == ACL_SUCCESS:
        STATE.prof_config = prof_config
        if emit._api_on:  # the span covers the start itself (job directory, sampler, ...)
            emit.record_api("aclprofStart", emit.ApiLevel.ACL, t_call, emit.now_ns())
    return ret


def stop(prof_config: int) -> int:
    if STATE.prof_path is None:
        return fail(ACL_ERROR_UNINITIALIZE, "acl.prof.stop: acl.prof.init was not called")
    if STATE.prof_session is None:
        return fail(ACL_ERROR_PROF_NOT_RUN, "acl.prof.stop: profiling was not started")
    if prof_config != STATE.prof_config:
        return fail(ACL_ERROR_INVALID_PARAM, "acl.prof.stop: not the config given to acl.prof.start")
    t_call = emit.now_ns()

    def record_stop() -> None:  # the span covers the harvest of pending work; written just
        if emit._api_on:        # before the session closes (nothing can be recorded after)
            emit.record_api("aclprofStop", emit.ApiLevel.ACL, t_call, emit.now_ns())

    return _control.stop_prof(before_close=record_stop)


@traced("aclprofSetConfig")
def set_config(config_type: int, value: str) -> int:
    """Extra switches applied at the next start (storage limit, host sampling)."""
    if STATE.prof_path is None:
        return fail(ACL_ERROR_UNINITIALIZE, "acl.prof.set_config: acl.prof.init was not called")
    known = (ACL_PROF_STORAGE_LIMIT, ACL_PROF_HOST_SYS, ACL_PROF_HOST_SYS_USAGE,
             ACL_PROF_HOST_SYS_USAGE_FREQ, ACL_PROF_SYS_HARDWARE_MEM_FREQ)
    if not isinstance(config_type, int) or not 0 < config_type < 17:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.set_config: unknown config type {config_type!r}")
    if not isinstance(value, str) or not value or len(value.encode()) > 256:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.set_config: value {value!r} must be 1..256 bytes")
    if config_type in known:
        try:
            _control.apply_set_configs(_control.base_config(), {config_type: value})
        except ProfilingError as exc:
            return fail(exc.code, str(exc))
    STATE.set_configs[config_type] = value
    return ACL_SUCCESS


# -- step info ------------------------------------------------------------------------------
def create_step_info() -> int:
    h = new_handle()
    _step_index[0] += 1
    _steps[h] = [_step_index[0], 0]
    return h


def get_step_timestamp(step_info: int, tag: int, stream: Any = None) -> int:
    """Timestamp the start or end of a step.  START then END once per step; a START after a
    complete pair reuses the step info for the next step (a new step index)."""
    ts = emit.now_ns()
    st = _steps.get(step_info) if isinstance(step_info, int) else None
    if st is None or tag not in (ACL_STEP_START, ACL_STEP_END):
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.get_step_timestamp: bad step info {step_info!r} or tag {tag!r}")
    if tag == ACL_STEP_START and st[1] == 0b11:  # one step info reused for the next iteration
        _step_index[0] += 1
        st[0], st[1] = _step_index[0], 0
    bit = 1 << tag
    if st[1] & bit or (tag == ACL_STEP_END and not st[1] & 1):
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.get_step_timestamp: tag {tag} out of order or repeated "
                    f"for step {st[0]}")
    st[1] |= bit
    from openmsprof.acl import rt
    emit.record_step(ts, st[0], StepTag(tag), device_id=rt.get_device()[0])
    return ACL_SUCCESS


def destroy_step_info(step_info: int) -> None:
    _steps.pop(step_info, None)


Create_Step_Info = create_step_info
Destroy_Step_Info = destroy_step_info


guard_module(globals())  # every entry point answers bad arguments with a code (acl/_guard.py)
