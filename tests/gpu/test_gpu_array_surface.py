"""Advanced indexing and the ndarray surface on a real GPU (CuPy): device arrays where CuPy
returns them, NumPy's values, the attributes CuPy's ndarray has."""

from __future__ import annotations

import copy

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

X = np.arange(60, dtype=np.float64).reshape(3, 4, 5)


@pytest.fixture
def gpu():
    import asyncgpu as ag

    with ag.configure(backend="cuda", execution="async"):
        yield ag
        ag.synchronize()


def test_advanced_indexing_gives_device_arrays(gpu):
    ag = gpu
    x = ag.array(X) * 1.0
    idx = ag.array(np.array([2, 0, -1]))
    cases = [
        (idx, np.array([2, 0, -1])),
        ((slice(None), ag.array(np.array([[3], [0]]))), (slice(None), np.array([[3], [0]]))),
        ((ag.array(np.array([0, 2])), slice(1, 3), ag.array(np.array([4, 0]))),
         (np.array([0, 2]), slice(1, 3), np.array([4, 0]))),
        (np.array([1, 0]), np.array([1, 0])),
        ([2, 2], [2, 2]),
        (X > 30, X > 30),
        (x > 30, X > 30),
        ((x[:, :, 0] > 20, 1), (X[:, :, 0] > 20, 1)),
    ]
    for key, host_key in cases:
        got = x[key]
        assert isinstance(got, ag.Array)
        np.testing.assert_array_equal(got.numpy(), X[host_key])


def test_kmeans_step_on_gpu(gpu):
    import asyncgpu.cupy as acp

    ag = gpu
    P = np.random.default_rng(1).standard_normal((1000, 3))
    points = ag.array(P)
    centers = points[ag.array(np.array([0, 1, 2, 3]))]
    labels = ((points[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2).argmin(axis=1)
    new = acp.stack([points[labels == i].mean(axis=0) for i in range(4)])
    shifted = points - new[labels]
    C = P[[0, 1, 2, 3]]
    lab = ((P[:, None, :] - C[None, :, :]) ** 2).sum(axis=2).argmin(axis=1)
    N = np.stack([P[lab == i].mean(axis=0) for i in range(4)])
    np.testing.assert_allclose(new.numpy(), N, rtol=1e-12)
    np.testing.assert_allclose(shifted.numpy(), P - N[lab], rtol=1e-12)


def test_advanced_assignment_on_gpu(gpu):
    ag = gpu
    x = ag.array(X) * 1.0
    x[x > 25] = -1.0
    x[ag.array(np.array([2]))] = ag.array(np.full((1, 4, 5), 7.0))
    x[:, [1, 3]] = ag.array(np.arange(5.0))
    after = x * 2.0
    h = X.copy()
    h[h > 25] = -1.0
    h[[2]] = 7.0
    h[:, [1, 3]] = np.arange(5.0)
    np.testing.assert_array_equal(after.numpy(), h * 2.0)


def test_bad_host_index_raises_before_enqueue_on_gpu(gpu):
    ag = gpu
    x = ag.array(X)
    calls = ag.statistics().calls
    with pytest.raises(IndexError, match="out of bounds"):
        x[np.array([0, 3])]
    with pytest.raises(IndexError, match="boolean index did not match"):
        x[np.array([True, False])]
    assert ag.statistics().calls == calls


def test_array_surface_on_gpu(gpu):
    import cupy

    import asyncgpu.cupy as acp

    ag = gpu
    A = X[0]
    a = ag.array(A) * 1.0
    c = ag.array(A + 1j * A[::-1])
    np.testing.assert_array_equal(c.imag.numpy(), A[::-1])
    np.testing.assert_array_equal(c.real.numpy(), A)
    assert a.real is a and not a.imag.numpy().any()
    np.testing.assert_array_equal(a.view(np.int64).numpy(), A.view(np.int64))
    assert a.flags.c_contiguous and a.T.flags["F_CONTIGUOUS"] and a.flags.owndata
    assert list(a.T.flat) == list(A.T.flat) and a.flat[7] == A.flat[7]
    np.testing.assert_array_equal(a.mT.numpy(), A.T)
    assert a.device == cupy.cuda.Device(ag.options().device)
    np.testing.assert_array_equal(a.ptp(axis=0).numpy(), np.ptp(A, axis=0))
    assert a.tobytes() == A.tobytes()
    assert f"{a.sum():.3f}" == f"{A.sum():.3f}" and str(a.sum()) == str(np.array(A.sum()))
    dup = copy.deepcopy(a)
    dup[0, 0] = 99.0
    assert a[0, 0] == A[0, 0]
    v = ag.array(np.array([5.0, 1.0, 4.0, 2.0, 3.0]))
    v.put(ag.array(np.array([0, 4])), ag.array(np.array([-1.0, -2.0])))
    v.partition(2)
    got = (v + 0.0).tolist()
    assert got[2] == 1.0 and set(got[:2]) == {-1.0, -2.0}
    assert acp.get_array_module(A) is np and acp.get_array_module(a) is acp
    acp.testing.assert_allclose(a, A)
    acp.testing.assert_array_equal(A, a)
    with pytest.raises(AssertionError):
        acp.testing.assert_array_equal(a + 1.0, A)
