"""Tensor-core instructions: `mma.sync`, `wmma.{load,mma,store}`, `ldmatrix`, `stmatrix`.

All are warp-collective `.aligned` operations, executed for every warp at the pc in one
numpy pass (see `tensor_frame`); a warp that arrives with fewer than 32 lanes faults.
The forms, layouts and numerics are documented in `tensor_mma`, `tensor_wmma` and
`tensor_ldmatrix`; `form_problem` lets the verifier reject an unsupported form before
anything runs, with the accepted forms in the message.
"""

from __future__ import annotations

from isa.semantics import (
    hopper_tma,
    hopper_wgmma,
    tensor_ldmatrix,
    tensor_mma,
    tensor_mma_sp,
    tensor_wmma,
)

_FORM_CHECKS = {
    "mma": tensor_mma.form_problem,
    "mma.sp": tensor_mma_sp.form_problem,
    "mma.sp::ordered_metadata": tensor_mma_sp.form_problem,
    "ldmatrix": tensor_ldmatrix.form_problem,
    "stmatrix": tensor_ldmatrix.form_problem,
    "wmma.load": tensor_wmma.form_problem,
    "wmma.store": tensor_wmma.form_problem,
    "wmma.mma": tensor_wmma.form_problem,
    "wgmma.mma_async": hopper_wgmma.form_problem,
    "cp.async.bulk.tensor": hopper_tma.tensor_problem,
    "cp.async.bulk": hopper_tma.bulk_problem,
}


def form_problem(ins) -> tuple[str, str] | None:
    """(message, accepted forms) when `ins` is a tensor instruction the interpreter cannot
    run as written; None otherwise (also for every non-tensor instruction)."""
    check = _FORM_CHECKS.get(ins.opname)
    return check(ins) if check is not None else None
