"""Calibration and accuracy harnesses: measured reference subsets (with their `#` source
lines) and the code that compares `ptxsim` against them (`gemm_accuracy`)."""
