"""The recorder's memo of the previous run (``asyncgpu.recorder.keys``): a launch taken from
it has exactly the key full keying gives, and everything that must be keyed again is."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import cuda

from asyncgpu.recorder import recording as _recorder
from asyncgpu.core.errors import FreedArrayError
from asyncgpu.runtime.current import current_runtime

from recorder_kernels import N, doubling, kernels

@pytest.fixture
def keys_checked(monkeypatch):
    """Every remembered key (the memo handed to ``replay_remembered`` or ``finish``) is
    compared with the full key of the launches it stands for."""
    checked = []
    real_finish, real_replay = _recorder.finish, _recorder.replay_remembered

    def check(token, memo, launches):
        full = tuple(launch.key for launch in launches)
        assert memo.key.parts[1] == full and memo.key.token == token

    def finish(rt, token, name, launches, memo=None):
        if memo is not None:
            check(token, memo, launches)
            checked.append(token)
        return real_finish(rt, token, name, launches, memo)

    def replay_remembered(rt, token, memo):
        check(token, memo, memo.launches)   # (the very launches deferred: see end_segment)
        frozen = real_replay(rt, token, memo)
        if frozen is not None:      # (else finish takes the memo: counted there)
            checked.append(token)
        return frozen

    monkeypatch.setattr(_recorder, "finish", finish)
    monkeypatch.setattr(_recorder, "replay_remembered", replay_remembered)
    return checked


SCALARS = [2, 3, 2.5, 0.0, -0.0, float("nan"), np.float32(2), np.float32(0), np.float32(-0.0),
           np.int32(2), True]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from(SCALARS)),
                      min_size=1, max_size=12),
       views=st.booleans())
def test_remembered_runs_equal_fully_keyed_runs(keys_checked, calls, views):
    """The same random calls with and without the memo: same outcomes, same results, and
    every remembered key equal to the full one."""
    import asyncgpu as ag

    def run(memo: bool):
        outcomes, results = [], []
        with ag.configure(backend="sim", sim_seed=0, sim_strategy="eager"):
            scale, add, inc = kernels(ag)
            base = ag.array(np.arange(2 * N, dtype=np.float32))
            arrays = [base[:N], base[N:], ag.zeros(N, np.float32), ag.zeros(N, np.float32)]

            @ag.graph
            def step(i, j, a):
                src = arrays[i][:] if views else arrays[i]       # a new view object per call
                if i != j:
                    scale[1, N](src, arrays[j], np.float32(a), N)
                inc[1, N](arrays[j], N)

            rt = current_runtime()
            for i, j, a in calls:
                if not memo and rt.graphs is not None:
                    rt.graphs.memo.clear()      # (nothing remembered: keyed in full)
                step(i, j, a)
                outcomes.append(step.outcome)
                results.append([x.numpy().tobytes() for x in arrays])
        return outcomes, results

    remembered = run(True)
    used = len(keys_checked)
    assert remembered == run(False)
    assert len(keys_checked) == used        # (the second run remembered nothing)


def test_repeated_identical_calls_use_the_remembered_key(sim, keys_checked):
    ag = sim
    scale, add, inc = kernels(ag)
    x, y = ag.ones(N, np.float32), ag.empty(N, np.float32)

    @ag.graph
    def step(a):
        scale[1, N](x, y, a, N)
        inc[1, N](y, N)

    for _ in range(4):
        step(np.float32(2))
    assert step.outcome == "replayed" and len(keys_checked) == 3
    np.testing.assert_array_equal(y.numpy(), np.full(N, 3, np.float32))


def test_signed_zero_scalars_are_different_keys(sim):
    ag = sim
    scale, add, inc = kernels(ag)
    x, y = ag.ones(N, np.float32), ag.empty(N, np.float32)

    @ag.graph
    def step(a):
        scale[1, N](x, y, a, N)

    outcomes = []
    for a in (0.0, 0.0, 0.0, -0.0):
        step(a)
        outcomes.append(step.outcome)
    assert outcomes == ["recorded", "replayed", "replayed", "recorded"]
    assert np.signbit(y.numpy()).all()


def test_a_freed_array_is_refused_not_remembered(sim):
    ag = sim
    scale, add, inc = kernels(ag)
    x, y, step = doubling(ag, ag.ones(N, np.float32))
    step()
    step()
    ag.synchronize()
    y.free()
    with pytest.raises(FreedArrayError):
        step()
    z = ag.empty(N, np.float32)
    scale[1, N](x, z, np.float32(4), N)     # the runtime is still usable
    np.testing.assert_array_equal(z.numpy(), np.full(N, 4, np.float32))


def test_a_freed_array_passed_as_the_very_same_object_is_refused(sim):
    """Every argument the same object as last call (matched by identity alone): a free between
    the calls still makes the next call key, and refuse, the launch in full."""
    ag = sim
    _, add, inc = kernels(ag)
    x, y, z = (ag.ones(N, np.float32) for _ in range(3))

    @ag.graph
    def step():
        inc[1, N](x, N)
        add[1, N](x, y, z, N)

    for _ in range(3):
        step()
    assert step.outcome == "replayed"
    ag.synchronize()
    y.free()
    with pytest.raises(FreedArrayError, match="'add'.*argument 1 'y'"):
        step()
    inc[1, N](x, N)                          # the runtime is still usable
    assert x.numpy().tolist() == [6.0] * N   # 1 + three calls, the refused one's inc, this one


@pytest.mark.parametrize("calls_before", [0, 1, 2])
@pytest.mark.parametrize("how", ["graph", "record"])
def test_an_array_freed_by_a_host_step_of_a_split_recording_is_refused_as_eager(sim, how,
                                                                                calls_before):
    """In a split recording the next segment's previous run is taken as the current one ends,
    before the host step between them: an array the step frees is still refused at its
    launch, whatever the number of earlier calls."""
    ag = sim
    _, _, inc = kernels(ag)

    def body(x, y, free_y):
        inc[1, N](x, N)
        x.numpy()                           # (a host step: ends the first segment)
        if free_y:
            y.free()
        inc[1, N](y, N)

    step = ag.graph(split=True)(body)
    x, y = ag.zeros(N, np.float32), ag.zeros(N, np.float32)
    for i in range(calls_before + 1):
        last = i == calls_before
        with pytest.raises(FreedArrayError, match=r"'inc'.*argument 0 'x'.*freed") if last \
                else _nothing():
            if how == "graph":
                step(x, y, last)
            else:
                with ag.record(split=True):
                    body(x, y, last)
    assert x.numpy().tolist() == [calls_before + 1.0] * N
    inc[1, N](x, N)                          # (the runtime is still usable)
    assert x.numpy().tolist() == [calls_before + 2.0] * N


def _nothing():
    import contextlib

    return contextlib.nullcontext()


def test_views_made_again_each_call_are_remembered(sim, keys_checked):
    """``w[0]`` is a new view object at every call: the same bytes and layout are remembered;
    another row is not."""
    ag = sim
    scale, add, inc = kernels(ag)
    w = ag.array(np.arange(2 * N, dtype=np.float32).reshape(2, N))
    y = ag.empty(N, np.float32)

    @ag.graph
    def step(row):
        scale[1, N](w[row], y, np.float32(2), N)

    for _ in range(3):
        step(0)
    assert step.outcome == "replayed" and len(keys_checked) == 2
    step(1)                                 # another row: keyed in full, a new key
    assert step.outcome == "recorded" and len(keys_checked) == 2
    np.testing.assert_array_equal(y.numpy(), 2 * np.arange(N, 2 * N, dtype=np.float32))


def test_tuple_and_record_arguments_are_keyed_by_value(sim, keys_checked):
    """A recording replays a launch of a tuple or record only when it is the same value: the
    same record bytes read as other fields, or a record changed in place, are another value."""
    ag = sim

    @ag.kernel(out=["y"])
    @cuda.jit
    def put(y, c):
        if cuda.grid(1) == 0:
            y[0] = c[0]
            y[1] = c[1]

    y = ag.empty(2)

    @ag.graph
    def step(c):
        put[1, 1](y, c)

    as_float = np.array([(1.0, 2.0)], dtype=[("a", "f8"), ("b", "f8")])
    as_int = as_float.view([("a", "i8"), ("b", "i8")])
    seen = []
    for c in [(1.0, 2.0), (1.0, 2.0), (1.0, 3.0), (1, 3), (1.0, 3.0), as_float[0],
              as_float[0], as_int[0]]:
        step(c)
        seen.append((step.outcome, y.numpy().tolist()))
    assert seen == [("recorded", [1, 2]), ("replayed", [1, 2]), ("recorded", [1, 3]),
                    ("recorded", [1, 3]), ("replayed", [1, 3]), ("recorded", [1, 2]),
                    ("replayed", [1, 2]), ("recorded", [float(as_int[0][0]),
                                                        float(as_int[0][1])])]
    record = as_float[0]
    step(record)
    step(record)
    assert step.outcome == "replayed"
    as_float[0] = (5.0, 6.0)       # the very same object, another value
    step(record)
    assert y.numpy().tolist() == [5, 6]
