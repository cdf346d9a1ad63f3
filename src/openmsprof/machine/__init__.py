"""Machine peaks (bandwidth, GEMM) for the roofline: measured once per machine, cached, written into each job."""
