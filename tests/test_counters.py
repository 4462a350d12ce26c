"""The runtime's counters (``asyncgpu.core.statistics.Counters``): what a user sees are ints in
``asyncgpu.statistics()``, counted by every launch."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

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


@pytest.mark.parametrize("pieces", [1, 4])
def test_data_edges_counted_are_the_edges_instruments_see_also_for_split_launches(pieces):
    from collections import Counter

    class Edges:
        def __init__(self):
            self.reasons = Counter()

        def edge_added(self, parent, child, reason, array):
            self.reasons[reason] += 1

    with ag.configure(backend="sim", sim_seed=4):
        k = ag.kernel(const=["x"], out=["y"], elementwise="n")(square)
        x, y, z = ag.array(np.arange(64.0)), ag.empty(64), ag.empty(64)
        before = ag.statistics()
        split = {"square": pieces} if pieces > 1 else None
        with ag.instrument(Edges()) as seen, ag.tenant(f"edges-{pieces}", split=split):
            k[2, 32](x, y, 64)
            k[2, 32](y, z, 64)
        counted = (ag.statistics() - before).edges
        assert dict(counted) == {r: n for r, n in seen.reasons.items() if r in ("RAW", "WAR",
                                                                              "WAW")}
        assert counted["RAW"] >= 1
        np.testing.assert_array_equal(z.numpy(), np.arange(64.0) ** 4)


def square(x, y, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = x[i] * x[i]


def test_a_snapshot_hashes_as_its_values(sim):
    """A frozen snapshot can be a set member or a dict key (its tables raised
    ``TypeError: unhashable type: 'mappingproxy'``)."""
    a = ag.zeros(4)
    b = a + 1
    first, again = ag.statistics(), ag.statistics()
    assert first == again and hash(first) == hash(again) and len({first, again}) == 1
    c = b * 2
    later = ag.statistics()
    assert later != first and len({first, later}) == 2
    assert float(c.sum()) == 8.0
