"""parse layer."""
