"""A steady segment's graph starts at its last launch (``Recording.repeated``), not at the host
operation or the body's end that follows: what the user can see (when ``graphs_replayed``
moves, the outcomes, the values) and what must not change (a body whose launches vary is not
cut at its shorter run's length for good, an exception after the launch runs nothing twice)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from recorder_kernels import N, kernels

def test_a_steady_segment_launches_its_graph_at_its_last_launch(sim):
    ag = sim
    scale, add, inc = kernels(ag)
    x = ag.zeros(N, np.float32)
    inside = []

    @ag.graph
    def step():
        inc[1, N](x, N)
        inc[1, N](x, N)
        inside.append(ag.statistics().graphs_replayed)   # the body is still running here

    after = []
    for _ in range(5):
        step()
        after.append(ag.statistics().graphs_replayed)
    # run 1 records; run 2 captures at the body's end (its memo becomes steady there); from
    # run 3 on the graph is launched by the second launch, before the body goes on
    assert after == [0, 1, 2, 3, 4]
    assert inside == [0, 0, 2, 3, 4]
    np.testing.assert_array_equal(x.numpy(), np.full(N, 10, np.float32))


def test_split_segments_launch_before_their_host_operation(sim):
    ag = sim
    scale, add, inc = kernels(ag)
    x, y = ag.zeros(N, np.float32), ag.zeros(N, np.float32)
    before_read, reads = [], []

    @ag.graph(split=True)
    def step():
        inc[1, N](x, N)
        scale[1, N](x, y, np.float32(2), N)
        before_read.append(ag.statistics().graphs_replayed)
        reads.append(float(y[0]))            # the host operation that ended the first runs
        inc[1, N](y, N)
        return float(y[1])

    results = [step() for _ in range(4)]
    assert step.outcome == "replayed+replayed"
    # two graphs a run from run 2 on; from run 3 the first is launched before the read
    assert before_read == [0, 0, 3, 5]
    assert reads == [2.0, 4.0, 6.0, 8.0] and results == [3.0, 5.0, 7.0, 9.0]


def test_a_body_that_goes_on_after_a_steady_memo_is_not_cut_for_good(sim):
    ag = sim
    scale, add, inc = kernels(ag)
    x = ag.zeros(N, np.float32)

    @ag.graph
    def step(twice):
        inc[1, N](x, N)
        if twice:
            inc[1, N](x, N)

    outcomes = []
    for twice in [False] * 3 + [True] * 4:
        step(twice)
        outcomes.append(step.outcome)
    # the first long run is cut where the short runs ended (its second launch starts a segment
    # of its own); the next keys the whole body again, and then the body is one graph again
    assert outcomes == ["recorded", "replayed", "replayed",
                        "replayed+recorded", "recorded", "replayed", "replayed"]
    np.testing.assert_array_equal(x.numpy(), np.full(N, 11, np.float32))


def test_an_exception_after_the_early_launch_runs_nothing_twice(sim):
    ag = sim
    scale, add, inc = kernels(ag)
    x = ag.zeros(N, np.float32)

    @ag.graph
    def step(fail):
        inc[1, N](x, N)
        inc[1, N](x, N)
        if fail:
            raise ValueError("the user's own")

    for _ in range(3):
        step(False)
    with pytest.raises(ValueError, match="the user's own"):
        step(True)
    assert step.outcome == "replayed"       # (the graph launched before the body raised)
    step(False)
    assert step.outcome == "replayed"
    np.testing.assert_array_equal(x.numpy(), np.full(N, 10, np.float32))


@pytest.mark.parametrize("after", ["raise", "refused host read", "library call"])
def test_outcome_says_replayed_when_the_graph_launched_before_the_body_went_eager(sim, after):
    """A steady body's graph launches at its last launch: if the body then raises, catches a
    refused host operation or makes a library call that runs eagerly, ``outcome`` still says a
    graph was launched, as ``statistics().graphs_replayed`` does (it said "eager")."""
    ag = sim
    import asyncgpu.cupy as acp

    scale, add, inc = kernels(ag)
    x = ag.zeros(N, np.float32)

    @ag.graph
    def step(go_eager):
        inc[1, N](x, N)
        inc[1, N](x, N)
        if go_eager and after == "raise":
            raise KeyError("the user's own")
        if go_eager and after == "refused host read":
            with pytest.raises(ag.RecordingError, match="host read"):
                float(x[0])
        if go_eager and after == "library call":
            acp.cumsum(x)               # not capturable: runs eagerly, with a warning

    for _ in range(3):
        step(False)
    replayed = ag.statistics().graphs_replayed
    with pytest.raises(KeyError) if after == "raise" else (
            pytest.warns(UserWarning, match="cumsum") if after == "library call"
            else contextlib.nullcontext()):
        step(True)
    assert ag.statistics().graphs_replayed == replayed + 1
    assert step.outcome == ("replayed+eager" if after == "library call" else "replayed")
    np.testing.assert_array_equal(x.numpy(), np.full(N, 8, np.float32))


def test_a_host_write_after_a_launch_is_copied_in_by_the_next_launch(sim):
    """The run that captures a split segment ends it at a host write of the graph's input (so
    the graph is launched first), and the next run launches it at its last launch, with no host
    access in between: that launch must still copy the written input in."""
    ag = sim
    scale, add, inc = kernels(ag)
    x = ag.zeros(N, np.float32)

    @ag.graph(split=True)
    def step(write):
        inc[1, N](x, N)
        if write:
            x[...] = 5          # after the segment's graph was launched
        else:
            ag.synchronize()

    step(False)     # recorded
    step(True)      # captured without copies in (x is on the device), launched, then x written
    step(False)     # launched by its launch: x must be copied in
    np.testing.assert_array_equal(x.numpy(), np.full(N, 6, np.float32))


#: Bodies that share prefixes, so a steady memo of one is cut by another: each op is
#: ("inc", array), ("scale", source, destination), ("read", array), ("write", array) or
#: ("sync",) (host operations: with split recording each ends a segment; a write makes the
#: array's host copy the current one, which the next graph must copy in).
VARIANTS = [
    [("inc", 0)],
    [("inc", 0), ("scale", 0, 1)],
    [("inc", 0), ("scale", 0, 1), ("read", 1), ("inc", 1)],
    [("inc", 0), ("read", 0), ("inc", 0), ("scale", 0, 1)],
    [("inc", 0), ("scale", 0, 1), ("inc", 1), ("read", 1)],
    [("write", 0), ("inc", 0), ("scale", 0, 1)],
    [("inc", 0), ("write", 1), ("inc", 1), ("read", 1)],
    [("inc", 0), ("scale", 0, 1), ("write", 0)],
    [("inc", 0), ("sync",), ("scale", 0, 1), ("write", 1)],
    [("inc", 0), ("write", 0), ("scale", 0, 1), ("sync",)],
]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.integers(0, len(VARIANTS) - 1), min_size=1, max_size=16),
       runs=st.integers(1, 3), seed=st.integers(0, 3))
# a read (4) and a write (7) after the early launch: the host access that ended the runs
# before must count as after their graph's launch, or the next launch skips its bookkeeping
@example(picks=[4], runs=3, seed=0)
@example(picks=[7], runs=3, seed=0)
def test_runs_of_changing_bodies_equal_eager_runs(picks, runs, seed):
    """Each picked body, called ``runs`` times in a row, recorded with split segments: the same
    host reads and final values as the same calls without the recorder, on randomized
    execution with the sim backend's ordering checks."""
    import asyncgpu as ag

    def program(recorded: bool) -> tuple[list[float], list[bytes]]:
        reads: list[float] = []
        with ag.configure(backend="sim", sim_seed=seed, sim_strategy="random"):
            scale, add, inc = kernels(ag)
            arrays = [ag.zeros(N, np.float32), ag.zeros(N, np.float32)]

            def body(variant: int) -> None:
                for op in VARIANTS[variant]:
                    if op[0] == "inc":
                        inc[1, N](arrays[op[1]], N)
                    elif op[0] == "scale":
                        scale[1, N](arrays[op[1]], arrays[op[2]], np.float32(0.5), N)
                    elif op[0] == "sync":
                        ag.synchronize()
                    elif op[0] == "read":
                        reads.append(float(arrays[op[1]][0]))
                    else:
                        arrays[op[1]][...] = np.float32(len(reads) % 3)

            step = ag.graph(body, split=True) if recorded else body
            for variant in picks:
                for _ in range(runs):
                    step(variant)
            return reads, [a.numpy().tobytes() for a in arrays]

    assert program(True) == program(False)
