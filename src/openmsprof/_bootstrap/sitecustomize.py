"""openmsprof autostart hook (put first on PYTHONPATH by ``openmsprof collect``).

At interpreter start-up it (1) takes itself off ``sys.path`` and ``PYTHONPATH`` so the program
and its children see their usual environment, (2) runs the ``sitecustomize`` it shadows, if any,
and (3) starts a process-level openmsprof session from ``OPENMSPROF_AUTOSTART`` (removed from the
environment, so only the first Python process of the program is profiled).  It never raises:
a failure is one line on stderr and the program runs unprofiled.
"""

import os
import sys


def _openmsprof_unhook() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    boot = os.environ.pop("OPENMSPROF_BOOTSTRAP_DIR", "") or here
    parts = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if boot in parts:
        parts.remove(boot)
        if any(parts):
            os.environ["PYTHONPATH"] = os.pathsep.join(parts)
        else:
            os.environ.pop("PYTHONPATH", None)
    sys.path[:] = [p for p in sys.path if not p or os.path.abspath(p) != here]
    return here


def _openmsprof_chain(here: str) -> None:
    """Run the next ``sitecustomize`` on sys.path, the one this file shadows."""
    import importlib.machinery
    import importlib.util

    for entry in sys.path:
        if os.path.abspath(entry or ".") == here:
            continue
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry or "."])
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            sys.modules["sitecustomize"] = module
            spec.loader.exec_module(module)
            return


def _openmsprof_autostart() -> None:
    spec = os.environ.pop("OPENMSPROF_AUTOSTART", "")
    if not spec:
        return
    from openmsprof.collector.autostart import start_from_spec

    start_from_spec(spec)


def _openmsprof_flight() -> None:
    if not os.environ.get("OPENMSPROF_FLIGHT_RECORDER"):
        return
    from openmsprof.flight.env_arm import arm_from_env

    arm_from_env()


def _openmsprof_main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    steps = (("could not restore PYTHONPATH", _openmsprof_unhook),
             ("error in the shadowed sitecustomize", lambda: _openmsprof_chain(here)),
             ("profiling not started", _openmsprof_autostart),
             ("flight recorder not armed", _openmsprof_flight))
    for what, step in steps:
        try:
            step()
        except BaseException as exc:  # never break the profiled program
            try:
                sys.stderr.write(f"openmsprof: {what}: {type(exc).__name__}: {exc}\n")
            except Exception:
                pass


_openmsprof_main()
