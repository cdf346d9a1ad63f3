"""``acl.mdl``: load ONNX models, describe them, build datasets, execute on ONNX Runtime.

Return conventions as pyACL: ``ret`` codes, ``(value, ret)`` tuples, bare values for the
desc getters.  The execute path with profiling off is one dict lookup, one cache check and
``run_with_iobinding`` on buffers bound once (ONNX Runtime reads and writes the user's memory
directly).  With profiling on it runs on a profiling session (see ``_model``).
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import numpy as np
import onnxruntime as ort

from openmsprof.acl import _data, _harvester, _memory, _model, _subscribe, rt
from openmsprof.acl._codes import (
    ACL_ERROR_INVALID_FILE,
    ACL_ERROR_INVALID_MODEL_ID,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_MODEL_INPUT_NOT_MATCH,
    ACL_ERROR_PARSE_MODEL,
    ACL_ERROR_READ_MODEL_FAILURE,
    ACL_ERROR_UNINITIALIZE,
    ACL_SUCCESS,
)
from openmsprof.acl._data import (
    add_dataset_buffer,
    create_dataset,
    create_desc,
    destroy_dataset,
    destroy_desc,
    get_dataset_buffer,
    get_dataset_num_buffers,
    get_desc,
    get_input_data_type,
    get_input_dims,
    get_input_name_by_index,
    get_input_size_by_index,
    get_num_inputs,
    get_num_outputs,
    get_output_data_type,
    get_output_dims,
    get_output_name_by_index,
    get_output_size_by_index,
)
from openmsprof.acl._guard import guard_module
from openmsprof.acl._harvester import refresh
from openmsprof.acl._model import PLAIN, SUBSCRIBED, Model
from openmsprof.acl._state import STATE, fail, own, traced
from openmsprof.config.validate import show
from openmsprof.recorder.records import ApiLevel
from openmsprof.sources import emit

__all__ = [  # the pyACL acl.mdl calls (seed 001) and the model table the facade keeps
    "add_dataset_buffer", "create_dataset", "create_desc", "destroy_dataset", "destroy_desc", "execute",
    "execute_async", "get_dataset_buffer", "get_dataset_num_buffers", "get_desc", "get_input_data_type",
    "get_input_dims", "get_input_name_by_index", "get_input_size_by_index", "get_num_inputs", "get_num_outputs",
    "get_output_data_type", "get_output_dims", "get_output_name_by_index", "get_output_size_by_index",
    "load_from_file", "load_from_mem", "models", "set_graph_optimization_level", "unload",
]

MODEL = ApiLevel.MODEL
_models: dict[int, Model] = _data.MODELS
_ids = itertools.count(1)
_opt_level: str | None = None
_now = emit.now_ns
_new_conn = emit.new_connection_id


def set_graph_optimization_level(level: str) -> int:
    """Extension: ONNX Runtime graph optimisation for models loaded from now on
    (``disable``, ``basic``, ``extended``, ``all``; default ``$OPENMSPROF_ORT_OPT_LEVEL`` or all)."""
    global _opt_level
    if level not in _model.OPT_LEVELS:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.mdl.set_graph_optimization_level: {level!r}; "
                    f"allowed: {', '.join(_model.OPT_LEVELS)}")
    _opt_level = level
    return ACL_SUCCESS


@traced("aclmdlLoadFromFile", MODEL)
def load_from_file(model_path: str) -> tuple[int, int]:
    """Load an ``.onnx`` file; returns (model_id, ret)."""
    if not STATE.initialized:
        return 0, fail(ACL_ERROR_UNINITIALIZE, "acl.mdl.load_from_file: call acl.init() first")
    if not isinstance(model_path, (str, os.PathLike)) or not os.fspath(model_path):
        return 0, fail(ACL_ERROR_INVALID_PARAM, f"acl.mdl.load_from_file: bad path {model_path!r}")
    path = os.fspath(model_path)
    if not os.path.isfile(path):
        return 0, fail(ACL_ERROR_READ_MODEL_FAILURE, f"acl.mdl.load_from_file: {path!r}: no such model file")
    if not os.access(path, os.R_OK):
        return 0, fail(ACL_ERROR_INVALID_FILE, f"acl.mdl.load_from_file: {path!r}: not readable")
    return _load(path, next(_ids), "acl.mdl.load_from_file")


@traced("aclmdlLoadFromMem", MODEL)
def load_from_mem(model: int, model_size: int) -> tuple[int, int]:
    """Load a model from ``model_size`` bytes of known memory at ``model`` (acl.rt.malloc_host +
    memcpy, acl.util.bytes_to_ptr / numpy_to_ptr); returns (model_id, ret).  ONNX Runtime
    re-reads the graph when profiling switches on, so the bytes are kept in a private file
    beside its profiles for the life of the process."""
    if not STATE.initialized:
        return 0, fail(ACL_ERROR_UNINITIALIZE, "acl.mdl.load_from_mem: call acl.init() first")
    if not isinstance(model_size, int) or isinstance(model_size, bool) or model_size <= 0 \
            or not _memory.check(model, model_size):
        if isinstance(model, (bytes, bytearray, memoryview)):
            return 0, fail(ACL_ERROR_INVALID_PARAM, f"acl.mdl.load_from_mem: model is a {type(model).__name__} "
                           f"of {len(model)} bytes, not a pointer; pass acl.util.bytes_to_ptr(data)")
        return 0, fail(ACL_ERROR_INVALID_PARAM, f"acl.mdl.load_from_mem: {show(model)} (+{show(model_size)} "
                       "bytes) is not known memory")
    model_id = next(_ids)
    from openmsprof.acl import _profdir

    path = os.path.join(_profdir.path(), f"model{model_id}_from_mem.onnx")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(_memory.read(model, model_size))
    return _load(path, model_id, "acl.mdl.load_from_mem")


def _load(path: str, model_id: int, what: str) -> tuple[int, int]:
    try:
        m = Model(model_id, path, _opt_level or _model.default_opt_level(), rt.get_device()[0])
    except Exception as exc:
        if not own(exc):
            raise
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return 0, fail(ACL_ERROR_PARSE_MODEL, f"{what}: {path!r} is not a valid ONNX model: {text}")
    _models[model_id] = m
    _harvester.HARVESTER.models[model_id] = m
    refresh(m)
    return model_id, ACL_SUCCESS


@traced("aclmdlUnload", MODEL)
def unload(model_id: int) -> int:
    m = _models.pop(model_id, None) if isinstance(model_id, int) else None
    if m is None:
        return fail(ACL_ERROR_INVALID_MODEL_ID, f"acl.mdl.unload: model id {model_id!r} is not loaded")
    if m.writer is not None:
        _subscribe.drop_model(m)
        _subscribe.UNLOADED_SUBSCRIBED.add(model_id)
    m.close()
    return ACL_SUCCESS


def refresh_all(stopping: bool = False) -> None:
    """Re-evaluate every model; ``stopping`` harvests everything first (before session stop)."""
    for m in list(_models.values()):
        if stopping:
            m.harvest(keep_running=m.writer is not None)
        refresh(m)


class _Binding:
    __slots__ = ("feeds", "gen", "io", "out_views")

    def __init__(self, gen: int, io: Any, feeds: dict[str, np.ndarray], out_views: list[np.ndarray]) -> None:
        self.gen, self.io, self.feeds, self.out_views = gen, io, feeds, out_views


def _bind(m: Model, in_ds: Any, out_ds: Any, what: str) -> tuple[_Binding | None, int]:
    """Check the datasets against the model and bind them (cached until memory changes)."""
    gen = _memory.generation
    ins, ret = _data.buffers_of(in_ds, m.inputs, True, what)
    if ret:
        return None, ret
    outs, ret = _data.buffers_of(out_ds, m.outputs, False, what)
    if ret:
        return None, ret
    io = None if any(s.size == 0 for s in m.outputs) else m.plain.io_binding()
    feeds: dict[str, np.ndarray] = {}
    for spec, (ptr, size, shape) in zip(m.inputs, ins, strict=False):
        feeds[spec.name] = _memory.view(ptr, size).view(spec.np_type).reshape(shape)
        if io is not None:
            io.bind_input(spec.name, "cpu", 0, np.dtype(spec.np_type), shape, ptr)
    out_views = []
    for spec, (ptr, size, _shape) in zip(m.outputs, outs, strict=False):
        out_views.append(_memory.view(ptr, size))
        if io is not None:
            io.bind_output(spec.name, "cpu", 0, np.dtype(spec.np_type), spec.dims, ptr)
    b = _Binding(gen, io, feeds, out_views)
    m.bindings[(in_ds, out_ds)] = b
    return b, ACL_SUCCESS


def _copy_out(b: _Binding, results: list[Any], what: str) -> int:
    for view, res in zip(b.out_views, results, strict=False):
        raw = np.ascontiguousarray(res).view(np.uint8).reshape(-1)
        if raw.size > view.size:
            return fail(ACL_ERROR_INVALID_PARAM, f"{what}: output of {raw.size} bytes does not fit "
                        f"its {view.size}-byte buffer")
        view[: raw.size] = raw
    return ACL_SUCCESS


def _run(m: Model, in_ds: Any, out_ds: Any, what: str, name: str = "aclmdlExecute") -> int:
    """Execute once (any mode); records the API span ``name`` when API profiling is on."""
    api = emit._api_on
    t0 = _now() if api else 0
    b = m.bindings.get((in_ds, out_ds))
    if b is None or b.gen != _memory.generation:
        b, ret = _bind(m, in_ds, out_ds, what)
        if b is None:
            return ret
    conn = 0
    mode = m.mode
    runner = m.runner
    try:
        if mode != PLAIN and runner is not None and _sampled(m, mode):
            conn = _new_conn()
            res = runner.run(m.out_names, b.feeds, conn, t0)
            ret = _copy_out(b, res, what) if res else ACL_SUCCESS
            if mode == SUBSCRIBED:
                m.harvest(keep_running=True)
                _harvester.HARVESTER.wake.set()
        elif b.io is not None:
            m.plain.run_with_iobinding(b.io)
            ret = ACL_SUCCESS
        else:
            ret = _copy_out(b, m.plain.run(m.out_names, b.feeds), what)
    except Exception as exc:
        if not own(exc):  # (a user's signal handler's exception: the caller's, as after a C call)
            raise
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        ret = fail(ACL_ERROR_MODEL_INPUT_NOT_MATCH if isinstance(exc, ort.capi.onnxruntime_pybind11_state.InvalidArgument)
                   else ACL_ERROR_INVALID_PARAM, f"{what}: model {m.id}: {text}")
    finally:
        if api:  # (an execute a user's signal handler interrupted ran too: its span is kept)
            emit.record_api(name, MODEL, t0, _now(), conn)
    return ret


def _sampled(m: Model, mode: int) -> bool:
    """Whether this execute is profiled: every one when subscribed, else one per interval."""
    m.count += 1
    every = m.every
    return mode == SUBSCRIBED or every <= 1 or m.count % every == 0


def execute(model_id: int, input: Any, output: Any) -> int:
    """Run the model on the input dataset, writing the output dataset's buffers."""
    m = _models.get(model_id) if type(model_id) is int else None
    if m is None:
        return fail(ACL_ERROR_INVALID_MODEL_ID, f"acl.mdl.execute: model id {model_id!r} is not loaded")
    if m.mode == PLAIN and not emit._api_on:
        b = m.bindings.get((input, output))
        if b is not None and b.io is not None and b.gen == _memory.generation:
            try:
                m.plain.run_with_iobinding(b.io)
                return ACL_SUCCESS
            except Exception as exc:
                if not own(exc):  # (a user's signal handler's: the model ran; never run it again)
                    raise  # the full path reports the model's own failure
    return _run(m, input, output, "acl.mdl.execute")


def execute_async(model_id: int, input: Any, output: Any, stream: int) -> int:
    """Queue an execute on ``stream``; ``acl.rt.synchronize_stream`` waits for it."""
    m = _models.get(model_id) if isinstance(model_id, int) else None
    if m is None:
        return fail(ACL_ERROR_INVALID_MODEL_ID, f"acl.mdl.execute_async: model id {model_id!r} is not loaded")
    s = rt.stream_of(stream)
    if s is None:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.mdl.execute_async: unknown stream {stream!r}")
    s.submit(lambda: _run(m, input, output, "acl.mdl.execute_async", "aclmdlExecuteAsync"))
    return ACL_SUCCESS


def models() -> dict[int, Model]:
    return _models


guard_module(globals())  # every entry point answers bad arguments with a code (acl/_guard.py)
