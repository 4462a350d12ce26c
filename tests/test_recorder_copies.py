"""Explicit memory and the recorder: host-current inputs are copied in *inside* the graph.

A replay whose inputs the host rewrote is one node (no copy node per input), its results equal
the eager ones, a change in which inputs are host-current selects (or captures) another graph,
and the happens-before checker sees the copies inside the graph like any other access.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from asyncgpu.runtime.array import DEVICE, HOST
from asyncgpu.core.errors import RaceError

from recorder_kernels import N, captured_graphs, doubling, kernels

BOTH = HOST | DEVICE


def test_host_written_inputs_are_copied_inside_the_replayed_graph(explicit):
    ag = explicit
    scale, add, inc = kernels(ag)
    x0 = np.arange(N, dtype=np.float32)
    x, y, z, w = ag.empty(N, np.float32), *(ag.empty(N, np.float32) for _ in range(3))

    @ag.graph
    def step():
        scale[1, N](x, y, np.float32(2), N)
        scale[1, N](x, z, np.float32(3), N)
        add[1, N](y, z, w, N)

    for i in range(6):
        x[...] = x0 + i                     # the host rewrites the input every iteration
        before = ag.statistics()
        step()
        after = ag.statistics()
        np.testing.assert_array_equal(w.numpy(), 5 * (x0 + i))
        if i >= 1:
            assert step.outcome == "replayed"
        if i >= 2:      # (the capture may also copy x in to time the launches for the lanes)
            # the graph and its copy back of w (``graph_read_back``), no copy node in
            copied_back = after.copies_to_host - before.copies_to_host
            assert copied_back <= 1
            assert after.nodes - before.nodes == 1 + copied_back
            assert after.copies_to_device - before.copies_to_device == 1
            assert after.bytes_to_device - before.bytes_to_device == x.nbytes
    assert ag.statistics().graphs_recorded == 1


def test_after_a_replay_copy_only_inputs_are_current_on_both_sides(explicit):
    ag = explicit
    x, y, step = doubling(ag)

    for i in range(3):
        x[...] = i
        step()
    assert step.outcome == "replayed"
    assert x._alloc.location == BOTH          # copied in, not written: no copy back needed
    assert y._alloc.location == DEVICE
    before = ag.statistics().copies_to_host
    np.testing.assert_array_equal(x.numpy(), np.full(N, 2, np.float32))
    assert ag.statistics().copies_to_host == before
    np.testing.assert_array_equal(y.numpy(), np.full(N, 4, np.float32))


def test_which_inputs_are_host_current_selects_the_graph(explicit):
    """Iterations alternate between rewriting x and not: two graphs, both correct."""
    ag = explicit
    scale, add, inc = kernels(ag)
    x = ag.zeros(N, np.float32)
    y = ag.zeros(N, np.float32)

    @ag.graph
    def step():
        inc[1, N](x, N)
        add[1, N](x, x, y, N)

    want_x = 0.0
    outcomes = []
    for i in range(8):
        if i % 2 == 0:
            x[...] = 10 * i
            want_x = 10 * i
        step()
        want_x += 1
        outcomes.append(step.outcome)
        np.testing.assert_array_equal(x.numpy(), np.full(N, want_x, np.float32))
        np.testing.assert_array_equal(y.numpy(), np.full(N, 2 * want_x, np.float32))
    # the second call captures (x host-current); the third captures the other variant
    assert outcomes == ["recorded"] + ["replayed"] * 7
    assert ag.statistics().graphs_recorded == 2


def test_static_replay_picks_the_graph_for_the_inputs_locations(explicit):
    ag = explicit
    scale, add, inc = kernels(ag)
    x, y = ag.zeros(N, np.float32), ag.zeros(N, np.float32)
    runs = []

    @ag.graph(static=True)
    def step(x, y):
        runs.append(1)
        scale[1, N](x, y, np.float32(3), N)

    for i in range(4):
        x[...] = i
        step(x, y)
        np.testing.assert_array_equal(y.numpy(), np.full(N, 3 * i, np.float32))
    assert len(runs) == 2                     # recorded, captured; then no body
    for _ in range(3):                        # x stays on the device: another graph
        step(x, y)
        np.testing.assert_array_equal(y.numpy(), np.full(N, 9, np.float32))
    assert len(runs) == 3                     # one body run captures that variant
    x[...] = 7
    step(x, y)                                # the first variant again, no body
    assert len(runs) == 3
    np.testing.assert_array_equal(y.numpy(), np.full(N, 21, np.float32))


@pytest.mark.pure     # (replaces a method of the stream manager)
def test_a_failed_replay_leaves_the_inputs_host_current(explicit, monkeypatch):
    ag = explicit
    from asyncgpu.runtime.current import current_runtime

    x, y, step = doubling(ag)

    for i in range(2):
        x[...] = i
        step()
    x[...] = 5
    manager = type(current_runtime().streams)

    def refuse(self, node, parents):
        raise RuntimeError("injected before the launch")

    with monkeypatch.context() as patch:
        patch.setattr(manager, "choose", refuse)
        with pytest.raises(RuntimeError, match="injected"):
            step()
    assert x._alloc.location == HOST          # the copy never ran: the host copy is current
    step()
    np.testing.assert_array_equal(y.numpy(), np.full(N, 10, np.float32))


def test_a_dropped_copy_wait_is_caught(explicit, monkeypatch):
    """Without the wait for the copy inside the graph, the checker reports the race."""
    ag = explicit
    from asyncgpu.recorder import capture as _graph_capture

    x, y, step = doubling(ag)
    real = _graph_capture._copies

    def no_waits(be, launches, order, copy_in):
        copies, needs = real(be, launches, order, copy_in)
        return copies, [-1] * len(needs)

    monkeypatch.setattr(_graph_capture, "_copies", no_waits)

    x[...] = 1
    step()
    x[...] = 2
    with pytest.raises(RaceError):
        step()
        ag.synchronize()


def test_managed_memory_graphs_copy_nothing(managed_memory):
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=0):
        x, y, step = doubling(ag)

        for i in range(3):
            x[...] = i
            step()
        assert step.outcome == "replayed"
        frozen = captured_graphs()
        assert [f.copy_in for f in frozen] == [()]
        np.testing.assert_array_equal(y.numpy(), np.full(N, 4, np.float32))


def test_a_host_written_output_the_graph_overwrites_is_not_copied(explicit):
    ag = explicit
    x, y, step = doubling(ag)

    for i in range(4):
        x[...] = i
        y[...] = np.nan                          # host-current, but overwritten by the graph
        before = ag.statistics()
        step()
        after = ag.statistics()
        np.testing.assert_array_equal(y.numpy(), np.full(N, 2 * i, np.float32))
    assert step.outcome == "replayed"
    assert after.copies_to_device - before.copies_to_device == 1       # x only
    assert after.bytes_to_device - before.bytes_to_device == x.nbytes


@pytest.mark.parametrize("order", ["opara", "ios"])
def test_variants_share_one_schedule(order):
    """A second variant (other inputs host-current) reuses the first one's streams and order:
    the timed capture-time search is not run again, and both follow the same schedule."""
    import asyncgpu as ag
    from asyncgpu.recorder import capture as _graph_capture

    with ag.configure(backend="sim", sim_seed=0, memory="explicit", graph_order=order):
        scale, add, inc = kernels(ag)
        x, y, z, w = (ag.zeros(N, np.float32) for _ in range(4))

        @ag.graph
        def step():
            scale[1, N](x, y, np.float32(2), N)
            scale[1, N](x, z, np.float32(3), N)
            add[1, N](y, z, w, N)

        planned = []
        real = _graph_capture.plan
        _graph_capture.plan = lambda *a, **k: planned.append(1) or real(*a, **k)
        try:
            for i in range(4):
                if i < 2:
                    x[...] = i + 1
                step()
                np.testing.assert_array_equal(w.numpy(), np.full(N, 5 * (2 if i else 1)))
        finally:
            _graph_capture.plan = real
        frozen = captured_graphs()
        assert len(frozen) == 2 and frozen[0].plan == frozen[1].plan
        assert len(planned) == 1



def doubled(y, x):
    i = cuda.grid(1)
    if i < y.shape[0]:
        y[i] = 2 * x[i]


def doubled_mirror(y, x):
    """``y = 2 x`` where ``x`` is passed reversed: each element reads the one it writes."""
    i = cuda.grid(1)
    n = y.shape[0]
    if i < n:
        y[i] = 2 * x[n - 1 - i]


@pytest.mark.parametrize("devices", [1, 2])
@pytest.mark.parametrize("static", [False, True], ids=["plain", "static"])
@pytest.mark.parametrize("read", ["same", "reversed"])
def test_an_array_passed_as_whole_output_and_as_input_gets_the_host_writes(devices, static,
                                                                           read):
    """The launch reads the array it overwrites whole: every replay copies in what the host
    wrote since (all of it, one element, or nothing), as an eager run would."""
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=devices, sim_strategy="random",
                      memory="explicit", sim_devices=devices, devices=devices):
        # (``out`` first: the launch's first access to z overwrites it whole)
        double = ag.kernel(out=["y"], const=["x"])(
            doubled if read == "same" else doubled_mirror)

        def body(out, inp):
            double[1, N](out, inp)

        step = ag.graph(body, static=True) if static else ag.graph(body)
        z = ag.zeros(N, np.float32)
        want = np.zeros(N, np.float32)
        for i in range(9):
            if i % 3 == 0:
                z[...] = want[...] = i
            elif i % 3 == 1:
                z[3] = want[3] = i
            step(z, z if read == "same" else z[::-1])
            want *= 2
            np.testing.assert_array_equal(z.numpy(), want)
        assert "replayed" in step.outcome
