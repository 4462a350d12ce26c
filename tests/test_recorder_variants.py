"""A replayed graph's memory bookkeeping under the explicit model.

``FrozenGraph.host_current`` says which inputs are current only on the host (so which variant
of a key launches, the one that copies exactly those in), and ``ExplicitMemory.before_graph``
and ``after_graph`` book the locations around a graph's launch and count its copies. For any
state of the allocations a graph touches, after the booking every allocation it touches is
current on the device and those it only copies in are current on both sides; a remembered run
is matched only while its arrays live; and a user program that rewrites inputs between replays
(so variants are chosen and copies booked on every call) computes what it computes unrecorded.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recorder_kernels import N, captured_graphs, kernels
from test_schedule_options import fresh_sim, statistics

import asyncgpu as ag
from asyncgpu.runtime.array import DEVICE, HOST
from asyncgpu.runtime.current import current_runtime

BOTH = HOST | DEVICE
LOCATIONS = st.sampled_from([HOST, DEVICE, BOTH])


def three_kernel_graph():
    """A graph with an input it reads (x), one it overwrites whole first (y), one it reads and
    writes (w), and an empty array it reads (e): (frozen graph, its arrays)."""
    scale, add, inc = kernels(ag)
    x, y, z, w = (ag.zeros(N, np.float32) for _ in range(4))
    e = ag.zeros(0, np.float32)

    @ag.graph
    def step():
        scale[1, N](x, y, np.float32(2), N)     # y: written whole before any read
        add[1, N](y, w, z, N)
        inc[1, N](w, N)
        scale[1, N](e, e, np.float32(1), 0)

    for _ in range(3):
        x[...] = 1.0
        step()
    ag.synchronize()
    (frozen,) = captured_graphs(step)
    return frozen, (x, y, z, w, e)


def locations(arrays):
    return [a._alloc.location for a in arrays]


def set_locations(arrays, where):
    for a, loc in zip(arrays, where):
        a._alloc.location = loc


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=st.lists(LOCATIONS, min_size=5, max_size=5), settled=st.booleans())
def test_host_current_and_the_booking_leave_everything_current_on_the_device(where, settled):
    with fresh_sim(memory="explicit"):
        rt = current_runtime()
        frozen, arrays = three_kernel_graph()
        x, y, z, w, e = (a._alloc for a in arrays)
        assert frozen.inputs == (x, w, e) and frozen.overwritten == (y, z)
        assert frozen.copy_in == (x,)       # (x was host-current at the capture)
        frozen.settled = rt.host_epoch if settled else rt.host_epoch - 1
        set_locations(arrays, where)
        # while the epoch stands still nothing is host-current; else the inputs with bytes
        # whose current copy is the host's, in order
        expected = () if settled else tuple(a for a, loc in zip((x, w), (where[0], where[3]))
                                            if loc == HOST)
        assert frozen.host_current(rt) == expected

        stats0 = statistics()
        booked = rt.memory.before_graph(frozen)
        assert booked == (x,) + tuple(a for a, loc in zip((y, z), where[1:3]) if loc == HOST)
        assert locations(arrays) == [BOTH, DEVICE, DEVICE, DEVICE, where[4]]
        rt.memory.after_graph(frozen)
        stats1 = statistics()
        assert locations(arrays) == [BOTH, DEVICE, DEVICE, DEVICE, where[4]]
        assert stats1["copies_to_device"] - stats0["copies_to_device"] == 1
        assert stats1["bytes_to_device"] - stats0["bytes_to_device"] == x.nbytes
        set_locations(arrays, [DEVICE] * 5)


def test_the_graph_books_what_the_host_wrote_and_what_it_writes():
    """After a replay whose input x the host rewrote, x is current on both sides and what the
    graph writes is on the device only."""
    with fresh_sim(memory="explicit"):
        rt = current_runtime()
        frozen, (x, y, z, w, e) = three_kernel_graph()
        x[...] = 5.0
        assert frozen.host_current(rt) == (x._alloc,)
        booked = rt.memory.before_graph(frozen)
        assert x._alloc in booked
        assert x._alloc.location == BOTH
        assert {y._alloc.location, z._alloc.location, w._alloc.location} == {DEVICE}
        rt.memory.graph_not_launched(booked)        # (nothing ran: undo the booking)


def test_a_memo_is_remembered_until_one_of_its_arrays_is_freed():
    """``_remember`` matches launches against the previous run only while all of its arrays
    live: freeing another array keeps the replays going; freeing one of the memo's makes the
    next call key its launches in full."""
    with fresh_sim(memory="explicit"):
        scale, add, inc = kernels(ag)
        x, y, tmp = (ag.zeros(N, np.float32) for _ in range(3))

        @ag.graph
        def step(a):
            inc[1, N](a, N)

        outcomes = []
        for i in range(8):
            if i == 3:
                tmp.free()          # moves the explicit-free count: the memo is checked
            if i == 5:
                x.free()            # one of the memo's arrays
            step(x if i < 5 else y)
            outcomes.append(step.outcome)
        assert outcomes[3:5] == ["replayed", "replayed"]
        assert outcomes[5] == "recorded"
        assert y.numpy().tolist() == [3.0] * N


def run_rewrites(pattern, recorded: bool):
    """A step, recorded or not, whose inputs the host rewrites in ``pattern`` between calls (so
    the variant launched changes): (outcomes, values)."""
    with fresh_sim(memory="explicit"):
        scale, add, inc = kernels(ag)
        x, v, y, z = (ag.zeros(N, np.float32) for _ in range(4))

        def body():
            scale[1, N](x, y, np.float32(2), N)
            add[1, N](y, v, z, N)

        step = ag.graph(body) if recorded else body
        seen = []
        for i, (rx, rv) in enumerate(pattern):
            if rx:
                x[...] = float(i)
            if rv:
                v[:4] = float(-i)
            step()
            seen.append(getattr(step, "outcome", None))
        return seen, z.numpy().tolist()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=2, max_size=10))
def test_rewritten_inputs_replay_what_the_unrecorded_calls_compute(pattern):
    outcomes, values = run_rewrites(pattern, True)
    assert values == run_rewrites(pattern, False)[1]
    assert outcomes[0] == "recorded" and outcomes[1] == "replayed"
