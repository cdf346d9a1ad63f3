"""The ``npu_bridge`` module paths of seed 003 (Estimator and sess.run modes)."""
