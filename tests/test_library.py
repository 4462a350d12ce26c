"""``asyncgpu.cupy`` and the ``Array`` operators against NumPy, the oracle (CuPy's test style).

Every test runs on the lazy, adversarial sim backend with its happens-before checker, so each
result is both NumPy's value and provably well ordered.
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncgpu.cupy as acp

RNG = np.random.default_rng(7)
A = RNG.uniform(0.5, 2.0, (6, 5))
B = RNG.uniform(0.5, 2.0, (6, 5))
S = RNG.uniform(0.5, 2.0, (5, 5)) + 5 * np.eye(5)      # well conditioned
SPD = S @ S.T


def check(got, want, rtol=1e-12, atol=1e-12):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            check(g, w, rtol, atol)
        return
    import asyncgpu as ag

    assert isinstance(got, ag.Array), type(got)
    host = got.numpy()
    want = np.asarray(want)
    assert host.shape == want.shape and host.dtype == want.dtype, (host, want)
    np.testing.assert_allclose(host, want, rtol=rtol, atol=atol)


UNARY = ["sqrt", "exp", "log", "log1p", "sin", "cos", "tanh", "arctan", "absolute", "negative",
         "floor", "ceil", "square", "reciprocal", "sign", "isnan", "isfinite", "rint", "cbrt",
         "exp2", "expm1", "degrees", "logical_not"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_ufuncs(sim, name):
    a = sim.array(A)
    check(getattr(acp, name)(a), getattr(np, name)(A))


BINARY = ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "arctan2",
          "hypot", "fmod", "equal", "not_equal", "less", "greater_equal", "logical_and",
          "copysign", "floor_divide"]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("rhs", ["array", "scalar", "broadcast"])
def test_binary_ufuncs(sim, name, rhs):
    a = sim.array(A)
    other = {"array": B, "scalar": 1.5, "broadcast": B[0]}[rhs]
    arg = other if rhs == "scalar" else sim.array(other)
    check(getattr(acp, name)(a, arg), getattr(np, name)(A, other))


@pytest.mark.parametrize("name", ["sum", "prod", "mean", "std", "var", "max", "min", "argmax",
                                  "argmin", "any", "all", "cumsum", "ptp", "median"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_reductions_with_axis(sim, name, axis):
    a = sim.array(A)
    fn_np, fn = getattr(np, name), getattr(acp, name)
    check(fn(a, axis=axis), fn_np(A, axis=axis))
    if name not in ("cumsum", "argmax", "argmin"):
        check(fn(a, axis=axis, keepdims=True), fn_np(A, axis=axis, keepdims=True))


@pytest.mark.parametrize("case", [
    ("matmul", lambda m: (m.asarray(A), m.asarray(B.T))),
    ("dot", lambda m: (m.asarray(A), m.asarray(B.T))),
    ("tensordot", lambda m: (m.asarray(A), m.asarray(B), 2)),
    ("outer", lambda m: (m.asarray(A[0]), m.asarray(B[1]))),
    ("concatenate", lambda m: ([m.asarray(A), m.asarray(B)],)),
    ("stack", lambda m: ((m.asarray(A), m.asarray(B)),)),
    ("where", lambda m: (m.asarray(A > 1), m.asarray(A), m.asarray(B))),
    ("clip", lambda m: (m.asarray(A), 0.8, 1.5)),
    ("sort", lambda m: (m.asarray(A),)),
    ("argsort", lambda m: (m.asarray(A),)),
    ("flip", lambda m: (m.asarray(A), 0)),
    ("roll", lambda m: (m.asarray(A), 2)),
    ("tile", lambda m: (m.asarray(A), (2, 1))),
    ("transpose", lambda m: (m.asarray(A),)),
    ("diff", lambda m: (m.asarray(A),)),
    ("cross", lambda m: (m.asarray(A[:, :3]), m.asarray(B[:, :3]))),
    ("einsum", lambda m: ("ij,kj->ik", m.asarray(A), m.asarray(B))),
    ("trace", lambda m: (m.asarray(S),)),
    ("linspace", lambda m: (0.0, 1.0, 7)),
    ("arange", lambda m: (3, 12, 2)),
    ("eye", lambda m: (4,)),
    ("zeros_like", lambda m: (m.asarray(A),)),
])
def test_array_functions(sim, case):
    import asyncgpu as ag

    name, make = case
    check(getattr(acp, name)(*make(ag)), getattr(np, name)(*make(np)))


@pytest.mark.parametrize("case", [
    ("solve", lambda m: (m.asarray(S), m.asarray(B[:5]))),
    ("inv", lambda m: (m.asarray(S),)),
    ("det", lambda m: (m.asarray(S),)),
    ("norm", lambda m: (m.asarray(A),)),
    ("qr", lambda m: (m.asarray(A),)),
    ("svd", lambda m: (m.asarray(A),)),
    ("eigh", lambda m: (m.asarray(SPD),)),
    ("cholesky", lambda m: (m.asarray(SPD),)),
    ("pinv", lambda m: (m.asarray(A),)),
    ("matrix_power", lambda m: (m.asarray(S), 3)),
    ("lstsq", lambda m: (m.asarray(A), m.asarray(B[:, 0]), None)),
])
def test_linalg(sim, case):
    import asyncgpu as ag

    name, make = case
    check(getattr(acp.linalg, name)(*make(ag)), getattr(np.linalg, name)(*make(np)),
          rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name,args", [
    ("fft", ()), ("ifft", ()), ("rfft", ()), ("fft2", ()), ("ifft2", ()), ("rfftn", ()),
    ("fftshift", ()), ("fft", (8,)),
])
def test_fft(sim, name, args):
    a = sim.array(A)
    check(getattr(acp.fft, name)(a, *args), getattr(np.fft, name)(A, *args),
          rtol=1e-10, atol=1e-10)


def test_random_generator_shapes_dtypes_statistics(sim):
    g = acp.random.default_rng(3)
    x = g.standard_normal((200, 100), dtype=np.float32)
    u = g.random(20000)
    k = g.integers(0, 10, size=5000)
    assert x.shape == (200, 100) and x.dtype == np.float32
    assert abs(float(x.mean())) < 0.02 and abs(float(x.std()) - 1) < 0.02
    assert 0 <= float(u.min()) and float(u.max()) < 1 and abs(float(u.mean()) - 0.5) < 0.01
    assert k.dtype.kind == "i" and int(k.min()) == 0 and int(k.max()) == 9
    # same seed, same draws: reproducible whatever the streams
    g2 = acp.random.default_rng(3)
    np.testing.assert_array_equal(g2.standard_normal((200, 100), dtype=np.float32).numpy(),
                                  x.numpy())


def test_random_global_state_is_refused(sim):
    with pytest.raises(AttributeError, match="default_rng"):
        acp.random.rand(3)


def test_issue_example(managed_memory, sim):
    ag = sim
    rng = np.random.default_rng(0)
    ha, hb = rng.random((64, 64)), rng.random((64, 64))
    a, b = ag.array(ha), ag.array(hb)
    a2, b2 = ag.array(ha.T.copy()), ag.array(hb * 2)
    c = acp.sqrt(a) + b
    d = acp.matmul(a2, b2)
    acp.multiply(c, 2, out=c)
    total = c.sum() + d.sum()
    pending = ag.statistics()
    assert not pending.host_syncs and pending.inflight == 7     # nothing has waited yet
    s = float(total)
    expected = ((np.sqrt(ha) + hb) * 2).sum() + (ha.T @ (hb * 2)).sum()
    assert s == pytest.approx(expected, rel=1e-12)
    st = ag.statistics()
    assert st.calls == 7 and st.streams_used >= 2
    assert st.host_syncs.get("host-read") == 1


def test_operators(sim):
    ag = sim
    a, b = ag.array(A), ag.array(B)
    cases = [
        (a + b, A + B), (a - 1, A - 1), (2 * a, 2 * A), (a / b, A / B), (1 / a, 1 / A),
        (a // 0.3, A // 0.3), (a % 0.7, A % 0.7), (a ** 2, A ** 2), (2 ** a, 2 ** A),
        (-a, -A), (+a, +A), (abs(a - 1.2), abs(A - 1.2)), (a < b, A < B), (a >= 1, A >= 1),
        (a == b, A == B), (a != a, A != A), (a @ b.T, A @ B.T), (a.T, A.T),
        (a.astype(np.float32), A.astype(np.float32)), (a.copy(), A.copy()),
        (a.sum(axis=0), A.sum(axis=0)), (a.mean(), A.mean()), (a.max(axis=1), A.max(axis=1)),
        (a.argmax(), A.argmax()), (a.T.reshape(30), A.T.reshape(30)), (a.T.ravel(), A.T.ravel()),
        (a.cumsum(axis=1), A.cumsum(axis=1)), (a.clip(0.8, 1.2), A.clip(0.8, 1.2)),
        (a.round(1), A.round(1)), (a.std(), A.std()), (a.min(), A.min()),
    ]
    ints = ag.array(np.arange(12, dtype=np.int64))
    hi = np.arange(12, dtype=np.int64)
    cases += [(ints & 5, hi & 5), (ints | 3, hi | 3), (ints ^ 6, hi ^ 6), (~ints, ~hi),
              (ints << 2, hi << 2), (ints >> 1, hi >> 1)]
    for got, want in cases:
        check(got, want)


def test_in_place_operators_write_the_left_operand(sim):
    ag = sim
    a = ag.array(A)
    view = a[1:3]
    same = a
    a += 1
    a *= 2
    view -= 0.5
    a /= ag.array(B)
    assert same is a
    expected = (A + 1) * 2
    expected[1:3] -= 0.5
    expected /= B
    check(a, expected)
    ints = ag.array(np.arange(5))
    ints //= 2
    check(ints, np.arange(5) // 2)


def test_matmul_in_place_writes_the_left_operand_or_refuses_before_anything_runs(sim):
    ag = sim
    m = ag.array(np.eye(2) * 2)
    alias, view = m, m[0]
    m @= ag.array(np.ones((2, 2)))
    assert m is alias
    check(m, np.full((2, 2), 2.0))
    check(view, [2.0, 2.0])
    stack = ag.array(np.ones((3, 2, 2)))
    stack @= ag.array(np.eye(2) * 3)
    check(stack, np.full((3, 2, 2), 3.0))
    ints = ag.array(np.ones((2, 2), np.int32))
    for left, right, why in [(ag.array(np.ones((3, 4))), ag.array(np.ones(4)), "of 2 or more"),
                             (ag.array(np.ones((2, 2))), ag.array(np.ones((4, 4))), "square"),
                             (ag.array(np.ones((2, 2))), ag.array(np.ones((3, 2, 2))), "stack"),
                             (ints, ag.array(np.ones((2, 2))),
                              "float64 product into the left operand's int32")]:
        calls = ag.statistics().calls
        with pytest.raises(ValueError, match=why):
            left @= right
        assert ag.statistics().calls == calls          # (refused before any node)
    check(ints, np.ones((2, 2), np.int32))


def test_scalar_conversions_wait_for_that_value_only(sim):
    ag = sim
    a = ag.array(A)
    total = a.sum()
    assert isinstance(total, ag.Array) and total.shape == ()
    assert float(total) == pytest.approx(A.sum())
    assert int(a.argmax()) == int(A.argmax())
    assert bool((a > 0).all()) is True
    assert a.mean().item() == pytest.approx(A.mean())


def test_out_and_in_place_functions(sim):
    ag = sim
    a, b = ag.array(A), ag.array(B)
    r = acp.add(a, b, out=a)
    check(a, A + B)
    assert r.shape == a.shape
    acp.copyto(b, 3.0)
    check(b, np.full_like(B, 3.0))
    z = ag.zeros((4, 4))
    acp.fill_diagonal(z, 2.0)
    check(z, 2 * np.eye(4))
    a.sort(axis=1)
    check(a, np.sort(A + B, axis=1))
    a.fill(1.5)
    check(a, np.full_like(A, 1.5))


def test_data_dependent_calls_synchronize_and_are_correct(sim):
    ag = sim
    h = np.array([3, 0, 1, 3, 0, 7, 1])
    x = ag.array(h)
    y = x * 2            # pending: nonzero must wait for it
    check(acp.nonzero(y), np.nonzero(h * 2))
    check(acp.unique(y), np.unique(h * 2))
    check(acp.extract(y > 2, y), np.extract(h * 2 > 2, h * 2))
    check(acp.flatnonzero(y), np.flatnonzero(h * 2))
    check(acp.bincount(x), np.bincount(h))
    vals, counts = acp.unique(x, return_counts=True)
    check((vals, counts), np.unique(h, return_counts=True))
    assert sim.statistics().host_syncs.get("library-call", 0) >= 6
    # boolean-mask indexing is a device array, as in CuPy (its nonzero synchronizes)
    got = y[y > 2]
    assert isinstance(got, ag.Array) and got.tolist() == (h * 2)[h * 2 > 2].tolist()


@pytest.mark.parametrize("name,call", [
    ("setdiff1d", lambda m, a, b: m.setdiff1d(a, b)),
    ("setxor1d", lambda m, a, b: m.setxor1d(a, b)),
    ("intersect1d", lambda m, a, b: m.intersect1d(a, b)),
    ("union1d", lambda m, a, b: m.union1d(a, b)),
    ("where with the condition alone", lambda m, a, b: m.where(a > 3)),
    ("rank-deficient lstsq", lambda m, a, b: m.linalg.lstsq(
        m.stack([a[:3], 2 * a[:3]], axis=1).astype(float), b[:3].astype(float), rcond=None)),
    ("trimseq", lambda m, a, b: m.polynomial.polyutils.trimseq(m.concatenate(
        [a.astype(float), m.zeros(3)]))),
    ("real_if_close", lambda m, a, b: m.real_if_close(a + 0j)),
    ("poly of conjugate roots", lambda m, a, b: m.poly(m.asarray(np.array([1j, -1j])))),
    ("delete of repeated indices", lambda m, a, b: m.delete(b, m.concatenate([a[:2], a[:2]]))),
    ("rank-deficient polyfit, full", lambda m, a, b: m.polyfit(
        m.ones(5), a.astype(float), 1, full=True)[1]),
])
def test_results_whose_shape_or_dtype_follow_the_values_are_right(sim, name, call):
    # (the simulator infers a call's result from runs on made-up data; these differ with the
    # values, and a wrong guess would be a wrong answer or a fault at a later synchronize)
    a, b = np.array([1, 2, 3, 4, 5]), np.array([3, 4, 5, 6, 7, 8])
    want = call(np, a, b)
    got = call(acp, acp.asarray(a), acp.asarray(b))
    check(tuple(got) if isinstance(want, tuple) else got,
          tuple(np.asarray(w) for w in want) if isinstance(want, tuple) else want)
    sim.synchronize()       # (and no fault reported for it)


@pytest.mark.parametrize("name,call", [
    ("arange(n)", lambda m, n, f: m.arange(n)),
    ("arange(0, n)", lambda m, n, f: m.arange(0, n)),
    ("arange of a float", lambda m, n, f: m.arange(f)),
    ("repeat(x, n)", lambda m, n, f: m.repeat(m.arange(3), n)),
    ("arange(m, n) of two 0-d arrays", lambda m, n, f: m.arange(n - 3, n)),
    ("arange(2, n)", lambda m, n, f: m.arange(2, n)),
    ("percentile(x, q)", lambda m, n, f: m.percentile(m.arange(10.0), f * 20)),
])
def test_a_0d_array_given_as_a_number_gives_numpys_shape(sim, name, call):
    """The result's shape follows the 0-d array's value: it was inferred from a stand-in's
    (``arange(n)`` an empty array, read silently as empty, then a fault at the next wait).
    CuPy 14.2 on the GPU gives these shapes too."""
    want = call(np, np.int64(5), 2.5)
    got = call(acp, acp.asarray(5), acp.asarray(2.5))
    check(got, want)
    sim.synchronize()       # (and no fault reported for it)


@pytest.mark.parametrize("call", [
    lambda n: acp.zeros((n, 2)), lambda n: acp.full((n,), 3.0),
    lambda n: acp.linspace(0, 1, num=n), lambda n: acp.eye(n), lambda n: acp.tri(n),
    lambda n: acp.triu(acp.ones((3, 3)), n), lambda n: acp.split(acp.arange(6.0), n),
    lambda n: acp.partition(acp.arange(6.0), n),
], ids=["zeros", "full", "linspace", "eye", "tri", "triu", "split", "partition"])
def test_a_0d_array_given_as_an_integer_is_refused_as_cupy_refuses_it(sim, call):
    # (CuPy 14.2 on the GPU refuses each: its arrays have no __index__; NumPy's take them)
    with pytest.raises(TypeError, match="'ndarray' object cannot be interpreted as an integer"):
        call(acp.asarray(2))
    sim.synchronize()


def test_a_0d_array_read_as_a_number_where_cupy_reads_it_so(sim):
    # (CuPy 14.2 on the GPU; NumPy's around needs an integer, and its rot90 writes k % 4 into k)
    n = acp.asarray(2)
    check(acp.around(acp.arange(6.0) / 3, n), np.around(np.arange(6.0) / 3, 2))
    check(acp.rot90(acp.arange(6.0).reshape(2, 3), n), np.rot90(np.arange(6.0).reshape(2, 3), 2))
    sim.synchronize()       # (and no fault reported for them)


def test_a_view_result_that_differs_from_its_inference_is_a_fault_not_a_wrong_answer(
        sim, monkeypatch):
    import asyncgpu as ag
    from asyncgpu.runtime import library, result_meta

    # (as if trimseq, which returns a view whose length follows the values, were unlisted)
    monkeypatch.setattr(library, "DATA_DEPENDENT", library.DATA_DEPENDENT - {"trimseq"})
    monkeypatch.setattr(result_meta, "_meta_cache", {})
    x = acp.asarray(np.array([1.0, 2.0, 0.0, 0.0]))
    acp.polynomial.polyutils.trimseq(x)
    with pytest.raises(ag.KernelFault, match="trimseq.*data-dependent"):
        sim.synchronize()


def test_views_of_arguments_are_views(sim):
    ag = sim
    a = ag.array(A)
    t = acp.transpose(a)
    r = acp.reshape(a, (5, 6))
    acp.multiply(a, 0, out=a)
    check(t, np.zeros((5, 6)))
    check(r, np.zeros((5, 6)))


def test_metadata_functions_and_constants(sim):
    ag = sim
    a = ag.array(A.astype(np.float32))
    assert acp.result_type(a, np.float64) == np.float64
    assert acp.shape(a) == (6, 5) and acp.ndim(a) == 2
    assert acp.float32 is np.float32 and acp.pi == np.pi
    assert acp.ndarray is ag.Array
    assert acp.get_array_module(a) is acp
    np.testing.assert_array_equal(acp.asnumpy(a), A.astype(np.float32))


def test_unknown_function_names_the_module(sim):
    with pytest.raises(AttributeError, match="no attribute 'no_such_function'"):
        acp.no_such_function


def test_bad_input_is_refused_before_enqueue_and_runtime_stays_usable(sim):
    ag = sim
    a, b = ag.array(A), ag.array(B[:, :4])
    before = ag.statistics().nodes
    with pytest.raises(ag.ArgumentError, match="call 'add'"):
        acp.add(a, b)
    with pytest.raises(ag.ArgumentError, match="asyncgpu.asarray"):
        acp.add(a, A)
    with pytest.raises(ag.ArgumentError, match="asyncgpu.asarray"):
        _ = a + A
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    with pytest.raises(ag.ArgumentError, match="asyncgpu.asarray"):
        acp.sqrt(FakeCUDAArray(A.copy()))
    assert ag.statistics().nodes == before
    c = ag.array(A)
    c.free()
    with pytest.raises(ag.FreedArrayError, match="call 'sqrt'"):
        acp.sqrt(c)
    check(a + 1, A + 1)


def test_arrays_are_not_hashable_like_numpy(sim):
    with pytest.raises(TypeError):
        hash(sim.array(A))


def test_sync_mode_gives_the_same_results():
    import asyncgpu as ag

    with ag.configure(backend="sim", execution="sync"):
        a = ag.array(A)
        check(acp.linalg.inv(a @ a.T + 5 * acp.eye(6)), np.linalg.inv(A @ A.T + 5 * np.eye(6)),
              rtol=1e-9)


def test_interop_on_sim(sim):
    ag = sim
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    d = FakeCUDAArray(A.copy())      # a device array of Numba's simulator
    a = ag.asarray(d)
    check(a, A)
    check(ag.array(d, dtype=np.float32), A.astype(np.float32))
    e = acp.exp(a)
    np.testing.assert_allclose(np.from_dlpack(e), np.exp(A))
    assert e.__dlpack_device__() == (1, 0)
    assert ag.asarray(a) is a
    check(ag.asarray(a, np.float32), A.astype(np.float32))
    with pytest.raises(AttributeError, match="no device pointer"):
        a.__cuda_array_interface__


def test_a_dlpack_export_on_sim_raises_buffer_error_for_no_copy_or_a_device_it_is_not_on(sim):
    """``np.from_dlpack(x, copy=False)`` gave a writable host copy whose writes were lost, and
    ``x.__dlpack__(dl_device=(2, 0))`` (a CUDA device asked for) a CPU capsule: a producer
    that cannot avoid a copy, or cannot export to the device asked for, raises
    ``BufferError``, as the array API standard asks (``__array__`` refuses copy=False too)."""
    ag = sim
    x = ag.asarray(np.arange(4.0))
    with pytest.raises(BufferError, match=r"copy=False\) cannot be honoured: .*host copy"):
        np.from_dlpack(x, copy=False)
    with pytest.raises(BufferError, match=r"dl_device=\(2, 0\)\) asks for a device the array is "
                                          r"not on \(\(1, 0\)\)"):
        x.__dlpack__(dl_device=(2, 0))
    for kwargs in ({}, {"copy": True}, {"device": "cpu"}, {"device": "cpu", "copy": None}):
        assert np.from_dlpack(x, **kwargs).tolist() == [0, 1, 2, 3]


def test_ufunc_methods_and_scalar_types(sim):
    ag = sim
    h = np.arange(6.0).reshape(2, 3)
    x = ag.array(h)
    check(acp.add.reduce(x, axis=1), np.add.reduce(h, axis=1))
    check(acp.multiply.outer(x[0], x[1]), np.multiply.outer(h[0], h[1]))
    z = ag.zeros(4)
    acp.add.at(z, ag.array(np.array([0, 0, 3])), 1.0)      # in place, repeated indices
    check(z, np.array([2.0, 0, 0, 1.0]))
    ints = ag.array(np.arange(5))
    assert (ints * 2).dtype == np.int64 and (ints * 2.0).dtype == np.float64
    assert (ints * 2).dtype == np.int64                       # cached metadata keeps types apart
    assert isinstance(np.float64(2) * x, ag.Array)            # NumPy scalars defer to Array


def test_value_dependent_shape_is_detected_without_a_list(sim):
    """``where(cond)`` (one argument) is not listed as data-dependent: inference notices."""
    ag = sim
    h = np.array([0.0, 2.0, 0.0, 3.0])
    x = ag.array(h)
    check(acp.where(x * 1 > 1), np.where(h > 1))


def test_library_modules_import_no_cuda_library():
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys, asyncgpu.runtime.library, asyncgpu.runtime.operators, "
            "asyncgpu.runtime.interop, asyncgpu.runtime.cupy_random, asyncgpu.cupy; "
            "bad = {'cupy', 'numba'} & {m.split('.')[0] for m in sys.modules}; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parent.parent)


def test_non_array_results_are_computed_from_the_real_values(sim):
    ag = sim
    x = ag.array(np.array([1.5, 2.5]))
    y = x * 2                      # pending
    assert acp.array2string(y) == np.array2string(np.array([3.0, 5.0]))


def test_export_stream_orders_a_consumer_after_all_pending_work(sim):
    """The stream handed to consumers (CAI ``stream``, DLPack) follows every pending node."""
    ag = sim
    from asyncgpu.runtime.export import export_stream
    from asyncgpu.runtime.current import current_runtime

    rt = current_runtime()
    x = ag.zeros(8)
    x.numpy()
    acp.add(x[:4], 1, out=x[:4])
    acp.add(x[4:], 1, out=x[4:])          # independent: another stream
    assert ag.statistics().streams_used == 2
    stream = export_stream(x)
    uid = x._alloc.buffer.uid
    rt.backend.hb.launch(stream, [(uid, 0, 64, True)], "consumer")    # ordered: no RaceError
    other = rt.backend.create_stream()
    with pytest.raises(ag.RaceError):
        rt.backend.hb.launch(other, [(uid, 0, 64, True)], "unordered consumer")
    ag.synchronize()
    assert export_stream(x) is None       # nothing pending: no stream to wait on


@pytest.mark.parametrize("call,kinds", [
    (lambda a: a + acp.zeros(4), (ValueError,)),                       # broadcasting
    (lambda a: a.sum(axis=5), (ValueError, IndexError, np.exceptions.AxisError)),
    (lambda a: acp.zeros(0).max(), (ValueError,)),                      # empty reduction
])
def test_a_refused_call_raises_what_cupy_raises_and_names_the_call(sim, call, kinds):
    import asyncgpu as ag

    a = acp.zeros((2, 3))
    with pytest.raises(kinds) as caught:
        call(a)
        sim.synchronize()
    assert isinstance(caught.value, ag.ArgumentError) and "failed" in str(caught.value)
    assert (a + 1).tolist() == [[1.0] * 3] * 2       # and the runtime goes on


def test_eigenvalues_are_complex_whatever_the_values_as_cupy_gives_them(sim):
    # (NumPy's are real where they all are; CuPy's eig and eigvals are always complex)
    symmetric, rotation = np.array([[2.0, 1.0], [1.0, 2.0]]), np.array([[0.0, -1.0], [1.0, 0.0]])
    w = acp.linalg.eigvals(acp.asarray(symmetric))
    assert w.dtype == np.complex128
    np.testing.assert_allclose(np.sort(w.numpy().real), [1.0, 3.0])
    w, v = acp.linalg.eig(acp.asarray(rotation.astype(np.float32)))
    assert w.dtype == v.dtype == np.complex64
    np.testing.assert_allclose(sorted(w.numpy().imag), [-1.0, 1.0], atol=1e-6)
    sim.synchronize()


@pytest.mark.parametrize("call", [
    lambda m: m.linalg.inv(m.zeros((2, 2))),
    lambda m: m.linalg.solve(m.zeros((2, 2)), m.ones(2)),
    lambda m: m.linalg.cholesky(-m.eye(2)),
])
def test_a_singular_matrix_gives_non_finite_values_not_an_error_as_cupy(sim, call):
    # (CuPy checks singular and indefinite matrices only under cupyx.errstate(linalg='raise'))
    got = call(acp)
    sim.synchronize()
    assert got.dtype == np.float64 and not np.isfinite(got.numpy()).any()


def test_a_call_with_out_returns_the_out_array_itself_as_cupy(sim):
    """It returned a new Array viewing ``out``: ``fn(x, out=o) is o`` was False."""
    import asyncgpu.cupy as acp

    x, out = acp.ones(3), acp.zeros(3)
    assert acp.add(x, x, out=out) is out and acp.add(x, x, out) is out
    assert acp.sin(x, out=(out,)) is out and acp.clip(x, 0, 1, out=out) is out
    assert acp.ravel(x) is not x                # (a view, not written: a new Array, as in CuPy)
    assert out.tolist() == [1.0] * 3


def test_a_library_call_out_of_memory_is_an_out_of_memory_error(sim):
    """It was an ArgumentError (a TypeError): ``except TypeError`` caught an out-of-memory."""
    import asyncgpu as ag
    import asyncgpu.cupy as acp

    with pytest.raises(ag.OutOfMemoryError, match="zeros") as caught:
        acp.zeros(10**14)                       # (800 TB)
    assert isinstance(caught.value, MemoryError)
    assert not isinstance(caught.value, TypeError)
    assert (acp.zeros(3) + 1).tolist() == [1.0] * 3     # (usable after it)


def test_an_in_place_call_with_out_returns_out_itself(sim):
    """``out`` also an input: the result viewed the input's slot, a new Array."""
    import asyncgpu.cupy as acp

    c, d = acp.ones(3), acp.ones(3)
    assert acp.multiply(c, 2, out=c) is c and acp.add(d, c, out=c) is c
    assert acp.sqrt(c, out=c) is c and c.clip(0, 1, out=c) is c
    assert c.tolist() == [1.0] * 3


def test_float_to_integer_conversions_saturate_as_on_the_gpu(sim):
    """As an H200 converted them (CUDA's conversions, not NumPy's undefined ones): toward zero,
    saturating; NaN to 0; an 8- or 16-bit integer keeps the 32-bit conversion's low bits."""
    import asyncgpu as ag
    import asyncgpu.cupy as acp

    x = ag.array(np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 300.7, -300.7, 2.5], np.float32))
    assert x.astype(np.int32).tolist() == [0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 300, -300, 2]
    assert x.astype(np.uint8).tolist() == [0, 255, 0, 0, 0, 44, 0, 2]
    assert x.astype(np.int8).tolist() == [0, -1, 0, -1, 0, 44, -44, 2]
    assert x.astype(np.uint64).tolist() == [2**63, 2**64 - 1, 0, 3000000000, 0, 300, 0, 2]
    d = x.astype(np.float64)
    assert d.astype(np.int32).tolist()[0] == -2**31       # (NaN, from a double: the GPU's)
    assert d.astype(np.uint32).tolist()[0] == 2**31
    assert acp.asarray(x, dtype=np.int16).tolist() == [0, -1, 0, -1, 0, 300, -300, 2]
    into = ag.zeros(8, np.int32)
    into[...] = x * 1                                         # (an Array value: a node)
    assert into.tolist() == x.astype(np.int32).tolist()
    acp.copyto(into, x[::-1] * 1, casting="unsafe")
    assert into.tolist() == x[::-1].astype(np.int32).tolist()
    assert x.astype(np.int32, order="F").flags.f_contiguous


def test_scatters_convert_floats_to_integers_as_an_assignment_does(sim):
    """put, ndarray.put, put_along_axis and fill_diagonal write on the device as an assignment
    does: a float stored into an integer array converts as the GPU converts (toward zero,
    saturating), not as NumPy's x86 casts (-1.5 to uint8 was 255). A number or a list CuPy
    converts on the host first, with NumPy's conversion."""
    import asyncgpu as ag
    import asyncgpu.cupy as acp

    v = ag.array(np.array([-1.5, np.inf, 1e20]))
    idx = ag.array(np.arange(3))
    for dtype in (np.uint8, np.int32):
        want = v.astype(dtype).tolist()
        assigned = ag.zeros(3, dtype)
        assigned[idx] = v
        put, method, along, diagonal = (ag.zeros(3, dtype), ag.zeros(3, dtype),
                                        ag.zeros((3, 1), dtype), ag.zeros((3, 3), dtype))
        acp.put(put, idx, v)
        method.put(idx, v)
        acp.put_along_axis(along, ag.zeros((3, 1), np.int64), v[:, None], 1)
        acp.fill_diagonal(diagonal, v)
        assert assigned.tolist() == put.tolist() == method.tolist() == want
        assert along.ravel().tolist() == acp.diagonal(diagonal).tolist() == want
    small = ag.zeros(2, np.uint8)
    acp.put(small, [0, 1], [1.5, 200.7])        # (host values: NumPy's conversion, as CuPy's)
    assert small.tolist() == [1, 200]
    with pytest.raises(OverflowError):
        acp.put(small, [0, 1], [-1.5, 300.7])


def test_a_call_on_a_broadcast_view_makes_no_stand_in_of_the_broadcast_shape(sim):
    """The simulator tries a call on stand-ins of its arguments to learn its result's shape:
    a broadcast view's stand-in spans the view's bytes, not its shape's elements."""
    import tracemalloc

    import asyncgpu.cupy as acp

    a = sim.array(np.arange(64, dtype=np.float64))
    view = acp.broadcast_to(a, (10**6, 64))                # 512 MB if made whole
    tracemalloc.start()
    try:
        total = view.sum(axis=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert total.tolist() == (np.arange(64.0) * 10**6).tolist()
    assert peak < 64 << 20


def test_a_0d_numpy_argument_changed_after_the_call_does_not_change_the_result(sim):
    """NumPy and CuPy take a 0-d NumPy array's value at the call: a write to it afterwards,
    before the node has run, changes nothing (it was held by reference and read later)."""
    x = sim.asarray(np.arange(4.0))
    s = np.array(2.0)
    got = [acp.full(3, s), acp.full_like(x, s), acp.where(x > 1, x, s), x.clip(s, None),
           x.searchsorted(s)]
    y = sim.zeros(3)
    y.fill(s)
    z = sim.zeros(3)
    acp.copyto(z, s)
    w = sim.zeros(3)
    acp.put(w, sim.asarray(np.array([0, 2])), s)
    s[...] = 50.0
    assert [g.tolist() for g in got] == [[2.0] * 3, [2.0] * 4, [2.0, 2.0, 2.0, 3.0],
                                         [2.0, 2.0, 2.0, 3.0], 2]
    assert (y.tolist(), z.tolist(), w.tolist()) == ([2.0] * 3, [2.0] * 3, [2.0, 0.0, 2.0])


@pytest.mark.parametrize("call", [
    lambda x, n: acp.sum(x, out=n),
    lambda x, n: x.sum(out=n),
    lambda x, n: np.sum(x, out=n),
    lambda x, n: x.mean(out=n),
    lambda x, n: acp.clip(x[0], 0.0, 1.0, n),
    lambda x, n: acp.copyto(n, x[0]),
])
def test_a_0d_numpy_out_is_refused_at_the_call(sim, call):
    """CuPy refuses a NumPy ``out`` (TypeError), as asyncgpu refuses one of more dimensions: a
    0-d one is no longer written later from a worker, first with a stand-in's value."""
    from asyncgpu.core.errors import ArgumentError

    x = sim.asarray(np.arange(4.0))
    n = np.zeros(())
    with pytest.raises(ArgumentError, match="NumPy array float64.. as an output") as info:
        call(x, n)
    assert isinstance(info.value, TypeError)
    sim.synchronize()
    assert n == 0.0
