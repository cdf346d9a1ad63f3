"""PyTorch facade of openmsprof.  Import :mod:`openmsprof.torch.profiler` (needs torch); plain
``import openmsprof`` never imports this package."""
