"""A graph launched again with nothing committed in between takes its previous launch as its only
parent (``Runtime.launch_graph``): random sequences of repeated launches, eager work, host
accesses and frees, under random simulated schedules with the happens-before checker on, equal
the same sequence run serially without graphs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from recorder_kernels import N, kernels

OPS = ("g1", "g1", "g2", "g2", "static", "eager", "read", "write", "partial", "free", "sync")


def _run(ag, ops, graphs):
    scale, add, inc = kernels(ag)
    a, b, c, d = (ag.array(np.arange(N, dtype=np.float32) + i) for i in range(4))

    def g1():
        scale[1, N](a, b, np.float32(2), N)
        add[1, N](b, c, d, N)

    def g2():
        inc[1, N](c, N)

    def g3(x, y):
        add[1, N](x, y, x, N)       # x += y

    if graphs:
        g1, g2 = ag.graph(g1), ag.graph(g2)
        g3 = ag.graph(g3, static=True)
    reads = []
    for i, op in enumerate(ops):
        if op == "g1":
            g1()
        elif op == "g2":
            g2()
        elif op == "static":
            g3(d, c)
        elif op == "eager":
            inc[1, N](a, N)
        elif op == "read":
            reads.append(d.numpy())
        elif op == "write":
            a[...] = np.full(N, i, np.float32)
        elif op == "partial":
            c[:8] = np.float32(-i)
        elif op == "free":
            t = ag.empty(N, np.float32)
            inc[1, N](t, N)
            del t
        else:
            ag.synchronize()
    return reads + [x.numpy() for x in (a, b, c, d)]


@pytest.mark.parametrize("strategy", ["random", "pct", "reverse", "starve"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.sampled_from(OPS), min_size=1, max_size=24), seed=st.integers(0, 3))
@example(ops=["g2", "g2", "g1", "g2", "g1", "read"], seed=0)      # g1 committed between g2s
@example(ops=["g1", "g1", "eager", "g1", "read"], seed=1)
@example(ops=["static", "static", "g2", "static", "partial", "static", "read"], seed=2)
def test_repeated_graph_launches_equal_serial(strategy, ops, seed):
    import asyncgpu as ag

    with ag.configure(backend="sim", execution="sync", sim_strategy="eager"):
        want = _run(ag, ops, graphs=False)
    with ag.configure(backend="sim", sim_seed=seed, sim_strategy=strategy):
        got = _run(ag, ops, graphs=True)
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)


def test_a_repeated_launch_waits_only_for_the_previous_one(sim):
    ag = sim
    scale, add, inc = kernels(ag)
    x = ag.zeros(N, np.float32)

    @ag.graph
    def twice():
        inc[1, N](x, N)
        inc[1, N](x, N)

    with ag.trace() as t:
        for _ in range(5):
            twice()
    assert float(x[0]) == 10.0
    graphs = [n for n in t.nodes if n.kind == "graph"]
    assert len(graphs) >= 3
    for earlier, later in zip(graphs, graphs[1:]):
        assert [p for p, _, _ in later.parents] == [earlier.id]
