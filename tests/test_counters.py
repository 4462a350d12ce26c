"""The runtime's counters (``asyncgpu.core.statistics.Counters``): what a user sees are ints in
``asyncgpu.statistics()``, counted by every launch."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgpu as ag
from asyncgpu.core.statistics import COUNTS, Counters


def test_every_count_reads_and_writes_as_an_int():
    c = Counters()
    for i, name in enumerate(COUNTS):
        assert getattr(c, name) == 0 and type(getattr(c, name)) is int
        setattr(c, name, getattr(c, name) + (1 << 40) + i)
    assert [getattr(c, name) for name in COUNTS] == [(1 << 40) + i for i in range(len(COUNTS))]
    assert c.edges == {"RAW": 0, "WAR": 0, "WAW": 0} and c.streams_used == set()
    snap = c.snapshot("sim", 0)
    assert snap.kernels == (1 << 40) + COUNTS.index("kernels")


def test_every_launch_counts():
    with ag.configure(backend="sim", sim_seed=3):
        k = ag.cuda_kernel(
            'extern "C" __global__ void inc(float* x) { x[threadIdx.x] += 1; }', "inc",
            sim=lambda x: x.__setitem__(slice(None), x + 1))
        x = ag.zeros(32, np.float32)
        before = ag.statistics()
        for _ in range(50):
            k[1, 32](x)
        assert float(x[0]) == 50.0
        after = ag.statistics()
    counts = {name: getattr(after, name) - getattr(before, name)
              for name in ("kernels", "nodes", "events_recorded", "nodes_retired")}
    assert all(type(getattr(after, name)) is int for name in counts)
    assert counts["kernels"] == 50 and counts["nodes"] >= 50
    assert counts["events_recorded"] >= 1 and counts["nodes_retired"] >= 1
    assert sum(after.edges.values()) - sum(before.edges.values()) >= 49


def test_counters_after_errors_count_what_ran(sim):
    import asyncgpu.cupy as acp
    from numba import cuda

    ag = sim

    @ag.kernel
    @cuda.jit
    def faults(x):
        x[100] = 1.0

    a, b = acp.zeros(3), acp.zeros(4)
    before = ag.statistics()
    for _ in range(3):
        with pytest.raises(ValueError):
            acp.add(a, b)                           # refused: nothing ran
    refused = ag.statistics()
    assert refused.calls == before.calls
    x = ag.zeros(4, np.float32)
    faults[1, 1](x)
    faults[1, 1](x)
    with pytest.raises(ag.KernelFault):
        ag.synchronize()
    after = ag.statistics()
    assert after.inflight == 0 and after.nodes_retired - refused.nodes_retired == after.nodes - \
        refused.nodes                               # (the faulted nodes are done, not in flight)
