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
