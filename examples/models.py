"""The example models live in the package (``openmsprof.demo.models``) so the demo can use them;
this shim keeps ``import models`` working for the examples, tests and benchmarks."""

from __future__ import annotations

import sys

from openmsprof.demo.models import resnet_like, save_all, tiny_mlp

__all__ = ["resnet_like", "save_all", "tiny_mlp"]

if __name__ == "__main__":
    for name, path in save_all(sys.argv[1] if len(sys.argv) > 1 else ".").items():
        print(f"{name}: {path}")
