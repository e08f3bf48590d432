"""Loose round-robin warp scheduling: start each cycle after the warp that issued last.

What it models: the LRR policy (Accel-Sim's default): warps are tried in list order starting
one past the last issuer, wrapping around, so every ready warp gets its turn. Left out:
nothing of the policy. Units: none.
"""

from __future__ import annotations

from models.warp_scheduler import register_policy


@register_policy("lrr")
class LrrScheduling:
    """Round robin starting after the last issuer."""

    def order(self, warps: list, last) -> list:
        """warps rotated to begin one past `last` (unchanged when `last` is gone)."""
        if last is None or last.finished:
            return warps
        try:
            k = warps.index(last) + 1
        except ValueError:
            return warps
        return warps[k:] + warps[:k]
