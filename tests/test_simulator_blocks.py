"""How the simulator runs a launch's blocks: a kernel without barriers runs each block's CUDA
threads one after another on one Python thread, a kernel with barriers a Python thread per
CUDA thread meeting at each barrier; device functions are found wherever a kernel reaches
them; a failing thread is reported as Numba reports it, and the runtime stays usable."""

from __future__ import annotations

import sys
import threading
import types

import numpy as np
import pytest
from numba import cuda
from numba.cuda import syncthreads as barrier  # (a barrier under another name)

from asyncgpu.backends.sim import numba_sim
from asyncgpu.core.errors import KernelFault


@cuda.jit(device=True)
def _triple(v):
    return 3 * v


#: device functions reached as attributes of a module the kernel names
helpers = types.ModuleType("helpers")
helpers.triple = _triple


@cuda.jit(device=True)
def _sync_then_read(buf, i):
    cuda.syncthreads()
    return buf[i]


def _python_threads_per_block(ag, monkeypatch, kernel, n=64, block=32):
    """Run ``kernel[n // block, block](x, y)`` and count the Python threads each block ran on
    (the kernel calls ``_note(cuda.blockIdx.x)``)."""
    seen: dict[int, set[int]] = {}

    def note(b):
        seen.setdefault(b, set()).add(threading.get_ident())

    x = ag.array(np.arange(n, dtype=np.float32))
    y = ag.zeros(n, np.float32)
    monkeypatch.setitem(globals(), "_note", note)
    kernel[n // block, block](x, y)
    out = y.numpy()
    return out, sorted(len(v) for v in seen.values())


def _note(b):       # (replaced by the tests that count threads)
    pass


def test_a_kernel_without_barriers_runs_each_block_on_one_python_thread(sim, monkeypatch):
    ag = sim

    @ag.kernel(const=["x"])
    @cuda.jit
    def square(x, y):
        i = cuda.grid(1)
        _note(cuda.blockIdx.x)
        if i < y.size:
            y[i] = x[i] * x[i]

    out, threads = _python_threads_per_block(ag, monkeypatch, square)
    assert out.tolist() == [float(i * i) for i in range(64)]
    assert threads == [1, 1]


def test_a_kernel_with_a_barrier_runs_a_thread_per_cuda_thread_that_meet_there(sim, monkeypatch):
    ag = sim

    @ag.kernel(const=["x"])
    @cuda.jit
    def reverse_in_block(x, y):
        buf = cuda.shared.array(32, np.float32)
        t = cuda.threadIdx.x
        _note(cuda.blockIdx.x)
        buf[t] = x[cuda.grid(1)]
        cuda.syncthreads()
        y[cuda.grid(1)] = buf[cuda.blockDim.x - 1 - t]

    out, threads = _python_threads_per_block(ag, monkeypatch, reverse_in_block)
    assert out.tolist() == [float(b * 32 + 31 - t) for b in range(2) for t in range(32)]
    assert threads == [32, 32]


@pytest.mark.parametrize("how", ["device function", "other name"])
def test_a_barrier_reached_through_a_device_function_or_another_name_is_a_barrier(sim, how):
    ag = sim

    @cuda.jit
    def through_device_function(x, y):
        buf = cuda.shared.array(32, np.float32)
        t = cuda.threadIdx.x
        buf[t] = x[cuda.grid(1)]
        y[cuda.grid(1)] = _sync_then_read(buf, cuda.blockDim.x - 1 - t)

    @cuda.jit
    def through_other_name(x, y):
        buf = cuda.shared.array(32, np.float32)
        t = cuda.threadIdx.x
        buf[t] = x[cuda.grid(1)]
        barrier()
        y[cuda.grid(1)] = buf[cuda.blockDim.x - 1 - t]

    fn = through_device_function if how == "device function" else through_other_name
    assert not numba_sim.barrier_free(fn.py_func)
    if how == "other name":
        return      # (Numba's simulator itself runs an intrinsic imported by name on the GPU only)
    k = ag.kernel(const=["x"])(fn)
    x = ag.array(np.arange(64, dtype=np.float32))
    y = ag.zeros(64, np.float32)
    k[2, 32](x, y)
    assert y.numpy().tolist() == [float(b * 32 + 31 - t) for b in range(2) for t in range(32)]


def test_block_votes_count_and_agree_across_the_block(sim):
    ag = sim

    @ag.kernel(out=["y"])
    @cuda.jit
    def votes(y):
        t = cuda.threadIdx.x
        count = cuda.syncthreads_count(t % 4 == 0)
        every = cuda.syncthreads_and(t < 100)
        some = cuda.syncthreads_or(t == 5)
        y[cuda.grid(1)] = count * 100 + every * 10 + some

    y = ag.empty(64, np.int32)
    votes[2, 32](y)
    assert y.numpy().tolist() == [8 * 100 + 10 + 1] * 64


def test_threads_that_return_before_a_barrier_do_not_hold_the_others(sim):
    ag = sim

    @ag.kernel
    @cuda.jit
    def early_exit(y, n):
        buf = cuda.shared.array(32, np.int32)
        t = cuda.threadIdx.x
        if t >= n:
            return
        buf[t] = t
        cuda.syncthreads()
        y[t] = buf[n - 1 - t]

    y = ag.zeros(32, np.int32)
    early_exit[1, 32](y, 20)
    assert y.numpy().tolist() == [19 - t for t in range(20)] + [0] * 12


def test_device_functions_reached_through_a_closure_or_a_module_attribute_run(sim):
    ag = sim

    def make():
        @cuda.jit(device=True)
        def double(v):
            return 2 * v

        @ag.kernel(out=["y"])
        @cuda.jit
        def k(y):
            i = cuda.grid(1)
            if i < y.size:
                y[i] = double(i) + helpers.triple(i)
        return k

    y = ag.zeros(8, np.int32)
    make()[1, 8](y)
    assert y.numpy().tolist() == [5 * i for i in range(8)]
    assert helpers.triple is _triple            # (put back after the launch)


@pytest.mark.parametrize("barriers", [False, True])
def test_a_failing_thread_is_named_and_the_runtime_stays_usable(sim, barriers):
    ag = sim

    @ag.kernel(out=["y"])
    @cuda.jit
    def fails_in_one_thread(y):
        i = cuda.grid(1)
        if i == 37:
            raise ValueError("bad element")
        y[i] = 1

    @ag.kernel(out=["y"])
    @cuda.jit
    def fails_before_a_barrier(y):
        i = cuda.grid(1)
        if i == 37:
            raise ValueError("bad element")
        cuda.syncthreads()
        y[i] = 1

    k = fails_before_a_barrier if barriers else fails_in_one_thread
    y = ag.zeros(64, np.int32)
    k[2, 32](y)
    with pytest.raises(KernelFault, match=r"tid=\[5, 0, 0\] ctaid=\[1, 0, 0\]: bad element"):
        ag.synchronize()
    z = ag.zeros(32, np.int32)
    fails_in_one_thread[1, 32](z)               # (threads 0-31 only: no failure)
    assert int(z.sum()) == 32


def test_numbas_own_block_manager_runs_with_a_short_switch_interval(sim, monkeypatch):
    """Where the simulator's internals are not as asyncgpu expects, Numba's own threads run
    the blocks, polled by its loop: the thread switch interval is short meanwhile."""
    ag = sim
    monkeypatch.setattr(numba_sim, "_blocks_safe", False)
    seen = []

    @ag.kernel(out=["y"])
    @cuda.jit
    def probe(y):
        cuda.syncthreads()
        if cuda.grid(1) == 0:
            seen.append(sys.getswitchinterval())
        y[cuda.grid(1)] = 1.0

    before = sys.getswitchinterval()
    y = ag.empty(64, np.float32)
    probe[2, 32](y)
    assert float(y.sum()) == 64.0
    assert seen == [pytest.approx(min(before, numba_sim.SIMULATOR_SWITCH_S))]
    assert sys.getswitchinterval() == before


@cuda.jit
def _add_one(y, i):         # (a kernel, called by another as a device function)
    cuda.syncthreads()
    y[i] += 1


#: device functions reached through a chain of module attributes (``pkg.sub.dev``)
pkg = types.ModuleType("pkg")
pkg.sub = types.ModuleType("pkg.sub")
pkg.sub.dev = _sync_then_read


def test_a_jit_function_called_from_a_kernel_or_reached_through_modules_runs_as_on_the_gpu(sim):
    ag = sim

    @ag.kernel
    @cuda.jit
    def calls_a_kernel(y):
        _add_one(y, cuda.grid(1))

    @ag.kernel(const=["x"])
    @cuda.jit
    def through_modules(x, y):
        buf = cuda.shared.array(32, np.float32)
        t = cuda.threadIdx.x
        buf[t] = x[cuda.grid(1)]
        y[cuda.grid(1)] = pkg.sub.dev(buf, cuda.blockDim.x - 1 - t)

    assert not numba_sim.barrier_free(calls_a_kernel.source.py_func)
    assert not numba_sim.barrier_free(through_modules.source.py_func)
    y = ag.zeros(32, np.float32)
    calls_a_kernel[1, 32](y)
    assert y.tolist() == [1.0] * 32
    x = ag.array(np.arange(32, dtype=np.float32))
    through_modules[1, 32](x, y)
    assert y.tolist() == [float(31 - t) for t in range(32)]


def test_a_thread_spinning_on_another_threads_atomic_flag_is_not_run_after_it(sim):
    ag = sim

    @ag.kernel
    @cuda.jit
    def spin(flag, out):
        t = cuda.threadIdx.x
        if t == 0:
            while cuda.atomic.cas(flag, 0, 1, 1) == 0:
                pass
            out[0] = 1
        if t == 40:
            cuda.atomic.cas(flag, 0, 0, 1)

    assert not numba_sim.barrier_free(spin.source.py_func)
    flag, out = ag.zeros(1, np.int32), ag.zeros(1, np.int32)
    spin[1, 64](flag, out)
    assert out.tolist() == [1]


class _TwoArguments(Exception):
    def __init__(self, i, n):
        super().__init__(f"index {i} out of range {n}")


@pytest.mark.parametrize("exc", ["two arguments", "SystemExit"])
def test_a_thread_failing_with_any_exception_is_reported_and_the_threads_live_on(sim, exc):
    ag = sim

    @ag.kernel
    @cuda.jit
    def fails(x):
        i = cuda.grid(1)
        if i == 3:
            if exc == "SystemExit":
                raise SystemExit(7)
            raise _TwoArguments(i, x.shape[0])
        cuda.syncthreads()
        x[i] = 1

    x = ag.zeros(16, np.int64)
    fails[2, 8](x)
    with pytest.raises(KernelFault, match=r"tid=\[3, 0, 0\] ctaid=\[0, 0, 0\]: raised "
                       r"SystemExit\(7\)" if exc == "SystemExit" else
                       r"raised _TwoArguments: index 3 out of range 16"):
        ag.synchronize()
    fill = ag.kernel(_fill_ones)
    for _ in range(3):                  # (every thread of the pool still answers)
        y = ag.zeros(64, np.int64)
        fill[2, 32](y)
        assert y.tolist() == [1] * 64


@cuda.jit
def _fill_ones(y):
    cuda.syncthreads()
    y[cuda.grid(1)] = 1


def test_a_failed_thread_that_another_spins_on_is_reported_without_waiting_for_it(sim):
    ag = sim

    @ag.kernel
    @cuda.jit
    def waits_for_a_failed_thread(x, flag):
        t = cuda.threadIdx.x
        if t == 1:
            x[100] = 1          # (out of bounds: fails before it sets the flag)
            flag[0] = 1
        if t == 0:
            while flag[0] == 0:
                pass
        cuda.syncthreads()

    x, flag = ag.zeros(4, np.int32), ag.zeros(1, np.int32)
    waits_for_a_failed_thread[1, 4](x, flag)
    with pytest.raises(KernelFault, match=r"tid=\[1, 0, 0\] ctaid=\[0, 0, 0\]"):
        ag.synchronize()


def test_the_threads_keep_nothing_of_a_launch_once_it_is_over(sim):
    import gc
    import weakref

    ag = sim

    @ag.kernel
    @cuda.jit
    def touch(x):
        cuda.syncthreads()
        x[cuda.grid(1)] += 1

    x = np.zeros(64, np.float32)
    seen = []
    real = numba_sim._Blocks.run

    def spy(self, grid_point, *args):
        seen.extend(weakref.ref(a) for a in args if hasattr(a, "__array__"))
        return real(self, grid_point, *args)

    numba_sim._Blocks.run = spy
    try:
        y = ag.array(x)
        touch[2, 32](y)
        ag.synchronize()
    finally:
        numba_sim._Blocks.run = real
    touch[1, 8](ag.zeros(8, np.float32))     # (fewer threads: most keep what they had)
    ag.synchronize()
    gc.collect()
    assert seen and all(r() is None for r in seen)


def test_a_debug_kernel_raises_on_a_division_by_zero_as_in_numbas_simulator(sim):
    ag = sim

    @ag.kernel(const=["x"])
    @cuda.jit(debug=True, opt=False)
    def ratio(x, y):
        i = cuda.grid(1)
        y[i] = 1.0 / x[0]

    x = ag.array(np.array([0.0, 1.0], np.float64))
    ratio[1, 2](x, ag.zeros(2, np.float64))
    with pytest.raises(KernelFault, match="divide by zero"):
        ag.synchronize()


@pytest.mark.parametrize("numbas_manager", [False, True])
def test_a_grid_sync_across_several_blocks_is_a_fault_and_in_one_block_runs(sim, monkeypatch,
                                                                            numbas_manager):
    """The simulator runs a launch's blocks one after another, so a grid-wide sync cannot wait
    for the other blocks: over several blocks it is a KernelFault saying so (Numba's simulator
    synchronised the block alone, and the result was silently wrong); over one block it is the
    block's barrier."""
    ag = sim
    if numbas_manager:
        monkeypatch.setattr(numba_sim, "_blocks_safe", False)

    @ag.kernel
    @cuda.jit
    def rotate(a, b):
        i = cuda.grid(1)
        a[i] = i
        cuda.cg.this_grid().sync()
        b[i] = a[(i + 4) % a.size]

    a, b = ag.zeros(8), ag.zeros(8)
    rotate[2, 4](a, b)
    with pytest.raises(KernelFault, match=r"kernel 'rotate'.*this_grid\(\)\.sync\(\) in a "
                                          r"launch of 2 blocks.*cuda backend, or launch it with "
                                          r"one block"):
        ag.synchronize()
    a, b = ag.zeros(8), ag.zeros(8)            # (the faulted launch's are unreadable)
    rotate[1, 8](a, b)
    assert b.numpy().tolist() == [4, 5, 6, 7, 0, 1, 2, 3]
