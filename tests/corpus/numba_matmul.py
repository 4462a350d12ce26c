"""Matrix multiplication with Numba, plain and with shared memory, ported from numba-cuda's docs.

Origin: repository ``NVIDIA/numba-cuda``, the documentation's "Matrix multiplication" example
(``numba_cuda/numba/cuda/tests/doc_examples/test_matmul.py``: ``matmul``, ``fast_matmul`` and
the square and non-square runs). ``cuda.to_device``/``copy_to_host`` become asyncgpu arrays
and ``get()``; the kernels are the same functions, wrapped by ``ag.kernel``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda
from numba.cuda import float32

import asyncgpu as ag  # asyncgpu: the runtime

# (rows of A, columns of A, columns of B) of the non-square run; the square run is 4 x 4
SIZES = {"sim": (5, 23, 7), "gpu": (500, 2300, 700)}
# Integer-valued products: exact in float32 and float64 up to 2^24.
TOLERANCE = {"sim": {"rtol": 0.0, "atol": 0.0}, "gpu": {"rtol": 0.0, "atol": 0.0}}


@ag.kernel(const=["A", "B"], out=["C"])  # asyncgpu: scheduled; A and B are only read
@cuda.jit
def matmul(A, B, C):
    """Perform square matrix multiplication of C = A * B."""
    i, j = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        tmp = 0.0
        for k in range(A.shape[1]):
            tmp += A[i, k] * B[k, j]
        C[i, j] = tmp


# Controls threads per block and shared memory usage.
# The computation will be done on blocks of TPB x TPB elements.
# TPB should not be larger than 32 in this example
TPB = 16


# asyncgpu: scheduled; no ``out`` for C: threads outside C write nothing, so only the elements
# the grid covers are written
@ag.kernel(const=["A", "B"])
@cuda.jit
def fast_matmul(A, B, C):
    """
    Perform matrix multiplication of C = A * B using CUDA shared memory.

    Reference: https://stackoverflow.com/a/64198479/13697228 by @RobertCrovella
    """
    # Define an array in the shared memory
    # The size and type of the arrays must be known at compile time
    sA = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    sB = cuda.shared.array(shape=(TPB, TPB), dtype=float32)

    x, y = cuda.grid(2)

    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bpg = cuda.gridDim.x  # blocks per grid

    # Each thread computes one element in the result matrix.
    # The dot product is chunked into dot products of TPB-long vectors.
    tmp = float32(0.)
    for i in range(bpg):
        # Preload data into shared memory
        sA[ty, tx] = 0
        sB[ty, tx] = 0
        if y < A.shape[0] and (tx + i * TPB) < A.shape[1]:
            sA[ty, tx] = A[y, tx + i * TPB]
        if x < B.shape[1] and (ty + i * TPB) < B.shape[0]:
            sB[ty, tx] = B[ty + i * TPB, x]

        # Wait until all threads finish preloading
        cuda.syncthreads()

        # Computes partial product on the shared memory
        for j in range(TPB):
            tmp += sA[ty, j] * sB[j, tx]

        # Wait until all threads finish computing
        cuda.syncthreads()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = tmp


def _launch_square(kernel, x_h, y_h, threadsperblock):
    z_h = np.zeros([4, 4])
    x_d = ag.array(x_h)  # asyncgpu: ag.array for cuda.to_device
    y_d = ag.array(y_h)  # asyncgpu: ag.array for cuda.to_device
    z_d = ag.array(z_h)  # asyncgpu: ag.array for cuda.to_device
    blockspergrid_x = math.ceil(z_h.shape[0] / threadsperblock[0])
    blockspergrid_y = math.ceil(z_h.shape[1] / threadsperblock[1])
    blockspergrid = (blockspergrid_x, blockspergrid_y)
    kernel[blockspergrid, threadsperblock](x_d, y_d, z_d)
    return z_d


def _operands(size):
    m, k, n = size
    # the original's operands: arange (scaled down so that every product stays exact in
    # float32 at the GPU size) and ones
    x_h = np.arange(m * k).reshape([m, k]) % 97
    y_h = np.ones([k, n])
    return x_h, y_h


def run(size):
    x_h = np.arange(16).reshape([4, 4])
    y_h = np.ones([4, 4])
    # the simple kernel and the shared-memory one, square case; the host reads of the results
    # come last, so that the launches are in flight together (asyncgpu: the original reads
    # each result back with copy_to_host before the next launch)
    z_simple = _launch_square(matmul, x_h, y_h, (16, 16))
    z_fast = _launch_square(fast_matmul, x_h, y_h, (TPB, TPB))

    # non-square case
    x_h, y_h = _operands(size)
    z_h = np.zeros([x_h.shape[0], y_h.shape[1]])
    x_d = ag.array(x_h)  # asyncgpu: ag.array for cuda.to_device
    y_d = ag.array(y_h)  # asyncgpu: ag.array for cuda.to_device
    z_d = ag.array(z_h)  # asyncgpu: ag.array for cuda.to_device
    threadsperblock = (TPB, TPB)
    grid_y_max = max(x_h.shape[0], y_h.shape[0])
    grid_x_max = max(x_h.shape[1], y_h.shape[1])
    blockspergrid_x = math.ceil(grid_x_max / threadsperblock[0])
    blockspergrid_y = math.ceil(grid_y_max / threadsperblock[1])
    blockspergrid = (blockspergrid_x, blockspergrid_y)
    fast_matmul[blockspergrid, threadsperblock](x_d, y_d, z_d)
    return {"square_simple": z_simple.get(), "square_fast": z_fast.get(),  # asyncgpu: get()
            "nonsquare_fast": z_d.get()}  # asyncgpu: get() for copy_to_host


def reference(size, got=None):
    square = np.arange(16).reshape([4, 4]) @ np.ones([4, 4])
    x_h, y_h = _operands(size)
    return {"square_simple": square, "square_fast": square, "nonsquare_fast": x_h @ y_h}
