"""Tool-facing outputs of the PyTorch path: ``…_ascend_pt/ASCEND_PROFILER_OUTPUT`` (docs/formats.md §3–§6)."""
