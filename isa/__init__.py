"""ptxsim's ISA layer: PTX types and opcode table, parser, verifier and the
functional SIMT interpreter.

    isa.run_kernel(ptx, entry, grid, block, args, shared_bytes=0)

runs a kernel on numpy arrays (modified in place) and returns instruction counts;
`isa.PtxError` reports bad input with file, line and column.
"""

from isa.errors import InputError, LaunchError, PtxError
from isa.launch import FunctionalResult, Launch, ShapeOnly, compile_kernel, run_kernel
from isa.opcodes import OPCODES, TABLE, OpSpec
from isa.parser import parse

__all__ = ["InputError", "LaunchError", "PtxError", "FunctionalResult", "Launch", "ShapeOnly",
           "compile_kernel", "run_kernel", "OPCODES", "TABLE", "OpSpec", "parse"]
