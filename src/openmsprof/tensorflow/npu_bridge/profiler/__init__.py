"""``npu_bridge.profiler``: seed 003's local (windowed) profiling class, in :mod:`.profiler`."""
