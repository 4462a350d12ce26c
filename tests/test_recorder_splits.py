"""Recorded steps of a tenant that splits a kernel (its own ``split=`` or a regulation plan's)
on the simulator: the kernel is recorded as its pieces, the captured graph runs each piece
after the one before whatever its streams, replays keep them, a change of plan records the
step anew, eager fallbacks issue the pieces in order, and every run equals the whole kernel's
result; on several devices too, where the pieces go to one device's graph."""

from __future__ import annotations

import itertools

import numpy as np
import programs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import cuda
from recorder_kernels import captured_graphs
from test_regulation import add_one, square

import asyncgpu as ag
from asyncgpu.core.plan import Plan
from asyncgpu.recorder import capture as _capture
from asyncgpu.recorder.keys import Piece
from asyncgpu.runtime.current import current_runtime

N = 1000


def scale(x, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        x[i] = x[i] * 0.5


def elementwise():
    """square (x -> y), add_one (x -> y) and scale (x in place), all element-wise."""
    return (ag.kernel(const=["x"], out=["y"], elementwise="n")(square),
            ag.kernel(const=["x"], out=["y"], elementwise="n")(add_one),
            ag.kernel(elementwise="n")(scale))


def before_in_graph(frozen):
    """Per kernel node of ``frozen``'s simulated graph, the kernel nodes that run before it
    inside the graph: earlier on its lane, or reached through a captured record and wait."""
    graph = frozen.graph
    seen = [set() for _ in range(graph.lanes)]
    records, before = {}, {}
    for kind, lane, arg in graph.ops:
        if kind == "kernel":
            before[arg] = set(seen[lane])
            seen[lane].add(arg)
        elif kind == "record":
            records[arg] = set(seen[lane])
        elif kind == "wait":
            seen[lane] |= records[arg]
    return before


def piece_chains(frozen):
    """The graph's nodes of each split launch, piece by piece (recorded order)."""
    node_of = {id(n.accesses): n for n in frozen.graph.nodes}
    chains = []
    for launch in frozen.launches:
        if type(launch) is Piece:
            if launch.piece == 0:
                chains.append([])
            chains[-1].append(node_of[id(launch.arrays)])
    return chains


def unordered_pieces(frozen):
    """The consecutive pieces the graph may run side by side (none when the split holds)."""
    before = before_in_graph(frozen)
    return [(a.name, i) for chain in piece_chains(frozen)
            for i, (a, b) in enumerate(itertools.pairwise(chain)) if a not in before[b]]


@pytest.mark.parametrize("memory", ["explicit", "managed"])
@pytest.mark.parametrize("strategy", ["random", "reverse", "starve"])
def test_a_recorded_split_kernel_runs_in_pieces_and_equals_the_whole(memory, strategy):
    with ag.configure(backend="sim", memory=memory, sim_strategy=strategy, sim_seed=3):
        sq, add, _ = elementwise()
        host = np.arange(float(N))
        x, y, z = ag.array(host), ag.empty(N), ag.empty(N)
        u, v = ag.array(np.ones(64)), ag.empty(64)
        splitter = ag.tenant(f"rec-splitter-{memory}-{strategy}", split={"square": 4})
        other = ag.tenant(f"rec-other-{memory}-{strategy}", priority="high")

        @ag.graph
        def step():
            sq[2, 32](x, y, N)              # split in 4
            add[2, 32](y, z, N)             # whole, after the pieces it reads

        outcomes = []
        with ag.instrument(programs.Edges()) as seen:
            for i in range(4):
                with splitter:
                    step()
                outcomes.append(step.outcome)
                with other:
                    add[1, 32](u, v, 64)
                assert z.numpy().tolist() == (host * host + 1).tolist()
                assert v.numpy().tolist() == [2.0] * 64
        assert outcomes == ["recorded", "replayed", "replayed", "replayed"]
        # the first run is issued eagerly: the pieces in order, as an eager split
        squares = [reasons for n, reasons in seen.kernels if n.name == "square"]
        assert [r.count("split") for r in squares] == [0, 1, 1, 1]
        (frozen,) = captured_graphs(step)
        assert [n.name for n in frozen.graph.nodes].count("square") == 4
        assert frozen.kernels == 2          # (a split launch is one launch of the step)
        assert unordered_pieces(frozen) == []


@pytest.mark.parametrize("streams", ["opara", "nimble", "single"])
@pytest.mark.parametrize("order", ["topological", "opara", "ios"])
def test_the_captured_graph_runs_each_piece_after_the_one_before(streams, order):
    with ag.configure(backend="sim", sim_seed=1, graph_streams=streams, graph_order=order):
        sq, add, half = elementwise()
        x, y, a, b = ag.array(np.arange(float(N))), ag.empty(N), ag.empty(N), ag.empty(N)
        w = ag.array(np.full(N, 4.0))

        @ag.graph
        def step():
            sq[2, 32](x, y, N)              # 8 pieces, ordered by the split only
            add[2, 32](x, a, N)             # 3 pieces beside them
            add[2, 32](y, b, N)             # whole
            half[2, 32](w, N)               # 3 pieces, in place

        with ag.tenant(f"orders-{streams}-{order}", split={"square": 8, "add_one": 3,
                                                            "scale": 3}):
            for _ in range(3):
                step()
        assert step.outcome == "replayed"
        (frozen,) = captured_graphs(step)
        chains = piece_chains(frozen)
        assert [len(c) for c in chains] == [8, 3, 3, 3]
        assert unordered_pieces(frozen) == []
        preds = frozen.plan[0]
        for i, launch in enumerate(frozen.launches):
            if type(launch) is Piece and launch.piece:
                assert i - 1 in preds[i]
        assert np.allclose(b.numpy(), np.arange(float(N)) ** 2 + 1)
        assert np.allclose(a.numpy(), np.arange(float(N)) + 1)
        assert np.allclose(w.numpy(), 4.0 * 0.5 ** 3)


def test_replays_keep_the_pieces_and_their_order():
    with ag.configure(backend="sim", sim_seed=4, sim_strategy="random"):
        sq, _, half = elementwise()
        x, y = ag.array(np.arange(float(N))), ag.empty(N)
        bodies = []

        @ag.graph(static=True)
        def step(x, y):
            bodies.append(1)
            half[2, 32](x, N)
            sq[2, 32](x, y, N)

        with ag.tenant("replayed-splitter", split={"scale": 2, "square": 4}):
            for i in range(6):
                step(x, y)
                assert np.allclose(y.numpy(), (np.arange(float(N)) * 0.5 ** (i + 1)) ** 2)
        assert len(bodies) == 2             # recorded, captured; then replayed without the body
        assert ag.statistics().graphs_recorded == 1
        (frozen,) = captured_graphs(step)
        assert [len(c) for c in piece_chains(frozen)] == [2, 4]
        assert unordered_pieces(frozen) == []


def last_graph():
    """The graph the current runtime launched last."""
    return current_runtime().last_replay()


def test_a_change_of_plan_records_the_step_anew_and_off_replays_the_whole_graph():
    with ag.configure(backend="sim", sim_seed=2, sim_strategy="random"):
        sq, _, _ = elementwise()
        host = np.arange(float(N))
        x, y = ag.array(host), ag.empty(N)
        tenant = ag.tenant("planned-recorder")

        @ag.graph
        def step():
            sq[2, 32](x, y, N)

        def run(times):
            outcomes = []
            for _ in range(times):
                with tenant:
                    step()
                outcomes.append(step.outcome)
                assert y.numpy().tolist() == (host * host).tolist()
            return outcomes

        assert run(3) == ["recorded", "replayed", "replayed"]
        whole = last_graph()
        assert piece_chains(whole) == []
        ag.regulate(plan=Plan({"planned-recorder": {"square": 4}}, {}))
        assert run(3) == ["recorded", "replayed", "replayed"]      # a new key: the pieces
        split = last_graph()
        assert [len(c) for c in piece_chains(split)] == [4] and unordered_pieces(split) == []
        ag.regulate(plan="off")
        assert run(2) == ["replayed", "replayed"]                   # the whole graph again
        assert last_graph() is whole
        ag.regulate(plan=Plan({"planned-recorder": {"square": 4}}, {}))
        assert run(1) == ["replayed"] and last_graph() is split     # (both stay cached)
        ag.regulate(plan="off")


def test_a_static_step_replays_the_graph_of_the_splits_in_force():
    with ag.configure(backend="sim", sim_seed=2):
        sq, _, _ = elementwise()
        host = np.arange(float(N))
        x, y = ag.array(host), ag.empty(N)
        tenant = ag.tenant("static-planned")
        bodies = []

        @ag.graph(static=True)
        def step(x, y):
            bodies.append(1)
            sq[2, 32](x, y, N)

        def run(times):
            for _ in range(times):
                with tenant:
                    step(x, y)
                assert y.numpy().tolist() == (host * host).tolist()
            return last_graph()

        whole = run(3)
        assert len(bodies) == 2             # recorded, captured; then static replays
        ag.regulate(plan=Plan({"static-planned": {"square": 4}}, {}))
        split = run(4)
        assert len(bodies) == 4             # recorded and captured anew, then static again
        assert [len(c) for c in piece_chains(split)] == [4] and unordered_pieces(split) == []
        ag.regulate(plan="off")
        assert run(3) is whole
        assert len(bodies) == 5             # the body once (it finds the whole graph), then static


def test_a_static_step_under_a_plan_splitting_other_kernels_stays_static():
    with ag.configure(backend="sim", sim_seed=2):
        sq, add, _ = elementwise()
        x, y, z = ag.array(np.arange(float(N))), ag.empty(N), ag.empty(N)
        tenant = ag.tenant("static-elsewhere")
        bodies = []

        @ag.graph(static=True)
        def step(x, y):
            bodies.append(1)
            sq[2, 32](x, y, N)

        for plan in (None, Plan({"static-elsewhere": {"add_one": 4}}, {})):
            if plan is not None:
                ag.regulate(plan=plan)
            for _ in range(3):
                with tenant:
                    step(x, y)
                    add[2, 32](y, z, N)         # (split by the plan, eagerly)
            assert z.numpy().tolist() == (np.arange(float(N)) ** 2 + 1).tolist()
        assert len(bodies) == 2             # the plan does not touch the step: still static
        ag.regulate(plan="off")


@pytest.mark.parametrize("fallback", ["host read", "library call"])
def test_a_recording_that_runs_eagerly_still_issues_the_pieces_in_order(fallback):
    import asyncgpu.cupy as acp

    with ag.configure(backend="sim", sim_seed=5, sim_strategy="random"):
        sq, add, _ = elementwise()
        host = np.arange(float(N))
        x, y, z = ag.array(host), ag.empty(N), ag.empty(N)

        @ag.graph
        def step():
            sq[2, 32](x, y, N)
            if fallback == "host read":
                float(y[0])                 # (raises: the pieces are issued first)
            else:
                acp.cumsum(x)               # (not capturable: the run goes on eagerly)
            add[2, 32](y, z, N)

        with (ag.instrument(programs.Edges()) as seen,
              ag.tenant(f"eager-splitter-{fallback}", split={"square": 4, "add_one": 2})):
            if fallback == "host read":
                with pytest.raises(ag.RecordingError, match="inside the recording"):
                    step()
            else:
                with pytest.warns(UserWarning, match="cumsum"):
                    step()
        assert step.outcome == "eager"
        assert y.numpy().tolist() == (host * host).tolist()
        launched = [(n.name, r.count("split")) for n, r in seen.kernels]
        assert launched[:4] == [("square", 0), ("square", 1), ("square", 1), ("square", 1)]
        if fallback == "library call":      # (the rest of the body ran eagerly, split)
            assert launched[4:] == [("add_one", 0), ("add_one", 1)]
            assert z.numpy().tolist() == (host * host + 1).tolist()


def test_a_dropped_piece_edge_is_caught_by_the_graph_order_not_by_the_race_checker(
        monkeypatch):
    """The pieces share no data, so the happens-before checker (which looks for unordered
    conflicting accesses) cannot see them run side by side, and the results stay right: the
    order is checked on the captured graph itself."""
    class NotAPiece:
        pass

    monkeypatch.setattr(_capture, "Piece", NotAPiece)      # (capture.py is never compiled)
    with ag.configure(backend="sim", sim_seed=1, sim_strategy="random", graph_streams="opara"):
        sq, _, _ = elementwise()
        host = np.arange(float(N))
        x, y = ag.array(host), ag.empty(N)

        @ag.graph
        def step():
            sq[2, 32](x, y, N)

        with ag.tenant("unordered-splitter", split={"square": 4}):
            for _ in range(3):
                step()                      # (no RaceError)
        assert y.numpy().tolist() == (host * host).tolist()
        (frozen,) = captured_graphs(step)
        assert len(unordered_pieces(frozen)) == 3
        assert frozen.graph.lanes == 4       # (each piece on a lane of its own)


_OPS = {"square": lambda x: x * x, "add_one": lambda x: x + 1.0}


# (squaring after adding one, three runs over, may reach infinity: the same in both runs)
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("strategy", ["random", "starve"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks=st.lists(st.tuples(st.integers(0, 2), st.booleans(),
                                 st.lists(st.tuples(st.sampled_from(["square", "add_one",
                                                                     "scale"]),
                                                    st.integers(0, 2), st.integers(0, 2)),
                                          min_size=1, max_size=4)),
                       min_size=1, max_size=4),
       length=st.integers(1, 40), pieces=st.tuples(st.integers(2, 8), st.integers(2, 8),
                                                   st.integers(2, 8)),
       seed=st.integers(0, 3), streams=st.sampled_from(["opara", "nimble"]),
       order=st.sampled_from(["topological", "opara", "ios"]))
def test_random_recorded_programs_of_split_tenants_equal_serial(strategy, blocks, length,
                                                                pieces, seed, streams, order):
    """Blocks of element-wise launches over three arrays, each block one tenant's step
    (recorded or eager); tenant 0 splits square and add_one, tenant 1 scale, tenant 2
    nothing. The program runs three times (recorded, captured, replayed), each time equal to
    NumPy's serial run, and every captured graph runs its pieces in order."""
    rng = np.random.default_rng(seed)
    init = [rng.integers(0, 8, length) / 8.0 for _ in range(3)]
    expected = [a.copy() for a in init]

    def serial_once():
        for _, _, ops in blocks:
            for name, src, dst in ops:
                if name == "scale" or src == dst:
                    expected[dst] = expected[dst] * 0.5
                else:
                    expected[dst] = _OPS[name](expected[src])

    with ag.configure(backend="sim", sim_seed=seed, sim_strategy=strategy,
                      graph_streams=streams, graph_order=order):
        sq, add, half = elementwise()
        kernels = {"square": sq, "add_one": add}
        arrays = [ag.array(a) for a in init]
        tag = f"{strategy}-{seed}-{length}-{pieces}"
        tenants = [ag.tenant(f"prop-a-{tag}", split={"square": pieces[0],
                                                     "add_one": pieces[1]}),
                   ag.tenant(f"prop-b-{tag}", split={"scale": pieces[2]}),
                   ag.tenant(f"prop-c-{tag}")]

        def body(ops):
            for name, src, dst in ops:
                if name == "scale" or src == dst:
                    half[2, 4](arrays[dst], length)
                else:
                    kernels[name][2, 4](arrays[src], arrays[dst], length)

        steps = [(tenants[t], ag.graph(lambda ops=ops: body(ops)) if recorded
                  else (lambda ops=ops: body(ops))) for t, recorded, ops in blocks]
        for _ in range(3):
            for tenant, step in steps:
                with tenant:
                    step()
            serial_once()
            for got, want in zip(arrays, expected):
                assert got.numpy().tolist() == want.tolist()
        assert all(unordered_pieces(frozen) == [] for frozen in captured_graphs())


def test_on_several_devices_a_split_tenants_replays_keep_the_pieces_on_one_device():
    with ag.configure(backend="sim", sim_seed=5, sim_strategy="random", sim_devices=2,
                      devices=2):
        sq, _, _ = elementwise()
        host = np.arange(float(N))
        x, y = ag.array(host), ag.empty(N)
        whole, splitter = ag.tenant("placed-whole"), ag.tenant("placed-splitter",
                                                               split={"square": 3})

        @ag.graph
        def step():
            sq[2, 32](x, y, N)

        with whole:
            step()
        outcomes = []
        for _ in range(3):
            with splitter:
                step()
            outcomes.append(step.outcome)
            assert y.numpy().tolist() == (host * host).tolist()
        # another split setting records anew rather than replaying the whole launch's graph
        assert outcomes == ["recorded", "replayed", "replayed"]
        stats = ag.tenants()["placed-splitter"]
        assert (stats.kernels, stats.graphs) == (3, 2)
        (split,) = [g for g in captured_graphs(step) if piece_chains(g)]
        assert [len(c) for c in piece_chains(split)] == [3] and unordered_pieces(split) == []
        with whole:
            step()                          # its own key, seen once: captured now, unsplit
        assert step.outcome == "replayed"
        assert sorted(len(piece_chains(g)) for g in captured_graphs(step)) == [0, 1]


def test_on_several_devices_a_split_launch_pinned_in_a_recording_keeps_its_device():
    with ag.configure(backend="sim", sim_seed=6, sim_strategy="random", sim_devices=2,
                      devices=2):
        sq, _, _ = elementwise()
        host = np.arange(float(N))
        x, y = ag.array(host), ag.empty(N)

        @ag.graph
        def step():
            with ag.device(1):
                sq[2, 32](x, y, N)

        with ag.tenant("pinned-splitter", split={"square": 4}):
            for _ in range(3):
                step()
                assert y.numpy().tolist() == (host * host).tolist()
        assert step.outcome == "replayed"
        (frozen,) = captured_graphs(step)
        assert frozen.name.endswith("on device 1")
        assert [len(c) for c in piece_chains(frozen)] == [4] and unordered_pieces(frozen) == []
