"""File safety, the lowest layer: guarded reads (no FIFOs, devices, links, oversized files) and safe writes (0640/0750, no-follow, atomic)."""
