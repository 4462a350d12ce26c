"""Advanced indexing returns device arrays (as CuPy does): integer arrays, lists, NumPy and
asyncgpu index arrays, boolean masks, mixed keys; assignments through them; errors raised before
anything is enqueued."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgpu.cupy as acp

X = np.arange(60, dtype=np.float64).reshape(3, 4, 5)


def _syncs(ag):
    return ag.statistics().host_syncs.get("library-call", 0)


def _counters(ag):
    st = ag.statistics()
    return st.nodes, st.calls, st.host_accesses


# Keys with host index data (lists, NumPy arrays, boolean masks), compared with NumPy.
HOST_KEYS = [
    ("int array", np.array([2, 0, 2])),
    ("negative", np.array([-1, -3])),
    ("list", [1, 0]),
    ("empty list", []),
    ("2-d index", np.array([[0, 1], [2, 2]])),
    ("slice then array", (slice(None), np.array([3, 0]))),
    ("int and array", (1, np.array([0, 3, 3]))),
    ("non-adjacent", (np.array([0, 2]), slice(1, 3), np.array([4, 0]))),
    ("int separated", (0, slice(None), np.array([1, 2]))),
    ("ellipsis", (Ellipsis, [4, 0])),
    ("new axis", (np.array([1, 0]), None, slice(2))),
    ("broadcast", (np.array([[0], [2]]), np.array([1, 3]))),
    ("full mask", X > 30),
    ("leading mask", np.array([True, False, True])),
    ("mask on middle axes", (slice(None), X[0] % 3 == 0)),
    ("mask and int", (X[:, 0, 0] > 0, 2)),
    ("bool scalar", True),
    ("false scalar", (False, 1)),
]


@pytest.mark.parametrize("key", [k for _, k in HOST_KEYS], ids=[n for n, _ in HOST_KEYS])
def test_host_index_data_gives_device_arrays_equal_to_numpy(sim, key):
    ag = sim
    x = ag.array(X) * 1.0        # pending: the gather must wait for it
    got = x[key]
    assert isinstance(got, ag.Array)
    expected = X[key]
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got.numpy(), expected)


DEVICE_KEYS = [
    ("int array", lambda ag: ag.array(np.array([2, 0, 2]))),
    ("negative int32", lambda ag: ag.array(np.array([-1, 0], np.int32))),
    ("mixed", lambda ag: (slice(1, None), ag.array(np.array([[3], [0]])), 4)),
    ("two arrays", lambda ag: (ag.array(np.array([0, 2])), slice(None),
                               ag.array(np.array([1, 1])))),
    ("device and host", lambda ag: (ag.array(np.array([0, 2])), [1, 3])),
    ("full mask", lambda ag: ag.array(X) > 30),
    ("leading mask", lambda ag: ag.array(np.array([True, False, True]))),
    ("mask then slice", lambda ag: (ag.array(X[:, :, 0] > 20), slice(1, 3))),
]


@pytest.mark.parametrize("make", [m for _, m in DEVICE_KEYS], ids=[n for n, _ in DEVICE_KEYS])
def test_device_index_arrays_give_device_arrays_equal_to_numpy(sim, make):
    ag = sim
    x = ag.array(X) + 0.0
    key = make(ag)
    host_key = tuple(k.numpy() if isinstance(k, ag.Array) else k for k in key) \
        if isinstance(key, tuple) else key.numpy()
    got = x[key]
    assert isinstance(got, ag.Array)
    np.testing.assert_array_equal(got.numpy(), X[host_key])


def test_integer_gather_is_a_node_without_host_sync(sim):
    ag = sim
    x = ag.array(X[0]) * 2.0
    idx = ag.array(np.array([3, 1])) + 0          # pending index: the host must not wait for it
    syncs, calls = _syncs(ag), ag.statistics().calls
    got = x[idx]
    assert ag.statistics().calls == calls + 1 and _syncs(ag) == syncs
    np.testing.assert_array_equal(got.numpy(), (X[0] * 2.0)[[3, 1]])


def test_host_mask_does_not_synchronize_but_device_mask_does(sim):
    ag = sim
    x = ag.array(X) * 1.0
    syncs = _syncs(ag)
    x[X > 10]
    assert _syncs(ag) == syncs
    x[x > 10]
    assert _syncs(ag) == syncs + 1          # the mask's nonzero: its length depends on values


def test_an_assignment_through_a_device_mask_counts_it_and_refuses_another_length_at_once(sim):
    """CuPy counts a device mask on the host to shape the value: the assignment waits for the
    mask, and a value of another length is a ValueError at the assignment, not a fault later."""
    ag = sim
    a = ag.array(np.arange(6.0))
    m = ag.array(np.arange(6)) > 1                  # true 4 times, pending
    three = ag.array(np.arange(3.0))
    syncs = _syncs(ag)
    with pytest.raises(ValueError, match="3 input values to the 4 output values"):
        a[m] = three
    assert _syncs(ag) == syncs + 1
    assert a.numpy().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]        # nothing written
    a[m] = ag.array(np.arange(4.0))
    syncs = _syncs(ag)
    a[np.arange(6) > 3] = -1.0                                      # (a host mask: no wait)
    assert _syncs(ag) == syncs
    assert a.numpy().tolist() == [0.0, 1.0, 0.0, 1.0, -1.0, -1.0]


def test_zero_d_index_array_gives_zero_d_array(sim):
    ag = sim
    x = ag.array(np.arange(5.0)) + 1.0
    got = x[ag.array(np.array(3))]
    assert isinstance(got, ag.Array) and got.shape == () and float(got) == 4.0
    m = ag.array(X) * 1.0
    got = m[ag.array(np.array(1)), ag.array(np.array(2)), 3]
    assert got.shape == () and float(got) == X[1, 2, 3]


def test_kmeans_step_with_masks_and_gathers(sim):
    ag = sim
    rng = np.random.default_rng(3)
    P = rng.standard_normal((40, 2))
    points = ag.array(P)
    centers = points[ag.array(np.array([0, 1, 2]))]
    for _ in range(3):
        d = ((points[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
        labels = d.argmin(axis=1)
        centers = acp.stack([points[labels == i].mean(axis=0) for i in range(3)])
        shifted = points - centers[labels]
    Ph, C = P, P[[0, 1, 2]]
    for _ in range(3):
        lab = ((Ph[:, None, :] - C[None, :, :]) ** 2).sum(axis=2).argmin(axis=1)
        C = np.stack([Ph[lab == i].mean(axis=0) for i in range(3)])
        S = Ph - C[lab]
    np.testing.assert_allclose(centers.numpy(), C)
    np.testing.assert_allclose(shifted.numpy(), S)


ERRORS = [
    ("out of range", np.array([0, 4]), IndexError, r"index 4 is out of bounds for axis 0 with size 3"),
    ("negative out of range", [-4], IndexError, r"index -4 is out of bounds for axis 0"),
    ("int out of range", (np.array([0]), 9), IndexError, r"index 9 is out of bounds for axis 1"),
    ("mask shape", np.array([True, False]), IndexError, r"boolean index did not match .* axis 0"),
    ("too many", (0, 0, 0, [0]), IndexError, r"too many indices for array: array is 3-dim"),
    ("float index", np.array([0.0, 1.0]), IndexError, r"must be of integer \(or boolean\)"),
    ("no broadcast", (np.array([0, 1]), np.array([0, 1, 2])), IndexError, r"shape mismatch"),
    ("two ellipses", (Ellipsis, [0], Ellipsis), IndexError, r"single ellipsis"),
    ("string", ([0], "a"), IndexError, r"only integers, slices"),
]


@pytest.mark.parametrize("key,exc,pattern", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_bad_index_raises_before_anything_is_enqueued(sim, key, exc, pattern):
    ag = sim
    x = ag.array(X) * 1.0
    before = _counters(ag)
    with pytest.raises(exc, match=pattern):
        x[key]
    with pytest.raises(exc, match=pattern):
        x[key] = 0.0
    assert _counters(ag) == before
    np.testing.assert_array_equal(x[np.array([1])].numpy(), X[[1]])   # still usable


def test_device_index_of_wrong_type_is_refused(sim):
    ag = sim
    x = ag.array(X)
    floats, mask = ag.array(np.array([0.0, 1.0])), ag.array(np.array([True, False]))
    before = _counters(ag)
    with pytest.raises(IndexError, match=r"integer \(or boolean\) type; got float64\[2\]"):
        x[floats]
    with pytest.raises(IndexError, match=r"boolean index did not match .* axis 1"):
        x[:, mask]
    assert _counters(ag) == before


ASSIGNMENTS = [
    ("device mask, scalar", lambda ag, x: (x > 25, -1.0), lambda h: (h > 25, -1.0)),
    ("device index, device value",
     lambda ag, x: (ag.array(np.array([2, 0])), ag.array(np.full((2, 4, 5), 7.0))),
     lambda h: (np.array([2, 0]), np.full((2, 4, 5), 7.0))),
    ("host index, broadcast value",
     lambda ag, x: ((slice(None), [1, 3]), ag.array(np.arange(5.0))),
     lambda h: ((slice(None), [1, 3]), np.arange(5.0))),
    ("host mask, list value", lambda ag, x: (np.array([True, False, True]), [[9.0] * 5] * 4),
     lambda h: (np.array([True, False, True]), [[9.0] * 5] * 4)),
    ("slice, device value", lambda ag, x: ((1, slice(1, 3)), x[0, :2] * 10),
     lambda h: ((1, slice(1, 3)), h[0, :2] * 10)),
    ("device mask, device value", lambda ag, x: (x[:, :, 0] > 20, x[0, 0] + 100),
     lambda h: (h[:, :, 0] > 20, h[0, 0] + 100)),
]


@pytest.mark.parametrize("dev,host", [a[1:] for a in ASSIGNMENTS], ids=[a[0] for a in ASSIGNMENTS])
def test_advanced_assignment_is_a_write_seen_by_later_work(sim, dev, host):
    ag = sim
    for _ in range(3):            # randomized schedules: a missing write shows as a wrong value
        x = ag.array(X) * 1.0
        key, value = dev(ag, x)
        x[key] = value
        after = x * 2.0           # must run after the assignment
        h = X.copy()
        hkey, hvalue = host(h)
        h[hkey] = hvalue
        np.testing.assert_array_equal(after.numpy(), h * 2.0)
        np.testing.assert_array_equal(x.numpy(), h)


def test_assignment_with_device_parts_is_a_node_not_a_host_write(sim):
    ag = sim
    x = ag.array(X) * 1.0
    idx = ag.array(np.array([0, 2]))
    mask = x > 10
    st = ag.statistics()
    accesses, syncs, calls = st.host_accesses, _syncs(ag), st.calls
    x[idx] = 0.0
    st = ag.statistics()
    assert st.host_accesses == accesses and _syncs(ag) == syncs and st.calls == calls + 1
    x[mask] = 0.0                   # (counted on the host, as CuPy counts it: one wait)
    assert _syncs(ag) == syncs + 1 and ag.statistics().calls == calls + 2


def test_assignment_value_that_does_not_broadcast_is_refused(sim):
    ag = sim
    x = ag.array(X)
    value = ag.array(np.arange(3.0))
    before = _counters(ag)
    with pytest.raises(ValueError, match=r"value array of shape \(3,\) could not be broadcast "
                       r"to indexing result of shape \(2, 4, 5\)"):
        x[[0, 1]] = value
    with pytest.raises(ValueError, match=r"shape \(3,\) .* result of shape \(2, 5\)"):
        x[0, 1:3] = value
    assert _counters(ag) == before


def test_an_array_value_assigned_through_a_basic_key_of_a_view(sim):
    ag = sim
    a = ag.array(np.arange(16, dtype=np.float64))
    a[0:8][:4] *= 0.125                     # view[:4] = (view[:4] * 0.125): an Array value
    a[8:][::2] = ag.array(np.ones(4))
    expected = np.arange(16, dtype=np.float64)
    expected[0:8][:4] *= 0.125
    expected[8:][::2] = 1.0
    np.testing.assert_array_equal(a.numpy(), expected)
