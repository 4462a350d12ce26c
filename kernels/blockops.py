"""Block-wide reductions through shared memory, shared by the workload kernels.

Each kernel declares a ``cuda.shared.array(BLOCK_MAX, dtype)`` scratch buffer (the size must be a
compile-time constant, so it is the largest block we launch) and hands it to these device
functions, which reduce one value per thread into ``buf[0]``. They use only shared memory and
``cuda.syncthreads()``: no warp shuffles, so they also run in Numba's CUDA simulator, and they
work for any block shape (1D, 2D, 3D, power of two or not) up to ``BLOCK_MAX`` threads.

Every thread of the block must call them (they contain barriers), and a kernel calls at most one
of them, once: the buffer is not reset afterwards.
"""

from numba import cuda

#: Largest number of threads per block (the scratch buffers have this many entries).
BLOCK_MAX = 1024

SUM, MIN, MAX = 0, 1, 2


@cuda.jit(device=True)
def thread_rank():
    """Linear index of this thread in its block (x fastest)."""
    return cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y * cuda.threadIdx.z)


@cuda.jit(device=True)
def block_reduce(buf, value, op):
    """Combine ``value`` of every thread of the block with ``op`` (SUM, MIN or MAX).

    Returns the block's total to every thread. Tree reduction over the next power of two, so
    blocks of any size work; partners beyond the last thread are skipped.
    """
    tid = thread_rank()
    nt = cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z
    buf[tid] = value
    cuda.syncthreads()
    half = 1
    while half < nt:
        half *= 2
    half //= 2
    while half > 0:
        if tid < half and tid + half < nt:
            a = buf[tid]
            b = buf[tid + half]
            if op == SUM:
                buf[tid] = a + b
            elif op == MIN:
                buf[tid] = min(a, b)
            else:
                buf[tid] = max(a, b)
        cuda.syncthreads()
        half //= 2
    return buf[0]
