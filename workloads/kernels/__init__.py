"""Real CUDA kernels (`*.cu`) with their committed nvcc PTX (`*.ptx`), and their catalog.

`catalog.KERNELS` maps each entry name to its file, coverage note, case builder and test
problem sizes; `case.load_ptx` reads a kernel's PTX. `regenerate_ptx.sh` rebuilds the PTX.
"""
