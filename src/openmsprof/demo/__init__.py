"""The demo: small ONNX models built in code for ``openmsprof demo``, the examples and the benchmarks."""
