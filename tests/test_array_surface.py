"""What a NumPy/CuPy ``ndarray`` has, an ``asyncgpu.Array`` has: attributes, methods, formatting,
copies, ``get_array_module`` and ``acp.testing``'s comparisons with mixed arguments."""

from __future__ import annotations

import copy

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
    choices = [np.arange(4) * k for k in (1, 10, 100)]
    got = ag.array(idx).choose([ag.array(c) for c in choices])
    np.testing.assert_array_equal(got.numpy(), idx.choose(choices))


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
