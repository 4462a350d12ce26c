"""What a NumPy/CuPy ``ndarray`` has, an ``asyncgpu.Array`` has: attributes, methods, formatting,
copies, ``get_array_module`` and ``acp.testing``'s comparisons with mixed arguments."""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest

import asyncgpu.cupy as acp

A = np.arange(24, dtype=np.float64).reshape(4, 6) - 7.5
C = (A + 1j * A[::-1]).astype(np.complex128)


def test_real_and_imag_of_complex_are_views(sim):
    ag = sim
    c = ag.array(C) * 1.0
    np.testing.assert_array_equal(c.real.numpy(), C.real)
    np.testing.assert_array_equal(c.imag.numpy(), C.imag)
    np.testing.assert_array_equal(c[1:, ::2].imag.numpy(), C[1:, ::2].imag)
    c.imag[0] = 100.0                  # a view: writes the array
    c.real = 5.0
    expected = C.copy()
    expected.imag[0] = 100.0
    expected.real = 5.0
    np.testing.assert_array_equal(c.numpy(), expected)


def test_real_of_real_array_is_itself_and_imag_is_new_zeros(sim):
    ag = sim
    a = ag.array(A)
    assert a.real is a
    im = a.imag
    assert im.shape == A.shape and im.dtype == A.dtype and not im.numpy().any()
    im[0, 0] = 3.0                     # CuPy's imag of a real array is a new writable array
    assert a[0, 0] == A[0, 0]
    with pytest.raises(TypeError, match="does not have an imaginary part"):
        a.imag = 1.0


@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.uint8, np.complex128])
def test_view_reinterprets_bytes_like_numpy(sim, dtype):
    ag = sim
    a = ag.array(A) + 0.0
    v = a.view(dtype)
    expected = A.view(dtype)
    assert v.shape == expected.shape and v.dtype == expected.dtype
    np.testing.assert_array_equal(v.numpy(), expected)
    v[0, 0] = 1                        # shares memory
    assert a.numpy().tobytes() != A.tobytes()


def test_view_of_other_size_needs_contiguous_last_axis(sim):
    ag = sim
    with pytest.raises(ValueError, match="last axis must be contiguous"):
        ag.array(A).T.view(np.float32)



@pytest.mark.parametrize("order", [">", "<"])
def test_a_view_in_the_other_byte_order_is_refused_as_kernels_cannot_read_it(sim, order):
    """Kernels read an array's bytes in the device's order whatever its dtype says (Numba
    refuses such an array at the launch, CUDA C misreads it): a view in the other order was
    accepted and ran on sim. A NumPy array of either order converts its values, as CuPy's."""
    ag = sim
    native = "<" if np.little_endian else ">"
    a = ag.array(np.arange(4, dtype=np.float32))
    if order == native:
        assert a.view(order + "f4").dtype == np.float32
        return
    with pytest.raises(ValueError, match=rf"view\({order}f4\) of float32\[4\]: .*device's "
                                         r"byte order.*x\.view\(numpy\.float32\)"):
        a.view(order + "f4")
    with pytest.raises(TypeError):     # (either catches it)
        a.view(np.dtype(np.int32).newbyteorder(order))
    swapped = np.arange(4, dtype=order + "f4")
    for convert in (ag.array, ag.asarray):
        c = convert(swapped)
        assert c.dtype.isnative and c.numpy().tolist() == [0, 1, 2, 3]


def test_a_dtype_of_the_other_byte_order_asked_of_device_work_is_refused_as_cupy_refuses_it(
        sim):
    """``astype(">f4")``, ``acp.zeros(2, dtype=">i4")``, ``acp.asarray(x, dtype=">f4")`` gave
    arrays of the other byte order (kernels read their bytes swapped on the GPU) and
    ``ag.zeros(2, dtype=">i4")`` a native one: CuPy refuses such a dtype at array creation,
    and so does asyncgpu now, before anything is enqueued, naming the call and the dtype to
    pass. Host data asked for that order is converted, as CuPy's ``asarray`` converts it."""
    ag = sim
    other = ">" if np.little_endian else "<"
    x = ag.asarray(np.arange(3, dtype="f4"))
    nodes = ag.statistics().nodes
    refused = {
        "asyncgpu.Array.astype": lambda: x.astype(other + "f4"),
        "asyncgpu.Array.sum": lambda: x.sum(dtype=np.dtype(other + "f8")),
        "asyncgpu.cupy.asarray": lambda: acp.asarray(x, dtype=other + "f4"),
        "asyncgpu.cupy.array": lambda: acp.array(x, other + "f4"),
        "asyncgpu.asarray": lambda: ag.asarray(x, dtype=other + "f4"),
        "asyncgpu.array": lambda: ag.array(x, other + "f4"),
        "asyncgpu.cupy.zeros": lambda: acp.zeros(2, dtype=other + "i4"),
        "asyncgpu.cupy.arange": lambda: acp.arange(0, 2, 1, other + "i4"),
        "asyncgpu.cupy.full_like": lambda: acp.full_like(x, 1, dtype=other + "i4"),
        "asyncgpu.cupy.add": lambda: acp.add(x, x, dtype=other + "f4"),
        "asyncgpu.cupy.asanyarray": lambda: acp.asanyarray(x, dtype=other + "f4"),
        "asyncgpu.zeros": lambda: ag.zeros(2, dtype=other + "i4"),
        "asyncgpu.empty": lambda: ag.empty(2, other + "i4"),
        "asyncgpu.full": lambda: ag.full(2, 1, other + "i4"),
        "asyncgpu.ones_like": lambda: ag.ones_like(x, dtype=other + "f4"),
    }
    for where, make in refused.items():
        with pytest.raises(ValueError, match=rf"^{re.escape(where)}: dtype .{{1}}[fi][48] is "
                                             r".*CuPy refuses it; pass (float|int)(32|64)"):
            make()
    assert ag.statistics().nodes == nodes           # (refused before anything was enqueued)
    swapped = np.arange(3, dtype=other + "f8")
    for r in (acp.asarray(swapped), acp.asarray([0, 1, 2], dtype=other + "f4"),
              ag.asarray([0, 1, 2], dtype=other + "f4"),
              acp.frombuffer(swapped.tobytes(), dtype=other + "f8"),
              acp.asanyarray([0.0, 1.0, 2.0], dtype=other + "f8")):
        assert r.dtype.isnative and r.tolist()[:2] == [0, 1], r
    filled = ag.full(2, np.array(1.0, other + "f8"))      # (its dtype from host data)
    assert filled.dtype.isnative and filled.tolist() == [1, 1]
    assert x.astype("=f4", copy=False) is x


def test_flags_match_numpy(sim):
    ag = sim
    a = ag.array(A)
    for arr, ref in ((a, A), (a.T, A.T), (a[:, ::2], A[:, ::2]), (a[1], A[1])):
        f = arr.flags
        assert f.c_contiguous == ref.flags.c_contiguous == f["C_CONTIGUOUS"] == f["C"]
        assert f.f_contiguous == ref.flags.f_contiguous == f["F_CONTIGUOUS"]
        assert f.writeable and f["WRITEABLE"] and f.aligned
    assert a.flags.owndata and a.flags["OWNDATA"] and not a[1:].flags.owndata
    assert "C_CONTIGUOUS : True" in repr(a.flags)
    with pytest.raises(KeyError, match="unknown flag"):
        a.flags["SHINY"]


def test_flat_reads_indexes_and_writes_in_c_order(sim):
    ag = sim
    a = ag.array(A) * 1.0
    t = a.T
    assert len(t.flat) == A.size
    assert list(t.flat) == list(A.T.flat)
    assert t.flat[7] == A.T.flat[7] and a.flat[-1] == A.flat[-1]
    np.testing.assert_array_equal(t.flat[2:9].numpy(), A.T.flat[2:9])
    np.testing.assert_array_equal(t.flat[[0, 5, -1]].numpy(), A.T.flat[[0, 5, -1]])
    with pytest.raises(IndexError, match="out of bounds"):
        a.flat[24]
    t.flat[1:6] = [-1.0, -2.0]         # values repeat, as in NumPy
    t.flat[ag.array(np.array([20]))] = 50.0
    expected = A.copy()
    expected.T.flat[1:6] = [-1.0, -2.0]
    expected.T.flat[[20]] = 50.0
    np.testing.assert_array_equal(a.numpy(), expected)


def test_a_host_array_of_flat_refuses_copy_false_as_the_array_does(sim):
    """``np.asarray(x.flat, copy=False)`` quietly gave a copy, whose writes were lost: it is
    refused as ``np.asarray(x, copy=False)`` is (NumPy 2's ``__array__`` protocol)."""
    ag = sim
    x = ag.asarray(np.arange(4.0))
    for obj in (x, x.flat):
        with pytest.raises(ValueError, match=r"always a copy .*copy=False\) cannot be honoured"):
            np.asarray(obj, copy=False)
    assert np.asarray(x.flat).tolist() == [0, 1, 2, 3]
    assert np.asarray(x.flat, dtype=np.int32, copy=True).tolist() == [0, 1, 2, 3]


def test_mT_swaps_last_two_axes(sim):
    ag = sim
    b = ag.array(A.reshape(2, 3, 4))
    np.testing.assert_array_equal(b.mT.numpy(), A.reshape(2, 3, 4).mT)
    with pytest.raises(ValueError, match="ndim < 2"):
        ag.array(np.arange(3)).mT


def test_device_on_sim_is_the_simulator_device(sim):
    ag = sim
    a = ag.array(A)
    d = a.device
    assert d == a[1:].device and d.id == 0 and int(d) == 0 and "sim" in repr(d)
    with d:
        pass


@pytest.mark.parametrize("name,args", [
    ("ptp", ()), ("ptp", (0,)), ("argpartition", (3,)), ("compress", ([True, False, True, True],)),
])
def test_node_methods_equal_numpy(sim, name, args):
    ag = sim
    v = ag.array(A[0]) * 1.0
    dev_args = tuple(ag.array(np.array(x)) if isinstance(x, list) else x for x in args)
    got = getattr(v, name)(*dev_args)
    expected = np.ptp(A[0], *args) if name == "ptp" else getattr(A[0], name)(*args)
    assert isinstance(got, ag.Array)
    if name == "argpartition":            # any order inside the partitions
        assert set(got.numpy()[:3]) == set(expected[:3])
    else:
        np.testing.assert_array_equal(got.numpy(), expected)


def test_choose_equals_numpy(sim):
    ag = sim
    idx = np.array([0, 2, 1, 0])
    choices = np.stack([np.arange(4) * k for k in (1, 10, 100)])
    got = ag.array(idx).choose(ag.array(choices))
    np.testing.assert_array_equal(got.numpy(), idx.choose(choices))
    # (a list of choices: CuPy 14.2's method refuses it on the GPU, as its function does)
    with pytest.raises(AttributeError, match="'list' object has no attribute 'shape'"):
        ag.array(idx).choose([ag.array(c) for c in choices])


def test_put_and_partition_write_their_array(sim):
    ag = sim
    for _ in range(3):                 # randomized schedules: an unbooked write is lost
        v = ag.array(np.array([5.0, 1.0, 4.0, 2.0, 3.0])) * 1.0
        v.put(ag.array(np.array([0, 4])), ag.array(np.array([-1.0, -2.0])))
        after_put = v + 0.0
        v.partition(2)
        after_partition = v + 0.0
        assert after_put.tolist() == [-1.0, 1.0, 4.0, 2.0, -2.0]
        got = after_partition.tolist()
        assert got[2] == 1.0 and set(got[:2]) == {-1.0, -2.0}


def test_tobytes_equals_numpy(sim):
    ag = sim
    a = ag.array(A) * 1.0
    assert a.tobytes() == A.tobytes()
    assert a.T.tobytes() == A.T.tobytes()
    assert a.T.tobytes("F") == A.T.tobytes("F")


def test_copy_and_deepcopy_are_independent(sim):
    ag = sim
    a = ag.array(A) * 1.0
    for dup in (copy.copy(a), copy.deepcopy(a), copy.deepcopy([a])[0]):
        assert isinstance(dup, ag.Array) and dup is not a
        dup[0, 0] = 1000.0
        assert a[0, 0] == A[0, 0] and dup[0, 0] == 1000.0
        np.testing.assert_array_equal(dup.numpy()[1:], A[1:])


def test_format_of_zero_d_like_numpy_scalars(sim):
    ag = sim
    a = ag.array(A) * 1.0
    assert f"{a.sum():.3f}" == f"{A.sum():.3f}"
    assert f"{a.argmax():d}" == f"{A.argmax():d}"
    assert f"{a[0, 1:2].sum():>8.2e}" == f"{A[0, 1:2].sum():>8.2e}"
    assert f"{a}" == str(A)
    with pytest.raises(TypeError, match="unsupported format string"):
        f"{a:.3f}"


def test_str_and_repr_of_zero_d_arrays(sim):
    ag = sim
    assert str(ag.array(np.array(3.0)) * 1.0) == str(np.array(3.0)) == "3.0"
    assert str(ag.array(np.array(7)) + 0) == "7"
    assert str(ag.array(np.array(True))) == "True"
    assert repr(ag.array(np.array(3.0))) == "asyncgpu.Array(3., dtype=float64)"
    assert str(ag.array(A)) == str(A)


def test_repr_is_numpys_under_asyncgpus_name_with_the_dtype_always_said(sim):
    ag = sim
    assert repr(ag.zeros((0, 3), np.float32)) == \
        "asyncgpu.Array([], shape=(0, 3), dtype=float32)"
    assert repr(ag.array(np.array([True, False]))) == \
        "asyncgpu.Array([ True, False], dtype=bool)"
    assert repr(ag.array(np.arange(4, dtype=np.int16))) == \
        "asyncgpu.Array([0, 1, 2, 3], dtype=int16)"
    big = repr(ag.array(np.arange(2000.0).reshape(40, 50)))
    assert big.startswith("asyncgpu.Array([[0.000e+00,") and "...," in big
    assert big.endswith("shape=(40, 50), dtype=float64)")
    lines = big.splitlines()
    assert all(line.startswith(" " * 16 + "[") for line in lines[1:] if line.strip()[0] == "[")
    assert max(len(line) for line in lines[:-1]) <= np.get_printoptions()["linewidth"]
    cube = repr(ag.array(np.arange(24).reshape(2, 3, 4) * 1.5)).splitlines()
    assert "" in cube and not [line for line in cube if line and not line.strip()]


def test_the_truth_value_of_an_array_is_numpys(sim):
    ag = sim
    assert bool(ag.array(np.array([2.5]))) and not bool(ag.zeros(()))
    with pytest.raises(ValueError, match="more than one element is ambiguous. Use a.any"):
        bool(ag.array(np.arange(3.0)) > 0)
    with pytest.raises(ValueError, match="empty array is ambiguous"):
        bool(ag.zeros(0))


def test_an_array_takes_weak_references_and_subscripts_as_a_type(sim):
    import weakref

    ag = sim
    a = ag.zeros(3)
    ref = weakref.ref(a)
    assert ref() is a
    del a
    assert ref() is None
    alias = acp.ndarray[int, np.dtype[np.float32]]
    assert alias.__origin__ is ag.Array


def test_flags_describe_the_layout_and_cannot_be_set(sim):
    import pickle

    ag = sim
    a = ag.zeros((2, 3))
    for copied in (copy.copy(a.T.flags), copy.deepcopy(a.T.flags),
                   pickle.loads(pickle.dumps(a.T.flags))):
        assert repr(copied) == repr(a.T.flags) and copied.f_contiguous
    assert a.flags.writeable and a.T.flags["F"]
    with pytest.raises(AttributeError, match="'writeable' of an asyncgpu array cannot be set"):
        a.flags.writeable = False
    with pytest.raises(AttributeError, match="cannot be set"):
        a.flags.c_contiguous = False


def test_get_array_module_answers_like_cupy(sim):
    ag = sim
    assert acp.get_array_module(np.zeros(3)) is np
    assert acp.get_array_module() is np
    assert acp.get_array_module(1.0, [1, 2]) is np
    assert acp.get_array_module(np.zeros(3), ag.array(A)) is acp


COMPARISONS = [
    ("assert_allclose", {"rtol": 1e-6, "atol": 1e-9, "err_msg": "here", "verbose": False}),
    ("assert_array_equal", {}),
    ("assert_array_almost_equal", {"decimal": 5}),
    ("assert_array_max_ulp", {"maxulp": 4}),
    ("assert_array_almost_equal_nulp", {"nulp": 4}),
]


@pytest.mark.parametrize("name,kwargs", COMPARISONS, ids=[c[0] for c in COMPARISONS])
def test_testing_comparisons_take_mixed_arguments(sim, name, kwargs):
    ag = sim
    fn = getattr(acp.testing, name)
    a = ag.array(A) * 1.0
    fn(a, A, **kwargs)
    fn(A, a, **kwargs)
    fn(a, a + 0.0, **kwargs)
    other = A.copy()
    other[2, 3] += 1.0
    with pytest.raises(AssertionError):
        fn(a, other, **kwargs)
    with pytest.raises(AssertionError):
        fn(other, a, **kwargs)


def test_testing_less_and_list_equal(sim):
    ag = sim
    a = ag.array(A)
    acp.testing.assert_array_less(a, A + 1)
    acp.testing.assert_array_less(A - 1, a)
    with pytest.raises(AssertionError):
        acp.testing.assert_array_less(a, A)
    acp.testing.assert_array_list_equal([a, A[0]], [A, a[0]])
    with pytest.raises(AssertionError, match="array 1"):
        acp.testing.assert_array_list_equal([a, a[0]], [A, A[1]])
    with pytest.raises(AssertionError, match="List size is different"):
        acp.testing.assert_array_list_equal([a], [A, A])
    with pytest.raises(AssertionError, match="here"):
        acp.testing.assert_allclose(a, A + 1, err_msg="here")
    with pytest.raises(AttributeError, match="assert_allclose"):
        acp.testing.numpy_cupy_allclose


def test_set_writes_host_values_after_the_work_that_reads_the_array(sim):
    ag = sim
    for _ in range(3):                 # randomized schedules: an unordered write shows
        a = ag.array(A) * 1.0
        doubled = a * 2.0              # a node reading a, not yet run
        a.set(np.ones_like(A))
        np.testing.assert_array_equal(doubled.numpy(), A * 2.0)
        np.testing.assert_array_equal(a.numpy(), np.ones_like(A))
    f = acp.asfortranarray(ag.array(A))
    f.set(A + 1.0)                     # a Fortran-ordered target takes the same values
    np.testing.assert_array_equal(f.numpy(), A + 1.0)


def test_set_and_get_out_refuse_another_shape_or_dtype_before_anything_runs(sim):
    ag = sim
    a = ag.array(A)
    before = ag.statistics()
    with pytest.raises(ValueError, match="shape mismatch"):
        a.set(np.zeros((6, 4)))
    with pytest.raises(TypeError, match="float32 array cannot be set to a float64"):
        a.set(A.astype(np.float32))
    with pytest.raises(TypeError, match="only a numpy.ndarray"):
        a.set(A.tolist())
    with pytest.raises(ValueError, match="shape mismatch"):
        a.get(out=np.empty((6, 4)))
    with pytest.raises(TypeError, match="float32 array cannot be obtained"):
        a.get(out=np.empty((4, 6), np.float32))
    with pytest.raises(TypeError, match="out must be a numpy.ndarray"):
        a.get(out=[0.0] * 24)
    with pytest.raises(ValueError, match="unsupported order 'K'"):
        a.get(order="K")
    # (CuPy refuses both; they were taken)
    with pytest.raises(RuntimeError, match="cannot set to a non-contiguous array"):
        a[:, ::2].set(np.zeros((4, 3)))
    with pytest.raises(RuntimeError, match="out cannot be a non-contiguous array"):
        a[:, :3].get(out=np.empty((4, 6))[:, ::2])
    after = ag.statistics()
    assert (after.calls, after.host_accesses) == (before.calls, before.host_accesses)
    np.testing.assert_array_equal(a.numpy(), A)


def test_get_takes_cupys_stream_order_out_and_blocking(sim):
    ag = sim
    a = ag.array(A) + 0.0
    np.testing.assert_array_equal(a.get(stream=None), A)
    np.testing.assert_array_equal(a.get(stream=object(), blocking=False), A)
    fortran = a.get(order="F")
    assert fortran.flags.f_contiguous and not fortran.flags.c_contiguous
    np.testing.assert_array_equal(fortran, A)
    assert a.T.get().flags.c_contiguous and a.T.get(order="A").flags.f_contiguous
    out = np.empty((6, 4), order="F")
    assert a.T.get(out=out) is out
    np.testing.assert_array_equal(out, A.T)
    host = np.empty((4, 6))
    assert acp.asnumpy(a, None, "C", host) is host and acp.asnumpy(a, stream=None).shape == (4, 6)
    np.testing.assert_array_equal(host, A)
    np.testing.assert_array_equal(acp.asnumpy([1, 2], out=np.empty(2)), [1.0, 2.0])


@pytest.mark.parametrize("make", [
    lambda xp, x: xp.asfortranarray(x),
    lambda xp, x: x.copy(order="F"),
    lambda xp, x: x.astype(np.float32, order="F"),
    lambda xp, x: xp.empty_like(xp.asfortranarray(x)),
    lambda xp, x: xp.zeros_like(xp.asfortranarray(x)),
    lambda xp, x: xp.copy(xp.asfortranarray(x)),
    lambda xp, x: xp.zeros((3, 5), order="F"),
    lambda xp, x: xp.array(x, order="F"),
    lambda xp, x: xp.empty_like(x.reshape(2, 3, 4).transpose(1, 0, 2)),
], ids=["asfortranarray", "copy-F", "astype-F", "empty_like", "zeros_like", "copy-K",
        "zeros-F", "array-F", "empty_like-permuted"])
def test_fortran_ordered_results_keep_numpys_and_cupys_layout(sim, make):
    ag = sim
    got, want = make(acp, ag.array(A)), make(np, A)
    assert got.strides == want.strides
    assert got.flags.f_contiguous == want.flags.f_contiguous
    assert got.flags.c_contiguous == want.flags.c_contiguous
    assert got.base is None and got.flags.owndata
    if not want.flags.c_contiguous:        # (empty_like's values are undefined)
        got[...] = want + 1.0              # a host write of the whole array, in its order
        np.testing.assert_array_equal(got.numpy(), want + 1.0)
        np.testing.assert_array_equal((got * 2.0).numpy(), (want + 1.0) * 2.0)


def test_fortran_ordered_results_hold_their_values_and_ufuncs_give_c_order_as_cupy(sim):
    ag = sim
    f = acp.asfortranarray(ag.array(A))
    np.testing.assert_array_equal(f.numpy(), A)
    np.testing.assert_array_equal(f.copy(order="F").numpy(), A)
    # CuPy allocates elementwise results in C order, whatever the operands' order
    assert (f + 1.0).flags.c_contiguous
    np.testing.assert_array_equal((f + 1.0).numpy(), A + 1.0)
    host = acp.asarray(np.asfortranarray(A))      # (order None: kept, as 'K')
    assert host.flags.f_contiguous and not host.flags.c_contiguous
    assert acp.array(np.asfortranarray(A), order="C").flags.c_contiguous
    assert acp.asarray(host, order="C").flags.c_contiguous
    assert f.T.flags.c_contiguous and f.T.base is None


def test_astype_without_conversion_and_copy_false_is_the_array_itself(sim):
    ag = sim
    a = ag.array(A)
    assert a.astype(np.float64, copy=False) is a
    assert a.astype("float64", "K", None, None, False) is a
    assert a.astype(np.float64) is not a
    assert a.astype(np.float32, copy=False) is not a
    assert a.T.astype(np.float64, order="C", copy=False) is not a.T
    np.testing.assert_array_equal(a.astype(np.float32, copy=False).numpy(), A.astype(np.float32))


def test_cupy_array_and_asarray_take_cupys_arguments(sim):
    ag = sim
    a = ag.array(A)
    assert acp.array([1, 2], ndmin=3).shape == (1, 1, 2)
    assert acp.array(a, copy=False) is a
    view = acp.array(a, copy=False, ndmin=3)
    assert view.shape == (1, 4, 6)
    copied = acp.array(a, ndmin=3)
    a2 = ag.array(A)
    alias = acp.array(a2, copy=False, ndmin=4)
    a2[0, 0] = 99.0
    assert float(alias[0, 0, 0, 0]) == 99.0 and float(copied[0, 0, 0]) == A[0, 0]
    assert acp.asarray(a) is a and acp.asarray(a, order="K") is a
    assert acp.asarray(a, copy=True) is not a
    np.testing.assert_array_equal(acp.asarray(a, np.float32, "F").numpy(), A.astype(np.float32))
    np.testing.assert_array_equal(acp.array(A.tolist(), np.int64, blocking=True).numpy(),
                                  A.astype(np.int64))
    with pytest.raises(TypeError, match="order must be 'C', 'F', 'A' or 'K'"):
        acp.array(A, order="X")
    with pytest.raises(NotImplementedError, match="subok=True"):
        acp.array(A, subok=True)


def test_asarray_with_copy_false_refuses_a_conversion_before_anything_runs(sim):
    a = acp.asarray(np.arange(6.0).reshape(2, 3))
    before = sim.statistics().nodes
    with pytest.raises(ValueError, match="unable to avoid a copy"):
        acp.asarray(a, dtype=np.float32, copy=False)
    with pytest.raises(ValueError, match="unable to avoid a copy"):
        acp.asarray(a, order="F", copy=False)
    assert sim.statistics().nodes == before
    assert acp.asarray(a, copy=False) is a and acp.asarray(a, np.float64, copy=False) is a


def test_order_a_of_a_non_contiguous_array_is_a_c_ordered_copy_as_in_cupy(sim):
    """``acp.asarray(v, order='A')`` of a non-contiguous array returned ``v`` itself, with
    ``copy=False`` too, and ``v.astype(..., order='A', copy=False)`` as well: CuPy keeps an
    array for ``'A'`` only in C or Fortran order, else copies it in C order (and refuses with
    ``copy=False``). A NumPy array is laid out in Fortran order for 'K' and 'A' only when it
    is in Fortran order, as CuPy lays it out."""
    ag = sim
    v = ag.asarray(A)[:, ::2]
    for copied in (acp.asarray(v, order="A"), acp.array(v, copy=None, order="a"),
                   v.astype(v.dtype, order="A", copy=False)):
        assert copied is not v and copied.flags.c_contiguous
        np.testing.assert_array_equal(copied.numpy(), A[:, ::2])
    before = ag.statistics().nodes
    with pytest.raises(ValueError, match="unable to avoid a copy"):
        acp.asarray(v, order="A", copy=False)
    assert ag.statistics().nodes == before
    f = ag.asarray(np.asfortranarray(A))
    assert acp.asarray(f, order="A", copy=False) is f and acp.asarray(v, order="K") is v
    strided = np.asfortranarray(A)[:, ::2]          # (Fortran-like strides, not contiguous)
    assert acp.asarray(strided, order="K").flags.c_contiguous
    assert acp.asarray(np.asfortranarray(A), order="A").flags.f_contiguous


def test_choose_with_out_by_position_writes_out_as_cupys_method(sim):
    """NumPy's method takes every positional argument for a choice: out given by position
    was a second choice, and out stayed unwritten."""
    import asyncgpu.cupy as acp

    index = acp.asarray(np.array([0, 1, 0]))
    choices = acp.asarray(np.array([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]]))
    out = acp.zeros(3)
    got = index.choose(choices, out)
    assert out.tolist() == [1.0, 20.0, 3.0] and got.tolist() == [1.0, 20.0, 3.0]
    sim.synchronize()


@pytest.mark.parametrize("seed", range(3))
def test_methods_take_their_arguments_as_cupys_signatures_do(sim, seed):
    """NumPy's argmax takes no dtype and its out second, its all and any a dtype before their
    out; its fill and swapaxes no keywords."""
    import asyncgpu.cupy as acp

    ag = sim
    with ag.configure(sim_seed=seed, sim_strategy="random"):
        a = ag.array(np.arange(12.0).reshape(3, 4)) * 1.0
        got = a.argmax(axis=1, dtype=np.int32)
        assert got.dtype == np.int32 and got.tolist() == [3, 3, 3]
        out = acp.zeros(3, np.int32)
        a.argmin(1, out, np.int32)                  # (out by position: booked as the write)
        assert out.tolist() == [0, 0, 0]
        flags = acp.zeros(3, bool)
        (a > 0).all(1, flags)                       # (NumPy's all takes a dtype second)
        assert flags.tolist() == [False, True, True]
        (a > 0).any(1, flags)
        assert flags.tolist() == [True] * 3
        b = acp.zeros(3)
        b.fill(value=2.0)
        assert b.tolist() == [2.0] * 3
        assert a.swapaxes(axis1=0, axis2=1).shape == (4, 3)


def test_item_with_an_index_is_refused_naming_cupys_signature_and_the_fix(sim):
    import asyncgpu as ag

    a = ag.array(np.arange(6.0).reshape(2, 3))
    for args in ((4,), (1, 0)):
        with pytest.raises(ag.ArgumentError, match=r"asyncgpu.Array.item: takes no arguments.*"
                                                   r"ndarray.item\(self\).*a.ravel\(\)\[i\]"):
            a.item(*args)
    assert a.ravel()[4].item() == 4.0 and a[1:, 2:].item() == 5.0


def test_the_ravel_function_views_as_the_method_does(sim):
    """CuPy's ravel(a) is a.ravel(): a view wherever a reshape can be one (NumPy's function
    copies a strided array), so writes through either reach the other."""
    import asyncgpu as ag
    import asyncgpu.cupy as acp

    y = ag.array(np.arange(6.0))
    flat = acp.ravel(y[::-2])
    assert flat.strides == y[::-2].ravel().strides == (-16,)
    y[1] = 100.0
    flat[0] = -1.0
    assert flat.tolist() == [-1.0, 3.0, 100.0]
    assert y.tolist() == [0.0, 100.0, 2.0, 3.0, 4.0, -1.0]
    m = ag.array(np.arange(6.0).reshape(2, 3))
    assert acp.ravel(m, order="F").tolist() == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    flat = acp.ravel(m.T, order="A")                        # (Fortran-ordered: a view)
    flat[5] = 50.0
    assert flat.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 50.0] and m[1, 2] == 50.0
    with pytest.raises(NotImplementedError, match="order='K'"):
        acp.ravel(m, order="K")
    assert m.ravel().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 50.0]    # (usable after it)


def test_reshape_and_ravel_take_cupys_order_and_copy(sim):
    """CuPy's ndarray.reshape(*shape, order='C', copy=None) and ravel(order='C'): the keywords
    were refused on sim (TypeError) where the GPU takes them."""
    import asyncgpu.cupy as acp

    a = acp.arange(6)
    assert a.reshape(2, 3, order="F").tolist() == [[0, 2, 4], [1, 3, 5]]
    assert a.reshape((3, 2), order="C").tolist() == [[0, 1], [2, 3], [4, 5]]
    assert a.reshape(2, 3).ravel(order="F").tolist() == [0, 3, 1, 4, 2, 5]
    b = a.reshape(2, 3, copy=True)
    b[0, 0] = 9
    assert a[0] == 0 and b.tolist() == [[9, 1, 2], [3, 4, 5]]
