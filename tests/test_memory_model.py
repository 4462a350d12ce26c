"""The explicit memory model (``memory="explicit"``): the location state machine and its copies.

On ``sim`` the explicit model splits every buffer into a device copy (what kernels see) and a host
mirror (what host accesses see), so a copy the runtime forgets shows as stale (poisoned) data and
the happens-before checker sees each copy as a read of one copy and a write of the other.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import library_programs
import programs
import recorder_kernels
from asyncgpu.runtime import memory as _memory
from asyncgpu.runtime.array import DEVICE, HOST
from asyncgpu.runtime.memory import BOTH

N = recorder_kernels.N


@pytest.fixture
def ex():
    """A sim runtime in the explicit memory model; yields the asyncgpu module."""
    import asyncgpu as ag

    with ag.configure(backend="sim", memory="explicit", sim_seed=3, sim_strategy="random",
                      execution="async"):
        yield ag
        ag.synchronize()


def _delta(ag, before, *names):
    after = ag.statistics()
    return tuple(getattr(after, n) - getattr(before, n) for n in names)


def _loc(a):
    return a._alloc.location


# -- the transition functions, every case ---------------------------------------------------
@pytest.mark.parametrize("location", [0, HOST, DEVICE, BOTH])
@pytest.mark.parametrize("reads", [False, True])
@pytest.mark.parametrize("writes", [False, True])
@pytest.mark.parametrize("covers", [False, True])
def test_device_use_transitions(location, reads, writes, covers):
    copy_in, after = _memory.device_use(location, reads, writes, covers)
    # a copy exactly when the host holds the only current copy and the device needs old bytes
    assert copy_in == (location == HOST and (reads or not covers))
    if writes:
        assert after == DEVICE
    elif copy_in:
        assert after == BOTH
    else:
        assert after == location


@pytest.mark.parametrize("location", [0, HOST, DEVICE, BOTH])
@pytest.mark.parametrize("whole", [False, True])
def test_host_read_transitions(location, whole):
    copy_out, after = _memory.host_read(location, whole)
    assert copy_out == (location == DEVICE)
    assert after == (BOTH if location == DEVICE and whole else location)


@pytest.mark.parametrize("location", [0, HOST, DEVICE, BOTH])
@pytest.mark.parametrize("whole,dense", [(True, True), (False, True), (False, False)])
def test_host_write_transitions(location, whole, dense):
    fetch, copy_in, after = _memory.host_write(location, whole, dense)
    if whole:
        assert (fetch, copy_in, after) == (False, False, HOST)
    elif location == DEVICE:
        assert (fetch, copy_in, after) == (not dense, True, DEVICE)
    else:
        assert (fetch, copy_in, after) == (False, False, HOST)


# -- the runtime applies them ----------------------------------------------------------------
def test_host_initialized_array_is_copied_in_once(ex):
    ag = ex
    scale, add, inc = recorder_kernels.kernels(ag)
    data = np.arange(N, dtype=np.float32)
    x, y = ag.array(data), ag.empty(N, np.float32)
    assert _loc(x) == HOST and _loc(y) == 0
    before = ag.statistics()
    scale[1, N](x, y, 2.0, N)
    assert _loc(x) == BOTH and _loc(y) == DEVICE
    scale[1, N](x, y, 3.0, N)                     # x is current on the device: no second copy
    assert _delta(ag, before, "copies_to_device", "bytes_to_device", "nodes") == (1, 4 * N, 3)
    np.testing.assert_array_equal(y.numpy(), 3 * data)
    assert _loc(y) == BOTH                        # a whole read makes the mirror current


def test_host_read_copies_only_what_is_read(ex):
    ag = ex
    scale, add, inc = recorder_kernels.kernels(ag)
    n = _memory.WHOLE_FETCH_BYTES // 4 + 16        # too large to be fetched whole
    x = ag.array(np.arange(n, dtype=np.float32))
    inc[1, N](x, n)
    assert _loc(x) == DEVICE
    before = ag.statistics()
    assert x[5] == 6.0
    assert _delta(ag, before, "copies_to_host", "bytes_to_host") == (1, 4)
    assert _loc(x) == DEVICE                      # part of the mirror only
    np.testing.assert_array_equal(np.asarray(x[8:12]), [9, 10, 11, 12])
    assert _delta(ag, before, "copies_to_host", "bytes_to_host") == (2, 20)
    np.testing.assert_array_equal(x.numpy(), np.arange(n) + 1)
    assert _loc(x) == BOTH
    before = ag.statistics()
    assert x[3] == 4.0 and x.numpy().sum() == np.arange(1, n + 1, dtype=np.float32).sum()
    assert _delta(ag, before, "copies_to_host") == (0,)     # mirror current: no copy


def test_a_small_allocation_is_fetched_whole_by_its_first_read(ex):
    ag = ex
    scale, add, inc = recorder_kernels.kernels(ag)
    x = ag.array(np.arange(N, dtype=np.float32))
    inc[1, N](x, N)
    before = ag.statistics()
    assert x[5] == 6.0
    assert _delta(ag, before, "copies_to_host", "bytes_to_host") == (1, 4 * N)
    assert _loc(x) == BOTH
    # the other elements are current on the host now: no more round trips
    assert [float(x[i]) for i in range(N)] == list(np.arange(N) + 1.0)
    np.testing.assert_array_equal(np.asarray(x[8:12]), [9, 10, 11, 12])
    assert _delta(ag, before, "copies_to_host") == (1,)
    inc[1, N](x, N)                               # written on the device again: fetched again
    assert x[0] == 2.0 and _delta(ag, before, "copies_to_host") == (2,)


def test_a_small_allocation_is_fetched_whole_only_if_that_waits_for_no_other_writer():
    import asyncgpu as ag

    scale, add, inc = recorder_kernels.kernels(ag)
    half = N // 2
    with ag.configure(backend="sim", memory="explicit", sim_seed=0, sim_strategy="lazy"):
        x = ag.array(np.arange(N, dtype=np.float32))
        inc[1, N](x[:half], half)
        inc[1, N](x[half:], half)      # another writer, of the other half
        assert ag.statistics().inflight == 3     # (x copied in, then the two writers)
        before = ag.statistics()
        assert x[1] == 2.0             # waits for the first writer and fetches its element only
        assert _delta(ag, before, "copies_to_host", "bytes_to_host") == (1, 4)
        assert _loc(x) == DEVICE and ag.statistics().inflight > 0   # the second still runs
        assert x[2] == 3.0             # no unfinished writer, but the whole has one: 4 bytes
        assert _delta(ag, before, "copies_to_host", "bytes_to_host") == (2, 8)
        assert _loc(x) == DEVICE and ag.statistics().inflight > 0
        assert x[half] == half + 1     # the whole's writers are this span's: all of it
        assert _delta(ag, before, "copies_to_host", "bytes_to_host") == (3, 8 + 4 * N)
        assert _loc(x) == BOTH
        np.testing.assert_array_equal(x.numpy(), np.arange(N) + 1)
        assert _delta(ag, before, "copies_to_host") == (3,)


def test_whole_host_write_needs_no_copy_back(ex):
    ag = ex
    scale, add, inc = recorder_kernels.kernels(ag)
    x = ag.array(np.zeros(N, np.float32))
    inc[1, N](x, N)
    before = ag.statistics()
    x[...] = np.full(N, 7, np.float32)
    assert _loc(x) == HOST
    assert _delta(ag, before, "copies_to_host", "copies_to_device") == (0, 0)
    inc[1, N](x, N)
    np.testing.assert_array_equal(x.numpy(), np.full(N, 8))


def test_partial_host_write_of_device_array_keeps_the_rest(ex):
    ag = ex
    scale, add, inc = recorder_kernels.kernels(ag)
    x = ag.array(np.zeros(N, np.float32))
    inc[1, N](x, N)                               # device: all ones; mirror: zeros
    before = ag.statistics()
    x[4:8] = 5                                    # dense: the span goes to the device
    x[10] = 9
    assert _loc(x) == DEVICE
    assert _delta(ag, before, "copies_to_host", "copies_to_device", "bytes_to_device") == \
        (0, 2, 5 * 4)
    inc[1, N](x, N)
    expected = np.full(N, 2, np.float32)
    expected[4:8] = 6
    expected[10] = 10
    np.testing.assert_array_equal(x.numpy(), expected)


def test_strided_host_write_of_device_array_fetches_the_span_first(ex):
    ag = ex
    scale, add, inc = recorder_kernels.kernels(ag)
    x = ag.array(np.zeros(N, np.float32))
    inc[1, N](x, N)
    before = ag.statistics()
    x[0:16:2] = -1                                # holes between the written elements
    assert _delta(ag, before, "copies_to_host", "copies_to_device") == (1, 1)
    expected = np.ones(N, np.float32)
    expected[0:16:2] = -1
    np.testing.assert_array_equal(x.numpy(), expected)
    x2 = ag.array(np.zeros(N, np.float32))
    inc[1, N](x2, N)
    x2[np.array([1, 3])] = 4                      # advanced index: not dense either
    expected = np.ones(N, np.float32)
    expected[[1, 3]] = 4
    np.testing.assert_array_equal(x2.numpy(), expected)
    x3 = ag.array(np.zeros(N, np.float32))
    inc[1, N](x3, N)
    before = ag.statistics()
    x3[4:20:4][...] = 7                           # ``[...]`` of a strided view: holes too
    assert _delta(ag, before, "copies_to_host", "copies_to_device") == (1, 1)
    expected = np.ones(N, np.float32)
    expected[4:20:4] = 7
    np.testing.assert_array_equal(x3.numpy(), expected)
    x3[...] = np.arange(N, dtype=np.float32)      # every byte: no fetch, no copy back
    assert _delta(ag, before, "copies_to_host", "copies_to_device") == (2, 1) and _loc(x3) == HOST
    np.testing.assert_array_equal(x3.numpy(), np.arange(N))
    inc[1, N](x3, N)
    x3[::2][:] = 0                                # ``[:]`` of a strided view: holes
    expected = np.arange(N, dtype=np.float32) + 1
    expected[::2] = 0
    np.testing.assert_array_equal(x3.numpy(), expected)
    x3[:] = 5                                     # every byte again
    assert _loc(x3) == HOST and x3.numpy().tolist() == [5.0] * N


def test_write_only_kernel_skips_the_copy_only_when_it_covers_everything(ex):
    ag = ex
    scale, add, inc = recorder_kernels.kernels(ag)
    x = ag.array(np.arange(N, dtype=np.float32))
    y = ag.array(np.full(N, 3, np.float32))       # HOST, then overwritten whole by `out=y`
    z = ag.array(np.full(2 * N, 4, np.float32))   # HOST, half of it overwritten
    before = ag.statistics()
    scale[1, N](x, y, 2.0, N)
    assert _delta(ag, before, "copies_to_device") == (1,)      # x only
    scale[1, N](x, z[:N], 2.0, N)
    assert _delta(ag, before, "copies_to_device") == (2,)      # z: its other half is needed
    np.testing.assert_array_equal(y.numpy(), 2 * np.arange(N))
    np.testing.assert_array_equal(z.numpy(), np.r_[2 * np.arange(N), np.full(N, 4)])


def test_empty_arrays_are_never_copied(ex):
    ag = ex
    scale, add, inc = recorder_kernels.kernels(ag)
    x = ag.empty(N, np.float32)
    before = ag.statistics()
    scale[1, N](ag.zeros(N, np.float32), x, 1.0, N)
    assert _delta(ag, before, "copies_to_device") == (1,)      # the zeros, not x
    assert (x.numpy() == 0).all()


@pytest.mark.pure     # (replaces a method of the memory model: a mutant)
def test_a_missing_copy_shows_as_stale_data(ex, monkeypatch):
    ag = ex
    scale, add, inc = recorder_kernels.kernels(ag)
    monkeypatch.setattr(_memory.ExplicitMemory, "before_device",
                        lambda self, accesses, device=0: None)
    x, y = ag.array(np.ones(N, np.float32)), ag.empty(N, np.float32)
    scale[1, N](x, y, 2.0, N)                     # x's device copy was never written
    assert np.isnan(y.numpy()).all()              # poison, not 2.0


@pytest.mark.pure     # (replaces a method of the memory model: a mutant)
def test_an_unwaited_copy_is_a_race(ex, monkeypatch):
    ag = ex
    scale, add, inc = recorder_kernels.kernels(ag)
    real = _memory.ExplicitMemory.copy

    def unwaited(self, alloc, lo, hi, to_device, label, *where):
        node = real(self, alloc, lo, hi, to_device, label, *where)
        if not to_device:
            node.finished = True                  # the host would read without waiting
        return node

    monkeypatch.setattr(_memory.ExplicitMemory, "copy", unwaited)
    x = ag.array(np.ones(N, np.float32))
    inc[1, N](x, N)
    with ag.trace(), pytest.raises(ag.RaceError):
        x.numpy()                                 # (traced: the fetch is a copy node)


@pytest.mark.pure     # (replaces a method of the memory model: a mutant)
def test_a_fetch_before_the_writers_finish_is_a_race(ex, monkeypatch):
    ag = ex
    scale, add, inc = recorder_kernels.kernels(ag)
    # the host would copy the span out without waiting for the kernel that writes it
    monkeypatch.setattr(_memory.ExplicitMemory, "host_waits",
                        lambda self, write, fetch, found: {})
    x = ag.array(np.ones(N, np.float32))
    inc[1, N](x, N)
    with pytest.raises(ag.RaceError):
        x.numpy()


@pytest.mark.parametrize("seed", range(6))
def test_host_reads_fetch_after_their_writers_under_random_schedules(seed):
    import asyncgpu as ag

    with ag.configure(backend="sim", memory="explicit", sim_seed=seed, sim_strategy="random",
                      execution="async"):
        _reads_after_writers(ag)


def _reads_after_writers(ag):
    scale, add, inc = recorder_kernels.kernels(ag)
    xs = [ag.array(np.full(N, i, np.float32)) for i in range(4)]
    for step in range(1, 6):
        for i, x in enumerate(xs):
            inc[1, N](x, N)
            if (i + step) % 3 == 0:
                assert x[step] == i + step        # one element, fetched after the writer
        ys = [ag.empty(N, np.float32) for _ in xs]
        for x, y in zip(xs, ys):
            scale[1, N](x, y, 2.0, N)
        for i, y in enumerate(ys):
            np.testing.assert_array_equal(y.numpy(), np.full(N, 2 * (i + step), np.float32))
        np.testing.assert_array_equal(np.asarray(xs[1][2:6]), np.full(4, 1 + step))


def test_copies_are_nodes_in_traces(ex):
    ag = ex
    scale, add, inc = recorder_kernels.kernels(ag)
    x, y = ag.array(np.ones(N, np.float32)), ag.empty(N, np.float32)
    with ag.trace() as t:
        scale[1, N](x, y, 2.0, N)
        y.numpy()
    kinds = [(n.kind, n.name) for n in t.device_nodes]
    assert kinds[0][0] == "copy" and kinds[0][1].endswith("to device")
    assert kinds[1] == ("kernel", "scale")
    assert kinds[2][0] == "copy" and kinds[2][1].endswith("to host")
    scale_rec = t.device_nodes[1]
    assert any(pid == t.device_nodes[0].id and reason == "RAW" for pid, reason, _ in scale_rec.parents)


def test_library_calls_and_operators_use_the_device_copy(ex):
    ag = ex
    import asyncgpu.cupy as acp

    a = np.linspace(0, 1, 32)
    x = ag.array(a)
    y = acp.sqrt(x) + x
    x[3] = 10.0                                   # after the calls read x: they saw the old x
    np.testing.assert_array_equal(y.numpy(), np.sqrt(a) + a)
    assert float(x.sum()) == pytest.approx(a.sum() - a[3] + 10.0)
    out = ag.empty(32)
    acp.multiply(x, 2.0, out=out)
    b = a.copy()
    b[3] = 10.0
    np.testing.assert_array_equal(out.numpy(), 2 * b)


def test_recorded_graphs_see_host_writes_between_replays(ex):
    ag = ex
    scale, add, inc = recorder_kernels.kernels(ag)
    x, y = ag.array(np.zeros(N, np.float32)), ag.empty(N, np.float32)

    @ag.graph
    def step(x, y):
        inc[1, N](x, N)
        scale[1, N](x, y, 2.0, N)

    for i in range(4):
        x[...] = np.full(N, i, np.float32)        # HOST again: the replay needs a copy in
        step(x, y)
        np.testing.assert_array_equal(y.numpy(), np.full(N, 2 * (i + 1)))
        assert x[0] == i + 1


def test_memory_option_from_the_environment():
    from asyncgpu.core.config import options_from_env

    assert options_from_env({}).memory == "explicit"
    assert options_from_env({"ASYNCGPU_MEMORY": "managed"}).memory == "managed"
    with pytest.raises(ValueError, match="ASYNCGPU_MEMORY|memory"):
        options_from_env({"ASYNCGPU_MEMORY": "unified"})


def test_switching_memory_model_converts_the_arrays():
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=1, memory="managed"):
        a = ag.array(np.arange(8.0))
        with ag.configure(backend="sim", sim_seed=1, memory="explicit"):
            b = ag.array(np.arange(8.0))
            np.testing.assert_array_equal((b + 1).numpy(), np.arange(8.0) + 1)
            assert a._alloc.buffer.host is not a._alloc.buffer.dev    # explicit memory now
            np.testing.assert_array_equal((a * 2).numpy(), np.arange(8.0) * 2)
        np.testing.assert_array_equal(a.numpy(), np.arange(8.0))
        np.testing.assert_array_equal((b * 3).numpy(), np.arange(8.0) * 3)


def test_switching_memory_model_passes_over_an_array_whose_making_was_interrupted():
    """An interrupt (a fault, Ctrl-C) in the middle of making an array can leave a half-made
    one alive in a reference cycle until the collector runs; a switch of memory model that
    walks the live arrays then converted nothing and raised AttributeError."""
    import asyncgpu as ag
    from asyncgpu.runtime.array import Array

    with ag.configure(backend="sim", sim_seed=1, memory="explicit"):
        a = ag.array(np.arange(8.0))
        half = [Array.__new__(Array)]
        half.append(half)               # (kept by a cycle, as a traceback's frames keep it)
        with ag.configure(backend="sim", sim_seed=1, memory="managed"):
            np.testing.assert_array_equal((a * 2).numpy(), np.arange(8.0) * 2)
        np.testing.assert_array_equal((a + 1).numpy(), np.arange(8.0) + 1)
        del half


# -- random programs: both models equal serial -----------------------------------------------
def _serial_managed(ag, steps, init, run_program=programs.run):
    """The serial oracle with the managed memory model (the default is explicit)."""
    from asyncgpu.runtime.current import current_runtime

    def run(ag, steps, init):
        assert ag.options().memory == "managed"
        assert current_runtime().memory is None     # no explicit copies: unified memory
        return run_program(ag, steps, init)

    return programs.run_serial(ag, run, steps, init, memory="managed")


def _same(a, b):
    for x, y in zip(a[0] + a[1], b[0] + b[1]):
        assert x.tolist() == y.tolist()
    assert len(a[0]) == len(b[0])


@pytest.mark.parametrize("strategy", ["random", "reverse", "starve", "pct"])
@settings(max_examples=programs.examples(40), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_random_programs_equal_serial_in_both_memory_models(strategy, steps):
    import asyncgpu as ag

    init = programs.initial(2)
    expected = _serial_managed(ag, steps, init)
    with ag.configure(backend="sim", execution="sync", sim_seed=0, sim_strategy="eager",
                      memory="explicit"):
        _same(programs.run(ag, steps, init), expected)
    for seed in (0, 1):
        _same(programs.run_async(ag, programs.run, steps, init, strategy, seed,
                                 memory="explicit"), expected)
    _same(programs.run_async(ag, programs.run, steps, init, strategy, 0, memory="managed"),
          expected)


@pytest.mark.parametrize("policy", programs.POLICIES[:4])
@settings(max_examples=programs.examples(15), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_random_programs_explicit_every_policy(policy, steps):
    import asyncgpu as ag

    init = programs.initial(3)
    expected = _serial_managed(ag, steps, init)
    _same(programs.run_async(ag, programs.run, steps, init, "random", 5, memory="explicit",
                             **policy), expected)


@pytest.mark.parametrize("strategy", ["random", "starve"])
@settings(max_examples=programs.examples(20), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps=library_programs.strategies())
def test_mixed_library_programs_explicit_equal_serial(strategy, steps):
    import asyncgpu as ag

    init = programs.initial(4)
    expected = _serial_managed(ag, steps, init, library_programs.run)
    got = programs.run_async(ag, library_programs.run, steps, init, strategy, 2,
                             memory="explicit")
    assert len(got[0]) == len(expected[0])
    for x, y in zip(got[0] + got[1], expected[0] + expected[1]):
        np.testing.assert_array_equal(x, y)


def test_same_array_written_whole_and_read_in_one_launch(ex):
    ag = ex
    src = r'''extern "C" __global__ void k(const float* x, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = 2.0f * x[i];
    }'''

    def twin(x, y, n):
        y[:n] = 2 * x[:n]

    k = ag.cuda_kernel(src, "k", out=["y"], sim=twin)
    x = ag.array(np.arange(8, dtype=np.float32))    # HOST; `out` covers it, `x` reads it
    k[1, 8](x, x, 8)
    np.testing.assert_array_equal(x.numpy(), 2 * np.arange(8))


def test_host_read_of_data_kernels_only_read_never_blocks():
    import asyncgpu as ag

    scale, add, inc = recorder_kernels.kernels(ag)
    with ag.configure(backend="sim", memory="explicit", sim_seed=0, sim_strategy="lazy"):
        x, y = ag.array(np.arange(N, dtype=np.float32)), ag.empty(N, np.float32)
        scale[1, N](x, y, 2.0, N)                 # copy of x and the kernel: both pending
        before = ag.statistics()
        assert x[5] == 5.0 and x.numpy().sum() == sum(range(N))
        after = ag.statistics()
        assert after.host_syncs == before.host_syncs and after.inflight == before.inflight > 0
        np.testing.assert_array_equal(y.numpy(), 2 * np.arange(N))


def test_cuda_copy_moves_the_span_between_mirror_and_device():
    """The cuda backend's copy (``cudaMemcpyAsync`` arguments) with host bytes standing in for
    device memory: the right span, direction and checker accesses."""
    import ctypes
    import types

    from asyncgpu.backends.cuda.backend import CudaCopy, DeviceBuffer

    device = np.zeros(64, np.uint8)
    buf = DeviceBuffer(64, None, device.ctypes.data)
    buf._host = np.arange(64, dtype=np.uint8)      # the pinned mirror, already allocated
    kinds = []

    def memcpy_async(dst, src, nbytes, kind, stream):
        kinds.append((kind, stream))
        ctypes.memmove(dst, src, nbytes)

    calls = types.SimpleNamespace(memcpy_async=memcpy_async)
    stream = types.SimpleNamespace(ptr=77)
    h2d = CudaCopy(calls, buf, 8, 24, True)
    h2d(stream)
    assert device[8:24].tolist() == list(range(8, 24)) and not device[:8].any()
    assert not device[24:].any()
    device[30:40] = 200
    d2h = CudaCopy(calls, buf, 30, 40, False)
    d2h(stream)
    assert (buf.host[30:40] == 200).all() and buf.host[29] == 29 and buf.host[40] == 40
    assert kinds == [(1, 77), (2, 77)]
    assert h2d.hb_accesses() == [(buf.host_uid, 8, 24, False), (buf.uid, 8, 24, True)]
    assert d2h.hb_accesses() == [(buf.uid, 30, 40, False), (buf.host_uid, 30, 40, True)]


_DOUBLE = r'''extern "C" __global__ void double_into(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2 * x[i]; }'''


def _double_twin(x, y, n):
    y[:n] = 2 * x[:n]


def test_a_launch_the_driver_refuses_keeps_the_host_data_of_what_it_would_overwrite(
        ex, monkeypatch):
    """``out=`` declares ``y`` written whole, so no copy of its host data goes to the device
    first; a launch the driver refuses (nothing ran) leaves ``y`` as the host wrote it."""
    from asyncgpu.runtime.current import current_runtime

    k = ex.cuda_kernel(_DOUBLE, "double_into", sim=_double_twin, out=["y"])
    x = ex.array(np.ones(4, np.float32))
    y = ex.array(np.arange(4, dtype=np.float32))
    backend = current_runtime().backend
    launch = backend.launch

    def refuse(node, stream):
        if node.kind != "kernel":
            return launch(node, stream)
        raise ex.LaunchError("double_into: the driver refused the launch (stand-in)")

    monkeypatch.setattr(backend, "launch", refuse)
    with pytest.raises(ex.LaunchError):
        k[1, 4](x, y, 4)
    monkeypatch.setattr(backend, "launch", launch)
    np.testing.assert_array_equal(y.numpy(), np.arange(4, dtype=np.float32))
    k[1, 4](x, y, 4)                                 # the runtime goes on
    np.testing.assert_array_equal(y.numpy(), np.full(4, 2, np.float32))
