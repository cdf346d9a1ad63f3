"""The optional C extensions (built by ``setup.py build_ext`` where a compiler is there): each is
loaded once by the module it speeds up, which keeps its pure-Python code as the reference and the
fallback.  An extension that was not built, or whose switch (an environment variable, e.g.
``OPENMSPROF_NEST_SWEEP_PYTHON=1``) is set to 1, is None and the Python code runs."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["load"]


def load(module: str, switch: str | None = None) -> ModuleType | None:
    """The extension ``module`` (a dotted name), or None when it is not built or ``switch`` is 1."""
    if switch is not None and os.environ.get(switch) == "1":
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
