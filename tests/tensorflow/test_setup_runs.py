"""A sess.run of initializers only is no iteration (seed 003: five training steps, five rows)."""

from __future__ import annotations

import tensorflow as tf
from openmsprof.tensorflow.tf_setup_runs import drop_setup_steps, is_setup_run


def test_initializer_fetches_are_setup_runs() -> None:
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 2])
        w = tf.compat.v1.get_variable("w", [2, 2])
        b = tf.compat.v1.get_variable("b", [2], initializer=tf.compat.v1.zeros_initializer())
        loss = tf.reduce_sum(tf.matmul(x, w) + b)
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = tf.compat.v1.global_variables_initializer()
        local = tf.compat.v1.local_variables_initializer()
    assert is_setup_run(g, init)
    assert is_setup_run(g, [init, local])  # local_variables_initializer of no variables: a NoOp group
    assert is_setup_run(g, w.initializer)
    assert not is_setup_run(g, train)
    assert not is_setup_run(g, [init, train])
    assert not is_setup_run(g, loss)
    assert not is_setup_run(g, "w:0")  # a name is not resolved: counted as an iteration
    assert not is_setup_run(g, [])


def test_steps_in_a_setup_window_are_dropped_and_renumbered() -> None:
    steps = [(0, 100, 1), (200, 300, 2), (400, 500, 3)]
    assert drop_setup_steps(steps, [(-5, 120)]) == [(200, 300, 1), (400, 500, 2)]
    assert drop_setup_steps(steps, []) == steps
    marked = [(0, 100, 7), (200, 300, 8)]  # numbered by the program (Trace step_num): kept
    assert drop_setup_steps(marked, [(-5, 120)]) == marked
