"""One classification of device tasks, used by every tool-facing writer (kernel_details,
op_statistic, trace_view, the profiler dbs, communication views, mindstudio_profiler_output).

A task is one of four kinds, decided from its operator name alone:

* ``COMMUNICATION``: a process-group backend's work (``gloo:``, ``nccl:``, ``hccl:``, ``mpi:``,
  ``ucc:`` prefixes, or an HCCL ``hcom_`` name);
* ``MEMCPY``: a pure data movement (``aten::copy_``, ``aten::_copy_from`` …, ``Memcpy``/``Memset``);
* ``CUBE``: matrix-engine work — matmul, convolution, attention (the name contains a word of
  ``CUBE_WORDS``, the same words msprof-analyze's ``compare_config.ini`` masks use);
* ``VECTOR``: every other computing operator.

The ``Task Type`` / ``Accelerator Core`` / ``Core Type`` written for each kind names the real
executor (docs/formats.md decision 1, tool-facing files included): ``CPU`` (or ``CUDA`` …) for
CUBE and VECTOR work, ``COMMUNICATION`` and ``MEMCPY_ASYNC`` for the other two kinds.  The
CUBE/VECTOR split msprof-analyze's compare makes comes from the duration columns
(``aicore_time(us)`` / ``aiv_vec_time(us)`` in kernel_details, ``aic_total_time`` /
``aiv_vec_time`` TASK_PMU_INFO rows in the db), which carry the task's executor time
(docs/formats.md "Task classification").
"""

from __future__ import annotations

import re
from enum import IntEnum
from functools import lru_cache

__all__ = ["COMM_PREFIXES", "Kind", "classify", "core_name", "core_names", "is_communication", "op_type"]

COMM_PREFIXES = ("gloo:", "nccl:", "hccl:", "mpi:", "ucc:", "hcom_")
CUBE_WORDS = ("matmul", "aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::addbmm", "aten::addmv",
              "aten::mv", "aten::dot", "aten::vdot", "aten::_mm", "aten::_addmm", "linear", "gemm", "gemv",
              "conv", "attention", "flash", "cutlass", "einsum", "aten::tensordot")
MEMCPY_NAMES = frozenset(("aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize", "aten::_to_copy",
                          "memcpy", "memset", "memcpy_async", "memset_async"))
_BACKWARD = re.compile(r"backward|grad|bwd", re.I)


class Kind(IntEnum):
    """Task kinds; the value is the code stored in ``Kernels.core`` columns."""

    VECTOR = 0
    CUBE = 1
    COMMUNICATION = 2
    MEMCPY = 3




def core_names(executor: str = "CPU") -> list[str]:
    """The ``Task Type`` text of each kind, indexed by ``Kind`` value: the executor for computing work."""
    return [executor, executor, "COMMUNICATION", "MEMCPY_ASYNC"]


def is_communication(name: str) -> bool:
    return name.startswith(COMM_PREFIXES)


#: Distinct names remembered by ``classify`` / ``op_type`` (the analysis worker meets the same
#: operator names window after window; a bounded cache, so a trace of unique names costs no more).
CACHE_NAMES = 1 << 16


@lru_cache(maxsize=CACHE_NAMES)
def classify(name: str) -> Kind:
    """The kind of the task named ``name`` (see the module docstring)."""
    if name.startswith(COMM_PREFIXES):
        return Kind.COMMUNICATION
    low = name.lower()
    if low in MEMCPY_NAMES or low.startswith(("memcpy", "memset")):
        return Kind.MEMCPY
    if any(w in low for w in CUBE_WORDS):
        return Kind.CUBE
    return Kind.VECTOR


def core_name(name: str, executor: str = "CPU") -> str:
    return core_names(executor)[classify(name)]


@lru_cache(maxsize=CACHE_NAMES)
def op_type(name: str) -> str:
    """The ``OP Type`` / ``Type`` text: a CANN-style type for matrix-engine work (``MatMul``,
    ``BatchMatMul``, ``Conv2D``, ``Conv2DBackward``, ``FlashAttention`` …; msprof-analyze finds
    matmul/conv/attention by these words), ``hcom_{type}_`` for an HCCL-named collective, the
    operator name itself for everything else."""
    low = name.lower()
    kind = classify(name)
    if kind == Kind.COMMUNICATION and name.startswith("hcom_"):
        return name.split("__", 1)[0] + "_"  # hcom_allReduce__256_0_1 → hcom_allReduce_ (torch_npu)
    if kind != Kind.CUBE:
        return name
    bwd = "Backward" if _BACKWARD.search(low) else ""
    if "attention" in low or "flash" in low:
        return "FlashAttention" + ("Grad" if bwd else "")
    if "conv" in low:
        return "Conv2D" + bwd
    if "bmm" in low or "batch" in low:
        return "BatchMatMul" + bwd
    return "MatMul" + bwd
