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
