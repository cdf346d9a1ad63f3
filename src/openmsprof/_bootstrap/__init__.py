"""Holds the ``sitecustomize.py`` that ``openmsprof collect`` puts first on a program's
PYTHONPATH; importing this package does nothing."""
