"""Ascend-mode flow ids (``trace_loops.FlowIds``): ``connectionId << 32 | ordinal`` of the task
among its connection's tasks, kept in a byte table (issue 26: the timeline's memory no longer
grows by a dict entry per connection)."""

from __future__ import annotations

import random

from openmsprof.export.msprof.trace_loops import FlowIds


def test_ordinals_count_per_connection_in_walk_order() -> None:
    ids = FlowIds()
    got = [ids(c) for c in (7, 3, 7, 7, 3, 1)]
    assert got == [7 << 32, 3 << 32, (7 << 32) | 1, (7 << 32) | 2, (3 << 32) | 1, 1 << 32]


def test_ordinals_past_255_and_ids_outside_the_table() -> None:
    ids = FlowIds()
    many = [ids(5) for _ in range(600)]  # a byte saturates at 255: the dict takes over
    assert many == [(5 << 32) | n for n in range(600)]
    far = FlowIds.LIMIT + 3
    assert [ids(far), ids(far), ids(-1), ids(-1)] == [far << 32, (far << 32) | 1, -1 << 32, (-1 << 32) | 1]
    assert ids(5) == (5 << 32) | 600


def test_same_ids_as_a_dict_of_counts_on_a_random_walk() -> None:
    rng = random.Random(26)
    walk = [rng.choice([rng.randrange(1, 50), rng.randrange(1, 200_000)]) for _ in range(50_000)]
    walk += [9] * 300  # one API launching hundreds of tasks
    seen: dict[int, int] = {}
    want = []
    for c in walk:
        want.append((c << 32) | seen.get(c, 0))
        seen[c] = seen.get(c, 0) + 1
    ids = FlowIds()
    assert [ids(c) for c in walk] == want
