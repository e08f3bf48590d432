"""Single ops (GEMM, softmax, RMSNorm, LayerNorm) as ISA kernel launches, timed on a preset.

`build_op(kind, config, **sizes)` -> `OpPlan` (launches, FLOPs, bytes, roofline peak);
`simulate_op(plan, config, fidelity)` -> dict of time, TFLOP/s, GB/s, simulated HBM
bytes, roofline time and bound, and the fidelity plan carried out; `plan_op` / `explain_op`
give that plan before anything runs. `ptxsim op` is the command over these.
"""

from workloads.ops import (  # noqa: F401  (register the op builders)
    attention,
    comm,
    elementwise,
    gating,
    gemm,
    layout,
    mla_decode,
    norms,
    pointwise,
)
from workloads.ops.registry import (
    OP_FLAGS,
    OP_HELP,
    OPS,
    Flag,
    Launch,
    OpPlan,
    available_fidelities,
    build_op,
    explain_op,
    plan_op,
    simulate_op,
)

__all__ = ["OPS", "OP_FLAGS", "OP_HELP", "Flag", "Launch", "OpPlan", "available_fidelities",
           "build_op", "explain_op", "plan_op", "simulate_op"]
