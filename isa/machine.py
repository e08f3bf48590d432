"""The state of a batch of CTAs in the functional model, and checked memory access.

Threads of the batch are laid out CTA after CTA, each CTA padded to whole warps of
32 lanes (padding lanes start exited), so `[T]` arrays reshape to `[warps, 32]`.
Registers are width files `[n_regs, T]`; `pc[T]` holds each thread's next
instruction, or `BLOCKED` (waiting at a barrier, resume point in `resume`) or
`EXITED`. Lane sets passed around are a `slice` (a contiguous run) or an index array.
"""

from __future__ import annotations

import numpy as np

from isa.cluster import OFFSET_MASK, RANK_SHIFT
from isa.cluster import ranks as cluster_ranks
from isa.errors import PtxError
from isa.memory import (
    GLOBAL_BASE,
    KPARAM_BASE,
    LOCAL_WINDOW,
    SHARED_WINDOW,
    TPARAM_BASE,
    WINDOW_SIZE,
    GlobalMemory,
    SpaceArrays,
)
from isa.types import FILE_DTYPE, UINT_OF_BITS

BLOCKED = np.int32(1 << 29)
EXITED = np.int32((1 << 29) + 1)
CALL_DEPTH = 8


class Machine:
    def __init__(self, program, launch, cta_ids: np.ndarray, gmem: GlobalMemory,
                 kparam: np.ndarray):
        self.program = program
        self.launch = launch
        self.gmem = gmem
        block = launch.block
        self.block_threads = block[0] * block[1] * block[2]
        self.tpc = -(-self.block_threads // 32) * 32
        self.n_cta = len(cta_ids)
        T = self.T = self.n_cta * self.tpc
        self.files = [np.zeros((max(program.nregs[f], 1), T), dtype=FILE_DTYPE[f])
                      for f in ("P", "R16", "R32", "R64")]
        self._views: dict = {}
        slot = np.arange(T, dtype=np.int64)
        lin = slot % self.tpc
        self.cta_of = (slot // self.tpc).astype(np.int64)
        self.lane = (lin & 31).astype(np.uint32)
        self.warp_in_cta = (lin >> 5).astype(np.uint32)
        valid = lin < self.block_threads
        self.tid = [(lin % block[0]).astype(np.uint32),
                    ((lin // block[0]) % block[1]).astype(np.uint32),
                    (lin // (block[0] * block[1])).astype(np.uint32)]
        self.cta_ids = cta_ids                       # [n_cta, 3]
        self.ctaid = [cta_ids[self.cta_of, k].astype(np.uint32) for k in range(3)]
        self.cluster = launch.cluster
        self.cluster_size = self.cluster[0] * self.cluster[1] * self.cluster[2]
        rank = cluster_ranks(cta_ids, self.cluster)
        self.cluster_rank = rank                     # per batch CTA (`isa.cluster`)
        self.cluster_first = np.arange(self.n_cta, dtype=np.int64) - rank
        # only mapa and multicast copies make shared::cluster addresses of other CTAs: in
        # other programs a shared address past the CTA's memory stays out of bounds
        self.cluster_addresses = any(ins.opname == "mapa" or "multicast::cluster" in ins.flags
                                     for ins in program.instrs)
        if self.cluster_size > 1 and (
                (self.cluster_first < 0).any()
                or (self.n_cta % self.cluster_size)
                or ((cta_ids // np.array(self.cluster)) != (
                    cta_ids[self.cluster_first] // np.array(self.cluster))).any()):
            raise ValueError("a batch must hold whole clusters in rank order "
                             "(isa.cluster.cluster_order)")
        self.pc = np.where(valid, program.entry_pc, EXITED).astype(np.int32)
        self.resume = np.zeros(T, dtype=np.int32)
        self.bar_id = np.full(T, -1, dtype=np.int16)
        self.bar_count = np.zeros(T, dtype=np.int32)
        self.depth = np.zeros(T, dtype=np.int8)
        self.ret_pc = np.zeros((T, CALL_DEPTH), dtype=np.int32)
        self.ret_site = np.zeros((T, CALL_DEPTH), dtype=np.int32)
        self.mem = SpaceArrays(self.n_cta, program.shared_bytes + launch.shared_bytes, T,
                               program.local_bytes, program.tparam_bytes, kparam)
        self.dyn_shared_base = program.shared_bytes
        self.steps = 0
        self.copies_bulk_data = True     # False in timing mode: bulk copies move no bytes
        self.async_groups: list = []     # cp.async: committed groups of pending copies
        self.async_pending: list = []    # cp.async: copies not yet committed

    # -- lanes and views ----------------------------------------------------------
    @staticmethod
    def nlanes(lanes) -> int:
        if isinstance(lanes, slice):
            return lanes.stop - lanes.start
        return lanes.size

    @staticmethod
    def lane_ids(lanes) -> np.ndarray:
        if isinstance(lanes, slice):
            return np.arange(lanes.start, lanes.stop, dtype=np.int64)
        return lanes

    def view(self, fid: int, dtype) -> np.ndarray:
        key = (fid, dtype)
        v = self._views.get(key)
        if v is None:
            v = self._views[key] = self.files[fid].view(dtype)
        return v

    def warp_ids(self, lanes) -> np.ndarray:
        return np.unique(self.lane_ids(lanes) >> 5)

    # -- special registers --------------------------------------------------------
    def special(self, name: str, lanes) -> np.ndarray:
        n = self.nlanes(lanes)
        base, _, comp = name.partition(".")
        k = "xyz".index(comp) if comp in ("x", "y", "z") else 0
        L = self.launch
        if base == "%tid":
            return self.tid[k][lanes]
        if base == "%ctaid":
            return self.ctaid[k][lanes]
        if base == "%ntid":
            return np.full(n, L.block[k], dtype=np.uint32)
        if base == "%nctaid":
            return np.full(n, L.grid[k], dtype=np.uint32)
        if base == "%laneid":
            return self.lane[lanes]
        if base == "%warpid":
            return self.warp_in_cta[lanes]
        if base == "%nwarpid":
            return np.full(n, self.tpc // 32, dtype=np.uint32)
        if base.startswith("%cluster") or base.endswith("clusterid") or \
                base == "%is_explicit_cluster":
            return self._cluster_special(base, k, lanes, n)
        if base in ("%smid", "%gridid"):
            return np.zeros(n, dtype=np.uint32)
        if base == "%nsmid":
            return np.ones(n, dtype=np.uint32)
        if base in ("%clock", "%clock_hi", "%globaltimer_lo", "%globaltimer_hi"):
            return np.full(n, self.steps & 0xFFFFFFFF, dtype=np.uint32)
        if base in ("%clock64", "%globaltimer"):
            return np.full(n, self.steps, dtype=np.uint64)
        if base.startswith("%lanemask_"):
            lane = self.lane[lanes].astype(np.uint64)
            one = np.uint64(1)
            rel = base[len("%lanemask_"):]
            m = {"eq": one << lane, "lt": (one << lane) - one, "le": (one << (lane + one)) - one}
            if rel in m:
                return m[rel].astype(np.uint32)
            le = ((one << (lane + one)) - one).astype(np.uint32)
            lt = ((one << lane) - one).astype(np.uint32)
            return ~lt if rel == "ge" else ~le
        if base == "%dynamic_smem_size":
            return np.full(n, L.shared_bytes, dtype=np.uint32)
        if base in ("%total_smem_size", "%aggr_smem_size"):
            return np.full(n, self.program.shared_bytes + L.shared_bytes, dtype=np.uint32)
        return np.zeros(n, dtype=np.uint32)

    def _cluster_special(self, base: str, k: int, lanes, n: int) -> np.ndarray:
        """%cluster_ctaid, %cluster_nctaid, %clusterid, %nclusterid, %cluster_ctarank,
        %cluster_nctarank, %is_explicit_cluster (`isa.cluster`)."""
        c = self.cluster
        if base == "%cluster_ctaid":
            return (self.ctaid[k][lanes] % c[k]).astype(np.uint32)
        if base == "%clusterid":
            return (self.ctaid[k][lanes] // c[k]).astype(np.uint32)
        if base == "%cluster_ctarank":
            return self.cluster_rank[self.cta_of[lanes]].astype(np.uint32)
        value = {"%cluster_nctaid": c[k], "%nclusterid": self.launch.grid[k] // c[k],
                 "%cluster_nctarank": self.cluster_size,
                 "%is_explicit_cluster": int(self.launch.explicit_cluster)}
        return np.full(n, value[base], dtype=np.uint32)

    def shared_owner(self, addr: np.ndarray, lanes, ins) -> tuple[np.ndarray, np.ndarray]:
        """(batch CTA owning each lane's shared::cluster address, offset in its shared
        memory): the executing lane's CTA, or the rank `mapa` (or a multicast copy) encoded
        (`isa.cluster`)."""
        cta = self.cta_of[lanes]
        if not self.cluster_addresses or addr.size == 0 or int(addr.max()) >> RANK_SHIFT == 0:
            return cta, addr
        field = np.where(addr >= 0, addr >> RANK_SHIFT, 0)
        rank = field - 1
        bad = (field > 0) & (rank >= self.cluster_size)
        if bad.any():
            r = int(rank[np.flatnonzero(bad)[0]])
            raise self.fault(ins, f"shared::cluster address of CTA rank {r} outside a cluster "
                             f"of {self.cluster_size} CTAs", lanes, ~bad,
                             expected=f"an address from mapa with a rank below "
                             f"{self.cluster_size}")
        remote = field > 0
        cta = np.where(remote, self.cluster_first[cta] + rank, cta)
        return cta, np.where(remote, addr & OFFSET_MASK, addr)

    # -- faults --------------------------------------------------------------------
    def describe_slot(self, slot: int) -> str:
        c = self.cta_ids[self.cta_of[slot]]
        t = (int(self.tid[0][slot]), int(self.tid[1][slot]), int(self.tid[2][slot]))
        return f"thread {t} of CTA {tuple(int(x) for x in c)}"

    def fault(self, ins, message: str, lanes=None, bad=None, expected: str = "",
              error: type[PtxError] = PtxError) -> PtxError:
        """An `error` at `ins`, naming the first lane of `lanes` that `bad` marks False."""
        where = ""
        if lanes is not None and bad is not None:
            ids = self.lane_ids(lanes)
            slot = int(ids[np.flatnonzero(~bad)[0]]) if (~bad).any() else int(ids[0])
            where = f" ({self.describe_slot(slot)})"
        return error(f"{message}{where} in '{ins.text}'", file=ins.loc.file,
                     line=ins.loc.line, col=ins.loc.col, text=ins.loc.text, expected=expected)

    # -- memory --------------------------------------------------------------------
    def locate(self, space: str | None, addr: np.ndarray, lanes, nbytes: int, ins):
        """Map addresses to (byte array, byte offsets); fault on bounds or alignment."""
        if nbytes > 1:
            aligned = (addr & (nbytes - 1)) == 0
            if not aligned.all():
                bad_addr = int(addr[np.flatnonzero(~aligned)[0]])
                raise self.fault(ins, f"misaligned {nbytes}-byte access at address "
                                 f"{bad_addr:#x}", lanes, aligned,
                                 expected=f"an address that is a multiple of {nbytes}")
        if space is None:
            space = self._generic_space(addr, lanes, ins)
            if space == "shared":
                addr = addr - SHARED_WINDOW
            elif space == "local":
                addr = addr - LOCAL_WINDOW
        if space in ("global", "const"):
            ok = self.gmem.check(addr, nbytes)
            if not ok.all():
                bad_addr = int(addr[np.flatnonzero(~ok)[0]])
                raise self.fault(ins, f"out-of-bounds {space} access of {nbytes} bytes at "
                                 f"{bad_addr:#x}", lanes, ok,
                                 expected=f"an address inside a buffer: {self.gmem.describe()}")
            return self.gmem.data, addr - GLOBAL_BASE
        if space == "shared":
            size = self.mem.shared_bytes
            owner, addr = self.shared_owner(addr, lanes, ins)
            return self.mem.shared, self._bounded(addr, nbytes, size, lanes, ins, "shared",
                                                  owner)
        if space == "local":
            return self.mem.local, self._bounded(addr, nbytes, self.mem.local_bytes, lanes, ins,
                                                 "local", None)
        if space == "param":
            if (addr >= KPARAM_BASE).all() and (addr < KPARAM_BASE + WINDOW_SIZE).all():
                rel = addr - KPARAM_BASE
                ok = (rel >= 0) & (rel + nbytes <= self.mem.kparam.size)
                if not ok.all():
                    raise self.fault(ins, "out-of-bounds kernel parameter access", lanes, ok)
                return self.mem.kparam, rel
            rel = addr - TPARAM_BASE
            return self.mem.tparam, self._bounded(rel, nbytes, self.mem.tparam_bytes, lanes, ins,
                                                  "param", None)
        raise self.fault(ins, f"unsupported state space '{space}'")

    def _bounded(self, addr, nbytes, size, lanes, ins, space, owner):
        """Flat offsets `owner * size + addr` (owner: per lane, or the lanes themselves when
        None), bounds checked."""
        ok = (addr >= 0) & (addr + nbytes <= size)
        if not ok.all():
            bad_addr = int(addr[np.flatnonzero(~ok)[0]])
            raise self.fault(ins, f"out-of-bounds {space} access of {nbytes} bytes at offset "
                             f"{bad_addr:#x}", lanes, ok,
                             expected=f"an offset in [0, {size}) of {space} memory")
        if owner is None:
            owner = self.lane_ids(lanes)
        return owner * size + addr

    def _generic_space(self, addr, lanes, ins) -> str:
        in_sh = (addr >= SHARED_WINDOW) & (addr < SHARED_WINDOW + WINDOW_SIZE)
        in_lo = (addr >= LOCAL_WINDOW) & (addr < LOCAL_WINDOW + WINDOW_SIZE)
        if in_sh.all():
            return "shared"
        if in_lo.all():
            return "local"
        if not (in_sh | in_lo).any():
            return "global"
        raise self.fault(ins, "generic access mixing state spaces across lanes", lanes,
                         ~(in_sh | in_lo), expected="lanes of one instruction in one space")

    def load(self, space, addr, lanes, ty, nvec: int, ins) -> list[np.ndarray]:
        size = max(ty.bits // 8, 1)
        buf, off = self.locate(space, addr, lanes, size * nvec, ins)
        view = buf.view(UINT_OF_BITS[size * 8])
        idx = off // size
        return [view[idx + k].view(ty.dtype) for k in range(nvec)]

    def store(self, space, addr, lanes, ty, values: list, ins) -> None:
        size = max(ty.bits // 8, 1)
        buf, off = self.locate(space, addr, lanes, size * len(values), ins)
        view = buf.view(UINT_OF_BITS[size * 8])
        idx = off // size
        for k, v in enumerate(values):
            view[idx + k] = np.asarray(v, dtype=ty.dtype).view(UINT_OF_BITS[size * 8])
