"""Memory lifetime on the GPU (reliability note F6, E2's recipe through asyncgpu's API).

A slow reader (spins, then copies) runs on one stream; the user drops or frees its input at
once and allocates and fills arrays of the same size. CuPy's pool would hand the block out
again at once (raw CuPy: the reader saw overwritten data 19/20 times); asyncgpu must keep it
until the reader finished: 0/20.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

SRC = r'''
extern "C" __global__ void slow_copy(const float* x, float* y, long long cycles, int n) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
'''
N = 1 << 16


@pytest.mark.parametrize("how", ["drop", "free"])
def test_memory_in_use_by_a_slow_reader_is_not_reused(how):
    import asyncgpu as ag

    with ag.configure(backend="cuda", execution="async"):
        k = ag.cuda_kernel(SRC, "slow_copy")
        warm_x, warm_y = ag.ones(N, np.float32), ag.zeros(N, np.float32)
        k[N // 256, 256](warm_x, warm_y, 0, N)          # load the module first (F21)
        ag.synchronize()
        wrong = 0
        for trial in range(20):
            x = ag.full(N, float(trial + 1), np.float32)
            y = ag.zeros(N, np.float32)
            k[N // 256, 256](x, y, 2_000_000, N)        # ~1 ms before it reads x
            if how == "drop":
                del x
                gc.collect()
            else:
                x.free()                                # waits for the reader
            decoys = [ag.full(N, -1.0, np.float32) for _ in range(4)]
            got = y.numpy()
            wrong += not np.all(got == trial + 1)
            del decoys
        assert wrong == 0


def test_a_dropped_runtimes_backend_and_device_memory_are_released():
    """Switching the memory model makes a new runtime; the old one's backend (and the device
    memory its pool holds) must go with it, though the kernel's cached launchers stay."""
    import weakref

    import cupy

    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    k = ag.cuda_kernel(SRC, "slow_copy")
    n = 1 << 26                                           # 256 MiB per array
    with ag.configure(backend="cuda", memory="explicit"):
        backend = weakref.ref(current_runtime().backend)
        x, y = ag.ones(n, np.float32), ag.zeros(n, np.float32)
        k[n // 256, 256](x, y, 0, n)
        assert float(y[n - 1]) == 1.0
        del x, y                                          # back to that backend's pool
        pool = current_runtime().backend.pool
        assert pool.total_bytes() >= 2 * n * 4            # the pool holds the two arrays' memory
        # (the device-wide free memory is no measure while other processes allocate: follow
        # the pool itself, which a block it hands out names by a weak reference)
        probe = pool.malloc(1)
        held = probe.mem.pool
        del probe, pool
    with ag.configure(backend="cuda", memory="managed"):
        gc.collect()
        assert backend() is None
        assert held() is None                             # its memory went back to the device
        z = ag.zeros(16, np.float32)
        k[1, 16](z, z, 0, 16)                             # the cached launcher still works
        ag.synchronize()
        assert float(z[0]) == 0.0
