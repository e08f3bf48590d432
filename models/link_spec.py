"""Config block for the off-chip links of one GPU: NVLink, InfiniBand, PCIe, and the topology.

What it models
--------------
`LinksSpec` holds, per GPU and per direction, the peak and the usable bandwidth of NVLink
(to the other GPUs of the node through the NVSwitches), of the InfiniBand NIC that belongs
to the GPU (GPU-direct RDMA to other nodes) and of the PCIe link (host side; the NIC traffic
crosses it too), the one-way latency of a message on NVLink and on the network, and a fixed
per-message cost (doorbell, packet and completion handling) charged on the sender's egress.
Topology: `gpus_per_node` GPUs per node, all connected by NVSwitch (every pair one hop), and
`nodes` nodes on a non-blocking fabric (rails: GPU i of every node on the same leaf).

`models.link_memory.LinkMemory` turns these into egress/ingress pipes; the usable bandwidth
(`*_achieved_gbps`) is what the pipes run at, the peak is kept for roofline figures.

Left out: NVSwitch contention between pairs (the switch is non-blocking), adaptive routing,
congestion on the fabric, NVLink SHARP (in-switch reduction). Units: GB/s (1e9 B/s), ns,
counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.framework.config import Problem, SpecMixin, spec_field


@dataclass(frozen=True, slots=True, kw_only=True)
class LinksSpec(SpecMixin):
    """Off-chip links of one GPU (per direction) and the node/cluster topology."""

    nvlink_bandwidth_per_direction_gbps: float = spec_field(
        "NVLink bandwidth per direction, all links together.", above=0)
    nvlink_achieved_gbps: float = spec_field(
        "NVLink bandwidth per direction that data movement reaches (the pipe rate of the "
        "link model).", above=0)
    pcie_bandwidth_per_direction_gbps: float = spec_field(
        "PCIe bandwidth per direction (the NIC's RDMA traffic crosses it).", above=0)
    network_bandwidth_per_gpu_gbps: float = spec_field(
        "Inter-node network (InfiniBand) bandwidth per GPU per direction (the NIC's rate).",
        above=0)
    network_achieved_gbps: float = spec_field(
        "InfiniBand bandwidth per GPU per direction that RDMA writes reach.", above=0)
    nvlink_latency_ns: float = spec_field(
        "One-way latency of an NVLink store to a peer GPU's memory.", minimum=0)
    nvlink_message_overhead_ns: float = spec_field(
        "Fixed sender-side cost of one NVLink message (chunk), on the egress pipe.", minimum=0)
    network_latency_ns: float = spec_field(
        "One-way latency of an RDMA write to a GPU in another node.", minimum=0)
    network_message_overhead_ns: float = spec_field(
        "Fixed sender-side cost of one RDMA message (chunk), on the NIC's egress.", minimum=0)
    gpus_per_node: int = spec_field("GPUs per node on one NVSwitch domain.", default=8,
                                    above=0)
    nodes: int = spec_field("Nodes in the cluster (ranks <= nodes * gpus_per_node).",
                            default=1, above=0)

    @property
    def network_pipe_gbps(self) -> float:
        """Rate of the RDMA path: the NIC, capped by the PCIe link it sits behind."""
        return min(self.network_achieved_gbps, self.pcie_bandwidth_per_direction_gbps)

    def problems(self) -> tuple[Problem, ...]:
        """Usable bandwidths cannot exceed their peaks."""
        found: list[Problem] = []
        if self.nvlink_achieved_gbps > self.nvlink_bandwidth_per_direction_gbps:
            found.append(("nvlink_achieved_gbps", self.nvlink_achieved_gbps,
                          f"<= nvlink_bandwidth_per_direction_gbps "
                          f"({self.nvlink_bandwidth_per_direction_gbps})",
                          "usable above peak"))
        if self.network_achieved_gbps > self.network_bandwidth_per_gpu_gbps:
            found.append(("network_achieved_gbps", self.network_achieved_gbps,
                          f"<= network_bandwidth_per_gpu_gbps "
                          f"({self.network_bandwidth_per_gpu_gbps})", "usable above peak"))
        return tuple(found)
