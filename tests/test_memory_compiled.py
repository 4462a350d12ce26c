"""A replayed graph's memory bookkeeping, compiled against Python.

``FrozenGraph.host_current`` (which inputs are current only on the host, so which variant of a
key launches), ``ExplicitMemory.before_graph`` and ``after_graph`` (the locations booked around
a graph's launch, and the copies counted) and ``Recording._remember`` have compiled twins
(``asyncgpu/csrc/memory.c``, ``recording.c``). For any state of the allocations a graph
touches, each twin must return what the Python one returns and leave the same locations and
statistics behind; and a user program that rewrites inputs between replays (so variants are
chosen and copies booked on every call) must run the same way with either.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recorder_kernels import N, captured_graphs, kernels
from test_scheduler_compiled import Log, fresh_sim, statistics

import asyncgpu as ag
from asyncgpu.core import compiled as _compiled
from asyncgpu.runtime.array import DEVICE, HOST
from asyncgpu.runtime.frozen import PythonFrozen
from asyncgpu.runtime.memory import PythonBooking
from asyncgpu.runtime.current import current_runtime

pytestmark = pytest.mark.skipif(_compiled.speedups is None,
                                reason="asyncgpu._speedups is not built")

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
def test_host_current_and_the_booking_agree_with_python(where, settled):
    with fresh_sim(True, memory="explicit"):
        rt = current_runtime()
        frozen, arrays = three_kernel_graph()
        base = _compiled.speedups
        frozen.settled = rt.host_epoch if settled else rt.host_epoch - 1
        set_locations(arrays, where)
        assert base.FrozenBase.host_current(frozen, rt) == PythonFrozen.host_current(frozen, rt)

        results = []
        for before_graph, after_graph in (
                (base.MemoryBase.before_graph, base.MemoryBase.after_graph),
                (PythonBooking.before_graph, PythonBooking.after_graph)):
            set_locations(arrays, where)
            stats0 = statistics()
            booked = before_graph(rt.memory, frozen)
            middle = locations(arrays)
            after_graph(rt.memory, frozen)
            stats1 = statistics()
            results.append((booked, middle, locations(arrays),
                            stats1["copies_to_device"] - stats0["copies_to_device"],
                            stats1["bytes_to_device"] - stats0["bytes_to_device"]))
        assert results[0] == results[1]
        set_locations(arrays, [DEVICE] * 5)


def test_the_graph_books_what_the_host_wrote_and_what_it_writes():
    """The compiled booking, by its visible effect: after a replay whose input x the host
    rewrote, x is current on both sides and what the graph writes is on the device only."""
    with fresh_sim(True, memory="explicit"):
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
    next call key its launches in full; compiled or not, the same outcomes and values."""
    seen = {}
    for compiled in (True, False):
        with fresh_sim(compiled, memory="explicit"):
            scale, add, inc = kernels(ag)
            x, y, tmp = (ag.zeros(N, np.float32) for _ in range(3))

            @ag.graph
            def step(a):
                inc[1, N](a, N)

            outcomes = []
            for i in range(8):
                if i == 3:
                    tmp.free()          # moves Allocation.explicit_frees: the memo is checked
                if i == 5:
                    x.free()            # one of the memo's arrays
                step(x if i < 5 else y)
                outcomes.append(step.outcome)
            seen[compiled] = (outcomes, y.numpy().tolist())
    assert seen[True] == seen[False]
    assert seen[True][0][3:5] == ["replayed", "replayed"]
    assert seen[True][0][5] == "recorded"
    assert seen[True][1] == [3.0] * N


def run_rewrites(compiled: bool, pattern):
    """A recorded step whose inputs the host rewrites in ``pattern`` between calls (so the
    variant launched changes): (outcomes, values, nodes, statistics)."""
    log = Log()
    with fresh_sim(compiled, memory="explicit"):
        scale, add, inc = kernels(ag)
        x, v, y, z = (ag.zeros(N, np.float32) for _ in range(4))

        @ag.graph
        def step():
            scale[1, N](x, y, np.float32(2), N)
            add[1, N](y, v, z, N)

        seen = []
        with ag.instrument(log):
            for i, (rx, rv) in enumerate(pattern):
                if rx:
                    x[...] = float(i)
                if rv:
                    v[:4] = float(-i)
                step()
                seen.append(step.outcome)
        values = z.numpy().tolist()
        return seen, values, log.nodes, statistics()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=2, max_size=10))
def test_rewritten_inputs_replay_the_same_way_compiled_and_in_python(pattern):
    assert run_rewrites(True, pattern) == run_rewrites(False, pattern)


def test_a_patched_host_current_is_the_one_called(monkeypatch):
    """The compiled replay asks the graph through its class: a patched method wins, for a
    recorded and for a static function."""
    from asyncgpu.runtime.frozen import FrozenGraph

    calls = []

    def spy(self, rt):
        calls.append(self.name)
        return PythonFrozen.host_current(self, rt)

    with fresh_sim(True, memory="explicit"):
        scale, add, inc = kernels(ag)
        x, y = ag.zeros(N, np.float32), ag.zeros(N, np.float32)

        def body(a, b):
            scale[1, N](a, b, np.float32(3), N)

        plain, static = ag.graph(body), ag.graph(body, static=True)
        for fn in (plain, static):
            for _ in range(3):
                x[...] = 1.0
                fn(x, y)
        with monkeypatch.context() as m:       # (undone before fresh_sim resets the twins)
            m.setattr(FrozenGraph, "host_current", spy)
            for fn in (plain, static):
                x[...] = 2.0
                before = len(calls)
                fn(x, y)
                assert fn.outcome == "replayed"
                assert len(calls) > before
        np.testing.assert_array_equal(y.numpy(), 6.0)
