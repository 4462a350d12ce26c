"""Memory lifetime (reliability note F6): memory a user drops or frees while kernels on other
streams still use it is not reused until they finish.

The sim backend poisons freed memory (0xFF bytes: NaN) and reuses it LIFO, so a block handed
out too early shows as a wrong value; the happens-before checker flags a free that is not
ordered after the device accesses. Explicit ``Array.free()`` of an array in use *waits* for
the unfinished nodes that use it (documented in docs/reliability.md); any later use raises
``FreedArrayError``.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import asyncgpu as ag
from asyncgpu.backends.sim.kernels import POISON

SRC = r'''
extern "C" __global__ void axpy(const double* x, double* y, double a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
'''
N = 16
X = np.arange(N, dtype=np.float64)


def axpy_twin(x, y, a, n):
    y[:n] += a * x[:n]


STRATEGIES = ["lazy", "starve", "random", "pct", "reverse"]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("seed", range(3))
def test_dropped_array_is_not_reused_while_readers_on_other_streams_run(strategy, seed):
    with ag.configure(backend="sim", sim_seed=seed, sim_strategy=strategy, execution="async"):
        k = ag.cuda_kernel(SRC, "axpy", sim=axpy_twin)
        outs = [ag.zeros(N) for _ in range(3)]
        tmp = ag.array(X)
        view = tmp[4:12]                 # a view keeps the base alive, but is dropped too
        for i, out in enumerate(outs):   # three readers: three streams (with-const)
            k[1, N](tmp, out, float(i + 1), N)
        k[1, 8](view, outs[0][0:8], 10.0, 8)
        del tmp, view
        gc.collect()
        decoys = [ag.full(N, 1e6) for _ in range(4)]   # LIFO reuse would hand out tmp's block
        got = [o.numpy() for o in outs]
        del decoys
    expect0 = X.copy()
    expect0[:8] += 10 * X[4:12]
    np.testing.assert_array_equal(got[0], expect0)
    np.testing.assert_array_equal(got[1], 2 * X)
    np.testing.assert_array_equal(got[2], 3 * X)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_explicit_free_waits_for_readers_and_writers_on_every_stream(strategy):
    with ag.configure(backend="sim", sim_seed=7, sim_strategy=strategy, execution="async"):
        k = ag.cuda_kernel(SRC, "axpy", sim=axpy_twin)
        x = ag.array(X)
        a, b = ag.zeros(N), ag.zeros(N)
        k[1, N](x, a, 1.0, N)            # readers of x on two streams
        k[1, N](x, b, 2.0, N)
        k[1, N](a, x, 1.0, N)            # and a writer of x after the first
        before = ag.statistics().host_syncs.get("free", 0)
        x.free()                         # waits: nothing may still touch x's block
        assert ag.statistics().host_syncs.get("free", 0) == before + 1
        reuse = ag.full(N, 5.0)          # LIFO: very likely x's old block, poisoned then filled
        np.testing.assert_array_equal(a.numpy(), X)
        np.testing.assert_array_equal(b.numpy(), 2 * X)
        np.testing.assert_array_equal(reuse.numpy(), np.full(N, 5.0))
        with pytest.raises(ag.FreedArrayError, match=r"array float64\[16\] has been freed"):
            k[1, N](x, a, 1.0, N)
        with pytest.raises(ag.FreedArrayError):
            x.numpy()


def test_free_of_an_idle_array_does_not_synchronize(sim):
    x = sim.array(X)
    x.numpy()
    before = sim.statistics().host_syncs.get("free", 0)
    x.free()
    assert sim.statistics().host_syncs.get("free", 0) == before


def test_freed_memory_is_poisoned_and_returns_to_the_pool(sim):
    from asyncgpu.runtime.current import current_runtime

    backend = current_runtime().backend
    backend = getattr(backend, "inner", backend)
    x = sim.array(X)
    buffer = x._alloc.buffer
    x.free()
    assert (buffer.host == POISON).all()             # poisoned: NaN for floats
    assert backend._pool[buffer.nbytes][-1] is buffer  # back in the pool, next in line
    y = sim.empty(N)
    assert y._alloc.buffer is buffer                  # LIFO reuse of the same block
    assert all(buffer is not b for b in backend._pool.get(buffer.nbytes, ()))  # taken out
    assert np.isnan(y.numpy()).all()                  # `empty` is poisoned too


def test_dropped_arrays_return_to_the_pool_after_their_kernels(sim):
    from asyncgpu.runtime.current import current_runtime

    backend = current_runtime().backend
    backend = getattr(backend, "inner", backend)
    k = sim.cuda_kernel(SRC, "axpy", sim=axpy_twin)
    out = sim.zeros(N)
    baseline = sum(len(v) for v in backend._pool.values())
    for i in range(20):
        tmp = sim.array(X + i)
        k[1, N](tmp, out, 1.0, N)
        del tmp
    gc.collect()
    sim.synchronize()
    sim.zeros(1)       # an allocation drains the queue of dropped blocks
    assert sum(len(v) for v in backend._pool.values()) >= baseline + 1
    np.testing.assert_array_equal(out.numpy(), 20 * X + sum(range(20)))


def _device_of(n_buffers: int, monkeypatch: pytest.MonkeyPatch) -> object:
    """The current sim backend, made to hold at most ``n_buffers`` live buffers of the size
    of ``N`` doubles, as a device of that much memory would (an allocation beyond them is
    an ``OutOfMemoryError``; freed ones go back)."""
    from asyncgpu.runtime.current import current_runtime

    backend = current_runtime().backend
    backend = getattr(backend, "inner", backend)
    alloc, free = backend.alloc, backend.free
    live: set[int] = set()

    def limited(nbytes: int):
        if nbytes == N * 8 and len(live) >= n_buffers:
            raise ag.OutOfMemoryError("cannot allocate: the test's device is full")
        buf = alloc(nbytes)
        if nbytes == N * 8:
            live.add(id(buf))
        return buf

    def freed(buf) -> None:
        live.discard(id(buf))
        free(buf)

    monkeypatch.setattr(backend, "alloc", limited)
    monkeypatch.setattr(backend, "free", freed)
    return backend


@pytest.mark.parametrize("memory", ["managed", "explicit"])
@pytest.mark.parametrize("strategy", ["lazy", "eager", "random"])
def test_a_program_that_drops_a_temporary_each_step_fits_where_its_serial_run_fits(
        memory, strategy, monkeypatch):
    """Each step's temporary is dropped while its kernel may still be pending: an allocation
    the device refuses first waits for the work in flight and frees what dropped arrays held,
    so the program runs in the memory its serial run needs (out, one temporary, one spare)."""
    with ag.configure(backend="sim", memory=memory, sim_strategy=strategy, sim_seed=1,
                      execution="async"):
        k = ag.cuda_kernel(SRC, "axpy", sim=axpy_twin)
        _device_of(3, monkeypatch)
        out = ag.zeros(N)
        for i in range(12):
            tmp = ag.array(X + i)
            k[1, N](tmp, out, 1.0, N)
            del tmp
        np.testing.assert_array_equal(out.numpy(), 12 * X + sum(range(12)))
        assert ag.statistics().host_syncs.get("allocation", 0) >= 1
        with pytest.raises(ag.OutOfMemoryError, match="device is full"):
            [ag.zeros(N) for _ in range(3)]             # (live arrays: nothing to reclaim)
        assert (out[:2] + 0).tolist() == [66.0, 78.0]


def test_a_recorded_function_made_and_dropped_each_step_fits_where_its_serial_run_fits(
        sim, monkeypatch):
    """Each step makes a recorded function (a closure) over a temporary of its own and drops
    both: the graphs it leaves, which keep the temporary alive, are destroyed when memory runs
    out, so the program runs in the memory its serial run needs."""
    k = sim.cuda_kernel(SRC, "axpy", sim=axpy_twin)
    _device_of(3, monkeypatch)
    out = sim.zeros(N)
    for i in range(8):
        tmp = sim.array(X + i)

        @sim.graph
        def step(tmp=tmp):
            k[1, N](tmp, out, 1.0, N)

        step()
        step()                              # captured: the graph holds tmp
        assert step.outcome == "replayed"
        del tmp, step
    np.testing.assert_array_equal(out.numpy(), 2 * (8 * X + sum(range(8))))


def test_memory_handed_to_another_library_is_given_back_only_after_a_device_synchronize(
        sim, monkeypatch):
    """An exported array (booked so by its export on ``cuda``) dropped: another library's work
    on it may still run on streams the runtime does not see, so its buffer waits for a
    synchronize of the whole device; past the bound, the runtime makes that synchronize."""
    from asyncgpu.runtime import issue
    from asyncgpu.runtime.current import current_runtime

    backend = current_runtime().backend
    backend = getattr(backend, "inner", backend)
    freed = []
    free = backend.free
    monkeypatch.setattr(backend, "free", lambda buf: (freed.append(buf), free(buf)))
    a = sim.zeros(N)
    a._alloc.exported = True
    buffer = a._alloc.buffer
    del a
    gc.collect()
    sim.zeros(N)                          # an entry point: the drop is seen, the memory held
    assert not any(b is buffer for b in freed)
    sim.synchronize()
    assert any(b is buffer for b in freed)
    monkeypatch.setattr(issue, "LENT_BYTES", N * 8)
    before = sim.statistics().host_syncs.get("exported", 0)
    for _ in range(2):
        b = sim.zeros(N)
        b._alloc.exported = True
        del b
    sim.zeros(N)
    assert sim.statistics().host_syncs.get("exported", 0) == before + 1


def test_arrays_dropped_in_reference_cycles_are_collected_before_memory_runs_out(
        sim, monkeypatch):
    k = sim.cuda_kernel(SRC, "axpy", sim=axpy_twin)
    _device_of(3, monkeypatch)
    out = sim.zeros(N)
    gc.disable()
    try:
        for i in range(6):
            cycle = [sim.array(X + i)]
            cycle.append(cycle)                       # freed by the collector only
            k[1, N](cycle[0], out, 1.0, N)
            del cycle
    finally:
        gc.enable()
    np.testing.assert_array_equal(out.numpy(), 6 * X + sum(range(6)))


def test_a_fault_met_while_memory_is_reclaimed_is_raised_there_and_nothing_is_lost(
        sim, monkeypatch):
    def oob(x, y, a, n):
        y[n + 100] = 1.0
    bad = sim.cuda_kernel(SRC, "axpy", sim=oob)
    _device_of(2, monkeypatch)
    out = sim.zeros(N)
    tmp = sim.array(X)
    bad[1, N](tmp, out, 1.0, N)
    del tmp
    with pytest.raises(sim.KernelFault, match="axpy"):
        sim.zeros(N)
    sim.synchronize()                                 # reported once, runtime usable
    assert sim.zeros(N).tolist() == [0.0] * N


def test_the_pool_gives_back_buffers_of_other_sizes_when_memory_runs_out(sim, monkeypatch):
    from asyncgpu.backends.sim import buffers

    from asyncgpu.runtime.current import current_runtime

    backend = current_runtime().backend
    backend = getattr(backend, "inner", backend)
    a = sim.empty(1000, np.uint8)
    sim.synchronize()
    a.free()
    assert backend._pool.get(1000)
    make = buffers.np.full
    calls = []

    def full(n, *args, **kwargs):       # the host has no room while the pool holds a buffer
        calls.append(n)
        if n == 1008 and backend._pool:
            raise MemoryError("no room")
        return make(n, *args, **kwargs)

    monkeypatch.setattr(buffers.np, "full", full)
    b = sim.empty(1008, np.uint8)
    assert b.nbytes == 1008 and not backend._pool
    monkeypatch.setattr(buffers.np, "full", make)


@pytest.mark.parametrize("memory", ["managed", "explicit"])
def test_a_kernel_whose_copy_does_not_fit_on_the_simulator_faults_and_the_runtime_goes_on(
        memory, monkeypatch):
    """The simulator runs each kernel on a private copy of what it reads; where the host has
    no room for it, that launch faults (naming the kernel) and the queue behind it runs."""
    from asyncgpu.backends.sim import kernels

    with ag.configure(backend="sim", memory=memory, sim_strategy="lazy", execution="async"):
        k = ag.cuda_kernel(SRC, "axpy", sim=axpy_twin)
        x, y = ag.array(X), ag.zeros(N)
        real = kernels.snapshot

        def snapshot(layouts, device=0):
            raise MemoryError("Unable to allocate")

        monkeypatch.setattr(kernels, "snapshot", snapshot)
        k[1, N](x, y, 1.0, N)
        with pytest.raises(ag.KernelFault, match="kernel 'axpy'.*could not run on the "
                           "simulator: the host's memory had no room"):
            ag.synchronize()
        monkeypatch.setattr(kernels, "snapshot", real)
        with pytest.raises(ag.KernelFault, match="axpy"):     # its output stays marked
            y.numpy()
        y2 = ag.zeros(N)
        k[1, N](x, y2, 2.0, N)
        np.testing.assert_array_equal(y2.numpy(), 2 * X)


def test_a_host_mirror_the_host_has_no_room_for_is_an_out_of_memory_error(monkeypatch):
    from asyncgpu.backends.sim import buffers

    with ag.configure(backend="sim", memory="explicit", execution="async"):
        make = buffers.np.full
        made = []

        def full(n, *args, **kwargs):   # the device's copy fits, the host mirror does not
            made.append(n)
            if n == 4096 and len(made) % 2 == 0:
                raise MemoryError("no room")
            return make(n, *args, **kwargs)

        monkeypatch.setattr(buffers.np, "full", full)
        with pytest.raises(ag.OutOfMemoryError, match="host mirror"):
            ag.empty(4096, np.uint8)
        monkeypatch.setattr(buffers.np, "full", make)
        assert (ag.zeros(3) + 1).tolist() == [1.0] * 3


def test_memory_is_reclaimed_inside_a_recorded_function_and_beside_another_threads_recording(
        sim, monkeypatch):
    """The work a recording waits for is already issued (its own launches are deferred): an
    allocation inside a recorded body reclaims, and so does one of a thread beside a recording
    in progress in another thread."""
    import threading

    k = sim.cuda_kernel(SRC, "axpy", sim=axpy_twin)
    _device_of(3, monkeypatch)
    out = sim.zeros(N)

    @sim.graph
    def step(out, c):
        t = sim.array(X + c)
        k[1, N](t, out, 1.0, N)

    for i in range(6):
        step(out, float(i))
    np.testing.assert_array_equal(out.numpy(), 6 * X + sum(range(6)))

    inside, leave = threading.Event(), threading.Event()

    def recording():
        with sim.record():
            inside.set()
            leave.wait(30)

    other = threading.Thread(target=recording)
    other.start()
    inside.wait(30)
    try:
        for i in range(6):
            tmp = sim.array(X + i)
            k[1, N](tmp, out, 1.0, N)
            del tmp
    finally:
        leave.set()
        other.join()
    np.testing.assert_array_equal(out.numpy(), 12 * X + 2 * sum(range(6)))


def test_two_threads_freeing_one_array_at_once_free_it_once_and_the_other_gets_freed_array_error(
        sim):
    import threading
    import time

    from asyncgpu.runtime.allocation import explicit_frees
    from asyncgpu.runtime.current import current_runtime

    rt = current_runtime()
    x = sim.array(X)
    results: list[str] = []

    def free() -> None:
        try:
            x.free()
            results.append("freed")
        except Exception as e:      # noqa: BLE001 (what the loser sees is the point)
            results.append(type(e).__name__)

    before = explicit_frees()
    with rt._lock:          # both threads reach free() before either can go on
        threads = [threading.Thread(target=free) for _ in range(2)]
        for t in threads:
            t.start()
        time.sleep(0.2)
    for t in threads:
        t.join()
    assert sorted(results) == ["FreedArrayError", "freed"]
    assert explicit_frees() == before + 1



class _Pooled:
    """A cycle whose finalizer keeps its array (a buffer pool of the program's own)."""

    pool: list = []

    def __init__(self, arr):
        self.buf = arr
        self.me = self

    def __del__(self):
        _Pooled.pool.append(self.buf)


def test_an_array_a_finalizer_keeps_is_not_handed_to_another_array(sim):
    _Pooled(sim.zeros(N))
    gc.collect()
    pooled = _Pooled.pool.pop()
    pooled[...] = 1.0
    others = [sim.full(N, 7.0) for _ in range(4)]
    others[0][...] = 3.0
    np.testing.assert_array_equal(pooled.numpy(), np.ones(N))
    # its memory goes back once the program drops it (its finalizer does not run again)
    uid = pooled._alloc.buffer.uid
    del pooled, others
    gc.collect()
    assert sim.zeros(N)._alloc.buffer.uid == uid


def test_an_array_finalizers_keep_twice_goes_back_after_the_second_time(sim):
    _Pooled(sim.zeros(N))
    gc.collect()
    _Pooled(_Pooled.pool.pop())         # (a second cycle keeps it, and lets it go again)
    gc.collect()
    kept = _Pooled.pool.pop()
    kept[...] = 2.0
    others = [sim.full(N, 7.0) for _ in range(4)]
    np.testing.assert_array_equal(kept.numpy(), np.full(N, 2.0))
    uid = kept._alloc.buffer.uid
    del kept, others
    gc.collect()
    assert sim.zeros(N)._alloc.buffer.uid == uid


def test_an_array_a_finalizer_launches_on_is_given_back_only_after_that_kernel(sim):
    k = sim.cuda_kernel(SRC, "axpy", sim=axpy_twin)
    x = sim.array(X)

    class Scrubbed:
        def __init__(self):
            self.buf = sim.zeros(N)
            self.me = self

        def __del__(self):
            k[1, N](x, self.buf, -1.0, N)

    for _ in range(20):
        Scrubbed()
        gc.collect()
        y = sim.ones(N)
        k[1, N](x, y, 1.0, N)
        np.testing.assert_array_equal(y.numpy(), X + 1)
    sim.synchronize()
