"""The runtime's counters (``asyncgpu.core.statistics.Counters``): C integers in the compiled
``CountersBase`` where it is built (asyncgpu/csrc/counters.c), slots otherwise. What a user
sees is the same either way: ints in ``asyncgpu.statistics()``, counted by every launch."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgpu as ag
from asyncgpu.core import compiled as _compiled
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


@pytest.mark.skipif(_compiled.speedups is None, reason="asyncgpu._speedups is not built")
def test_the_compiled_counts_are_the_python_ones():
    assert _compiled.speedups.CountersBase.counts() == COUNTS
    assert isinstance(Counters(), _compiled.speedups.CountersBase)
    with pytest.raises(OverflowError):
        Counters().kernels = 1 << 64


def test_launches_count_the_same_with_compiled_and_python_methods():
    def run():
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
            return {name: getattr(after, name) - getattr(before, name)
                    for name in ("kernels", "nodes", "events_recorded", "nodes_retired")}, \
                sum(after.edges.values()) - sum(before.edges.values())

    compiled = _compiled.in_use()
    try:
        results = [run()]
        _compiled.use(False)
        results.append(run())
    finally:
        _compiled.use(compiled)
    assert results[0] == results[1]
    counts, edges = results[0]
    assert counts["kernels"] == 50 and counts["nodes"] >= 50 and edges >= 49
