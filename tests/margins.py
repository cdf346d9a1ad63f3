"""Timing bounds the tests allow, sized for the CI machine at load 20 on 2 cores (issue 24).

The product's own figures are measured, idle and beside a co-runner, in ``benchmarks/``; a test
only checks what still holds on a machine ten times oversubscribed, where a runnable thread can
wait seconds for a core.  Each bound names the promise it stands for.
"""

from __future__ import annotations

#: Records lost to a SIGKILL (kill → newest record on disk).  Promised: <= 1 s with the 0.2 s
#: flusher (benchmarks/bench_markers.py measures it); allowed here: 5 s.
SIGKILL_LOSS_S = 5.0
