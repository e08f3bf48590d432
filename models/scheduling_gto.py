"""Greedy-then-oldest warp scheduling: keep issuing from the last warp, else the oldest ready.

What it models: the GTO policy of GPGPU-Sim/Accel-Sim. The warp that issued last is tried
first; then all warps oldest first (the scheduler's list is kept in age order: CTA launch
order, then warp index). Left out: nothing of the policy. Units: none.
"""

from __future__ import annotations

from models.warp_scheduler import register_policy


@register_policy("gto")
class GtoScheduling:
    """Greedy on the last-issued warp, then oldest first."""

    def order(self, warps: list, last) -> list:
        """[last] + warps (oldest first); the last warp appears twice, harmlessly."""
        if last is None or last.finished:
            return warps
        return [last, *warps]
