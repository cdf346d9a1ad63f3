"""Every pyACL entry point answers an argument of any type with its error code, never an exception
(acl/_guard.py): the profiled application never dies because it passed a list where a handle
goes.  Before, the buffer and dataset calls (``_data``, re-exported by ``acl`` and ``acl.mdl``),
the subscription calls (``_subscribe``, re-exported by ``acl.prof``) and the calls returning
None raised ``TypeError`` on an unhashable argument."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from openmsprof import acl

BAD: list[Any] = [None, "x", object(), -1, 2**80, 1.5, float("nan"), b"\x00" * 3, [1], {"a": 1}]
MODULES = {"acl": acl, "acl.prof": acl.prof, "acl.mdl": acl.mdl, "acl.rt": acl.rt, "acl.util": acl.util}


def _entry_points() -> list[tuple[str, Callable[..., Any]]]:
    found = []
    for mod_name, mod in MODULES.items():
        for name in mod.__all__:
            fn = getattr(mod, name)
            if inspect.isfunction(fn):
                found.append((f"{mod_name}.{name}", fn))
    return found


def _arity(fn: Callable[..., Any]) -> int:
    return sum(p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               for p in inspect.signature(fn).parameters.values())


def test_prof_and_mdl_name_their_api() -> None:
    assert {"create_config", "start", "stop", "model_subscribe", "get_op_start", "create_step_info",
            "range_start", "mark"} <= set(acl.prof.__all__)
    assert {"load_from_file", "execute", "get_num_inputs", "create_dataset", "add_dataset_buffer"} <= set(acl.mdl.__all__)
    assert not {"fail", "guard_module", "traced", "resolve_output", "from_mask", "new_handle"} & {
        n for m in MODULES.values() for n in m.__all__}


@pytest.mark.parametrize("bad", BAD, ids=lambda b: type(b).__name__)
def test_every_entry_point_answers_a_bad_argument_with_a_code(bad: Any) -> None:
    assert acl.init() == 0
    raised = []
    for name, fn in _entry_points():
        annotation = str(fn.__annotations__.get("return", ""))
        try:
            ret = fn(*([bad] * _arity(fn)))
        except ValueError as exc:  # a call with no code in its answer (ptr_to_bytes): one line naming it
            if annotation in ("int", "None") or annotation.endswith(", int]"):
                raised.append(f"{name}({bad!r}): {type(exc).__name__}: {exc}")
            else:
                assert str(exc).startswith(name) and "\n" not in str(exc), str(exc)
            continue
        except Exception as exc:
            raised.append(f"{name}({bad!r}): {type(exc).__name__}: {exc}")
            continue
        if annotation == "int":
            assert isinstance(ret, int), name
        elif annotation.startswith("tuple[") and annotation.endswith(", int]"):
            assert isinstance(ret, tuple) and isinstance(ret[-1], int), name
    assert raised == []


def test_an_unhashable_handle_is_an_unknown_handle() -> None:
    """A value getter answers a list as it answers a handle it does not know (0, ""), not with an
    error code where a count belongs; a code-returning call names itself in the recent error."""
    assert acl.init() == 0
    for bad in ([1], {"a": 1}, 123456789):
        assert acl.mdl.get_num_inputs(bad) == 0
        assert acl.mdl.get_input_size_by_index(bad, 0) == 0
        assert acl.mdl.get_input_name_by_index(bad, 0) == ""
        assert acl.destroy_data_buffer(bad) == acl.ACL_ERROR_INVALID_PARAM
        assert acl.get_recent_err_msg().startswith("acl.destroy_data_buffer: unknown data buffer")
        assert acl.mdl.destroy_dataset(bad) == acl.ACL_ERROR_INVALID_PARAM
