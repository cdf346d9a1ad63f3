"""Subscription half of ``acl.prof``: subscribe configs, model (un)subscribe and the
``get_op_*`` accessors that decode 80-byte op records from user memory (docs/formats.md §7.1).

``data`` is a pointer from ``acl.util.numpy_to_ptr`` (checked against live memory before it is
read) or any bytes-like object; ``data_len`` is its length in bytes.  Bad pointers, lengths or
indexes give an error code (``(value, ret)`` calls) or 0 (bare-value calls), never a crash.
"""

from __future__ import annotations

import os
from typing import Any

from openmsprof.acl import _memory
from openmsprof.acl._codes import (
    ACL_AICORE_NONE,
    ACL_ERROR_INVALID_MODEL_ID,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_PROF_API_CONFLICT,
    ACL_ERROR_PROF_REPEAT_SUBSCRIBE,
    ACL_ERROR_UNINITIALIZE,
    ACL_SUCCESS,
)
from openmsprof.acl._data import MODELS
from openmsprof.acl._guard import guard_module
from openmsprof.acl._harvester import refresh
from openmsprof.acl._model import Model
from openmsprof.acl._state import STATE, fail, new_handle, traced
from openmsprof.sources import subscription
from openmsprof.sources.subscription import OP_DESC_SIZE, OP_TABLE

_configs: dict[int, tuple[int, int, int]] = {}  # handle → (switch, metrics, fd)
_writers: dict[int, subscription.PipeWriter] = {}  # fd → writer shared by its models


@traced("aclprofCreateSubscribeConfig")
def create_subscribe_config(time_info_switch: int, aicore_metrics: int, fd: int) -> int:
    """A subscribe config writing to pipe ``fd``; 0 on bad arguments."""
    if time_info_switch not in (0, 1) or not isinstance(fd, int) or fd < 0:
        fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.create_subscribe_config: bad switch {time_info_switch!r} or fd {fd!r}")
        return 0
    if aicore_metrics != ACL_AICORE_NONE and not (isinstance(aicore_metrics, int) and 0 <= aicore_metrics <= 8):
        fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.create_subscribe_config: bad aicore_metrics {aicore_metrics!r}")
        return 0
    try:
        os.fstat(fd)
    except OSError:
        fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.create_subscribe_config: fd {fd} is not open")
        return 0
    h = new_handle()
    _configs[h] = (time_info_switch, aicore_metrics, fd)
    return h


@traced("aclprofDestroySubscribeConfig")
def destroy_subscribe_config(sub_config: int) -> int:
    if _configs.pop(sub_config, None) is None:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.destroy_subscribe_config: unknown config {sub_config!r}")
    return ACL_SUCCESS


@traced("aclprofModelSubscribe")
def model_subscribe(model_id: int, sub_config: int) -> int:
    if not STATE.initialized:
        return fail(ACL_ERROR_UNINITIALIZE, "acl.prof.model_subscribe: call acl.init() first")
    if STATE.prof_path is not None or STATE.json_profiling:
        return fail(ACL_ERROR_PROF_API_CONFLICT, "acl.prof.model_subscribe: not allowed between "
                    "acl.prof.init and acl.prof.finalize or with acl.json profiling on")
    m = MODELS.get(model_id) if isinstance(model_id, int) else None
    if m is None:
        return fail(ACL_ERROR_INVALID_MODEL_ID, f"acl.prof.model_subscribe: model id {model_id!r} is not loaded")
    cfg = _configs.get(sub_config)
    if cfg is None:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.model_subscribe: unknown subscribe config {sub_config!r}")
    if m.writer is not None:
        return fail(ACL_ERROR_PROF_REPEAT_SUBSCRIBE, f"acl.prof.model_subscribe: model {model_id} is already subscribed")
    fd = cfg[2]
    w = _writers.get(fd)
    if w is None or w.closed:
        w = _writers[fd] = subscription.PipeWriter(fd)
    m.writer = w
    m.sub_config = sub_config
    refresh(m)
    return ACL_SUCCESS


#: Ids of models unloaded while subscribed: their subscription already ended (pending records
#: delivered, pipe closed) and a later model_un_subscribe of the id succeeds.
UNLOADED_SUBSCRIBED: set[int] = set()


def drop_model(m: Model) -> None:
    """End ``m``'s subscription: deliver what is pending, close the pipe when no model uses it."""
    w = m.writer
    m.harvest(keep_running=False)
    m.writer = None
    m.sub_config = 0
    if w is not None and not any(o.writer is w for o in MODELS.values() if o is not m):
        _writers.pop(w.fd, None)
        if not w.closed:
            w.closed = True
            try:  # the reader sees end-of-file, as after aclprofModelUnSubscribe
                os.close(w.fd)
            except OSError:
                pass


@traced("aclprofModelUnSubscribe")
def model_un_subscribe(model_id: int) -> int:
    m = MODELS.get(model_id) if isinstance(model_id, int) else None
    if m is None and model_id in UNLOADED_SUBSCRIBED:  # seed sample 2: unload (10), then this (11)
        UNLOADED_SUBSCRIBED.discard(model_id)
        return ACL_SUCCESS
    if m is None:
        return fail(ACL_ERROR_INVALID_MODEL_ID, f"acl.prof.model_un_subscribe: model id {model_id!r} is not loaded")
    if m.writer is None:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.model_un_subscribe: model {model_id} is not subscribed")
    drop_model(m)
    refresh(m)
    return ACL_SUCCESS


model_unsubscribe = model_un_subscribe


def dropped_records() -> int:
    """Op records dropped so far on every pipe (full or closed)."""
    return sum(w.dropped for w in _writers.values())


# -- accessors ------------------------------------------------------------------------------
def _blob(data: Any, data_len: Any) -> bytes | None:
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        if not isinstance(data_len, int) or not 0 <= data_len <= len(raw):
            return None
        return raw[:data_len]
    if not isinstance(data_len, int) or data_len < 0 or not _memory.check(data, data_len):
        return None
    return _memory.read(data, data_len)


def _record(data: Any, data_len: Any, index: Any) -> tuple[int, ...] | None:
    raw = _blob(data, data_len)
    if raw is None or not isinstance(index, int) or index < 0 or (index + 1) * OP_DESC_SIZE > len(raw):
        return None
    try:
        return subscription.decode(raw[index * OP_DESC_SIZE:(index + 1) * OP_DESC_SIZE])
    except ValueError:
        return None


def get_op_desc_size() -> tuple[int, int]:
    return OP_DESC_SIZE, ACL_SUCCESS


def get_op_num(data: Any, data_len: int) -> tuple[int, int]:
    raw = _blob(data, data_len)
    if raw is None or len(raw) % OP_DESC_SIZE:
        return 0, fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.get_op_num: data {data!r} / length {data_len!r} "
                       f"is not known memory holding whole {OP_DESC_SIZE}-byte records")
    return len(raw) // OP_DESC_SIZE, ACL_SUCCESS


def _text(what: str, data: Any, data_len: int, index: int, field: int) -> tuple[str, int]:
    rec = _record(data, data_len, index)
    entry = OP_TABLE.lookup(rec[4]) if rec is not None else None
    if entry is None:
        return "", fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.{what}: bad data, length {data_len!r} or index {index!r}")
    return entry[field], ACL_SUCCESS


def get_op_type_len(data: Any, data_len: int, index: int) -> tuple[int, int]:
    text, ret = _text("get_op_type_len", data, data_len, index, 1)
    return (len(text) + 1 if not ret else 0), ret


def get_op_name_len(data: Any, data_len: int, index: int) -> tuple[int, int]:
    text, ret = _text("get_op_name_len", data, data_len, index, 0)
    return (len(text) + 1 if not ret else 0), ret


def _truncated(what: str, data: Any, data_len: int, index: int, buf_len: Any, field: int) -> tuple[str, int]:
    if not isinstance(buf_len, int) or buf_len <= 0:
        return "", fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.{what}: buffer length {buf_len!r} must be > 0")
    text, ret = _text(what, data, data_len, index, field)
    return text[: buf_len - 1], ret


def get_op_type(data: Any, data_len: int, index: int, op_type_len: int) -> tuple[str, int]:
    return _truncated("get_op_type", data, data_len, index, op_type_len, 1)


def get_op_name(data: Any, data_len: int, index: int, op_name_len: int) -> tuple[str, int]:
    return _truncated("get_op_name", data, data_len, index, op_name_len, 0)


def _field(what: str, data: Any, data_len: int, index: int, pos: int) -> int:
    rec = _record(data, data_len, index)
    if rec is None:
        fail(ACL_ERROR_INVALID_PARAM, f"acl.prof.{what}: bad data, length {data_len!r} or index {index!r}")
        return 0
    return int(rec[pos])


def get_op_start(data: Any, data_len: int, index: int) -> int:
    return _field("get_op_start", data, data_len, index, 6)


def get_op_end(data: Any, data_len: int, index: int) -> int:
    return _field("get_op_end", data, data_len, index, 7)


def get_op_duration(data: Any, data_len: int, index: int) -> int:
    return _field("get_op_duration", data, data_len, index, 5)


def get_model_id(data: Any, data_len: int, index: int) -> int:
    return _field("get_model_id", data, data_len, index, 1)


def get_op_thread_id(data: Any, data_len: int, index: int) -> int:
    return _field("get_op_thread_id", data, data_len, index, 3)


guard_module(globals())  # every entry point answers bad arguments with a code (acl/_guard.py)
