"""SM partitions on the GPU: a partitioned tenant's kernels (CUDA C and Numba) run on its SMs
only, two tenants' partitions are disjoint, steps are timed across the partitions' green
contexts, results equal the unpartitioned run's, tenants a plan puts in one partition share
its SMs, a partition given back frees its SMs, and one that cannot be made on every GPU is
made on none."""

from __future__ import annotations

import numpy as np
import pytest
from test_gpu_multi_device import needs_two
from test_partitions import add_one

import asyncgpu as ag
from asyncgpu.runtime.current import current_runtime

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("fresh_runtime")]

#: Each block writes the SM it ran on, then spins so the launch's blocks stay resident together.
WHERE = r"""extern "C" __global__ void where(unsigned int* out, long long spin) {
    unsigned int sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    if (threadIdx.x == 0) out[blockIdx.x] = sm;
    long long t0 = clock64();
    while (clock64() - t0 < spin) {}
}"""


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_partitioned_tenants_kernels_run_on_their_own_sms_only(memory):
    with ag.configure(backend="cuda", memory=memory):
        where = ag.cuda_kernel(WHERE, "where", out=["out"])
        numba_add = ag.kernel(const=["x"], out=["y"])(add_one)
        first, second = ag.tenant("part-gpu-a", sms=32), ag.tenant("part-gpu-b", sms=40)
        outs = {first.name: ag.zeros(264, np.uint32), second.name: ag.zeros(264, np.uint32)}
        x, y, z = ag.array(np.arange(1 << 20, dtype=np.float64)), ag.empty(1 << 20), \
            ag.empty(1 << 20)
        for _ in range(3):
            with first:
                where[264, 64](outs[first.name], np.int64(200_000))
                numba_add[256, 256](x, y, 1 << 20)
            with second:
                where[264, 64](outs[second.name], np.int64(200_000))
                numba_add[256, 256](y, z, 1 << 20)     # (after first's: ordered by its data)
        used = {name: set(out.numpy().tolist()) for name, out in outs.items()}
        assert 0 < len(used[first.name]) <= 32 and 0 < len(used[second.name]) <= 40
        assert not used[first.name] & used[second.name]
        assert np.array_equal(z.numpy(), np.arange(1 << 20, dtype=np.float64) + 2)
        ag.synchronize()
        stats = ag.tenants()
        assert all(len(stats[name].latencies_s) == 3 and min(stats[name].latencies_s) > 0
                   for name in outs)


def test_work_outside_any_partition_still_runs_on_every_sm():
    with ag.configure(backend="cuda"):
        where = ag.cuda_kernel(WHERE, "where", out=["out"])
        with ag.tenant("part-gpu-walled", sms=32):
            pass
        out = ag.zeros(264 * 4, np.uint32)
        where[264 * 4, 64](out, np.int64(200_000))
        assert len(set(out.numpy().tolist())) > 100


@needs_two
def test_a_partition_holds_on_every_gpu_of_the_runtime():
    with ag.configure(backend="cuda", devices="all"):
        where = ag.cuda_kernel(WHERE, "where", out=["out"])
        walled = ag.tenant("part-gpu-every", sms=24)
        outs = []
        for gpu in (0, 1):
            out = ag.zeros(264, np.uint32)
            with ag.device(gpu), walled:
                where[264, 64](out, np.int64(100_000))
            outs.append(out)
        for out in outs:
            assert 0 < len(set(out.numpy().tolist())) <= 24


def test_a_partition_given_back_frees_its_sms_and_the_launch_lanes():
    with ag.configure(backend="cuda"):
        where = ag.cuda_kernel(WHERE, "where", out=["out"])
        rt = current_runtime()
        backend = rt.backend
        lanes = backend.single_node_graphs
        index = rt.tenant_index("part-gpu-moved", "normal")
        with rt._lock:                          # (as a regulation plan moves it)
            rt.partition_tenant(index, 120)
        assert not backend.single_node_graphs
        inside = ag.zeros(264, np.uint32)
        with ag.tenant("part-gpu-moved"):
            where[264, 64](inside, np.int64(100_000))
        assert 0 < len(set(inside.numpy().tolist())) <= 120
        with rt._lock:
            rt.partition_tenant(index, None)
        assert backend.single_node_graphs == lanes
        with ag.tenant("part-gpu-next", sms=120):    # (fits only if the SMs came back)
            pass
        out = ag.zeros(264 * 4, np.uint32)
        with ag.tenant("part-gpu-moved"):
            where[264 * 4, 64](out, np.int64(200_000))
        assert len(set(out.numpy().tolist())) > 100     # (on any SM again)


def test_tenants_a_plan_puts_in_one_partition_run_on_its_sms_and_not_the_leads():
    with ag.configure(backend="cuda"):
        where = ag.cuda_kernel(WHERE, "where", out=["out"])
        names = ("part-gpu-lead", "part-gpu-one", "part-gpu-two")
        scopes = [ag.tenant(n, priority="high" if n == names[0] else "normal") for n in names]
        for scope in scopes:
            with scope:
                pass
        rest = current_runtime().backend.partitionable_sms() - 40
        plan = ag.Plan(partitions={names[0]: 40, names[1]: rest, names[2]: rest},
                       shared=names[1:])
        ag.regulate(plan=plan)
        outs = [ag.zeros(264, np.uint32) for _ in names]
        for _ in range(2):
            for scope, out in zip(scopes, outs):
                with scope:
                    where[264, 64](out, np.int64(200_000))
        lead, one, two = (set(out.numpy().tolist()) for out in outs)
        assert 0 < len(lead) <= 40 and len(one | two) <= rest
        assert not lead & (one | two)
        assert len(one | two) > 40          # (the shared partition: more than the lead's)
        ag.regulate(plan="off")
        assert current_runtime().backend._green.ledger.owners == {}


@needs_two
def test_a_partition_that_fails_on_one_gpu_is_made_on_none():
    with ag.configure(backend="cuda", devices="all"):
        first, second = current_runtime().backend.parts
        second.reserve_sms("part-gpu-blocker", 8)
        total = sum(second._green.ledger.groups)    # (what a device can partition)
        with pytest.raises(ValueError, match="part-gpu-both"):
            with ag.tenant("part-gpu-both", sms=total):     # (fits the first GPU only)
                pass
        assert first._green.ledger.free_sms() == total     # (given back there)
