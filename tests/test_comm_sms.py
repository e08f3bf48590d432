"""Communication SMs: compute kernels run on sm.count - sm.comm_count SMs, comm kernels on the
reserved ones (ids above the compute SMs)."""

import numpy as np
import pytest

import models
import simulator
from models.fixed_latency_memory import FixedLatencyMemory
from workloads.kernels.case import load_ptx


class RecordingMemory(FixedLatencyMemory):
    """Fixed-latency memory that remembers which SM ids issued accesses."""

    def __init__(self, config):
        super().__init__(config)
        self.sm_ids: set[int] = set()

    def access(self, sm_id, kind, sectors, now_ps, ops=1, policy=None):
        self.sm_ids.add(sm_id)
        return super().access(sm_id, kind, sectors, now_ps, ops, policy)


def _run(cfg, sms, n_ctas=264):
    n = n_ctas * 128
    made = []

    def factory(config, n_sms, carveout):
        made.append(n_sms)
        memory = RecordingMemory(config)
        made.append(memory)
        return memory

    x, y = np.ones(n, np.float32), np.ones(n, np.float32)
    res = simulator.simulate_kernel(load_ptx("saxpy.cu"), "saxpy", n_ctas, 128,
                                    [n, np.float32(2.0), x, y], config=cfg, memory=factory,
                                    sms=sms, regs_per_thread=255)
    return res, made[0], made[1].sm_ids


def test_compute_kernel_runs_on_count_minus_comm_count_sms():
    """With 20 of 132 SMs reserved, a 264-CTA grid runs on SMs 0..111 exactly."""
    cfg = models.load_preset("h800_sxm", {"sm.comm_count": 20})
    res, n_sms_memory, ids = _run(cfg, "compute")
    assert ids == set(range(112))
    assert n_sms_memory == 132                       # the memory serves every SM
    used = res.stats.query("component == 'kernel' and stat == 'sms_used'").value.iloc[0]
    assert used == 112


def test_comm_kernel_runs_on_the_reserved_sms_only():
    """sms='comm' puts the CTAs on SMs 112..131, the 20 reserved ones."""
    cfg = models.load_preset("h800_sxm", {"sm.comm_count": 20})
    res, _, ids = _run(cfg, "comm", n_ctas=40)
    assert ids == set(range(112, 132))
    assert res.stats.query("component == 'kernel' and stat == 'sms_used'").value.iloc[0] == 20


def test_fewer_comm_sms_take_longer_for_the_same_comm_kernel():
    """The same comm grid on 4 reserved SMs takes longer than on 20."""
    few = _run(models.load_preset("h800_sxm", {"sm.comm_count": 4}), "comm", 80)[0]
    many = _run(models.load_preset("h800_sxm", {"sm.comm_count": 20}), "comm", 80)[0]
    assert few.cycles > many.cycles


def test_comm_kernel_without_reserved_sms_is_an_error():
    """sms='comm' with sm.comm_count = 0 names the key to set."""
    cfg = models.load_preset("h800_sxm")
    with pytest.raises(ValueError, match="sm.comm_count"):
        _run(cfg, "comm", 4)
    with pytest.raises(ValueError, match="accepted: compute, comm"):
        _run(cfg, "links", 4)
