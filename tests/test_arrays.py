"""Host access to arrays: views, waits only on conflicts, NumPy-like behaviour."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda


def make_fill(ag):
    @ag.kernel(out=["y"])
    @cuda.jit
    def fill(y, v):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = v
    return fill


def make_copy(ag):
    @ag.kernel(const=["x"], out=["y"])
    @cuda.jit
    def copy(x, y):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = x[i]
    return copy


def test_metadata_like_numpy(sim):
    ag = sim
    a = ag.zeros((4, 6), np.float32)
    assert (a.shape, a.dtype, a.size, a.nbytes, a.ndim, len(a)) == ((4, 6), np.float32, 24, 96, 2, 4)
    v = a[1:3, ::2]
    assert v.shape == (2, 3) and v.strides == (24, 8) and not v.is_c_contiguous
    assert a.T.shape == (6, 4) and a.reshape(24).shape == (24,)


@pytest.mark.parametrize("field, value, fix", [
    ("shape", (8, 8), r"a.reshape\(shape\) is a view"), ("dtype", np.int32, r"a.view\(dtype\)"),
    ("strides", (8,), "index, transpose or reshape")])
def test_an_arrays_layout_cannot_be_set_and_a_recorded_step_keeps_running_right(sim, field,
                                                                                 value, fix):
    """Setting a layout field in place would leave a recorded function replaying the old
    layout, and an eager launch faulting: refused with the way to get the new layout."""
    ag = sim
    a = ag.array(np.arange(64, dtype=np.float32))

    @ag.graph
    def double(x):
        return x * 2.0

    double(a)
    double(a)
    with pytest.raises(AttributeError, match=fr"keep the {field} they were made with: {fix}"):
        setattr(a, field, value)
    assert (a.shape, a.dtype, a.strides) == ((64,), np.float32, (4,))
    np.testing.assert_array_equal(double(a).numpy(), np.arange(64, dtype=np.float32) * 2)
    assert double.outcome == "replayed"
    np.testing.assert_array_equal(a.reshape(8, 8).numpy(), np.arange(64.0).reshape(8, 8))


def test_transpose_takes_numpys_axes_and_refuses_what_is_not_a_permutation(sim):
    ag = sim
    host = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    a = ag.array(host)
    for axes in [(), (None,), ((2, 0, 1),), (2, 0, 1), (-1, -3, 1), ([1, 0, 2],)]:
        np.testing.assert_array_equal(a.transpose(*axes).numpy(), host.transpose(*axes))
    for axes in [(0, 0, 1), (0, 1), (0, 1, 3), (0, 1, -4), ("x", 0, 1), (0.0, 1, 2)]:
        with pytest.raises(ValueError, match="axes must be a permutation of the array's 3 axes"):
            a.transpose(*axes)                  # (a view past the allocation, or aliased)
    np.testing.assert_array_equal(a.numpy(), host)


def test_iteration_membership_and_index_behave_as_numpys(sim):
    ag = sim
    a = ag.array(np.arange(6.0).reshape(2, 3))
    assert [row.numpy().tolist() for row in a] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert 4.0 in a and 9.0 not in a
    with pytest.raises(TypeError, match="iteration over a 0-d"):
        list(ag.array(np.float32(1.0)))
    assert [10, 20][ag.array(np.int64(1))] == 20
    with pytest.raises(TypeError, match=r"only integer scalar \(0-d\) arrays"):
        [10, 20][ag.array(np.array([1]))]


@pytest.mark.parametrize("value, dtype", [(np.nan, np.int32), (1e10, np.int8), (2.7, np.int32),
                                          (1 + 2j, np.float32), (5, None), (300, np.int8)])
def test_full_casts_its_number_as_numpys_full_does(sim, value, dtype):
    import warnings

    ag = sim
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # (NumPy's cast warnings, alike on both sides)
        try:
            want = np.full(3, value, dtype)
        except OverflowError:
            with pytest.raises(OverflowError):
                ag.full(3, value, dtype)
            return
        got = ag.full(3, value, dtype)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want)


def test_host_reads_and_writes_through_views(sim):
    ag = sim
    h = np.arange(12, dtype=np.int32).reshape(3, 4)
    a = ag.array(h)
    assert a[2, 1] == 9 and a[-1, -1] == 11
    assert np.asarray(a[1]).tolist() == [4, 5, 6, 7]
    a[0, :] = -1
    a[2] = np.array([7, 7, 7, 7])
    h[0, :] = -1
    h[2] = 7
    assert a.numpy().tolist() == h.tolist()
    assert a[[0, 2], 1].tolist() == h[[0, 2], 1].tolist()
    with pytest.raises(IndexError):
        a[3, 0]


def test_scalar_reads_of_vectors_and_their_views_index_as_numpy(sim):
    ag = sim
    h = np.arange(10, dtype=np.float32) * 1.5
    a = ag.array(h)
    for view, ref in ((a, h), (a[::3], h[::3]), (a[2:7], h[2:7]), (a[::-2], h[::-2])):
        n = len(ref)
        for i in [*range(-n, n), np.int64(1), np.int32(-1)]:
            assert view[i] == ref[i] and type(view[i]) is type(ref[i])
        for bad in (n, -n - 1):
            with pytest.raises(IndexError, match="out of bounds"):
                view[bad]
    a.free()
    with pytest.raises(ag.FreedArrayError):
        a[0]


_INDEX = st.one_of(st.integers(-9, 9), st.builds(slice, st.none() | st.integers(-10, 10),
                                                 st.none() | st.integers(-10, 10),
                                                 st.none() | st.integers(-3, 3).filter(bool)))


@settings(max_examples=150, deadline=None)
@given(shape=st.sampled_from([(7,), (6, 5), (4, 3, 2)]), first=_INDEX, second=_INDEX,
       view_first=st.booleans())
def test_views_of_the_first_axis_are_numpy_s(shape, first, second, view_first):
    """``a[k]`` and ``a[i:j:s]`` (the short path) and any other basic index give NumPy's
    shape, strides and elements, as views of views too, and write through to the base."""
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=0):
        h = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
        a = ag.array(h)
        base_a, base_h = (a[::-1], h[::-1]) if view_first else (a, h)
        for key in (first, (first, second) if len(shape) > 1 else first):
            try:
                ref = base_h[key]
            except IndexError:
                with pytest.raises(IndexError):
                    base_a[key]
                continue
            got = base_a[key]
            if np.ndim(ref) == 0:
                assert got == ref
                continue
            assert got.shape == ref.shape and got.strides == ref.strides
            np.testing.assert_array_equal(got.numpy(), ref)
            if ref.size:
                got[...] = -1
                ref[...] = -1
                np.testing.assert_array_equal(a.numpy(), h)


def test_host_read_waits_only_for_writers_of_the_bytes_read(managed_memory, sim):
    # (explicit memory tracks where the current copy is per allocation: a read of the
    # other half waits for the copy that made the whole allocation device-current)
    ag = sim
    fill = make_fill(ag)
    a = ag.zeros(64, np.float32)
    fill[1, 32](a[:32], 1.0)
    before = ag.statistics()
    assert a[40] == 0.0                          # other half: no wait
    assert ag.statistics().host_syncs == before.host_syncs
    assert a[3] == 1.0                           # written half: one wait
    assert ag.statistics().host_syncs["host-read"] == before.host_syncs.get("host-read", 0) + 1


def test_host_read_of_data_kernels_only_read_never_blocks(sim):
    ag = sim
    copy = make_copy(ag)
    # lazy: the simulator takes no step at API calls, so only a host wait can run the copy
    with ag.configure(sim_strategy="lazy"):
        x = ag.array(np.arange(32, dtype=np.float32))
        y = ag.empty_like(x)
        copy[1, 32](x, y)
        before = ag.statistics()
        assert before.inflight >= 1              # the copy (and x's upload) are queued
        assert x.numpy().tolist() == list(range(32))
        after = ag.statistics()
        assert after.host_syncs == before.host_syncs
        assert after.inflight == before.inflight  # the read did not wait for the copy to run
        assert y.numpy().tolist() == list(range(32))
        assert ag.statistics().inflight == 0


def test_host_write_waits_for_pending_readers(sim):
    ag = sim
    copy = make_copy(ag)
    x = ag.array(np.arange(32, dtype=np.float32))
    y = ag.empty_like(x)
    copy[1, 32](x, y)
    x[...] = -5.0                                  # write-after-read through the host
    assert y.numpy().tolist() == list(range(32))
    assert x.numpy().tolist() == [-5.0] * 32


def test_disjoint_views_run_on_different_streams_without_edges(managed_memory, sim):
    # (explicit memory: both views depend on the one copy of the allocation, not on
    # each other; tests/test_memory_model.py)
    ag = sim
    fill = make_fill(ag)
    a = ag.zeros(64, np.float32)
    before = ag.statistics()
    fill[1, 32](a[:32], 1.0)
    fill[1, 32](a[32:], 2.0)
    after = ag.statistics()
    assert sum(after.edges.values()) == sum(before.edges.values())
    assert after.streams_used >= 2
    assert a.numpy().tolist() == [1.0] * 32 + [2.0] * 32


def test_scalar_conversions_and_repr(sim):
    ag = sim
    s = ag.array(np.array(2.5, np.float64))
    assert float(s) == 2.5 and int(s) == 2 and bool(s) and s.item() == 2.5
    assert "2.5" in repr(s) and "float64" in repr(s)
    one = ag.array(np.array([2.5]))
    assert bool(one) and one.item() == 2.5
    for x in (one, ag.zeros(3)):    # (NumPy's refusal, which CuPy converts through)
        with pytest.raises(TypeError):
            float(np.zeros(x.shape))
        with pytest.raises(TypeError):
            float(x)


def test_creation_functions(sim):
    ag = sim
    assert ag.full((2, 2), 3, np.int16).numpy().tolist() == [[3, 3], [3, 3]]
    assert ag.ones(3).numpy().dtype == np.float64
    x = ag.array([[1.0, 2.0]], dtype=np.float32)
    assert ag.zeros_like(x).numpy().tolist() == [[0.0, 0.0]]
    assert ag.empty_like(x).shape == (1, 2)
    assert ag.asarray(x) is x and ag.asarray(x, np.float64).dtype == np.float64
    assert ag.array(x).numpy().tolist() == [[1.0, 2.0]]
    z = ag.zeros(0, np.float32)
    assert z.numpy().shape == (0,)


def test_many_launches_keep_bounded_state(sim):
    """A long loop without host access: live entries and in-flight nodes stay bounded."""
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    with ag.configure(backend="sim", sim_seed=1, sim_strategy="eager"):
        k = ag.cuda_kernel(
            'extern "C" __global__ void inc(float* y) { y[threadIdx.x] += 1.0f; }', "inc",
            sim=lambda y: y.__setitem__(slice(None), y + 1),
        )
        y = ag.zeros(4, np.float32)
        rt = current_runtime()
        for _ in range(3000):
            k[1, 4](y)
        assert rt.streams.inflight <= rt.options.poll_threshold + 1
        assert rt.deps.live_entries(y._alloc.id) <= 2
        assert y.numpy().tolist() == [3000.0] * 4


def test_configure_validates_and_restores():
    import asyncgpu as ag

    with pytest.raises(TypeError, match="unknown option"):
        ag.configure(streams=3)
    with pytest.raises(ValueError, match="execution must be one of async, sync"):
        ag.configure(execution="parallel")
    before = ag.options()
    with ag.configure(execution="sync") as opts:
        assert opts.execution == "sync" and ag.options().execution == "sync"
    assert ag.options() == before


def test_host_write_of_one_element_waits_for_its_readers(sim):
    """Regression: an all-integer index used to compute a wrong byte span and skip the wait."""
    import asyncgpu as ag

    for seed in range(6):
        with ag.configure(backend="sim", sim_seed=seed, sim_strategy="starve"):
            copy = make_copy(ag)
            x = ag.array(np.arange(32, dtype=np.float32))
            y = ag.empty_like(x)
            copy[1, 32](x, y)
            x[0] = -1.0                      # must wait for the copy, which reads x[0]
            x[-1] = -2.0
            assert y.numpy().tolist() == list(range(32))
            assert x[0] == -1.0 and x[31] == -2.0


def test_memory_of_dropped_arrays_is_reclaimed_after_their_kernels_finish(sim):
    """Finished nodes remembered by the dependency tracker must not keep allocations alive."""
    import gc
    import weakref

    ag = sim

    @ag.kernel(const=["x"])
    @cuda.jit
    def inc(x, y):
        i = cuda.grid(1)
        if i < y.shape[0]:
            y[i] = x[i] + 1

    x = ag.ones(100, np.float32)
    y = ag.empty(100, np.float32)
    inc[1, 128](x, y)
    refs = [weakref.ref(x._alloc), weakref.ref(y._alloc)]
    ag.synchronize()
    del x, y
    gc.collect()
    ag.synchronize()        # (the runtime lets go of dropped allocations at its next call)
    assert [r() for r in refs] == [None, None]


@pytest.mark.parametrize("dtype,key,value,exc", [
    (np.int8, [0, 1], 300, OverflowError),
    (np.int8, "mask", np.nan, ValueError),
    (np.int8, [0], "x", ValueError),
    (np.uint8, [0], -1, OverflowError),
    (np.float32, [0], 1 + 2j, TypeError),
], ids=["300-into-int8", "nan-into-int8-by-mask", "str-into-int8", "-1-into-uint8",
        "complex-into-float32"])
def test_an_advanced_assignment_numpy_refuses_raises_at_once_and_leaves_the_array(
        sim, dtype, key, value, exc):
    """As NumPy's: raised where the assignment is written; raised when the node ran, at the next
    wait, it left the array unreadable."""
    ag = sim
    a = ag.array(np.arange(5, dtype=dtype))
    with pytest.raises(exc):
        a[a == 0 if key == "mask" else key] = value
    ag.synchronize()
    assert a.tolist() == list(range(5))
    a[[0, 1]] = np.array([7, 8])                    # (what NumPy converts is written)
    assert a.tolist() == [7, 8, 2, 3, 4]


def test_an_array_converts_pickles_and_answers_in_as_numpys_does(sim):
    import pickle

    ag = sim
    a = ag.array(np.arange(6.0).reshape(2, 3))
    assert "x" not in a and None not in a and 3.0 in a     # (no element can equal a string)
    assert ag.array(np.array([0.0, 1.0, 2.0])) in a         # (a row: as NumPy)
    for refused in ([0.0, 1.0, 2.0], (0.0, 1.0, 2.0), np.array([0.0, 1.0, 2.0])):
        with pytest.raises(TypeError, match="asyncgpu.asarray"):
            refused in a                                    # (not a silent False)
    with pytest.raises(ValueError, match="broadcast"):
        ag.array(np.arange(4.0)) in a
    assert bytes(a) == np.arange(6.0).tobytes() and bytes(a[1, 2:]) == np.float64(5).tobytes()
    assert complex(ag.array(np.array(1 + 2j))) == 1 + 2j
    for kind in (float, int, complex):      # (a 1-element array of 2 dimensions: as NumPy)
        try:
            want = kind(np.arange(6.0).reshape(2, 3)[1:, 2:])
        except TypeError as exc:
            with pytest.raises(TypeError, match=str(exc)):
                kind(a[1:, 2:])
        else:
            assert kind(a[1:, 2:]) == want
    for x in (a, ag.array(np.asfortranarray(np.arange(6.0).reshape(2, 3)))):
        back = pickle.loads(pickle.dumps(x))
        assert isinstance(back, ag.Array) and back.tolist() == x.tolist()
        assert back.strides == x.strides                   # (Fortran order kept)
    assert a[(0, 1),].tolist() == np.arange(6.0).reshape(2, 3)[(0, 1),].tolist()
    with pytest.raises(np.exceptions.AxisError):
        a.transpose(0, 5)
    with pytest.raises(ValueError, match="permutation"):
        a.transpose(0, 0)


def test_a_big_endian_array_keeps_its_values_in_the_machines_order(sim):
    """CUDA's numbers are the machine's order: the bytes of a '>f4' array read as other
    numbers on the device (CuPy keeps the dtype and the kernels misread it)."""
    ag = sim
    x = ag.array(np.arange(3, dtype=">f4"))
    assert x.dtype == np.dtype("float32") and x.dtype.isnative
    assert (x + 1).tolist() == [1.0, 2.0, 3.0]
