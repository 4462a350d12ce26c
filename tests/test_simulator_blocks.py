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
