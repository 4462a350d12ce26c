"""The benchmark suite at the tiny scale on the sim backend: checks pass in every mode, and each
workload's DAG has the expected shape (nodes, edges, streams)."""

from __future__ import annotations

import pytest

from benchmarks import harness
from benchmarks.workloads import WORKLOADS


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workload_passes_in_every_mode(name):
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=11, sim_strategy="random"):
        results = harness.bench_workload(ag, WORKLOADS[name], "tiny", harness.MODES, [32], 2,
                                         warmup=0, iterations=1, inputs="streaming")
        results += harness.bench_workload(ag, WORKLOADS[name], "tiny", ("parallel",), [32], 2,
                                          warmup=0, iterations=1, inputs="resident")
    bad = [(r.mode, r.inputs, r.message) for r in results if not r.ok]
    assert not bad


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workload_dag_shape(name):
    import asyncgpu as ag

    cls = WORKLOADS[name]
    nodes = harness.record_run(ag, cls, seed=5)
    edges = {(p.id, n.id) for n in nodes for p, _, _ in n.edges}
    streams = {n.stream.index for n in nodes}
    expected = cls.expected_dag
    assert len(nodes) == expected["nodes"]
    assert len(edges) == expected["edges"]
    assert len(streams) == expected["streams"]
