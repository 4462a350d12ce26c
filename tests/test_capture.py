"""Stream capture and graphs on the sim backend: replay equals eager, the checker sees every inner
operation, capture-breaking host synchronizations raise, and graphs keep their arrays alive."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from asyncgpu.core.errors import CaptureError, RaceError
from benchmarks.handopt import Hand

from recorder_kernels import ADD, INC, N, SCALE, _add, _inc, _scale, kernels as make_kernels

# the backend-level capture API: hand-written prefetches, no copy nodes
pytestmark = pytest.mark.usefixtures("managed_memory")


@pytest.fixture
def env(sim):
    """(ag, backend, hand, kernels) on a fresh sim runtime."""
    from asyncgpu.runtime.current import current_runtime

    ag = sim
    rt = current_runtime()
    kernels = dict(zip(("scale", "add", "inc"), make_kernels(ag)))
    return ag, rt.backend, Hand(rt), kernels


def _fork_join(be, h, k, x, y, z, w, origin, side, *, join=True, inner_edge=True):
    """w = 2x + 3x: scale on two streams, add on the origin. Returns the graph."""
    be.begin_capture(origin)
    fork = h.event()
    be.record(fork, origin)
    be.wait(side, fork)
    h.launch(k["scale"], 1, N, origin, x, y, np.float32(2), N)
    h.launch(k["scale"], 1, N, side, x, z, np.float32(3), N)
    if inner_edge:
        e = h.event()
        be.record(e, side)
        be.wait(origin, e)
    h.launch(k["add"], 1, N, origin, y, z, w, N)
    if join:
        done = h.event()
        be.record(done, side)
        be.wait(origin, done)
    return be.end_capture(origin)


def _arrays(ag, x0):
    return (ag.array(x0), ag.empty(N, np.float32), ag.empty(N, np.float32),
            ag.empty(N, np.float32))


@pytest.mark.parametrize("strategy", ["random", "reverse", "starve", "pct"])
@pytest.mark.parametrize("seed", range(3))
def test_capture_then_replay_equals_eager(strategy, seed):
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    with ag.configure(backend="sim", sim_seed=seed, sim_strategy=strategy):
        rt = current_runtime()
        be, h = rt.backend, Hand(rt)
        k = {"scale": ag.cuda_kernel(SCALE, "scale", out=["y"], sim=_scale),
             "add": ag.cuda_kernel(ADD, "add", out=["z"], sim=_add)}
        x0 = np.arange(N, dtype=np.float32)
        x, y, z, w = _arrays(ag, x0)
        s0, s1, s2 = h.stream(0), h.stream(1), h.stream(2)
        g = _fork_join(be, h, k, x, y, z, w, s0, s1)
        assert g.kernels == 3 and g.lanes == 2
        # nothing ran at capture: w still holds the poison of empty()
        assert np.isnan(w.numpy()).all()
        for round_ in range(3):
            x[...] = x0 + round_
            be.graph_launch(g, s2)       # any stream: the graph follows its earlier work
            h.sync_stream(s2)
            np.testing.assert_array_equal(w.numpy(), 5 * (x0 + round_))
        be.graph_destroy(g)


def test_back_to_back_launches_do_not_overlap(env):
    ag, be, h, k = env
    x = ag.zeros(N, np.float32)
    s0, s1, s2 = h.stream(0), h.stream(1), h.stream(2)
    be.begin_capture(s0)
    h.launch(k["inc"], 1, N, s0, x, N)
    h.launch(k["inc"], 1, N, s0, x, N)
    g = be.end_capture(s0)
    for s in (s1, s2, s1):      # three launches on two streams, no host sync between them
        be.graph_launch(g, s)
    h.sync()
    np.testing.assert_array_equal(x.numpy(), np.full(N, 6, np.float32))


def test_missing_inner_edge_is_reported_at_end_capture(env):
    ag, be, h, k = env
    x, y, z, w = _arrays(ag, np.ones(N, np.float32))
    s0, s1 = h.stream(0), h.stream(1)
    with pytest.raises(RaceError, match="captured graph.*RAW"):
        _fork_join(be, h, k, x, y, z, w, s0, s1, inner_edge=False)
    # the backend is usable: the correct capture works
    g = _fork_join(be, h, k, x, y, z, w, s0, s1)
    be.graph_launch(g, s0)
    h.sync_stream(s0)
    np.testing.assert_array_equal(w.numpy(), np.full(N, 5, np.float32))


def test_later_work_on_the_launch_stream_waits_for_the_whole_graph(env):
    ag, be, h, k = env
    x, y, z, w = _arrays(ag, np.ones(N, np.float32))
    v = ag.empty(N, np.float32)
    s0, s1, s2, s3 = (h.stream(i) for i in range(4))
    g = _fork_join(be, h, k, x, y, z, w, s0, s1)
    be.graph_launch(g, s2)
    h.launch(k["scale"], 1, N, s2, z, v, np.float32(10), N)   # z: written on the side lane
    h.sync_stream(s2)
    np.testing.assert_array_equal(v.numpy(), np.full(N, 30, np.float32))
    # work on another stream does not wait for the graph: the checker reports it
    be.graph_launch(g, s2)
    with pytest.raises(RaceError, match="WAR|RAW"):
        h.launch(k["scale"], 1, N, s3, w, v, np.float32(10), N)
    h.sync()


def test_graph_launch_follows_earlier_work_of_its_stream(env):
    ag, be, h, k = env
    x = ag.zeros(N, np.float32)
    y = ag.empty(N, np.float32)
    s0, s1 = h.stream(0), h.stream(1)
    be.begin_capture(s0)
    h.launch(k["scale"], 1, N, s0, x, y, np.float32(2), N)
    g = be.end_capture(s0)
    h.launch(k["inc"], 1, N, s1, x, N)     # eager, on the launch stream, before the graph
    be.graph_launch(g, s1)
    h.sync_stream(s1)
    np.testing.assert_array_equal(y.numpy(), np.full(N, 2, np.float32))


def _host_wait_captured(be, h, s0, s1):
    e = h.event()
    be.record(e, s0)
    be.host_wait(e)


def _query_captured(be, h, s0, s1):
    e = h.event()
    be.record(e, s0)
    be.event_done(e)


def _synchronize(be, h, s0, s1):
    be.synchronize()


def _prefetch(be, h, s0, s1):
    be.prefetch(h.x._alloc.buffer, s0)


def _wait_outside_event(be, h, s0, s1):
    e = h.event()
    be.record(e, s1)           # s1 is not capturing: an eager event
    be.wait(s0, e)


@pytest.mark.parametrize("forbidden", [_host_wait_captured, _query_captured, _synchronize,
                                       _prefetch, _wait_outside_event])
def test_capture_breaking_calls_raise_and_leave_the_backend_usable(env, forbidden):
    ag, be, h, k = env
    h.x = x = ag.zeros(N, np.float32)
    s0, s1 = h.stream(0), h.stream(1)
    be.begin_capture(s0)
    h.launch(k["inc"], 1, N, s0, x, N)
    with pytest.raises(CaptureError, match="invalidates a capture"):
        forbidden(be, h, s0, s1)
    with pytest.raises(CaptureError, match="invalid"):
        h.launch(k["inc"], 1, N, s0, x, N)
    with pytest.raises(CaptureError, match="invalidated.*discarded"):
        be.end_capture(s0)
    # nothing captured ran, and everything works again
    h.launch(k["inc"], 1, N, s0, x, N)
    ag.synchronize()
    np.testing.assert_array_equal(x.numpy(), np.ones(N, np.float32))
    be.begin_capture(s0)
    h.launch(k["inc"], 1, N, s0, x, N)
    g = be.end_capture(s0)
    be.graph_launch(g, s1)
    h.sync_stream(s1)
    np.testing.assert_array_equal(x.numpy(), np.full(N, 2, np.float32))


def test_runtime_synchronize_inside_a_capture_raises(env):
    ag, be, h, k = env
    s0 = h.stream(0)
    be.begin_capture(s0)
    with pytest.raises(CaptureError, match="synchronize"):
        ag.synchronize()
    with pytest.raises(CaptureError):
        be.end_capture(s0)
    ag.synchronize()


def test_unjoined_work_raises_at_end_capture(env):
    ag, be, h, k = env
    x, y, z, w = _arrays(ag, np.ones(N, np.float32))
    s0, s1 = h.stream(0), h.stream(1)
    with pytest.raises(CaptureError, match="not joined back"):
        _fork_join(be, h, k, x, y, z, w, s0, s1, join=False, inner_edge=False)
    assert not be.captures.capturing(s0) and not be.captures.capturing(s1)


def test_misuse_of_capture_calls(env):
    ag, be, h, k = env
    s0, s1 = h.stream(0), h.stream(1)
    with pytest.raises(CaptureError, match="not capturing"):
        be.end_capture(s0)
    be.begin_capture(s0)
    with pytest.raises(CaptureError, match="already capturing"):
        be.begin_capture(s0)
    fork = h.event()
    be.record(fork, s0)
    be.wait(s1, fork)
    with pytest.raises(CaptureError, match="end it on that stream"):
        be.end_capture(s1)
    g = be.end_capture(s0)
    assert not be.captures.engaged          # no capture open: the backends skip the tracker
    be.begin_capture(s0)
    with pytest.raises(CaptureError, match="not recorded in the capture"):
        be.wait(s0, fork)                   # recorded in the previous capture
    with pytest.raises(CaptureError, match="discarded"):
        be.end_capture(s0)
    be.begin_capture(s0)
    with pytest.raises(CaptureError, match="inside a capture"):
        be.graph_launch(g, s0)
    be.end_capture(s0)


def test_a_graph_keeps_its_arrays_alive(env):
    ag, be, h, k = env
    s0 = h.stream(0)

    def build():
        x = ag.array(np.full(N, 3, np.float32))
        y = ag.empty(N, np.float32)
        be.begin_capture(s0)
        h.launch(k["scale"], 1, N, s0, x, y, np.float32(2), N)
        h.launch(k["inc"], 1, N, s0, y, N)
        return be.end_capture(s0), weakref.ref(x._alloc), weakref.ref(y._alloc)

    g, rx, ry = build()
    gc.collect()
    assert rx() is not None and ry() is not None
    # same-size arrays now: a freed buffer would be handed out again (the pool reuses LIFO)
    others = [ag.array(np.full(N, -1, np.float32)) for _ in range(2)]
    be.graph_launch(g, s0)
    h.sync_stream(s0)
    for o in others:
        np.testing.assert_array_equal(o.numpy(), np.full(N, -1, np.float32))
    be.graph_launch(g, s0)
    be.graph_destroy(g)          # waits for the launch, then lets go of the arrays
    gc.collect()
    ag.synchronize()
    assert rx() is None and ry() is None
    with pytest.raises(CaptureError, match="destroyed"):
        be.graph_launch(g, s0)


def test_launching_a_graph_whose_array_was_freed_raises(env):
    ag, be, h, k = env
    x = ag.zeros(N, np.float32)
    s0 = h.stream(0)
    be.begin_capture(s0)
    h.launch(k["inc"], 1, N, s0, x, N)
    g = be.end_capture(s0)
    x.free()
    with pytest.raises(CaptureError, match="freed"):
        be.graph_launch(g, s0)


def test_launches_of_one_graph_are_ordered_across_lanes(env):
    """Launch 2's side lane writes what launch 1's origin lane reads last: it must wait."""
    ag, be, h, k = env
    x = ag.array(np.ones(N, np.float32))
    y = ag.empty(N, np.float32)
    z = ag.empty(N, np.float32)
    s0, s1, s2, s3 = (h.stream(i) for i in range(4))
    be.begin_capture(s0)
    fork = h.event()
    be.record(fork, s0)
    be.wait(s1, fork)
    h.launch(k["scale"], 1, N, s1, x, y, np.float32(2), N)
    j = h.event()
    be.record(j, s1)
    be.wait(s0, j)
    h.launch(k["scale"], 1, N, s0, y, z, np.float32(3), N)
    g = be.end_capture(s0)
    be.graph_launch(g, s2)
    be.graph_launch(g, s3)
    h.sync()
    np.testing.assert_array_equal(z.numpy(), np.full(N, 6, np.float32))


# -- property: any correctly synchronized multi-stream schedule replays like it runs eagerly ------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


_OP = st.tuples(st.sampled_from(["inc", "scale", "add"]), st.integers(0, 2),
                st.permutations(range(3)))


def _run_schedule(be, h, k, arrays, ops, capture_on=None):
    """Each op on its stream, waiting (through per-op events) for the earlier ops it conflicts
    with on other streams; with ``capture_on``, forked from and joined back into that stream."""
    streams = [h.stream(i) for i in range(3)]
    if capture_on is not None:
        be.begin_capture(capture_on)
        fork = h.event()
        be.record(fork, capture_on)
        for s in streams:
            if s is not capture_on:
                be.wait(s, fork)
    done = []          # (stream, event, reads, writes) per op
    for kind, si, perm in ops:
        a, b, c = (arrays[i] for i in perm)
        reads, writes = {"inc": ({perm[0]}, {perm[0]}), "scale": ({perm[0]}, {perm[1]}),
                         "add": ({perm[0], perm[1]}, {perm[2]})}[kind]
        for s2, e2, r2, w2 in done:
            if s2 != si and (writes & (r2 | w2) or reads & w2):
                be.wait(streams[si], e2)
        s = streams[si]
        if kind == "inc":
            h.launch(k["inc"], 1, N, s, a, N)
        elif kind == "scale":
            h.launch(k["scale"], 1, N, s, a, b, np.float32(2), N)
        else:
            h.launch(k["add"], 1, N, s, a, b, c, N)
        e = h.event()
        be.record(e, s)
        done.append((si, e, reads, writes))
    if capture_on is not None:
        for s in streams:
            if s is not capture_on:
                j = h.event()
                be.record(j, s)
                be.wait(capture_on, j)
        return be.end_capture(capture_on)
    return None


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(_OP, min_size=1, max_size=10), seed=st.integers(0, 2**16),
       strategy=st.sampled_from(["random", "reverse", "starve", "pct"]))
def test_random_schedules_replay_like_eager(ops, seed, strategy):
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    init = np.arange(3 * N, dtype=np.float32).reshape(3, N) % 7
    with ag.configure(backend="sim", sim_seed=seed, sim_strategy=strategy):
        rt = current_runtime()
        be, h = rt.backend, Hand(rt)
        k = {"scale": ag.cuda_kernel(SCALE, "scale", out=["y"], sim=_scale),
             "add": ag.cuda_kernel(ADD, "add", out=["z"], sim=_add),
             "inc": ag.cuda_kernel(INC, "inc", sim=_inc)}
        arrays = [ag.array(init[i]) for i in range(3)]
        for _ in range(2):
            h.begin()
            _run_schedule(be, h, k, arrays, ops)
            h.sync()
        eager = [a.numpy() for a in arrays]
        for a, v in zip(arrays, init):
            a[...] = v
        h.begin()
        g = _run_schedule(be, h, k, arrays, ops, capture_on=h.stream(0))
        assert g.kernels == len(ops)
        be.graph_launch(g, h.stream(3))
        be.graph_launch(g, h.stream(1))
        h.sync()
        for a, want in zip(arrays, eager):
            np.testing.assert_array_equal(a.numpy(), want)


def _gated_graph(be, h, k, x, y, ev, external):
    s0, s1 = h.stream(0), h.stream(1)
    be.begin_capture(s0)
    fork = h.event()
    be.record(fork, s0)
    be.wait(s1, fork)
    if external:
        be.wait_external(s1, ev)
    h.launch(k["scale"], 1, N, s1, x, y, np.float32(2), N)
    join = h.event()
    be.record(join, s1)
    be.wait(s0, join)
    return be.end_capture(s0)


def test_external_wait_gates_a_branch_on_work_outside_the_graph(env):
    ag, be, h, k = env
    x = ag.zeros(N, np.float32)
    y = ag.empty(N, np.float32)
    s2, s3 = h.stream(2), h.stream(3)
    ev = be.create_event()
    g = _gated_graph(be, h, k, x, y, ev, external=True)
    for i in range(1, 4):
        h.launch(k["inc"], 1, N, s2, x, N)      # outside the graph, on another stream
        be.record(ev, s2)                        # the graph waits for this record
        be.graph_launch(g, s3)
        h.sync_stream(s3)
        np.testing.assert_array_equal(y.numpy(), np.full(N, 2 * i, np.float32))
    h.sync()
    ungated = _gated_graph(be, h, k, x, y, ev, external=False)
    h.launch(k["inc"], 1, N, s2, x, N)
    be.record(ev, s2)
    with pytest.raises(RaceError, match="RAW"):
        be.graph_launch(ungated, s3)
    h.sync()


def test_external_wait_outside_a_capture_raises(env):
    ag, be, h, k = env
    with pytest.raises(CaptureError, match="not capturing"):
        be.wait_external(h.stream(0), be.create_event())
