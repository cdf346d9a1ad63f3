"""Gathering the graphs TensorFlow ran after grappler (analysed by :mod:`openmsprof.tensorflow.tf_graphs`).

* TF2 (eager, ``tf.function``, Keras): ``context.enable_graph_collection()`` makes every function
  instantiated while it is on keep its pre-optimization graph and its post-grappler partition
  graphs (``export_run_metadata().function_graphs``).  The cost is paid when a function is
  instantiated, not per call (:func:`graph_collection`, :func:`collected_function_graphs`).
* ``sess.run``: ``RunOptions(output_partition_graphs=True)`` on the first run of each fetch/feed
  signature (:class:`SessionGraphs`), the session's own ``graph_def`` as the pre-optimization graph.

Each graph is a (model name, partition ``GraphDef``, pre-optimization ``GraphDef``) triple.
TensorFlow is imported lazily.
"""

from __future__ import annotations

from typing import Any

from openmsprof.tensorflow.tf_graphs import IO_OPS

__all__ = ["SessionGraphs", "collected_function_graphs", "fetch_key", "graph_collection"]


def fetch_key(fetches: Any, feed_dict: Any) -> tuple[Any, ...]:
    """A hashable signature of a ``sess.run`` call (names of fetches and feeds)."""
    def key(f: Any) -> Any:
        if isinstance(f, (list, tuple)):
            return tuple(key(x) for x in f)
        if isinstance(f, dict):
            return tuple(sorted((str(k), key(v)) for k, v in f.items()))
        return getattr(f, "name", None) or str(f)
    feeds = tuple(sorted(key(k) for k in feed_dict)) if isinstance(feed_dict, dict) else ()
    return key(fetches), feeds


class SessionGraphs:
    """The partition graphs of the ``sess.run`` signatures seen in a profiled window."""

    def __init__(self) -> None:
        self.seen: set[tuple[Any, ...]] = set()
        #: (model name, partition GraphDef, pre-optimization GraphDef or None)
        self.graphs: list[tuple[str, Any, Any]] = []

    def want(self, fetches: Any, feed_dict: Any) -> bool:
        """True the first time a signature is run (ask TensorFlow for its partition graphs)."""
        try:
            k = fetch_key(fetches, feed_dict)
        except Exception:
            return False
        if k in self.seen:
            return False
        self.seen.add(k)
        return True

    def add(self, run_metadata: Any, pre_graph: Any) -> None:
        for g in run_metadata.partition_graphs:
            self.graphs.append(("sess.run", g, pre_graph))


_collecting: list[bool] = [False]


def graph_collection(on: bool) -> bool:
    """Switch TensorFlow's function-graph collection (TF2 functions instantiated meanwhile keep
    their optimized graphs); False when the eager context cannot.  Switching it on again would
    drop what was collected, so an already running collection is left as it is."""
    if on and _collecting[0]:
        return True
    try:
        from tensorflow.python.eager import context

        ctx = context.context()
        if on:
            ctx.enable_graph_collection()
        else:
            ctx.disable_graph_collection()
    except Exception:
        return False
    _collecting[0] = on
    return True


def collected_function_graphs(keep: bool = False) -> list[tuple[str, Any, Any]]:
    """(function name, partition graph, pre-optimization graph) of the function graphs collected
    since the last call (collection goes on when ``keep``).  A graph is named after the function
    whose nodes its pre-optimization graph holds (``__inference_multi_step_on_iterator_258``);
    N/A when none of the context's functions matches."""
    from tensorflow.python.eager import context

    ctx = context.context()
    rm = ctx.export_run_metadata()
    if not keep:
        graph_collection(False)
    if rm is None:
        return []
    names = _function_names(ctx)
    out: list[tuple[str, Any, Any]] = []
    for fg in rm.function_graphs:
        pre = fg.pre_optimization_graph
        key = frozenset(n.name for n in pre.node if n.op not in IO_OPS)
        out.extend((names.get(key, "N/A"), pg, pre) for pg in fg.partition_graphs)
    return out


def _function_names(ctx: Any) -> dict[frozenset[str], str]:
    """The node-name set of each function the eager context holds → its name."""
    found: dict[frozenset[str], str] = {}
    try:
        for name in ctx.list_function_names():
            found.setdefault(frozenset(n.name for n in ctx.get_function_def(name).node_def), name)
    except Exception:  # names only label fusion_op rows
        pass
    return found
