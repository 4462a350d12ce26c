"""On ``sim``, ``asyncgpu.cupy`` offers CuPy's surface (names, Generator methods, signatures),
so that a program that passes on the simulator runs on the GPU."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import asyncgpu.cupy as acp
from asyncgpu import ArgumentError, NotOnSimulatorError
from asyncgpu.runtime import cupy_surface as _cupy_surface


@pytest.mark.parametrize("method", ["normal", "choice", "shuffle", "permutation", "bytes"])
def test_generator_methods_cupy_lacks_raise_attribute_error_as_on_the_gpu(sim, method):
    g = acp.random.default_rng(0)
    with pytest.raises(AttributeError, match=f"'Generator' object has no attribute '{method}'"):
        getattr(g, method)
    assert not hasattr(g, method)
    # CuPy's methods still draw, and the runtime is usable
    x = g.standard_normal(1000)
    assert x.shape == (1000,) and abs(float(x.mean())) < 0.2


def test_global_state_function_names_the_generator_method_cupy_has(sim):
    with pytest.raises(AttributeError, match=r"g\.standard_normal\(\.\.\.\)"):
        acp.random.randn(3)
    with pytest.raises(AttributeError, match="CuPy's Generator has no 'normal' method"):
        acp.random.normal(size=3)


@pytest.mark.parametrize("case", [
    ("in1d", lambda m: (m.asarray(np.arange(12.0).reshape(3, 4)), m.asarray([1.0, 5.0, 11.0])),
     lambda a, b: np.isin(a, b).ravel()),
    ("trapz", lambda m: (m.asarray(np.linspace(0, 1, 9) ** 2),), np.trapezoid),
    ("round_", lambda m: (m.asarray([0.125, 1.55, -2.5]), 1), np.round),
    ("product", lambda m: (m.asarray([[1.0, 2.0], [3.0, 4.0]]), 0), np.prod),
    ("cumproduct", lambda m: (m.asarray([1.0, 2.0, 3.0]),), np.cumprod),
    ("alltrue", lambda m: (m.asarray([True, False]),), np.all),
    ("sometrue", lambda m: (m.asarray([True, False]),), np.any),
    ("msort", lambda m: (m.asarray([[3.0, 1.0], [1.0, 2.0]]),), lambda a: np.sort(a, axis=0)),
])
def test_cupy_names_numpy_2_removed_run_as_their_numpy_equivalent(sim, case):
    name, make, reference = case
    got = getattr(acp, name)(*make(sim))
    want = reference(*make(np))
    got = got.numpy() if isinstance(got, sim.Array) else got
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("path", ["unstack", "vecdot", "block", "geomspace", "errstate",
                                  "linalg.multi_dot", "fft.test", "random.SeedSequence"])
def test_numpy_only_names_are_refused_as_on_the_gpu(sim, path):
    prefix, _, name = path.rpartition(".")
    module = f"cupy.{prefix}" if prefix else "cupy"
    ns = acp
    for part in filter(None, prefix.split(".")):
        ns = getattr(ns, part)
    with pytest.raises(AttributeError, match=f"module '{module}' has no attribute '{name}'"):
        getattr(ns, name)


def test_a_keyword_cupy_refuses_is_refused_before_anything_is_enqueued(sim):
    a = sim.array(np.arange(6.0))
    mask = a > 2
    before = sim.statistics().calls
    with pytest.raises(sim.ArgumentError, match=r"unexpected keyword argument 'where'.*"
                       r"sum\(a, axis=None, dtype=None, out=None, keepdims=False\)"):
        acp.sum(a, where=mask)
    with pytest.raises(TypeError, match="unexpected keyword argument 'initial'"):
        acp.max(a, initial=3.0)
    assert sim.statistics().calls == before
    assert float(acp.sum(a)) == 15.0          # the runtime is usable afterwards


@pytest.mark.parametrize("path", ["fuse", "RawKernel", "ElementwiseKernel", "cuda",
                                  "get_default_memory_pool", "fft.config", "random.XORWOW"])
def test_cupy_names_without_a_numpy_counterpart_are_not_available_on_sim(sim, path):
    ns = acp
    prefix, _, name = path.rpartition(".")
    for part in filter(None, prefix.split(".")):
        ns = getattr(ns, part)
    with pytest.raises(NotOnSimulatorError, match="not available on the simulator"):
        getattr(ns, name)
    with pytest.raises(NotImplementedError):
        getattr(ns, name)


def test_ufunc_attributes_follow_cupys_ufunc(sim):
    a = sim.array(np.arange(5.0))
    assert float(acp.add.reduce(a)) == 10.0
    assert acp.add.nin == 2
    with pytest.raises(AttributeError, match="ufunc' object has no attribute 'identity'"):
        acp.add.identity


def test_constants_and_types_are_cupys(sim):
    assert acp.NINF == -math.inf and math.isnan(acp.NaN) and acp.pi == math.pi
    assert acp.newaxis is None and acp.float32 is np.float32
    assert acp.AxisError is np.exceptions.AxisError and acp.s_ is np.s_


def test_the_list_loads_and_describes_cupy_14_2():
    s = _cupy_surface.surface()
    assert s["cupy_version"].startswith("14.2")
    top = s["namespaces"][""]
    assert top["sum"]["kind"] == "function" and top["add"]["kind"] == "ufunc"
    assert top["add"]["nin"] == 2 and top["add"]["nout"] == 1
    assert top["linalg"] == {"kind": "module", "walked": True}
    assert {"linalg", "fft", "random", "testing"} <= set(s["namespaces"])
    gen = s["generator_methods"]
    assert "standard_normal" in gen and "normal" not in gen
    assert [p["name"] for p in gen["integers"]["params"]] == [
        "self", "low", "high", "size", "dtype", "endpoint"]
    assert s["ndarray"]["sum"]["kind"] == "method" and s["ndarray"]["shape"]["kind"] == "attribute"


def _listed():
    s = _cupy_surface.surface()
    for prefix, entries in s["namespaces"].items():
        if prefix.split(".")[0] == "testing":
            continue       # asyncgpu.cupy.testing is its own module of host-side comparisons
        for name, entry in entries.items():
            yield prefix, name, entry


def test_every_listed_name_resolves_on_sim_or_is_documented_as_not_available(sim):
    resolved = unavailable = 0
    for prefix, name, entry in _listed():
        ns = acp
        for part in filter(None, prefix.split(".")):
            ns = getattr(ns, part)
        try:
            value = getattr(ns, name)
        except NotOnSimulatorError:
            unavailable += 1
            continue
        except AttributeError as exc:
            # only the functions of random's hidden global state are refused this way
            assert prefix == "random" and "explicit generator" in str(exc), (prefix, name)
            continue
        resolved += 1
        if entry["kind"] in ("function", "ufunc"):
            assert callable(value), (prefix, name)
    assert resolved > 400 and unavailable < 60


@pytest.mark.parametrize("name,call", [
    ("sum", lambda a, m: a.sum(where=m)),
    ("max", lambda a, m: a.max(initial=0.0)),
    ("mean", lambda a, m: a.mean(where=m)),
    ("all", lambda a, m: a.all(where=m)),
    ("take", lambda a, m: a.take(acp.asarray(np.array([7])), mode="wrap")),
    ("argsort", lambda a, m: a.argsort(stable=True)),
    ("partition", lambda a, m: a.partition(1, kind="introselect")),
    ("ptp", lambda a, m: a.ptp(where=m)),
    ("astype", lambda a, m: a.astype(np.float32, device=None)),
    ("sum", lambda a, m: a.sum(0, None, None, False, 1.0)),
])
def test_methods_refuse_what_cupys_ndarray_signature_refuses(sim, name, call):
    a = sim.array(np.arange(6.0).reshape(2, 3))
    mask = a > 1
    before = sim.statistics().calls
    with pytest.raises(sim.ArgumentError, match=rf"asyncgpu\.Array\.{name}: .*"
                       rf"CuPy's signature is ndarray\.{name}\("):
        call(a, mask)
    assert sim.statistics().calls == before
    assert float(a.sum(axis=None, keepdims=False)) == 15.0     # CuPy's keywords pass
    np.testing.assert_array_equal(a.take(acp.asarray(np.array([1])), axis=1).numpy(),
                                  [[1.0], [4.0]])


I8 = np.array([1, -2, 3, -4, 5, -6], np.int8)


def _value(r):
    if isinstance(r, tuple):
        return tuple(_value(x) for x in r)
    return (r.dtype.name, r.tolist()) if hasattr(r, "tolist") and hasattr(r, "dtype") else r


# (each expected value is what CuPy 14.2 gave on the GPU for the same call)
@pytest.mark.parametrize("case,expected", [
    (lambda: acp.argsort(acp.asarray(np.array([3, 1, 3, 2, 1, 3, 0]))),
     ("int64", [6, 1, 4, 3, 0, 2, 5])),                   # (stable: ties keep their order)
    (lambda: acp.asarray(np.array([3, 1, 3, 2, 1, 3, 0])).argsort(),
     ("int64", [6, 1, 4, 3, 0, 2, 5])),
    (lambda: 2 ** acp.asarray(I8), ("int8", [2, 0, 8, 0, 32, 0])),
    (lambda: acp.asarray(np.array([7, -1, 1], np.int32)) ** -1, ("int32", [0, -1, 1])),
    (lambda: acp.reciprocal(acp.asarray(np.array([0, 1, 2], np.int32))), ("int32", [0, 1, 0])),
    (lambda: type(acp.linalg.qr(acp.asarray(np.eye(3)))).__name__, "tuple"),
    (lambda: type(acp.linalg.eigh(acp.asarray(np.eye(3)))).__name__, "tuple"),
    (lambda: type(acp.linalg.slogdet(acp.asarray(np.eye(3)))).__name__, "tuple"),
    # (CuPy's sinc and i0 are ufuncs computing in half, single or double precision; its fix
    # keeps integers)
    (lambda: acp.fix(acp.asarray(np.array([-1, 0, 2], np.int32))), ("int32", [-1, 0, 2])),
    (lambda: acp.sinc(acp.asarray(np.array([True, False]))), ("float16", [0.0, 1.0])),
    (lambda: acp.i0(acp.asarray(np.array([0, 1], np.int16))).dtype.name, "float32"),
], ids=["argsort", "ndarray.argsort", "int-power", "negative-power", "reciprocal", "qr",
        "eigh", "slogdet", "fix-of-ints", "sinc-of-bools", "i0-of-int16"])
def test_results_are_cupys_where_numpys_differ(sim, case, expected):
    assert _value(case()) == expected


@pytest.mark.parametrize("solve,good", [
    (lambda a: acp.linalg.inv(a), 0.25 * np.eye(2)),
    (lambda a: acp.linalg.solve(a, acp.ones((2, 2, 1))), np.full((2, 1), 0.25)),
    (lambda a: acp.linalg.cholesky(a), 2.0 * np.eye(2)),
], ids=["inv", "solve", "cholesky"])
def test_a_batch_with_one_singular_matrix_spoils_only_that_one(sim, solve, good):
    """As CuPy's batched solvers (unchecked: NaN for the matrix that fails); the whole batch
    was NaN."""
    batch = np.stack([4.0 * np.eye(2), np.array([[1.0, 2.0], [2.0, 4.0]])])
    got = solve(acp.asarray(batch)).get()
    np.testing.assert_allclose(got[0], good)
    assert np.isnan(got[1]).all()
    sim.synchronize()


@pytest.mark.parametrize("case,exc,pattern", [
    (lambda: acp.where(acp.asarray(I8) > 0, acp.asarray(I8), 300), OverflowError,
     "Python integer 300 out of bounds for int8"),
    (lambda: acp.clip(acp.asarray(np.array([1, 2], np.uint8)), 0, 300), OverflowError,
     "Python integer 300 out of bounds for uint8"),
    (lambda: acp.ones(3).astype(acp.float64, casting="safe"), TypeError,
     "casting is not supported yet"),
    (lambda: acp.dot(acp.ones(3), 2), TypeError, "Argument 'b' has incorrect type"),
    (lambda: acp.choose(acp.zeros(3, acp.int64), [acp.ones(3), acp.zeros(3)]), AttributeError,
     "'list' object has no attribute 'shape'"),
    (lambda: acp.linalg.solve(acp.ones((2, 3)), acp.ones(2)), np.linalg.LinAlgError,
     "must be square"),
    (lambda: acp.linalg.inv(acp.ones((2, 3))), np.linalg.LinAlgError, "must be square"),
    (lambda: acp.sqrt([1.0, 4.0]), TypeError, "Unsupported type <class 'list'>"),
    (lambda: acp.add(acp.ones(2), (1, 2)), TypeError, "Unsupported type <class 'tuple'>"),
    # (an int result is not written into a bool or unsigned output, whatever the exponent)
    (lambda: acp.power(acp.arange(1, 4), -1, out=acp.zeros(3, bool)), TypeError,
     "Cannot cast .*int64.* to .*bool"),
    (lambda: acp.ones(3, bool).__ipow__(-2), TypeError, "Cannot cast .*int64.* to .*bool"),
    (lambda: acp.reciprocal(acp.asarray([0, 1, 2]), out=acp.zeros(3, bool)), TypeError,
     "Cannot cast .*int64.* to .*bool"),
    (lambda: acp.arange(3, dtype=acp.uint8) ** -2, OverflowError,
     "Python integer -2 out of bounds for uint8"),
], ids=["where", "clip", "astype-casting", "dot-scalar", "choose-list", "solve-non-square",
        "inv-non-square", "ufunc-list", "ufunc-tuple", "negative-power-into-bool",
        "negative-power-in-place", "reciprocal-of-zero-into-bool", "negative-power-of-uint8"])
def test_what_cupy_refuses_is_refused_with_its_exception_class(sim, case, exc, pattern):
    with pytest.raises(exc, match=pattern):
        case()
        sim.synchronize()
    assert float(acp.ones(2).sum()) == 2.0      # (the runtime stays usable)


def test_feature_detection_of_a_name_the_simulator_cannot_run_answers_false(sim):
    assert not hasattr(acp.random, "RandomState") and getattr(acp, "fuse", None) is None
    with pytest.raises(NotOnSimulatorError):    # (looked up plainly, it still says why)
        acp.fuse


@pytest.mark.parametrize("case,expected", [
    (lambda: acp.asarray(np.array([1, -2, 3], np.int32)).take(4), -2),
    (lambda: acp.asarray(np.array([1, -2, 3], np.int32)).take(-4), 3),
    (lambda: _value(acp.take(acp.asarray(np.array([1, -2, 3], np.int32)),
                             acp.asarray(np.array([3])))), ("int32", [1])),
    (lambda: _value(acp.take_along_axis(acp.arange(3), acp.asarray(np.array([5])), 0)),
     ("int64", [2])),
    # (a gather and a scatter by integer arrays wrap too; they faulted at the next wait)
    (lambda: _value(acp.arange(3)[acp.asarray(np.array([5, -4]))]), ("int64", [2, 2])),
    (lambda: _value(acp.arange(6).reshape(2, 3)[..., acp.asarray(np.array([4]))]),
     ("int64", [[1], [4]])),
    (lambda: _value(_assigned(acp.zeros(3), acp.asarray(np.array([5])), 9.0)),
     ("float64", [0.0, 0.0, 9.0])),
    (lambda: _value(_assigned(acp.zeros((2, 3)), (acp.asarray(np.array([3])), 1), 9.0)),
     ("float64", [[0.0, 0.0, 0.0], [0.0, 9.0, 0.0]])),
    (lambda: _value(_put_along(acp.zeros((2, 3)), acp.asarray(np.array([[5], [0]])))),
     ("float64", [[0.0, 0.0, 9.0], [9.0, 0.0, 0.0]])),
    # (CuPy's ravel_multi_index wraps by default, NumPy's raises)
    (lambda: _value(acp.ravel_multi_index((acp.asarray(np.array([0, 5])),
                                           acp.asarray(np.array([1, 1]))), (2, 3))),
     ("int64", [1, 4])),
    # (CuPy's ufunc.at is its scatter kernel, compress a take of the nonzero positions, and
    # searchsorted takes the data in sorter's order: each wraps as take does)
    (lambda: _value(_scattered(acp.add, acp.asarray(np.array([5, -1, 0])), 1.0)),
     ("float32", [1.0, 0.0, 2.0])),
    (lambda: _value(_scattered(acp.maximum, acp.asarray(np.array([4])), 7.0)),
     ("float32", [0.0, 7.0, 0.0])),
    (lambda: _value(acp.compress(acp.asarray(np.array([True, False, True, True])),
                                 acp.asarray(np.array([10.0, 20.0, 30.0])))),
     ("float64", [10.0, 30.0, 10.0])),
    (lambda: _value(acp.asarray(np.array([10.0, 20.0, 30.0])).compress([0, 1, 0, 1])),
     ("float64", [20.0, 10.0])),
    (lambda: _value(acp.searchsorted(acp.asarray(np.array([3.0, 1.0, 2.0])),
                                     acp.asarray(np.array([2.5])),
                                     sorter=acp.asarray(np.array([1, 5, 0])))),
     ("int64", [2])),
], ids=["take", "take-negative", "take-array", "take_along_axis", "getitem", "getitem-ellipsis",
        "setitem", "setitem-tuple", "put_along_axis", "ravel_multi_index", "add.at",
        "maximum.at", "compress", "ndarray.compress", "searchsorted-sorter"])
def test_take_wraps_an_index_out_of_range_around_as_cupy_does(sim, case, expected):
    r = case()
    assert (int(r) if not isinstance(r, tuple) else r) == expected


def _scattered(ufunc, indices, value):
    a = acp.zeros(3, dtype=np.float32)
    ufunc.at(a, indices, value)
    return a


def _assigned(a, index, value):
    a[index] = value
    return a


def _put_along(a, indices):
    acp.put_along_axis(a, indices, 9.0, 1)
    return a


@pytest.mark.parametrize("call", [
    lambda: acp.unravel_index(acp.asarray(np.array([1, 7])), (2, 3)),
    lambda: acp.unravel_index(acp.asarray(np.array([-1])), (2, 3)),
    lambda: acp.ravel_multi_index((acp.asarray(np.array([0, 5])), acp.asarray(np.array([1, 1]))),
                                  (2, 3), mode="raise"),
    lambda: acp.ravel_multi_index((acp.asarray(np.array([0, 5])), acp.asarray(np.array([1, 1]))),
                                  (2, 3), mode=("raise", "wrap")),
], ids=["unravel_index", "unravel_index-negative", "ravel_multi_index-raise",
        "ravel_multi_index-one-raises"])
def test_indices_cupy_checks_on_the_host_are_refused_at_the_call(sim, call):
    """CuPy reads them to the host (it synchronizes) and raises ValueError; the simulator
    inferred the result from stand-in values and faulted at the next wait."""
    with pytest.raises(ValueError):
        call()
    sim.synchronize()


@pytest.mark.parametrize("case,exc,pattern", [
    (lambda: acp.asarray(np.array([1, 2], np.int8)).clip(0, 300), OverflowError, "300 out of"),
    (lambda: acp.ones(3).dot(2), TypeError, "Argument 'b' has incorrect type"),
    (lambda: acp.asarray(np.array([1, 3])).searchsorted([0, 3]), NotImplementedError,
     "Only python scalars or ndarrays"),
    (lambda: acp.asarray(np.array([1], np.uint8)) >= 2**70, OverflowError, "too large"),
], ids=["clip", "dot", "searchsorted", "big-int"])
def test_methods_refuse_what_cupys_refuse(sim, case, exc, pattern):
    with pytest.raises(exc, match=pattern):
        case()
        sim.synchronize()


def test_nanargmax_of_a_slice_of_nans_alone_is_minus_one_as_in_cupy(sim):
    # (CuPy 14.2 on the GPU: [-1, 1] and -1; NumPy raises, which came as a fault at a wait)
    x = acp.asarray(np.array([[np.nan, np.nan], [1.0, 2.0]]))
    assert acp.nanargmax(x, axis=1).tolist() == [-1, 1]
    assert acp.nanargmin(x, axis=1).tolist() == [-1, 0]
    assert int(acp.nanargmin(acp.asarray(np.array([np.nan, np.nan])))) == -1
    # (CuPy's reduction gives int64 indices alone: another dtype is refused on the GPU)
    assert acp.nanargmax(x, 1, np.int64).dtype == np.int64
    with pytest.raises(TypeError, match="Wrong type .*int32.* for cupy_nanargmax"):
        acp.nanargmax(x, 1, np.int32)
    sim.synchronize()


@pytest.mark.parametrize("call", [
    lambda s, n: acp.linalg.matrix_power(s, -1), lambda s, n: acp.linalg.tensorinv(s, ind=1),
    lambda s, n: acp.linalg.pinv(n),
], ids=["matrix_power-of-a-singular", "tensorinv-of-a-singular", "pinv-of-nan"])
def test_linear_algebra_cupy_does_not_check_gives_non_finite_values_not_a_fault(sim, call):
    """CuPy does not check these unless asked, and gives non-finite values (on the GPU, 14.2:
    +-inf for the singular inverses, NaN for pinv); NumPy raised LinAlgError, a fault at the
    next wait."""
    singular = acp.asarray(np.array([[1.0, 2.0], [2.0, 4.0]]))
    with_nan = acp.asarray(np.array([[1.0, np.nan], [0.0, 1.0]]))
    got = np.asarray(acp.asnumpy(call(singular, with_nan)))
    sim.synchronize()
    assert not np.isfinite(got).all()


def test_a_call_reads_its_arguments_as_cupys_signature_does(sim):
    """Where NumPy's names or order differ from CuPy's (checked on the GPU, CuPy 14.2, for
    flip, percentile and argmax): the argument goes where CuPy's signature puts it."""
    a = acp.asarray(np.arange(12.0).reshape(3, 4))
    assert acp.flip(a=acp.arange(3)).tolist() == [2, 1, 0]
    assert float(acp.percentile(acp.arange(10.0), 50, interpolation="lower")) == 4.0
    got = acp.argmax(a, 1, np.int32)                        # (dtype is CuPy's third)
    assert got.dtype == np.int32 and got.tolist() == [3, 3, 3]
    out = acp.zeros(3, np.int32)
    acp.argmax(a, 1, np.int32, out)     # (out, CuPy's fourth, is booked as the call's write)
    assert out.tolist() == [3, 3, 3]
    with pytest.raises(TypeError):                          # (an array is no dtype)
        acp.argmax(a, 1, acp.zeros(3, np.int64))
    x, y = np.arange(6.0), np.arange(6.0)[::-1].copy()
    w = np.linspace(0.5, 1.0, 6)
    h = acp.histogram2d(acp.asarray(x), acp.asarray(y), 2, None, acp.asarray(w))[0]
    np.testing.assert_allclose(h.get(), np.histogram2d(x, y, 2, weights=w)[0])
    assert acp.concatenate(tup=(acp.arange(2), acp.arange(1))).tolist() == [0, 1, 0]
    assert acp.reshape(acp.arange(4), newshape=(2, 2)).shape == (2, 2)
    singular = acp.asarray(np.array([[1.0, 2.0], [2.0, 4.0]]))
    for call in (lambda: acp.linalg.inv(a=singular), lambda: acp.linalg.cholesky(a=singular),
                 lambda: acp.linalg.solve(a=singular, b=acp.ones(2))):
        assert np.isnan(call().get()).all()     # (by keyword: a fault, or NumPy's refusal)
    assert acp.linalg.matrix_power(M=singular, n=2).tolist() == [[5.0, 10.0], [10.0, 20.0]]
    sim.synchronize()


def test_a_generators_draws_take_cupys_dtype_where_numpys_lack_it(sim):
    # (CuPy 14.2 on the GPU: uniform and beta take dtype=; NumPy's generator methods do not)
    g = acp.random.default_rng(0)
    assert g.uniform(0.0, 1.0, size=4, dtype=np.float32).dtype == np.float32
    assert g.beta(2.0, 3.0, size=4, dtype=np.float32).dtype == np.float32
    first = acp.random.default_rng(7).uniform(size=3, dtype=np.float32).tolist()
    assert acp.random.default_rng(7).uniform(size=3, dtype=np.float32).tolist() == first
    sim.synchronize()


@pytest.mark.parametrize("call,exc", [
    (lambda: acp.zeros(4).put(acp.asarray(np.array([9])), 1.0, "raise"), IndexError),
    (lambda: acp.asarray(np.array([0, 5])).choose(acp.ones((2, 2))), ValueError),
    (lambda: acp.choose(acp.asarray(np.array([0, 5])), acp.ones((2, 2))), ValueError),
    (lambda: acp.percentile(acp.arange(4.0), acp.asarray(np.array([150.0]))), ValueError),
], ids=["put-raise", "ndarray.choose", "choose", "percentile-over-100"])
def test_an_index_out_of_range_in_mode_raise_is_refused_at_the_call(sim, call, exc):
    """CuPy reads the indices (or quantiles) to the host and raises at the call; the simulator
    inferred the result from stand-ins and faulted at the next wait."""
    with pytest.raises(exc):
        call()
    sim.synchronize()                   # (nothing left to fault)
    a = acp.zeros(4)
    a.put(acp.asarray(np.array([9])), 1.0)          # (CuPy's default mode wraps around)
    assert a.tolist() == [0.0, 1.0, 0.0, 0.0]


def test_sinc_i0_and_fix_take_a_ufuncs_out_dtype_and_casting_as_in_cupy(sim):
    """NumPy's sinc and i0 take no out=: the call was refused on sim as it ran."""
    x = acp.asarray(np.array([-1.5, 0.0, 0.5, 2.0]))
    for name in ("sinc", "i0", "fix"):
        fn = getattr(acp, name)
        out = acp.zeros(4, np.float32)
        assert fn(x, out=out) is out
        assert np.allclose(out.get(), getattr(np, name)(x.get()), atol=1e-6)
        assert fn(x, dtype=np.float32).dtype == np.float32
        with pytest.raises(TypeError, match="Cannot cast"):
            fn(x, out=acp.zeros(4, np.int32))           # (same_kind: no floats into ints)
    with pytest.raises(TypeError, match="cupy_i0"):
        acp.i0(acp.asarray(np.ones(2, np.complex64)))
    assert acp.sinc(acp.asarray(np.ones(2, np.complex64))).dtype == np.complex64
    sim.synchronize()


def test_sinc_is_exactly_zero_at_the_integers_and_one_near_zero_as_cupys_sinpi(sim):
    """CuPy computes sinpi(x) / (pi x): +0 at every integer, 1 within 1e-9 of 0, NaN at
    infinity; NumPy's sin(pi x) / (pi x) left -4e-17 at 2, a different answer on sim."""
    x = np.array([-3.0, -2, -1, -1e-10, 0, 1e-10, 1, 2, 3, 0.5, np.inf])
    for dtype in (np.float16, np.float32, np.float64):
        got = acp.sinc(acp.asarray(x.astype(dtype))).get()
        assert got[[0, 1, 2, 6, 7, 8]].tolist() == [0.0] * 6
        assert not np.signbit(got[[0, 1, 2, 6, 7, 8]]).any()
        assert got[3:6].tolist() == [1.0, 1.0, 1.0]
        assert got[9] == pytest.approx(2 / np.pi, rel=1e-3) and np.isnan(got[10])


# (each as CuPy 14.2's source computes or refuses it: cupy/_manipulation/add_remove.py,
# cupy/_statistics/histogram.py, cupy/linalg/_product.py, cupy/_core/core.pyx)
@pytest.mark.parametrize("case,expected", [
    (lambda: acp.unique_values(acp.asarray(np.array([3, 1, 2, 1, 9, 0]))),
     ("int64", [0, 1, 2, 3, 9])),                  # (sorted; NumPy 2's come in hash order)
    (lambda: acp.histogram(acp.asarray(np.array([0.0, 1, 1, 2])), 2,
                           weights=acp.asarray(np.ones(4, np.bool_)))[0], ("int64", [1, 3])),
    (lambda: acp.histogram(acp.asarray(np.array([0.0, 1, 1, 2])), 2,
                           weights=acp.asarray(np.ones(4, np.float32)))[0],
     ("float64", [1.0, 3.0])),
    (lambda: acp.kron(2, acp.asarray(np.array([1.0, 2.0], np.float32))),
     ("float32", [2.0, 4.0])),                     # (a number is a weak scalar: multiply)
    (lambda: acp.bincount(acp.asarray(np.array([1, 2])), minlength=None), ("int64", [0, 1, 1])),
], ids=["unique_values", "histogram-bool-weights", "histogram-float32-weights", "kron-number",
        "bincount-minlength-none"])
def test_sorting_and_counting_results_are_cupys(sim, case, expected):
    assert _value(case()) == expected


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda s: acp.sort(s, kind="quicksort"), ValueError, "kind can only be None or 'stable'"),
    (lambda s: acp.argsort(s, kind="heapsort"), ValueError, "kind can only be None"),
    (lambda s: s.copy().sort(kind="quicksort"), ValueError, "kind can only be None"),
    (lambda s: acp.zeros((3, 4))[:, ::2].sort(), NotImplementedError, "non-contiguous"),
    (lambda s: acp.zeros((3, 4))[:, ::2].partition(1), NotImplementedError, "non-contiguous"),
    (lambda s: acp.lexsort((s, s)), AttributeError, "stack them first"),
    (lambda s: acp.searchsorted(s, np.int64(2)), NotImplementedError, "Only python scalars"),
    (lambda s: acp.histogram(s, "auto"), NotImplementedError, "integer and array bins"),
    (lambda s: acp.histogram(s, 2, weights=[1.0] * 4), ValueError, "weights must be"),
    (lambda s: acp.fft.fft([1.0, 2.0]), TypeError, "got a list as argument 1 where CuPy takes"),
    (lambda s: acp.unique([3, 1, 1]), AttributeError, "got a list"),
    (lambda s: acp.bincount([1, 2]), AttributeError, "got a list"),
    (lambda s: acp.nonzero([1, 0]), TypeError, "got a list"),
    (lambda s: acp.count_nonzero([1, 0]), TypeError, "got a list"),
    (lambda s: acp.where([True, False], 1.0, 2.0), AttributeError, "got a list"),
], ids=["sort-kind", "argsort-kind", "method-sort-kind", "sort-of-a-strided-view",
        "partition-of-a-strided-view", "lexsort-of-a-tuple", "searchsorted-numpy-scalar",
        "histogram-auto", "histogram-list-weights", "fft-of-a-list", "unique-of-a-list",
        "bincount-of-a-list", "nonzero-of-a-list", "count_nonzero-of-a-list",
        "where-of-a-list"])
def test_what_cupys_sorting_counting_and_fft_refuse_is_refused_at_the_call(sim, call, exc,
                                                                           pattern):
    """NumPy takes each of these (a list as an array, any sort kind, a tuple of keys), so
    the program ran on sim and failed on the GPU."""
    s = acp.asarray(np.array([3.0, 1.0, 2.0, 1.0]))
    with pytest.raises(exc, match=pattern):
        call(s)
    assert acp.sort(s).tolist() == [1.0, 1.0, 2.0, 3.0]        # (usable after it)


# (each as CuPy 14.2's source reads the argument: a method of it, cupy/_math/sumprod.py and
# cupy/_logic/truth.py; a Cython ndarray parameter, cupy/_core/_routines_math.pyx)
@pytest.mark.parametrize("call, exc, said", [
    (lambda x: acp.isin(x, [1, 2]), AttributeError, "got a list as argument 2"),
    (lambda x: acp.isin(2, x), AttributeError, "got an int as argument 1"),
    (lambda x: acp.sum([1.0, 2.0]), AttributeError, "got a list as argument 1"),
    (lambda x: acp.mean((1.0, 2.0)), AttributeError, "got a tuple as argument 1"),
    (lambda x: acp.clip(3.0, 0, 1), AttributeError, "got a float as argument 1"),
    (lambda x: acp.searchsorted([1, 2], x), NotImplementedError, "got a list"),
    (lambda x: acp.reshape([1, 2], (2, 1)), AttributeError, "got a list"),
    (lambda x: acp.zeros_like([1, 2]), AttributeError, "got a list"),
    (lambda x: acp.array_equal(x, 1), AttributeError, "got an int as argument 2"),
    (lambda x: acp.full((2,), [1.0, 2.0]), AttributeError, "got a list as argument 2"),
    (lambda x: acp.cumsum([1, 2]), TypeError, "got a list"),
    (lambda x: acp.median([1.0, 2.0]), TypeError, "got a list"),
    (lambda x: acp.all([True]), TypeError, "got a list"),
    (lambda x: acp.expand_dims((1, 2), 0), TypeError, "got a tuple"),
], ids=["isin-list", "isin-number", "sum-list", "mean-tuple", "clip-number", "searchsorted-list",
        "reshape-list", "zeros_like-list", "array_equal-number", "full-list", "cumsum-list",
        "median-list", "all-list", "expand_dims-tuple"])
def test_host_values_where_cupy_reads_an_array_are_refused_at_the_call_as_cupy_fails(
        sim, call, exc, said):
    x = acp.arange(4)
    with pytest.raises(exc, match=said):
        call(x)
    assert acp.full((2,), 3.0).tolist() == [3.0, 3.0]      # (a number to fill with is one)
    assert acp.isin(x, acp.asarray([1, 2])).tolist() == [False, True, True, False]


def test_a_generators_draws_convert_to_any_dtype_as_cupys_do(sim):
    """CuPy's ``random`` and ``standard_exponential`` draw floats and convert them to the
    ``dtype`` asked for, unchecked (cupy/random/_generator_api.pyx); NumPy's took float32 and
    float64 alone, so a program CuPy runs was refused on sim. CuPy draws exponentials by
    ``'inv'`` alone."""
    g = acp.random.default_rng(0)
    for dtype in (np.float16, np.int32, np.complex64, np.float32):
        assert g.random(3, dtype).dtype == dtype
        assert g.standard_exponential(3, dtype).dtype == dtype
    with pytest.raises(NotImplementedError, match="method 'zig' is not supported"):
        g.standard_exponential(3, method="zig")
    assert g.random(2).dtype == np.float64


def test_rounding_half_and_single_floats_scales_in_double_precision_as_cupy(sim):
    """CuPy rounds rint(x * 10**d) / 10**d in double precision (cupy/_core/core.pyx's
    cupy_round); NumPy scales a float32 in float32: 0.35 to one decimal was 0.4 on sim."""
    x = acp.asarray(np.array([0.35, 0.05], np.float32))
    assert acp.around(x, 1).tolist() == pytest.approx([0.3, 0.1])
    assert x.round(1).dtype == np.float32
    assert acp.round(acp.asarray(np.array([0.55], np.float16)), 1).tolist() == \
        pytest.approx([0.5], abs=1e-3)


def test_half_float_sums_and_means_accumulate_in_single_precision_as_cupy(sim):
    """4,096 halves summed down a column: 2,048 where NumPy accumulates in half precision."""
    ones = acp.ones((4096, 2), np.float16)
    assert acp.sum(ones, axis=0).tolist() == [4096.0, 4096.0]
    assert ones.sum(axis=0).dtype == np.float16
    assert acp.mean(acp.ones((4096, 2), np.float32), axis=0, dtype=np.float16).tolist() == \
        [1.0, 1.0]


def test_var_and_std_follow_cupys_kernels(sim):
    """cupy/_core/_routines_statistics.pyx's _var: the mean in the input's own type (truncated
    for integers when dtype is given), a double-precision result for an integer dtype, NaN
    without a degree of freedom."""
    i = acp.asarray(np.array([1, 2], np.int32))
    assert float(acp.var(i)) == 0.25 and float(i.std()) == 0.5
    assert float(acp.var(i, dtype=np.float64)) == 0.5          # (mean 1.5 truncated to 1)
    assert acp.var(i, dtype=np.int64).dtype == np.float64
    assert np.isnan(float(acp.var(acp.asarray([1.0, 2.0]), ddof=2)))
    assert acp.var(acp.asarray(np.ones(3, np.complex64))).dtype == np.float32
    m = acp.arange(12.0).reshape(3, 4)
    assert acp.var(m, axis=1).tolist() == [1.25] * 3
    assert acp.std(m, axis=(0, 1), keepdims=True).shape == (1, 1)



def test_float_floor_division_and_remainder_are_cupys_floor_of_the_quotient(sim):
    """CuPy computes float x // y as floor(x / y) and x % y as x - floor(x / y) * y, fused
    (cupy/_core/include/cupy/carray.cuh, _routines_math.pyx); NumPy's gave 1.0 // 0.1 == 9.0.
    The values are raw CuPy's on an H200."""
    x = acp.asarray(np.array([1.0, 7.0, -1.0]))
    assert (x // 0.1).tolist() == [10.0, 70.0, -10.0]
    assert (x % 0.1).tolist() == [-5.551115123125783e-17, -3.885780586188048e-16,
                                  5.551115123125783e-17]
    q, r = divmod(acp.asarray(np.array([1.0])), 0.1)
    assert (q.tolist(), r.tolist()) == ([10.0], [-5.551115123125783e-17])
    assert (acp.asarray(np.array([1.0, 3.0], np.float32)) // np.float32(0.1)).tolist() == \
        [10.0, 30.0]
    assert np.isnan((acp.asarray(np.array([1.0])) % np.inf).tolist()[0])
    assert (acp.arange(5) // 2).tolist() == [0, 0, 1, 1, 2]          # (integers as before)


@pytest.mark.parametrize("call, exc, said", [
    (lambda x: acp.maximum.accumulate(x), NotImplementedError, "maximum.accumulate"),
    (lambda x: acp.maximum.reduce(x), NotImplementedError, "maximum.reduce"),
    (lambda x: acp.multiply.reduceat(x, acp.asarray([0, 2])), NotImplementedError, "reduceat"),
    (lambda x: acp.multiply.at(x, acp.asarray([0]), 2.0), NotImplementedError, "multiply.at"),
    (lambda x: acp.add.at(acp.zeros(2, np.int8), acp.asarray([0]), 1), TypeError,
     "only supports int32"),
    (lambda x: acp.add.reduce(x, initial=1.0), ArgumentError,
     "unexpected argument 'initial'"),
    (lambda x: acp.add.reduce(x, where=x > 1), ArgumentError, "unexpected argument 'where'"),
], ids=["accumulate", "reduce", "reduceat", "at", "at-dtype", "reduce-initial", "reduce-where"])
def test_ufunc_methods_cupy_lacks_are_refused_at_the_call(sim, call, exc, said):
    """cupy/_core/_kernel.pyx: reduce and accumulate for add and multiply alone, reduceat for
    add, at for the ufuncs with a scatter kernel (and its dtypes)."""
    x = acp.asarray(np.array([1.0, 3.0, 2.0]))
    with pytest.raises(exc, match=said):
        call(x)
    assert acp.add.accumulate(x).tolist() == [1.0, 4.0, 6.0]
    acp.add.at(x, acp.asarray([0]), 1.0)
    assert x.tolist() == [2.0, 3.0, 2.0]


def test_operators_compare_and_raise_to_powers_as_cupys(sim):
    """CuPy's __richcmp__ and __pow__ (cupy/_core/core.pyx): == None is an array of False,
    a string is refused, a 0-d NumPy array compares as its value and is refused in arithmetic,
    ** 0.5 is sqrt (NaN at -inf, where power gives inf), the modulo of pow() is ignored."""
    a = acp.asarray(np.array([1.0, 2.0]))
    assert (a == None).tolist() == [False, False]       # noqa: E711
    assert (a != None).tolist() == [True, True]         # noqa: E711
    with pytest.raises(TypeError, match="Unsupported type"):
        a == "a"                                        # noqa: B015
    assert (acp.asarray(np.array([0.1], np.float32)) == np.array(0.1)).tolist() == [True]
    with pytest.raises(TypeError, match="0-d NumPy array"):
        a * np.array(2.0)
    with pytest.raises(TypeError, match="Unsupported type"):
        acp.sqrt(np.array(4.0))
    edges = acp.asarray(np.array([-np.inf, -0.0, 4.0])) ** 0.5
    assert np.isnan(edges.tolist()[0]) and edges.tolist()[1:] == [0.0, 2.0]
    assert np.signbit(edges.get()[1])
    assert pow(a, 2, 5).tolist() == [1.0, 4.0]
    assert (acp.arange(3) ** 0.5).dtype == np.float64
    assert "x" not in a and 2.0 in a


def test_quantile_and_percentile_interpolate_sorted_data_as_cupy(sim):
    """cupy/_statistics/order.py sorts (NaN last) and interpolates without propagating NaN:
    quantile([1, nan, 3], 0.25) is 2.0 on the GPU, NaN in NumPy; NumPy's newer methods are
    refused."""
    x = acp.asarray(np.array([1.0, np.nan, 3.0]))
    assert float(acp.quantile(x, 0.25)) == 2.0 and acp.quantile(x, 0.25).ndim == 0
    assert float(acp.quantile(x, 0.0)) == 1.0 and np.isnan(float(acp.quantile(x, 0.75)))
    assert acp.percentile(x, [0, 25]).tolist() == [1.0, 2.0]
    m = np.arange(12.0).reshape(3, 4)
    am = acp.asarray(m)
    for kwargs in ({"axis": 1}, {"axis": 0}, {"method": "lower"}, {"method": "nearest"},
                   {"method": "midpoint"}, {"axis": 1, "keepdims": True}):
        got = acp.quantile(am, [0.1, 0.5, 0.9], **kwargs).get()
        np.testing.assert_allclose(got, np.quantile(m, [0.1, 0.5, 0.9], **kwargs))
    with pytest.raises(ValueError, match="'hazen' method is not yet supported"):
        acp.quantile(am, 0.5, method="hazen")
    with pytest.raises(ValueError, match="Percentiles must be in the range"):
        acp.percentile(am, 150.0)


def test_clip_follows_cupys_kernel_with_a_nan_bound_and_refuses_complex(sim):
    """cupy_clip: max if min > max, else min if x < min, else max if x > max, else x; a NaN
    bound drops out of those tests (NumPy gives NaN); no complex loop."""
    x = acp.asarray(np.array([-1.0, 5.0, 0.5]))
    assert acp.clip(x, np.nan, 1.0).tolist() == [-1.0, 1.0, 0.5]
    assert acp.clip(x, 2.0, 1.0).tolist() == [1.0, 1.0, 1.0]
    assert x.clip(0.0, None).tolist() == [0.0, 5.0, 0.5]
    with pytest.raises(TypeError, match="cupy_clip"):
        acp.clip(acp.asarray(np.array([2 + 1j])), 0, 1)


def test_an_average_with_weights_summing_to_zero_raises_at_the_call_as_cupy(sim):
    """CuPy reads the weights' sum to refuse zero (cupy/_statistics/meanvar.py): a
    ZeroDivisionError at the call, where sim's was a KernelFault at the next wait."""
    x = acp.arange(4.0)
    with pytest.raises(ZeroDivisionError, match="Weights sum to zero"):
        acp.average(x, weights=acp.asarray(np.array([1.0, -1.0, 0.0, 0.0])))
    assert float(acp.average(x, weights=acp.ones(4))) == 1.5
    assert float(acp.average(x)) == 1.5


def test_nanvar_and_nanstd_follow_cupys_kernels(sim):
    """cupy/_core/_routines_statistics.pyx's _nanvar: the input's type whatever dtype says
    (nanstd takes dtype's), each deviation divided by max(count - ddof, 0): inf without a
    degree of freedom where NumPy gives NaN."""
    f = acp.asarray(np.array([1.0, 2.0, np.nan, 4.0], np.float32))
    assert acp.nanvar(f, dtype=np.float64).dtype == np.float32
    assert acp.nanstd(f, dtype=np.float64).dtype == np.float64
    assert float(acp.nanvar(f)) == pytest.approx(np.nanvar([1.0, 2.0, np.nan, 4.0]))
    assert float(acp.nanvar(acp.asarray(np.array([1.0, 3.0])), ddof=2)) == np.inf
    m = np.arange(12.0).reshape(3, 4)
    m[0, 0] = np.nan
    np.testing.assert_allclose(acp.nanvar(acp.asarray(m), axis=1).get(), np.nanvar(m, axis=1))
    assert float(acp.nanvar(acp.arange(4))) == 1.25


def test_reductions_take_a_list_of_axes_as_cupys_do(sim):
    """CuPy's reductions take any sequence of axes (cupy/_core/_reduction.pyx); NumPy's refused
    a list, so sum(a, axis=[0]) failed on sim where the GPU computes it."""
    h = np.arange(12.0).reshape(3, 4)
    m = acp.asarray(h)
    assert acp.sum(m, axis=[0]).tolist() == h.sum(axis=0).tolist()
    assert float(m.sum(axis=[0, 1])) == 66.0
    assert acp.mean(m, axis=[1]).tolist() == h.mean(axis=1).tolist()
    np.testing.assert_allclose(acp.nanvar(m, axis=[1]).get(), h.var(axis=1))
    np.testing.assert_allclose(acp.quantile(m, 0.5, axis=[1]).get(), np.quantile(h, 0.5, axis=1))


def test_max_min_all_any_and_kin_take_a_list_of_axes_and_var_refuses_one_as_cupy(sim):
    """As raw CuPy 14.2 answered on an H200: max, min, all, any, nanmean, median, ptp take a
    list of axes; var and std raise TypeError (their code indexes a shape with it)."""
    h = np.arange(12.0).reshape(3, 4)
    m = acp.asarray(h)
    assert acp.max(m, axis=[1]).tolist() == [3.0, 7.0, 11.0]
    assert acp.min(m, axis=[0, 1]).tolist() == 0.0
    assert acp.all(m, axis=[1]).tolist() == [False, True, True]
    assert m.any(axis=[0, 1]).tolist() is True
    assert acp.nanmean(m, axis=[1]).tolist() == [1.5, 5.5, 9.5]
    assert acp.median(m, axis=[1]).tolist() == [1.5, 5.5, 9.5]
    assert acp.ptp(m, axis=[1]).tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(TypeError, match="not list"):
        acp.var(m, axis=[1])
    with pytest.raises(TypeError, match="not list"):
        m.std(axis=[0])


def test_unique_values_keeps_each_nan_as_cupys(sim):
    """cupy/_manipulation/add_remove.py: unique_values is unique(x, equal_nan=False)."""
    got = acp.unique_values(acp.asarray(np.array([np.nan, 1.0, np.nan]))).get()
    assert got[0] == 1.0 and np.isnan(got[1:]).all() and got.size == 3


def test_an_integer_array_to_a_negative_float_power_is_a_float_reciprocal(sim):
    """CuPy's __pow__ with -1.0 is reciprocal(x, dtype=float64): 1 / 0 is inf there; without
    dtype an integer reciprocal of 0 is 0. (The simulator inferred int64 from stand-in values
    holding a 0 and faulted at the next wait on data without one.)"""
    x = acp.asarray(np.array([4, 2]))
    assert _value(x ** -1.0) == ("float64", [0.25, 0.5])
    assert _value(acp.reciprocal(x, dtype=np.float64)) == ("float64", [0.25, 0.5])
    assert _value(acp.asarray(np.array([0, 4])) ** -1.0) == ("float64", [np.inf, 0.25])
    assert _value(acp.reciprocal(acp.asarray(np.array([0, 4], np.int32)))) == ("int32", [0, 0])


def test_quantile_of_single_floats_with_a_python_q_stays_single_and_refuses_a_2d_q(sim):
    """cupy/_statistics/order.py: the result type is result_type(a, q) with q as given (a
    Python number weak), and a q of more than one dimension raises ValueError."""
    x = acp.arange(10, dtype=np.float32)
    assert acp.quantile(x, 0.5).dtype == np.float32
    assert acp.percentile(x, 50).dtype == np.float32
    assert acp.quantile(x, [0.5]).dtype == np.float64      # (a list: a float64 array first)
    with pytest.raises(ValueError, match="Expected q to have a dimension of 1"):
        acp.quantile(acp.arange(10.0), acp.asarray(np.array([[0.1, 0.5]])))


def test_a_half_float_variance_sums_in_half_and_overflows_as_cupys_kernel(sim):
    """cupy/_core/_routines_statistics.pyx: _var_core_float16 reduces in its output type."""
    assert np.isinf(float(acp.var(acp.arange(100, dtype=np.float16))))
    assert float(acp.var(acp.arange(10, dtype=np.float16))) == 8.25


def test_a_gather_from_an_array_without_elements_is_refused_at_the_call(sim):
    """CuPy's take: 'cannot do a non-empty take from an empty axes.' before anything runs."""
    idx = acp.asarray(np.array([0]))
    with pytest.raises(IndexError, match="non-empty take from an empty axes"):
        acp.zeros(0)[idx]
    with pytest.raises(IndexError, match="non-empty take from an empty axes"):
        acp.zeros((2, 0))[:, idx]
    assert acp.zeros((0, 3))[:, idx].shape == (0, 1)
    assert float(acp.ones(3)[idx][0]) == 1.0             # (the runtime goes on)


def test_calls_numpy_refuses_run_as_cupys_do(sim):
    """Each as CuPy 14.2 gave it on the GPU: argmax over a tuple of axes (its reduction kernel
    counts through them flattened), sign of booleans (int8), one element assigned from an
    array of one element, searchsorted's side anything but 'right' taken as 'left'."""
    m = acp.asarray(np.array([[3.0, 1.0, 4.0], [1.0, 5.0, 9.0]]))
    assert int(acp.argmax(m, axis=(0, 1))) == 5 and int(m.argmin(axis=(0, 1))) == 1
    assert acp.argmax(m, axis=(1,), keepdims=True).tolist() == [[2], [2]]
    assert _value(acp.sign(acp.asarray(np.array([True, False])))) == ("int8", [1, 0])
    a = acp.asarray(np.array([1, 2], np.int8))
    a[0] = acp.asarray(np.array([5], np.int32))
    assert a.tolist() == [5, 2]
    z = acp.asarray(np.array(2.5))
    z[...] = acp.asarray(np.array([7.0]))
    assert float(z) == 7.0
    assert _value(acp.searchsorted(acp.asarray(np.array([1.0, 2.0])),
                                   acp.asarray(np.array([1.0])), side="middle")) == ("int64", [0])


def test_creation_from_numbers_refuses_what_cupys_refuses(sim):
    """cupy/_creation/ranges.py works out arange's length with numpy.ceil and int(), and
    linspace between two numbers in float(): a complex bound and an infinite range raise."""
    with pytest.raises(TypeError):
        acp.arange(0, 2 + 1j)
    with pytest.raises(OverflowError):
        acp.arange(0, np.inf)
    with pytest.raises(TypeError, match="complex"):
        acp.linspace(0, 1j, 3)
    assert acp.arange(np.float32(1), 3).dtype == np.float64       # (CuPy's: float)
    assert acp.arange(5, 1, -2).tolist() == [5, 3] and acp.arange(3).dtype == np.int64
    assert acp.linspace(0, 1, 3).tolist() == [0.0, 0.5, 1.0]


def test_functions_of_host_data_read_their_input_once_at_the_call(sim, tmp_path):
    """CuPy's loadtxt, fromiter, fromfile, load, fromfunction, ... are
    ``asarray(numpy.<name>(...))``: one run, at the call. A generator, an open file or a
    StringIO is read once (the simulator's shape inference had read it first, leaving the
    call an empty result or an error), and fromfunction calls its function once."""
    import io

    assert acp.loadtxt(io.StringIO("1 2\n3 4")).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert acp.genfromtxt(io.StringIO("1 2\n3 4")).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert acp.fromiter((i for i in range(3)), dtype="i4").tolist() == [0, 1, 2]
    assert acp.fromiter((i for i in range(3)), dtype="i4", count=3).tolist() == [0, 1, 2]
    np.arange(4, dtype=np.float32).tofile(tmp_path / "x.bin")
    with open(tmp_path / "x.bin", "rb") as f:
        assert acp.fromfile(f, dtype=np.float32).tolist() == [0.0, 1.0, 2.0, 3.0]
    np.save(tmp_path / "a.npy", np.arange(3.0))
    with open(tmp_path / "a.npy", "rb") as f:
        loaded = acp.load(f)
    assert isinstance(loaded, sim.Array) and loaded.tolist() == [0.0, 1.0, 2.0]
    np.savez(tmp_path / "b.npz", x=np.arange(2))
    with acp.load(tmp_path / "b.npz") as npz:
        assert isinstance(npz["x"], sim.Array) and npz["x"].tolist() == [0, 1]
    calls = []
    got = acp.fromfunction(lambda i, j: calls.append(1) or i + j, (2, 2))
    assert got.tolist() == [[0.0, 1.0], [1.0, 2.0]] and len(calls) == 1
    big = acp.frombuffer(np.arange(2, dtype=">f4").tobytes(), dtype=">f4")
    assert big.dtype == np.float32 and big.tolist() == [0.0, 1.0]     # (CuPy's byte order)


@pytest.mark.parametrize("convert", [
    acp.asanyarray, acp.asarray_chkfinite, lambda a: acp.require(a, requirements="C"),
    lambda a: acp.require(a, np.float32), lambda a: acp.require(a, requirements=["F", "O"]),
])
def test_asanyarray_asarray_chkfinite_and_require_copy_a_numpy_array_in(sim, convert):
    """CuPy 14's three call ``cupy.asarray`` (or ``array``) of their input: a NumPy array is
    copied into the runtime's memory, as ``acp.asarray`` copies it (it was refused as an
    implicit host-to-device copy)."""
    host = np.arange(6.0).reshape(2, 3)
    got = convert(host)
    assert isinstance(got, sim.Array) and got.tolist() == host.tolist()


def test_require_refuses_the_flags_cupys_refuses_and_keeps_an_array_that_meets_them(sim):
    x = sim.asarray(np.arange(3.0))
    assert acp.require(x) is x and acp.require(x, requirements="C") is x
    assert acp.require(x, requirements="O") is not x
    with pytest.raises(ValueError, match='Incorrect flag "W"'):
        acp.require(x, requirements="W")
    with pytest.raises(ValueError, match="both"):
        acp.require(x, requirements="CF")


def test_asarray_chkfinite_of_nan_or_inf_raises_value_error_at_the_call(sim):
    """NumPy and CuPy raise ValueError at the call (CuPy reads ``isfinite(a).all()`` to the
    host); it returned an Array, readable with its NaN, and raised a KernelFault at a later
    wait. The check waits for the data's writers: here a node still to run."""
    with pytest.raises(ValueError, match="must not contain"):
        acp.asarray_chkfinite(sim.asarray([1.0, np.nan]))
    with pytest.raises(ValueError, match="must not contain"):
        acp.asarray_chkfinite(acp.log(sim.asarray([1.0, 0.0])))        # -inf, computed later
    with pytest.raises(ValueError, match="must not contain"):
        acp.asarray_chkfinite(np.array([np.inf]))
    assert acp.asarray_chkfinite([1, 2], dtype=np.float32).tolist() == [1.0, 2.0]
    sim.synchronize()                                                   # (no fault left over)


def test_nanmin_and_nanmax_of_a_slice_of_nans_warn_at_the_call_as_cupys(sim):
    """cupy/_statistics/order.py reads isnan(result).any() to the host and warns: the call
    waits for its input, and warns once, only where a slice holds NaNs alone."""
    x = acp.asarray(np.array([[1.0, np.nan], [np.nan, np.nan]]))
    with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):
        got = acp.nanmax(x, axis=0)
    assert got[0] == 1.0 and np.isnan(float(got[1]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(acp.nanmin(acp.asarray(np.array([2.0, np.nan])))) == 2.0


def test_diag_of_a_matrix_is_a_copy_that_later_writes_leave_apart_as_in_cupy(sim):
    """cupy/_creation/matrix.py returns ``cupy.array(v.diagonal(k))``: NumPy's diag is a view,
    so a write to the matrix changed the diagonal taken before it, and the other way round."""
    a = acp.arange(9.0).reshape(3, 3)
    d = acp.diag(a)
    up = acp.diag(a, 1)
    a[0, 0] = 100.0
    d += 1.0
    assert d.tolist() == [1.0, 5.0, 9.0] and up.tolist() == [1.0, 5.0]
    assert a.tolist() == [[100.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]
    assert acp.diag(acp.asarray(np.array([1.0, 2.0]))).tolist() == [[1.0, 0.0], [0.0, 2.0]]


def test_ufunc_at_converts_the_values_to_the_arrays_dtype_first_as_cupys_scatter(sim):
    """cupy/_core/_routines_indexing.pyx: with an index array, ``_scatter_op`` converts the
    values to the array's dtype before its kernel adds them (``core.array(value,
    dtype=a.dtype)`` on the host, ``value.astype(a.dtype)`` on the device); NumPy's ``at``
    added in float64 and cast the sums back (-1 + 0.5 was 0, CuPy's -1 + 0 is -1). With
    integers alone the ufunc writes into the view, under its casting rule."""
    idx = acp.asarray(np.array([0, 1]))
    x = acp.asarray(np.array([-1, -3], np.int32))
    acp.add.at(x, idx, acp.asarray(np.array([0.5, 1.5])))
    assert x.tolist() == [-1, -2]
    x = acp.zeros(2, np.int32)
    acp.add.at(x, idx[:1], acp.asarray(np.array([np.inf])))          # (the GPU's conversion)
    assert x.tolist() == [2**31 - 1, 0]
    m = acp.asarray(np.array([-1, -3], np.int32))
    acp.add.at(m, m < -2, 0.9)                                        # (a mask: converted too)
    assert m.tolist() == [-1, -3]
    with pytest.raises(OverflowError, match="out of bounds for int32"):
        acp.add.at(acp.zeros(2, np.int32), idx, 2**40)
    with pytest.raises(TypeError, match="Cannot cast ufunc 'add' output"):
        acp.add.at(acp.zeros(3, np.int32), 2, 1.5)
    f = acp.zeros(3)
    acp.add.at(f, (slice(1, None),), 1.5)
    assert f.tolist() == [0.0, 1.5, 1.5]


def test_a_float_filled_into_an_integer_array_converts_as_the_gpu_converts(sim):
    """cupy/_creation/basic.py fills with ``copyto(a, fill_value, casting='unsafe')``, and
    cupy/_manipulation/basic.py copies a number with its copy kernel: a float converts on the
    device (toward zero, saturating; NaN from a double the lowest int32), as an array's astype
    does, where NumPy's cast gave the lowest int32 for 1e10 and 2**32 - 5 for -5.0."""
    assert acp.full(2, 1e10, dtype=np.int32).tolist() == [2**31 - 1] * 2
    assert acp.full(2, -5.0, dtype=np.uint32).tolist() == [0, 0]
    assert acp.full(1, float("nan"), dtype=np.int32).tolist() == [-2**31]
    assert acp.full_like(acp.zeros(2, np.int8), 300.7).tolist() == [44, 44]
    assert acp.full(2, 7).dtype == np.int64 and acp.full(2, 2.5).tolist() == [2.5, 2.5]
    x = acp.zeros(2, np.int32)
    acp.copyto(x, 1e10, casting="unsafe")
    assert x.tolist() == [2**31 - 1] * 2
    acp.copyto(x, np.float32(-3e9), casting="unsafe", where=acp.asarray([True, False]))
    assert x.tolist() == [-2**31, 2**31 - 1]
    with pytest.raises(TypeError, match="same_kind"):
        acp.copyto(x, 1.5)


@pytest.mark.parametrize("call, exc", [
    (lambda x: acp.put(x, acp.asarray(np.array([0])), float("nan")), ValueError),
    (lambda x: acp.put(x, acp.asarray(np.array([0])), 1e10), OverflowError),
    (lambda x: x.put(acp.asarray(np.array([0])), float("nan")), ValueError),
    (lambda x: acp.put_along_axis(x, acp.asarray(np.array([0])), 1e10, 0), OverflowError),
    (lambda x: acp.fill_diagonal(x.reshape(2, 2), float("nan")), ValueError),
], ids=["put-nan", "put-out-of-range", "ndarray.put", "put_along_axis", "fill_diagonal"])
def test_a_host_number_put_into_an_integer_array_is_refused_as_cupys_host_conversion(
        sim, call, exc):
    """cupy/_core/_routines_indexing.pyx and cupy/_indexing/insert.py convert a value that is
    not a device array on the host, ``core.array(v, dtype=a.dtype)``: NaN or 1e10 into int32
    raise there (the simulator cast them silently, as the device casts an array's values)."""
    x = acp.zeros(4, np.int32)
    with pytest.raises(exc):
        call(x)
    assert x.tolist() == [0, 0, 0, 0]
    acp.put(x, acp.asarray(np.array([0])), acp.asarray(np.array([1e10])))   # (an array: cast)
    acp.put(x, acp.asarray(np.array([1])), -2.7)
    assert x.tolist() == [2**31 - 1, -2, 0, 0]


def test_meshgrid_of_one_array_gives_the_array_itself_as_cupy(sim):
    """cupy/_creation/ranges.py: ``if len(xi) <= 1: return tuple(xi)``; NumPy copies it, so a
    write to the grid no longer reached the input. CuPy's inputs are 1-D device arrays."""
    x = acp.arange(3.0)
    (g,) = acp.meshgrid(x)
    g[0] = 99.0
    assert x.tolist() == [99.0, 1.0, 2.0]
    assert acp.meshgrid() == ()
    gx, gy = acp.meshgrid(x, acp.arange(2.0))
    gx[0, 0] = -1.0
    assert gx.shape == gy.shape == (2, 3) and x.tolist() == [99.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="input has to be 1d"):
        acp.meshgrid(acp.zeros((2, 2)))
    with pytest.raises(AttributeError, match="'list' object has no attribute 'ndim'"):
        acp.meshgrid([1.0, 2.0])
    with pytest.raises(ValueError, match="Valid values for `indexing`"):
        acp.meshgrid(x, indexing="yx")


def test_integers_above_2_to_the_53_round_to_tens_exactly_as_cupys_kernel(sim):
    """cupy/_core/core.pyx rounds integers to a negative number of decimals in integer
    arithmetic (``cupy_round_neg_uint``); NumPy rounds through float64, which lost the last
    digits of 2**60 + 13 (1152921504606846976, not ...990)."""
    x = acp.asarray(np.array([2**60 + 13, -25, 25, 15, 123456, -123456]))
    assert acp.round(x, -1).tolist() == [2**60 + 14, -20, 20, 20, 123460, -123460]
    assert x.round(-3).tolist() == [2**60 + 24, 0, 0, 0, 123000, -123000]
    big = acp.asarray(np.array([2**63 + 55], np.uint64))
    assert acp.around(big, -1).tolist() == [2**63 + 52] and acp.around(big, -1).dtype == np.uint64
    small = acp.asarray(np.array([125, -125, 7], np.int16))
    out = acp.zeros(3, np.int16)
    acp.round(small, -1, out=out)
    assert out.tolist() == [120, -120, 10] and acp.round(small, 2).tolist() == [125, -125, 7]


def test_ufunc_at_by_an_integer_or_a_mask_takes_any_dtype_as_cupy(sim):
    """cupy/_core/_routines_indexing.pyx checks the dtype in its index-array scatter alone
    (``_scatter_op_single``); by integers and slices the ufunc writes into a view, by one mask
    a kernel of every dtype does: both were refused with TypeError on the simulator."""
    f = acp.zeros(4)
    acp.subtract.at(f, 2, 1.0)
    assert f.tolist() == [0.0, 0.0, -1.0, 0.0]
    b = acp.asarray(np.array([1, 2, 3], np.int8))
    acp.add.at(b, b > 1, 1)
    acp.maximum.at(b, [True, False, False], 7)
    assert b.tolist() == [7, 3, 4] and b.dtype == np.int8
    acp.subtract.at(b, slice(None), 1)
    assert b.tolist() == [6, 2, 3]
    with pytest.raises(TypeError, match="only supports int32, uint32"):
        acp.subtract.at(f, acp.asarray(np.array([2])), 1.0)
    with pytest.raises(TypeError, match="only supports int32"):
        acp.add.at(b, (acp.asarray(np.array([0])),), 1)


def test_place_casts_float_values_into_an_integer_array_as_cupys_put(sim):
    """cupy/_indexing/insert.py: ``place`` puts ``cupy.asarray(vals)`` with ``arr.put``, which
    casts each value in its kernel; NumPy's place refused float values for an integer array
    (TypeError, "according to the rule 'safe'")."""
    x = acp.asarray(np.array([0, 5, 0, 0], np.int32))
    acp.place(x, x == 0, acp.asarray(np.array([1.7, -2.9])))
    assert x.tolist() == [1, 5, -2, 1]
    acp.place(x, x == 5, [1e10])                      # (saturated, as the GPU converts it)
    assert x.tolist() == [1, 2**31 - 1, -2, 1]
    with pytest.raises(ValueError):
        acp.place(x, x == 1, acp.zeros(0))


@pytest.mark.parametrize("call, said", [
    (lambda x: acp.putmask(x, x == 0, [1, 2]), "`values` should be of type cupy.ndarray"),
    (lambda x: acp.putmask(x, x == 0, (1,)), "`values` should be of type cupy.ndarray"),
    (lambda x: acp.putmask(x, [True, False, True], 5), "`mask` should be of type cupy.ndarray"),
], ids=["list-values", "tuple-values", "list-mask"])
def test_putmask_refuses_a_list_as_cupys_putmask_does(sim, call, said):
    """cupy/_indexing/insert.py: ``putmask`` takes device arrays, its values a number too, and
    raises TypeError for anything else; NumPy's took a list (the program ran on the simulator
    and failed on the GPU)."""
    x = acp.zeros(3, np.int32)
    with pytest.raises(TypeError, match=said):
        call(x)
    acp.putmask(x, x == 0, acp.asarray(np.array([1, 2], np.int32)))
    acp.putmask(x, x == 2, 7)
    assert x.tolist() == [1, 7, 1]
