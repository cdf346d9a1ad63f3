"""Model descriptions, datasets and data buffers (``acl.mdl.*desc*``, ``*dataset*``,
``acl.create_data_buffer`` ...), and the check of a dataset against a model's inputs/outputs."""

from __future__ import annotations

from typing import Any

import numpy as np

from openmsprof.acl import _memory
from openmsprof.acl._codes import (
    ACL_DT_UNDEFINED,
    ACL_ERROR_INVALID_MODEL_ID,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_MODEL_INPUT_NOT_MATCH,
    ACL_ERROR_MODEL_OUTPUT_NOT_MATCH,
    ACL_SUCCESS,
)
from openmsprof.acl._guard import guard_module
from openmsprof.acl._state import fail, new_handle


class _Handles(dict[Any, Any]):
    """A handle table: a handle that is not an int (a list, a dict: unhashable) is simply not
    there, as an unknown handle is, so every call answers it with its usual code."""

    def get(self, key: Any, default: Any = None) -> Any:
        return dict.get(self, key, default) if type(key) is int else default

    def pop(self, key: Any, default: Any = None) -> Any:
        return dict.pop(self, key, default) if type(key) is int else default

    def __contains__(self, key: object) -> bool:
        return type(key) is int and dict.__contains__(self, key)


MODELS: dict[int, Any] = {}  # model id → _model.Model (filled by acl.mdl)
_descs: dict[int, Any] = _Handles()  # desc → Model or None (not yet filled)
_datasets: dict[int, list[int]] = _Handles()
_buffers: dict[int, list[int]] = _Handles()  # data buffer → [ptr, size]


def _bump() -> None:
    _memory.generation += 1


# -- data buffers (top-level acl.* in pyACL) ------------------------------------------------
def create_data_buffer(data: int, size: int) -> int:
    if not isinstance(data, int) or not isinstance(size, int) or size < 0:
        fail(ACL_ERROR_INVALID_PARAM, f"acl.create_data_buffer: bad pointer/size {data!r}, {size!r}")
        return 0
    h = new_handle()
    _buffers[h] = [data, size]
    return h


def destroy_data_buffer(data_buffer: int) -> int:
    if _buffers.pop(data_buffer, None) is None:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.destroy_data_buffer: unknown data buffer {data_buffer!r}")
    _bump()
    return ACL_SUCCESS


def update_data_buffer(data_buffer: int, data: int, size: int) -> int:
    buf = _buffers.get(data_buffer)
    if buf is None or not isinstance(data, int) or not isinstance(size, int) or size < 0:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.update_data_buffer: bad arguments for {data_buffer!r}")
    buf[:] = [data, size]
    _bump()
    return ACL_SUCCESS


def get_data_buffer_addr(data_buffer: int) -> int:
    buf = _buffers.get(data_buffer)
    return buf[0] if buf is not None else 0


def get_data_buffer_size(data_buffer: int) -> int:
    buf = _buffers.get(data_buffer)
    return buf[1] if buf is not None else 0


# -- datasets -------------------------------------------------------------------------------
def create_dataset() -> int:
    h = new_handle()
    _datasets[h] = []
    return h


def add_dataset_buffer(dataset: int, data_buffer: int) -> tuple[int, int]:
    ds = _datasets.get(dataset)
    if ds is None or data_buffer not in _buffers:
        return dataset, fail(ACL_ERROR_INVALID_PARAM,
                             f"acl.mdl.add_dataset_buffer: unknown dataset {dataset!r} or buffer {data_buffer!r}")
    ds.append(data_buffer)
    _bump()
    return dataset, ACL_SUCCESS


def get_dataset_num_buffers(dataset: int) -> int:
    ds = _datasets.get(dataset)
    return len(ds) if ds is not None else 0


def get_dataset_buffer(dataset: int, index: int) -> int:
    ds = _datasets.get(dataset)
    if ds is None or not isinstance(index, int) or not 0 <= index < len(ds):
        return 0
    return ds[index]


def destroy_dataset(dataset: int) -> int:
    if _datasets.pop(dataset, None) is None:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.mdl.destroy_dataset: unknown dataset {dataset!r}")
    _bump()
    return ACL_SUCCESS


def buffers_of(dataset: Any, specs: list[Any], inputs: bool, what: str
               ) -> tuple[list[tuple[int, int, list[int]]], int]:
    """(ptr, size, shape) per model input/output, or an error code naming the bad buffer."""
    kind = "input" if inputs else "output"
    code = ACL_ERROR_MODEL_INPUT_NOT_MATCH if inputs else ACL_ERROR_MODEL_OUTPUT_NOT_MATCH
    ds = _datasets.get(dataset) if isinstance(dataset, int) else None
    if ds is None:
        return [], fail(ACL_ERROR_INVALID_PARAM, f"{what}: {kind} dataset {dataset!r} does not exist")
    if len(ds) != len(specs):
        return [], fail(code, f"{what}: {kind} dataset has {len(ds)} buffers, the model has {len(specs)} {kind}s")
    out = []
    for i, (h, spec) in enumerate(zip(ds, specs, strict=False)):
        buf = _buffers.get(h)
        if buf is None:
            return [], fail(ACL_ERROR_INVALID_PARAM, f"{what}: {kind} {i} ({spec.name!r}): data buffer destroyed")
        ptr, size = buf
        if not _memory.check(ptr, size):
            return [], fail(ACL_ERROR_INVALID_PARAM, f"{what}: {kind} {i} ({spec.name!r}): pointer {ptr:#x} "
                            f"(+{size}) is not memory from acl.rt.malloc or acl.util.numpy_to_ptr")
        itemsize = np.dtype(spec.np_type).itemsize
        shape = list(spec.dims)
        if spec.size == 0:  # dynamic dims: infer one from the byte size
            known = int(np.prod([d for d in shape if d >= 0], dtype=np.int64)) * itemsize
            dyn = [j for j, d in enumerate(shape) if d < 0]
            if len(dyn) != 1 or known == 0 or size % known:
                return [], fail(code, f"{what}: {kind} {i} ({spec.name!r}) has dynamic shape {spec.dims}; "
                                f"cannot derive it from a {size}-byte buffer")
            shape[dyn[0]] = size // known
        elif (inputs and size != spec.size) or (not inputs and size < spec.size):
            return [], fail(code, f"{what}: {kind} {i} ({spec.name!r}) needs {spec.size} bytes "
                            f"({spec.np_type} {spec.dims}), the buffer has {size}")
        dt = _memory.dtype_at(ptr)
        if inputs and dt is not None and dt != np.dtype(spec.np_type):
            return [], fail(code, f"{what}: input {i} ({spec.name!r}) is {spec.np_type}, the buffer "
                            f"holds a {dt} array")
        out.append((ptr, size, shape))
    return out, ACL_SUCCESS


# -- model descriptions ---------------------------------------------------------------------
def create_desc() -> int:
    h = new_handle()
    _descs[h] = None
    return h


def get_desc(model_desc: int, model_id: int) -> int:
    if model_desc not in _descs:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.mdl.get_desc: unknown desc {model_desc!r}")
    m = MODELS.get(model_id) if isinstance(model_id, int) else None
    if m is None:
        return fail(ACL_ERROR_INVALID_MODEL_ID, f"acl.mdl.get_desc: model id {model_id!r} is not loaded")
    _descs[model_desc] = m
    return ACL_SUCCESS


def destroy_desc(model_desc: int) -> int:
    if _descs.pop(model_desc, 0) == 0:
        return fail(ACL_ERROR_INVALID_PARAM, f"acl.mdl.destroy_desc: unknown desc {model_desc!r}")
    return ACL_SUCCESS


def _spec(desc: int, index: int, inputs: bool) -> Any:
    m = _descs.get(desc)
    if m is None:
        return None
    specs = m.inputs if inputs else m.outputs
    return specs[index] if isinstance(index, int) and 0 <= index < len(specs) else None


def get_num_inputs(model_desc: int) -> int:
    m = _descs.get(model_desc)
    return len(m.inputs) if m is not None else 0


def get_num_outputs(model_desc: int) -> int:
    m = _descs.get(model_desc)
    return len(m.outputs) if m is not None else 0


def get_input_size_by_index(model_desc: int, index: int) -> int:
    s = _spec(model_desc, index, True)
    return s.size if s is not None else 0


def get_output_size_by_index(model_desc: int, index: int) -> int:
    s = _spec(model_desc, index, False)
    return s.size if s is not None else 0


def _dims(desc: int, index: int, inputs: bool) -> tuple[dict[str, Any], int]:
    s = _spec(desc, index, inputs)
    if s is None:
        return {}, fail(ACL_ERROR_INVALID_PARAM, f"acl.mdl.get_{'input' if inputs else 'output'}_dims: "
                        f"bad desc {desc!r} or index {index!r}")
    return {"name": s.name, "dimCount": len(s.dims), "dims": list(s.dims)}, ACL_SUCCESS


def get_input_dims(model_desc: int, index: int) -> tuple[dict[str, Any], int]:
    return _dims(model_desc, index, True)


def get_output_dims(model_desc: int, index: int) -> tuple[dict[str, Any], int]:
    return _dims(model_desc, index, False)


def get_input_name_by_index(model_desc: int, index: int) -> str:
    s = _spec(model_desc, index, True)
    return s.name if s is not None else ""


def get_output_name_by_index(model_desc: int, index: int) -> str:
    s = _spec(model_desc, index, False)
    return s.name if s is not None else ""


def get_input_data_type(model_desc: int, index: int) -> int:
    s = _spec(model_desc, index, True)
    return s.acl_type if s is not None else ACL_DT_UNDEFINED


def get_output_data_type(model_desc: int, index: int) -> int:
    s = _spec(model_desc, index, False)
    return s.acl_type if s is not None else ACL_DT_UNDEFINED


guard_module(globals())  # every entry point answers bad arguments with a code (acl/_guard.py)
