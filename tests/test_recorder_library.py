"""Library calls captured inside recordings (sim): elementwise ufuncs, reductions and matrix
products are part of the graph, their results are the same arrays at every run, replays equal
NumPy, and calls off the allow-list keep the eager fallback with a warning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from asyncgpu.recorder import calls as _graph_calls

from recorder_kernels import N, kernels


def test_captured_calls_replay_equal_numpy_with_stable_results(sim):
    ag = sim
    import asyncgpu.cupy as acp

    scale, add, inc = kernels(ag)
    x = ag.array(np.arange(N, dtype=np.float32))
    m = ag.array(np.arange(16, dtype=np.float32).reshape(4, 4))
    y = ag.empty(N, np.float32)

    @ag.graph
    def step(x, m):
        r = acp.sqrt(x)                          # ufunc
        s = r * 2 + 1                            # operators: ufuncs
        scale[1, N](s, y, np.float32(3), N)      # a kernel reads a call's result
        total = y.sum()                          # method reduction (0-d)
        p = acp.multiply(m, m)                   # elementwise product
        col = acp.max(p, axis=0)                 # reduction with an axis
        return r, total, col

    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # nothing falls back
        for i in range(4):
            x0 = np.arange(N, dtype=np.float32) + i
            x[...] = x0
            r, total, col = step(x, m)
            seen.append((r, total, col))
            want_y = 3 * (np.sqrt(x0) * 2 + 1)
            np.testing.assert_allclose(r.numpy(), np.sqrt(x0), rtol=1e-6)
            np.testing.assert_allclose(y.numpy(), want_y, rtol=1e-6)
            np.testing.assert_allclose(float(total), want_y.sum(dtype=np.float32), rtol=1e-5)
            m0 = np.arange(16, dtype=np.float32).reshape(4, 4)
            np.testing.assert_array_equal(col.numpy(), (m0 * m0).max(axis=0))
            assert step.outcome == ("recorded" if i == 0 else "replayed")
    # the same result arrays at every run: what makes the second run's key equal the first's
    assert all(s[0] is seen[0][0] and s[2] is seen[0][2] for s in seen)


@pytest.mark.parametrize("static", [False, True])
def test_a_call_given_minus_zero_after_zero_is_not_replayed_with_zero(sim, static):
    ag = sim
    import asyncgpu.cupy as acp

    x = ag.array(np.ones(4, np.float32))

    @ag.graph(static=static)
    def f(x, s):
        return acp.copysign(x, s), acp.multiply(x, np.float32(s))

    for s in (0.0, 0.0, 0.0, -0.0, -0.0, 0.0):
        signed, product = f(x, s)
        np.testing.assert_array_equal(signed.numpy(), np.copysign(np.ones(4, np.float32), s))
        assert np.signbit(product.numpy()).all() == np.signbit(s)


def test_results_of_calls_on_a_new_batch_each_time_do_not_stay_alive(sim):
    """A recorded step given a new input array at every call (never replayed) lets its earlier
    results go, as the eager program does; an input that comes again still replays."""
    import gc
    import weakref

    ag = sim

    @ag.graph
    def step(x):
        return x * 2.0 + 1.0

    refs = []
    for i in range(40):
        out = step(ag.array(np.full(64, i, np.float32)))
        np.testing.assert_array_equal(out.numpy(), np.full(64, 2 * i + 1, np.float32))
        refs.append(weakref.ref(out._alloc))
        del out
    ag.synchronize()
    gc.collect()
    assert sum(r() is not None for r in refs) <= 2
    x = ag.array(np.arange(64, dtype=np.float32))
    outcomes = []
    for _ in range(3):
        out = step(x)
        outcomes.append(step.outcome)
    assert outcomes == ["recorded", "replayed", "replayed"]
    np.testing.assert_array_equal(out.numpy(), np.arange(64, dtype=np.float32) * 2 + 1)


def test_a_step_fed_its_own_result_keeps_a_bounded_number_of_results(sim):
    import gc
    import weakref

    from asyncgpu.recorder.calls import RESULTS_PER_CALL

    ag = sim

    @ag.graph
    def step(x):
        return x + 1.0

    x = ag.zeros(64, np.float32)
    refs = []
    for _ in range(3 * RESULTS_PER_CALL):
        x = step(x)
        refs.append(weakref.ref(x._alloc))
    np.testing.assert_array_equal(x.numpy(), np.full(64, 3 * RESULTS_PER_CALL, np.float32))
    gc.collect()
    ag.synchronize()        # (the runtime lets go of dropped allocations at its next call)
    assert sum(r() is not None for r in refs) <= RESULTS_PER_CALL + 1


def test_a_result_the_program_freed_is_made_anew_and_the_calls_go_on(sim):
    ag = sim
    import asyncgpu.cupy as acp

    host = np.arange(8, dtype=np.float32)
    x = ag.array(host)

    @ag.graph
    def step(x):
        return acp.sqrt(x) * 2.0                 # two captured calls, one result kept

    first = step(x)
    first.free()                                 # the program is done with it
    outcomes = []
    for _ in range(3):
        again = step(x)
        outcomes.append(step.outcome)
        np.testing.assert_allclose(again.numpy(), np.sqrt(host) * 2, rtol=1e-6)
    assert again is not first and outcomes[-1] == "replayed"


def test_a_replayed_graph_with_calls_is_one_node(sim):
    ag = sim
    import asyncgpu.cupy as acp

    x = ag.array(np.ones(N, np.float32))

    @ag.graph
    def step():
        acp.multiply(x, 2, out=x)                # the caller's out=: an in-place write
        acp.add(x, 1, out=x)

    step()
    step()
    before = ag.statistics()
    step()
    after = ag.statistics()
    assert step.outcome == "replayed"
    assert after.nodes - before.nodes == 1 and after.calls == before.calls
    np.testing.assert_array_equal(x.numpy(), np.full(N, 15, np.float32))   # ((1*2+1)*2+1)*2+1


@pytest.mark.parametrize("call", ["np.sum", "add", "add, out=(None,)", "sum method"])
def test_a_call_given_out_none_is_captured_and_replays(sim, call):
    """``out=None`` asks for a new result, as leaving ``out`` out does: NumPy passes it on
    (``np.sum(x)`` calls ``x.sum(axis=None, dtype=None, out=None)``)."""
    ag = sim
    import asyncgpu.cupy as acp

    x = ag.zeros(N, np.float32)
    body, want = {
        "np.sum": (lambda: np.sum(x), lambda h: h.sum()),
        "add": (lambda: acp.add(x, 1, out=None), lambda h: h + 1),
        "add, out=(None,)": (lambda: acp.add(x, 1, out=(None,)), lambda h: h + 1),
        "sum method": (lambda: x.sum(axis=0, out=None), lambda h: h.sum(axis=0)),
    }[call]
    step = ag.graph(body)
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # nothing falls back
        for i in range(4):
            x[...] = i
            got = step()
            np.testing.assert_array_equal(np.asarray(got.numpy()),
                                          want(np.full(N, i, np.float32)))
            assert step.outcome == ("recorded" if i == 0 else "replayed")


def test_calls_off_the_allow_list_or_with_several_results_fall_back(sim):
    ag = sim
    import asyncgpu.cupy as acp

    x = ag.array(np.arange(N, dtype=np.float32))

    @ag.graph
    def step():
        return acp.modf(x)                       # two results: not on the allow-list

    with pytest.warns(UserWarning, match="modf.*allow-list"):
        frac, whole = step()
    np.testing.assert_array_equal(whole.numpy(), np.arange(N, dtype=np.float32))
    assert step.outcome == "eager"
    assert "sort" not in _graph_calls.CAPTURABLE and "sum" in _graph_calls.CAPTURABLE


def test_split_recording_keeps_capturable_calls_in_the_segment(sim):
    ag = sim
    import asyncgpu.cupy as acp

    scale, add, inc = kernels(ag)
    x = ag.zeros(N, np.float32)

    @ag.graph(split=True)
    def step():
        inc[1, N](x, N)
        s = x.sum()                              # captured: no segment break
        t = acp.cumsum(x)                        # not capturable: ends the segment
        return float(s), t

    got = [step()[0] for _ in range(3)]
    assert got == [N * 1.0, N * 2.0, N * 3.0]
    assert step.outcome == "replayed"            # one segment before cumsum, none after


_OPS = ("add", "multiply", "subtract", "maximum", "sqrt", "negative", "sum0")


@settings(max_examples=15, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(_OPS), st.integers(0, 2), st.integers(0, 2)),
                    min_size=1, max_size=6),
       order=st.sampled_from(["topological", "opara"]), seed=st.integers(0, 3))
def test_random_recorded_call_programs_equal_numpy(ops, order, seed):
    import asyncgpu as ag
    import asyncgpu.cupy as acp

    def program(lib, arrs):
        vals = list(arrs)
        for op, i, j in ops:
            a, b = vals[i], vals[j]
            if op == "sqrt":
                r = lib.sqrt(lib.absolute(a))
            elif op == "negative":
                r = lib.negative(a)
            elif op == "sum0":
                r = lib.sum(a, axis=0) + a       # broadcast back to the shape
            else:
                r = getattr(lib, op)(a, b)
            vals[i] = r
        return vals

    init = [np.random.default_rng(k).uniform(-1, 1, (4, 4)).astype(np.float32)
            for k in range(3)]
    want = program(np, [a.copy() for a in init])
    with ag.configure(backend="sim", sim_seed=seed, graph_order=order):
        arrs = [ag.array(a) for a in init]
        step = ag.graph(lambda: program(acp, arrs))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for _ in range(3):
                got = step()
        assert step.outcome == "replayed"
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g.numpy()), w, rtol=1e-5, atol=1e-6)


def test_a_call_given_cupys_argument_order_replays_as_it_ran(sim):
    """The recording re-issued its calls with NumPy's function, which reads ``argmax(a, 1,
    np.int32)``'s dtype as its ``out``: the recording failed on sim."""
    import asyncgpu.cupy as acp

    ag = sim
    a = ag.array(np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]]))

    @ag.graph
    def step(a):
        return acp.argmax(a, 1, np.int32), acp.nanargmax(a, 1, np.int64), a.all(1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # (nanargmax is not captured: it runs eagerly)
        for _ in range(3):
            top, nan_top, every = step(a)
            assert (top.dtype, nan_top.dtype) == (np.int32, np.int64)
            assert top.tolist() == nan_top.tolist() == [1, 0]
            assert every.tolist() == [True, False]


@pytest.mark.parametrize("static", [False, True])
def test_a_captured_calls_result_is_its_own_for_each_argument_set_of_the_function(sim, static):
    """The result was kept by the call's own operands alone: a recorded function called with
    other arguments (a kernel writing its operand from them) returned the same array, and the
    result the caller held from the first call read the second call's value."""
    ag = sim
    scale, add, inc = kernels(ag)

    def body(x, y):
        scale[1, N](x, y, np.float32(2), N)     # y = 2x
        return y.sum()

    f = ag.graph(body, static=static)
    ones = ag.array(np.ones(N, np.float32))
    tens = ag.array(np.full(N, 10, np.float32))
    y = ag.zeros(N, np.float32)
    first, second = f(ones, y), f(tens, y)
    assert first is not second
    assert (float(first), float(second)) == (2.0 * N, 20.0 * N)
    again = f(ones, y)                          # (the same arguments: the same array)
    assert again is first and float(again) == 2.0 * N and float(second) == 20.0 * N
