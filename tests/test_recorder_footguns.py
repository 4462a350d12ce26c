"""Each hazard of recording and replaying graphs, with what a user sees (sim backend)."""

from __future__ import annotations

import gc
import math
import threading
import weakref

import numpy as np
import pytest
from numba import cuda

from asyncgpu.core.errors import RecordingError

from recorder_kernels import N, kernels


@pytest.fixture
def env(sim):
    from asyncgpu.runtime.current import current_runtime

    return sim, current_runtime(), kernels(sim)


def test_graph_keeps_its_arrays_alive(env):
    ag, rt, (scale, add, inc) = env

    @ag.graph
    def step(a):
        inc[1, N](a, N)

    a = ag.zeros(N, np.float32)
    step(a)
    step(a)                                  # captured: the graph holds a
    ag.synchronize()                         # and no queued launch does any more
    alloc = weakref.ref(a._alloc)
    # the simulated device bytes, read back without a reference to the allocation (a freed
    # block would be poisoned: NaN)
    device_bytes = a._alloc.buffer.dev
    del a
    gc.collect()
    assert alloc() is not None               # the graph is the only holder
    assert not alloc().freed
    np.testing.assert_array_equal(device_bytes.view(np.float32), np.full(N, 2, np.float32))
    step.clear()                             # graph destroyed: nothing holds the memory now
    gc.collect()
    ag.synchronize()            # (the runtime lets go of dropped allocations at its next call)
    assert alloc() is None


def test_a_recorded_function_dropped_lets_go_of_its_graphs_arrays_at_the_next_synchronize(env):
    ag, rt, (scale, add, inc) = env

    def make():
        @ag.graph
        def step(a):
            inc[1, N](a, N)
        return step

    kept, dropped = make(), make()
    a, b = ag.zeros(N, np.float32), ag.zeros(N, np.float32)
    for _ in range(3):
        kept(a)
        dropped(b)
    assert kept.outcome == dropped.outcome == "replayed"
    alloc = weakref.ref(b._alloc)
    del b, dropped
    gc.collect()
    assert alloc() is not None              # not from the finalizer: at the next wait
    ag.synchronize()
    gc.collect()
    ag.synchronize()            # (the runtime lets go of dropped allocations at its next call)
    assert alloc() is None
    kept(a)                                  # the other function's graph is still there
    assert kept.outcome == "replayed"
    np.testing.assert_array_equal(a.numpy(), np.full(N, 4, np.float32))


def test_host_access_inside_a_recording_raises_naming_the_array(env):
    ag, rt, (scale, add, inc) = env
    x = ag.zeros(N, np.float32)
    y = ag.empty(N, np.float32)

    @ag.graph
    def peek():
        inc[1, N](x, N)
        return float(x[0])                   # would read stale data: launches are deferred

    with pytest.raises(RecordingError, match=r"host read of array float32\[64\]"):
        peek()
    assert rt.recording is None              # recording mode left
    # the launch before the refused access was issued, as without the recorder
    np.testing.assert_array_equal(x.numpy(), np.ones(N, np.float32))
    scale[1, N](x, y, np.float32(2), N)      # the runtime stays usable
    np.testing.assert_array_equal(y.numpy(), np.full(N, 2, np.float32))

    @ag.graph
    def poke():
        x[0] = 5

    with pytest.raises(RecordingError, match="host write"):
        poke()
    assert rt.recording is None


def test_synchronize_and_free_inside_a_recording_raise(env):
    ag, rt, (scale, add, inc) = env
    x = ag.zeros(N, np.float32)
    with pytest.raises(RecordingError, match="synchronize"):
        with ag.record():
            inc[1, N](x, N)
            ag.synchronize()
    with pytest.raises(RecordingError, match="free"):
        with ag.record():
            x.free()
    assert rt.recording is None
    np.testing.assert_array_equal(x.numpy(), np.ones(N, np.float32))


def test_configure_inside_a_recording_is_refused_by_name_and_ends_a_split_segment(env):
    ag, rt, (scale, add, inc) = env
    x = ag.zeros(N, np.float32)
    execution = ag.configure().options.execution

    @ag.graph
    def step(x):
        inc[1, N](x, N)
        ag.configure(execution="sync")

    with pytest.raises(RecordingError, match=r"asyncgpu.configure inside the recording of "
                                             r"'.*step': .*call configure outside"):
        step(x)
    assert ag.configure().options.execution == execution     # (nothing changed)
    np.testing.assert_array_equal(x.numpy(), np.ones(N, np.float32))   # (issued eagerly)

    @ag.graph
    def caught(x):
        inc[1, N](x, N)
        try:
            ag.configure(execution="sync")
        except RecordingError:
            pass

    for _ in range(3):      # (a body that catches it runs eagerly, as for a host operation;
        caught(x)           # it was captured and replayed, the refusal gone from its runs)
        assert caught.outcome == "eager"
    np.testing.assert_array_equal(x.numpy(), np.full(N, 4, np.float32))

    @ag.graph(split=True)
    def split_step(x):
        inc[1, N](x, N)
        with ag.configure(execution="sync"):
            inc[1, N](x, N)

    for _ in range(3):
        split_step(x)
    np.testing.assert_array_equal(x.numpy(), np.full(N, 10, np.float32))


@pytest.mark.parametrize("misuse, message", [
    (lambda ag: ag.graph(3), r"asyncgpu.graph decorates a function .*got 3"),
    (lambda ag: ag.graph(split=1), "split must be True or False; got 1"),
    (lambda ag: ag.graph(static="yes")(print), "static must be True or False"),
    (lambda ag: ag.record(split=None), "split must be True or False"),
    (lambda ag: ag.record(print), r"name must be a str or None; got <built-in function print>"
                                  r" \(record\(\) is used as `with asyncgpu.record\(\):`"),
    (lambda ag: ag.record("r")(print), r"asyncgpu.record\('r'\) is a context manager .*"
                                       r"decorate it with @asyncgpu.graph"),
])
def test_a_recorder_used_the_wrong_way_says_the_right_way(env, misuse, message):
    ag, rt, _ = env
    with pytest.raises(TypeError, match=message):
        misuse(ag)


def test_the_users_exception_escapes_and_the_runtime_stays_usable(env):
    ag, rt, (scale, add, inc) = env
    x = ag.zeros(N, np.float32)

    class Mine(Exception):
        pass

    @ag.graph
    def broken():
        inc[1, N](x, N)
        raise Mine("from the user")

    for _ in range(3):
        with pytest.raises(Mine, match="from the user"):
            broken()
    assert rt.recording is None
    np.testing.assert_array_equal(x.numpy(), np.full(N, 3, np.float32))


def test_scalars_are_part_of_the_key(env):
    ag, rt, (scale, add, inc) = env
    x = ag.array(np.ones(N, np.float32))
    y = ag.empty(N, np.float32)

    @ag.graph
    def times(a):
        scale[1, N](x, y, np.float32(a), N)

    times(2)
    times(2)
    assert times.outcome == "replayed"
    np.testing.assert_array_equal(y.numpy(), np.full(N, 2, np.float32))
    times(3)                                 # never the frozen 2
    assert times.outcome == "recorded"
    np.testing.assert_array_equal(y.numpy(), np.full(N, 3, np.float32))
    times(3)
    assert times.outcome == "replayed"
    np.testing.assert_array_equal(y.numpy(), np.full(N, 3, np.float32))


def test_rebound_arrays_record_again(env):
    ag, rt, (scale, add, inc) = env

    @ag.graph
    def bump(a):
        inc[1, N](a, N)

    a = ag.zeros(N, np.float32)
    bump(a)
    bump(a)
    assert bump.outcome == "replayed"
    b = ag.zeros(N, np.float32)              # same shape and dtype, another array
    bump(b)
    assert bump.outcome == "recorded"
    np.testing.assert_array_equal(b.numpy(), np.ones(N, np.float32))
    np.testing.assert_array_equal(a.numpy(), np.full(N, 2, np.float32))
    c = a[: N // 2]                          # a view of the same memory: another byte range
    bump.clear()
    with ag.record("views") as rec:
        inc[1, N // 2](c, N // 2)
    assert rec.outcome == "recorded"


def test_outputs_are_overwritten_by_the_next_replay(env):
    """The graph writes the same arrays every time: copy what you want to keep."""
    ag, rt, (scale, add, inc) = env
    x = ag.zeros(N, np.float32)
    out = ag.empty(N, np.float32)

    @ag.graph
    def step():
        inc[1, N](x, N)
        scale[1, N](x, out, np.float32(10), N)
        return out

    results = [step() for _ in range(2)]
    kept = results[1].numpy().copy()         # a host copy survives
    third = step()
    assert third is results[1] is out        # the same array object every time
    np.testing.assert_array_equal(kept, np.full(N, 20, np.float32))
    np.testing.assert_array_equal(third.numpy(), np.full(N, 30, np.float32))


def test_data_dependent_branches_have_one_key_each(env):
    ag, rt, (scale, add, inc) = env
    x = ag.zeros(N, np.float32)

    @ag.graph
    def step(twice):
        inc[1, N](x, N)
        if twice:
            inc[1, N](x, N)

    pattern = [True, False, True, False, True, False]
    outcomes = []
    for flag in pattern:
        step(flag)
        outcomes.append(step.outcome)
    assert outcomes == ["recorded", "recorded", "replayed", "replayed", "replayed", "replayed"]
    np.testing.assert_array_equal(x.numpy(), np.full(N, 9, np.float32))


def test_library_calls_run_eagerly_with_a_warning_naming_the_call(env):
    ag, rt, (scale, add, inc) = env
    import asyncgpu.cupy as acp

    x = ag.array(np.full(N, 4, np.float32))
    y = ag.empty(N, np.float32)

    @ag.graph
    def step():
        inc[1, N](x, N)
        r = acp.cumsum(x)                    # not on the capture allow-list
        add[1, N](r, r, y, N)

    for i in range(2):
        with pytest.warns(UserWarning, match="cumsum.*allow-list"):
            step()
        assert step.outcome == "eager"
        np.testing.assert_allclose(y.numpy(), 2 * np.cumsum(np.full(N, 5 + i, np.float32)))
    assert rt.recording is None


def test_nested_recordings_are_inlined(env):
    ag, rt, (scale, add, inc) = env
    x = ag.zeros(N, np.float32)

    @ag.graph
    def inner():
        inc[1, N](x, N)

    @ag.graph
    def outer():
        inner()
        inner()

    for _ in range(3):
        outer()
    assert outer.outcome == "replayed" and inner.outcome == "inline"
    np.testing.assert_array_equal(x.numpy(), np.full(N, 6, np.float32))


def test_other_threads_launch_normally_during_a_recording(env):
    ag, rt, (scale, add, inc) = env
    x = ag.zeros(N, np.float32)
    y = ag.zeros(N, np.float32)
    done = []

    def other():
        inc[1, N](y, N)
        done.append(float(y[0]))             # host access from another thread is allowed

    with ag.record():
        inc[1, N](x, N)
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert done == [1.0]
    np.testing.assert_array_equal(x.numpy(), np.ones(N, np.float32))


def test_a_freed_array_is_refused_at_the_next_call(env):
    ag, rt, (scale, add, inc) = env
    from asyncgpu import FreedArrayError

    @ag.graph
    def bump(a):
        inc[1, N](a, N)

    a = ag.zeros(N, np.float32)
    bump(a)
    bump(a)
    a.free()
    with pytest.raises(FreedArrayError):
        bump(a)
    assert rt.recording is None


def test_split_recordings_replay_each_stretch_between_host_operations(env):
    ag, rt, (scale, add, inc) = env
    x = ag.zeros(N, np.float32)
    y = ag.empty(N, np.float32)

    @ag.graph(split=True)
    def step():
        for _ in range(2):
            x[0] = 0                         # host write: ends a segment, then runs
            inc[1, N](x, N)
            scale[1, N](x, y, np.float32(2), N)
        return float(y[1])                   # host read: waits for the replayed segment

    got = [step() for _ in range(3)]
    assert step.outcome == "replayed+replayed"
    assert got == [4.0, 8.0, 12.0]
    assert float(y[0]) == 2.0


def test_scalars_are_keyed_by_their_exact_bits(env):
    """-0.0 == 0.0 in Python, but a kernel may tell them apart: never replay one for the other."""
    ag, rt, (scale, add, inc) = env
    x = ag.array(np.ones(N, np.float32))
    y = ag.empty(N, np.float32)

    @ag.graph
    def times(a):
        scale[1, N](x, y, a, N)

    for a in (np.float32(0.0), np.float32(0.0), np.float32(-0.0)):
        times(a)
    assert times.outcome == "recorded"
    assert np.signbit(y.numpy()).all()


MINUS_NAN = -float("nan")


@pytest.mark.parametrize("way", ["launch", "static", "static-numpy", "static-complex",
                                 "library"])
def test_a_call_given_minus_nan_after_nan_is_not_replayed_with_nan(env, way):
    """NaN and -NaN print alike (repr, hex) but copysign tells them apart: a graph recorded
    with one is never replayed for the other, whether the float is a kernel's argument (a
    Python float reaches a Numba kernel as it is), a static function's argument or a captured
    library call's."""
    import asyncgpu.cupy as acp

    ag, rt, _ = env

    @ag.kernel
    @cuda.jit
    def sign_of_real(y, a, n):
        i = cuda.grid(1)
        if i < n:
            y[i] = math.copysign(1.0, a)

    y = ag.zeros(N, np.float32)
    x = ag.array(np.ones(N, np.float32))
    if way == "library":
        @ag.graph
        def f(a):
            return acp.copysign(x, a)
    else:
        @ag.graph(static=way != "launch")
        def f(a):
            sign_of_real[1, N](y, a.real if isinstance(a, complex) else a, N)
            return y
    make = {"static-numpy": np.float32, "static-complex": lambda v: complex(v, 0.0)}.get(
        way, float)
    for a in (float("nan"), float("nan"), float("nan"), MINUS_NAN):
        got = f(make(a))
    assert f.outcome == "recorded"                  # keyed apart: recorded again
    np.testing.assert_array_equal(got.numpy(), np.full(N, -1, np.float32))


def test_recursive_recorded_functions_are_inlined(env):
    ag, rt, (scale, add, inc) = env
    x = ag.zeros(N, np.float32)

    @ag.graph
    def bump(depth):
        inc[1, N](x, N)
        if depth:
            bump(depth - 1)

    for _ in range(3):
        bump(2)
    assert bump.outcome == "replayed" and rt.recording is None
    np.testing.assert_array_equal(x.numpy(), np.full(N, 9, np.float32))


def test_bad_arguments_inside_a_recording_raise_before_anything_is_enqueued(env):
    ag, rt, (scale, add, inc) = env
    from asyncgpu import ArgumentError

    x = ag.zeros(N, np.float32)

    @ag.graph
    def bad():
        inc[1, N](x, N)
        inc[1, N](x)                         # missing n

    with pytest.raises(ArgumentError, match="inc"):
        bad()
    assert rt.recording is None
    np.testing.assert_array_equal(x.numpy(), np.ones(N, np.float32))


def test_a_fault_of_a_launch_the_recording_issued_names_the_launchs_line(env):
    """The first (eager) run issues its launches when the body returns: the fault named the
    line that called the recorded function, the replays the launch's own."""
    ag, rt, _ = env
    from numba import cuda

    @ag.kernel
    @cuda.jit
    def past_the_end(x):
        x[cuda.grid(1) + 1000] = 1.0

    def body(x):
        past_the_end[1, 1](x)

    launch_line = f"test_recorder_footguns.py:{body.__code__.co_firstlineno + 1}"
    step = ag.graph(body)
    x = ag.zeros(8)
    for outcome in ("recorded", "replayed"):
        step(x)
        with pytest.raises(ag.KernelFault, match=f"kernel 'past_the_end' at {launch_line} "):
            ag.synchronize()
        assert step.outcome == outcome


def test_a_trace_started_inside_a_recording_is_refused_and_the_recording_goes_on(env):
    """Its launches are issued when the recording ends, after such a trace: it came back empty,
    or its read synchronized inside the recording, refused as a synchronize the program never
    called. A trace around the recorded call sees them."""
    ag, rt, (scale, add, inc) = env
    a = ag.zeros(N, np.float32)

    @ag.graph
    def step():
        inc[1, N](a, N)
        with pytest.raises(RecordingError, match=r"trace\(\) started inside a recording.*"
                                                 r"start it around the recorded call"):
            ag.trace()

    for _ in range(3):
        step()
    with ag.trace() as t:
        step()
    assert [n.name for n in t.kernels] and a.tolist() == [4.0] * N
