"""Collection layer: the process-wide session, per-thread buffers, the flusher and raw files."""
