"""``asyncgpu.graph(static=True)``: once captured, calls with the same arguments launch the graph
without running the body."""

from __future__ import annotations

import numpy as np
import pytest

from recorder_kernels import N, kernels


@pytest.fixture
def env(sim):
    return sim, kernels(sim)


def test_static_replay_skips_the_body_and_follows_host_writes(env):
    ag, (scale, add, inc) = env
    runs = []

    @ag.graph(static=True)
    def step(x, y, z):
        runs.append(1)
        scale[1, N](x, y, np.float32(2), N)
        add[1, N](x, y, z, N)
        return z

    x, y, z = ag.zeros(N, np.float32), ag.empty(N, np.float32), ag.empty(N, np.float32)
    for i in range(6):
        x[...] = np.full(N, i, np.float32)          # host write, ordered with the graph
        out = step(x, y, z)
        assert out is z
        np.testing.assert_array_equal(z.numpy(), np.full(N, 3 * i, np.float32))
    assert len(runs) == 2                           # recorded, captured; then never again
    assert step.outcome == "replayed"
    assert ag.statistics().graphs_replayed >= 5


def test_a_static_function_captures_anew_under_other_graph_options(env):
    """graph_streams and graph_order decide how a graph is scheduled: after a change, a
    static call runs its body again and is captured with the new schedule, as a recorded
    function's key changes; back under the old options, one run of the body finds the old
    graph, which replays."""
    ag, (scale, add, inc) = env
    runs = []

    @ag.graph(static=True)
    def step(x):
        runs.append(1)
        inc[1, N](x, N)
        inc[1, N](x, N)

    x = ag.zeros(N, np.float32)
    for _ in range(3):
        step(x)
    assert len(runs) == 2
    with ag.configure(graph_streams="single", graph_order="opara"):
        for _ in range(3):
            step(x)
        assert len(runs) == 4 and step.outcome == "replayed"
    step(x)
    assert len(runs) == 5 and step.outcome == "replayed"
    step(x)
    assert len(runs) == 5 and step.outcome == "replayed"
    np.testing.assert_array_equal(x.numpy(), np.full(N, 16, np.float32))


def test_a_static_function_stops_running_its_body_again_after_the_memory_model_changes(env):
    """configure(memory=...) destroys the graphs: a static function records and captures
    once more under the new model, then launches its graph without running the body (it ran
    the body at every call, trying the destroyed graph first)."""
    ag, (scale, add, inc) = env
    runs = []

    @ag.graph(static=True)
    def step(x, y):
        runs.append(1)
        scale[1, N](x, y, np.float32(2), N)

    x, y = ag.zeros(N, np.float32), ag.empty(N, np.float32)
    value = 0
    for memory in ("explicit", "managed", "explicit"):
        ag.configure(memory=memory)
        before = len(runs)
        for _ in range(5):
            value += 1
            x[...] = np.float32(value)          # host write: the explicit graph copies x in
            replayed = ag.statistics().graphs_replayed
            step(x, y)
            np.testing.assert_array_equal(y.numpy(), np.full(N, 2 * value, np.float32))
        assert len(runs) - before == 2, memory  # recorded, captured; then never again
        assert step.outcome == "replayed"
        assert ag.statistics().graphs_replayed == replayed + 1


def test_a_static_call_with_a_freed_argument_names_the_kernel_and_argument(env):
    ag, (scale, _, _) = env

    @ag.graph(static=True)
    def step(x, y):
        scale[1, N](x, y, np.float32(2), N)

    x, y = ag.ones(N, np.float32), ag.empty(N, np.float32)
    for _ in range(3):
        step(x, y)
    x.free()
    with pytest.raises(ag.FreedArrayError, match=r"kernel 'scale' .* argument 0 'x': array "
                                                 r"float32\[64\] has been freed"):
        step(x, y)
    x = ag.ones(N, np.float32)
    step(x, y)                                      # the runtime goes on
    np.testing.assert_array_equal(y.numpy(), np.full(N, 2, np.float32))


def test_static_replay_keys_on_arrays_and_scalars(env):
    ag, (scale, add, inc) = env
    runs = []

    @ag.graph(static=True)
    def scaled(x, y, a):
        runs.append(a)
        scale[1, N](x, y, np.float32(a), N)

    x = ag.array(np.arange(N, dtype=np.float32))
    y, w = ag.empty(N, np.float32), ag.empty(N, np.float32)
    for _ in range(3):
        scaled(x, y, 2.0)
    assert runs == [2.0, 2.0]
    scaled(x, y, -0.0)                              # another scalar: the body runs
    scaled(x, w, 2.0)                               # another output array: the body runs
    assert runs == [2.0, 2.0, -0.0, 2.0]
    np.testing.assert_array_equal(w.numpy(), 2 * np.arange(N, dtype=np.float32))


def test_static_freezes_what_the_body_reads_outside_its_arguments(env):
    """The documented hazard: a global scalar is frozen at capture."""
    ag, (scale, add, inc) = env
    factor = {"a": 2.0}

    @ag.graph(static=True)
    def scaled(x, y):
        scale[1, N](x, y, np.float32(factor["a"]), N)

    x = ag.array(np.ones(N, np.float32))
    y = ag.empty(N, np.float32)
    scaled(x, y)
    scaled(x, y)
    factor["a"] = 5.0
    scaled(x, y)                                    # replayed: still 2
    np.testing.assert_array_equal(y.numpy(), np.full(N, 2, np.float32))
    scaled.clear()                                  # forget the graphs: the body runs again
    scaled(x, y)
    np.testing.assert_array_equal(y.numpy(), np.full(N, 5, np.float32))


def test_static_with_unkeyable_arguments_runs_the_body(env):
    ag, (scale, add, inc) = env
    runs = []

    @ag.graph(static=True)
    def bump(x, tag):
        runs.append(tag)
        inc[1, N](x, N)

    x = ag.zeros(N, np.float32)
    for _ in range(3):
        bump(x, ["not", "hashable"])
    assert len(runs) == 3
    np.testing.assert_array_equal(x.numpy(), np.full(N, 3, np.float32))


def test_static_and_split_are_exclusive(env):
    ag, _ = env
    with pytest.raises(ValueError, match="static"):
        ag.graph(lambda: None, split=True, static=True)


def test_a_read_only_graph_behind_a_live_writer_counts_an_edge_per_launch():
    """Each launch of a graph that only reads ``x`` waits for the unfinished writer of ``x``:
    one RAW edge per call in ``statistics().edges``, the repeated launches' included."""
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=0, sim_strategy="lazy"):
        _, _, inc = kernels(ag)
        peek = ag.cuda_kernel('extern "C" __global__ void peek(const float* x, int n) { }',
                              "peek", sim=lambda x, n: None)
        x = ag.ones(N, np.float32)

        @ag.graph(static=True)
        def reader():
            peek[1, N](x, N)

        inc[1, N](x, N)
        ag.synchronize()
        before = ag.statistics().edges["RAW"]
        inc[1, N](x, N)                  # left unfinished by the lazy simulator
        for call in range(1, 5):
            reader()
            assert ag.statistics().edges["RAW"] - before == call
        assert reader.outcome == "replayed"
