"""Co-design what-ifs: the kernels, policies and data formats of the proposed units.

`vpcu_kernels` (PTX generators for the variable-precision tensor unit), `precision`
(precision policies registered by name), `zce_format` (the zero-compression tensor format
and sparsity sources), `zce_kernels` (PTX generators for zero-skipping MMA), `numerics`
(what each unit's shortcut costs in accuracy, on a reduced layer against FP64), `whatif`
(the what-if tables: time beside error), `run_numerics` (that error per op category for a
`ptxsim run`). The hardware
side lives in `models/vpcu.py`, `models/units.py` and the `deepseek_codesign` preset.
"""
