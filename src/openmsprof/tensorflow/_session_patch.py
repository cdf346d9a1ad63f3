"""sess.run mode: a ``tf.compat.v1.Session`` configured with the ``NpuOptimizer`` custom optimizer.

:func:`install` wraps ``Session.__init__`` and ``Session.close`` once.  At construction the
``NpuOptimizer`` entries are taken out of a copy of the ``ConfigProto`` (TensorFlow never sees an
optimizer name it does not know, so grappler logs no error); when one of them has
``parameter_map["profiling_mode"].b`` (or ``PROFILING_MODE`` is set) the session opens the profiled
window, and ``close()`` (also via ``with``) ends it.  A session never closed is ended at exit.
``Session.run`` is wrapped too: while a window is open, the first run of each fetch/feed signature
asks TensorFlow for its post-grappler partition graphs (shapes and fusion_op; one graph copy per
signature, nothing on later runs); a run of initializers only is marked as no iteration
(:mod:`openmsprof.tensorflow.tf_setup_runs`).
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

from openmsprof.config.errors import own_failure
from openmsprof.recorder import session
from openmsprof.tensorflow import _tf_window as _control
from openmsprof.tensorflow.tf_setup_runs import is_setup_run

__all__ = ["NPU_OPTIMIZER", "install", "take_npu_optimizer"]

NPU_OPTIMIZER = "NpuOptimizer"
_installed: list[bool] = []

log = logging.getLogger("openmsprof")
#: session.run partition graphs that could not be read (their shapes are missing)
graph_skips = [0]


def _skipped(exc: Exception) -> None:
    """One line each in the job's collection.log; the first one on the console too."""
    graph_skips[0] += 1
    text = (f"a session.run's partition graphs could not be read ({type(exc).__name__}: {exc}); their ops' shapes "
            f"are missing ({graph_skips[0]} so far)")
    s = session.current()
    if s is not None:
        s.note(text, warn=graph_skips[0] == 1)
    elif graph_skips[0] == 1:
        log.warning("openmsprof: %s", text)


def take_npu_optimizer(config: Any) -> tuple[Any, dict[str, Any] | None]:
    """(``config`` without NpuOptimizer entries, those entries' parameters or None)."""
    if config is None:
        return None, None
    opts = config.graph_options.rewrite_options.custom_optimizers
    if not any(o.name == NPU_OPTIMIZER for o in opts):
        return config, None
    clean = type(config)()
    clean.CopyFrom(config)
    params: dict[str, Any] = {}
    kept = [o for o in clean.graph_options.rewrite_options.custom_optimizers if o.name != NPU_OPTIMIZER]
    for o in opts:
        if o.name == NPU_OPTIMIZER:
            for key, value in o.parameter_map.items():
                params[key] = value
    del clean.graph_options.rewrite_options.custom_optimizers[:]
    for o in kept:
        clean.graph_options.rewrite_options.custom_optimizers.add().CopyFrom(o)
    return clean, params


def _session_config(params: dict[str, Any] | None) -> Any:
    where = 'Session parameter_map["profiling_options"]'
    if params is not None and "profiling_mode" in params and params["profiling_mode"].b:
        opts = params["profiling_options"].s if "profiling_options" in params else None
        return _control.config_from(opts or None, where)
    return _control.env_config("environment PROFILING_OPTIONS")


def install() -> None:
    """Wrap ``tf.compat.v1.Session`` (idempotent)."""
    if _installed:
        return
    from tensorflow.python.client import session as tf_session

    cls = tf_session.Session
    orig_init, orig_close = cls.__init__, cls.close

    @functools.wraps(orig_init)
    def __init__(self: Any, target: str = "", graph: Any = None, config: Any = None) -> None:
        config, params = take_npu_optimizer(config)
        orig_init(self, target, graph, config)
        if _control.active():
            return
        cfg = _session_config(params)
        if cfg is not None:
            _control.begin(cfg, self, "tf.compat.v1.Session (profiling_mode)")

    @functools.wraps(orig_close)
    def close(self: Any) -> None:
        try:
            orig_close(self)
        finally:
            _control.end(self)

    orig_run = cls.run

    @functools.wraps(orig_run)
    def run(self: Any, fetches: Any, feed_dict: Any = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        graphs = _control.session_graphs()
        if graphs is not None and is_setup_run(self.graph, fetches):  # not an iteration
            t0 = time.time_ns()
            try:
                return orig_run(self, fetches, feed_dict, options, run_metadata)
            finally:
                _control.setup_run(t0, time.time_ns())
        if graphs is None or not graphs.want(fetches, feed_dict):
            return orig_run(self, fetches, feed_dict, options, run_metadata)
        from tensorflow.core.protobuf import config_pb2

        opts = config_pb2.RunOptions()
        if options is not None:
            opts.CopyFrom(options)
        opts.output_partition_graphs = True
        meta = run_metadata if run_metadata is not None else config_pb2.RunMetadata()
        out = orig_run(self, fetches, feed_dict, opts, meta)
        try:
            graphs.add(meta, self.graph_def)
        except Exception as exc:  # the graphs only add shapes; the run's result is what matters
            if not own_failure(exc):  # (a user's signal handler's exception: the caller's)
                raise
            _skipped(exc)
        return out

    cls.run = run  # type: ignore[method-assign]
    cls.__init__ = __init__  # type: ignore[method-assign]
    cls.close = close  # type: ignore[method-assign]
    _installed.append(True)
