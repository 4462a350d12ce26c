"""Thread numbering and block-wide reductions through shared memory, shared by the workload kernels.

Each kernel declares a ``cuda.shared.array(BLOCK_MAX, dtype)`` scratch buffer (the size must be a
compile-time constant, so it is the largest block we launch) and hands it to these device
functions, which reduce one value per thread to a block total. They use only shared memory and
``cuda.syncthreads()``: no warp shuffles, so they also run in Numba's CUDA simulator, and they
work for any block shape (1D, 2D, 3D, power of two or not) up to ``BLOCK_MAX`` threads.

Every thread of the block must call them (they contain barriers), and a kernel calls at most one
of them, once: the buffer is not reset afterwards. The result is valid in thread 0 only.
"""

from numba import cuda

#: Largest number of threads per block (the scratch buffers have this many entries).
BLOCK_MAX = 1024

SUM, MIN, MAX = 0, 1, 2

#: Threads that fold the partials between the two barriers of ``block_reduce``.
LANES = 32


@cuda.jit(device=True)
def thread_rank():
    """Linear index of this thread in its block (x fastest)."""
    tx, ty, tz = cuda.threadIdx.x, cuda.threadIdx.y, cuda.threadIdx.z
    return tx + cuda.blockDim.x * (ty + cuda.blockDim.y * tz)


@cuda.jit(device=True)
def grid_rank():
    """(this thread's index over the whole grid, the grid's thread count), for any grid and
    block shape: blocks in order, threads in block order inside each, so a warp's threads have
    consecutive numbers and a loop ``for t in range(first, n, step)`` over a flat index makes
    coalesced accesses whatever the launch's shape (the 2D kernels walk their outputs so)."""
    return grid_rank_from(0, cuda.gridDim.x)


@cuda.jit(device=True)
def grid_rank_from(first, total):
    """:func:`grid_rank` of a launch that is blocks ``first`` to ``first + gridDim.x - 1`` in
    x of a grid of ``total`` blocks in x (the ``grid_offset`` contract of ``asyncgpu.kernel``:
    a piece of a launch split by its grid numbers its threads as the whole launch would)."""
    by = cuda.gridDim.y
    block = cuda.blockIdx.x + first + total * (cuda.blockIdx.y + by * cuda.blockIdx.z)
    nt = cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z
    return block * nt + thread_rank(), nt * total * by * cuda.gridDim.z


@cuda.jit(device=True)
def _combine(a, b, op):
    if op == SUM:
        return a + b
    if op == MIN:
        return min(a, b)
    return max(a, b)


@cuda.jit(device=True)
def block_reduce(buf, value, op):
    """Combine ``value`` of every thread of the block with ``op`` (SUM, MIN or MAX).

    Returns the block's total in thread 0 (other threads get a partial). Two barriers only:
    after the first, each of the first ``LANES`` threads folds a strided slice of the buffer; after
    the second, thread 0 folds those ``LANES`` values. A tree would need log2(threads) barriers,
    and a barrier is what costs most in the simulator (tens of milliseconds per block).
    """
    tid = thread_rank()
    nt = cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z
    buf[tid] = value
    cuda.syncthreads()
    lanes = min(LANES, nt)
    if tid < lanes:
        acc = buf[tid]
        for t in range(tid + lanes, nt, lanes):
            acc = _combine(acc, buf[t], op)
        buf[tid] = acc
    cuda.syncthreads()
    total = buf[0]
    if tid == 0:
        for t in range(1, lanes):
            total = _combine(total, buf[t], op)
    return total
