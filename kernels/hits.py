"""HITS kernels: sparse matrix-vector product (CSR), sum, and division by a scalar.

``spmv`` follows LightSpMV's dynamic scheme: blocks take the next rows from a global row counter,
one atomic per grab of ``ROWS_PER_THREAD`` x threads rows. LightSpMV sizes its row "vectors" from
the mean row length and combines a vector's partial sums with warp shuffles; with 3 nonzeros per
row one thread per row is the right width, so no combine step is needed, and the kernel also runs
in Numba's simulator (no warp intrinsics) with any block size. The next grab is taken while the
current one is processed (double-buffered in shared memory), so each grab costs one barrier.
The counter must be 0 before each launch (the host resets it).
"""

from numba import cuda, float32, float64, int32

from .blockops import BLOCK_MAX, SUM, block_reduce, thread_rank

#: Rows each thread handles per grab (consecutive threads take consecutive rows).
ROWS_PER_THREAD = 4


@cuda.jit
def spmv(row_counter, ptr, idx, val, vec, out, n):
    """out[row] = sum_k val[k] vec[idx[k]] over ptr[row] <= k < ptr[row + 1], for row < n."""
    base_s = cuda.shared.array(2, int32)
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    grab = nt * ROWS_PER_THREAD
    if tid == 0:
        base_s[0] = cuda.atomic.add(row_counter, 0, grab)
    cuda.syncthreads()
    slot = 0
    while True:
        base = base_s[slot]
        if base >= n:                 # the same for the whole block: all threads leave together
            break
        if tid == 0:                  # the slot read in the previous grab is free again
            base_s[1 - slot] = cuda.atomic.add(row_counter, 0, grab)
        for row in range(base + tid, min(base + grab, n), nt):
            acc = float32(0.0)
            for k in range(ptr[row], ptr[row + 1]):
                acc += val[k] * vec[idx[k]]
            out[row] = acc
        cuda.syncthreads()
        slot = 1 - slot


@cuda.jit
def vsum(x, z, n):
    """z[0] += sum_i x[i] (float64 partials, one float atomic per block)."""
    buf = cuda.shared.array(BLOCK_MAX, float64)
    acc = 0.0
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        acc += float64(x[i])
    total = block_reduce(buf, acc, SUM)
    if thread_rank() == 0:
        cuda.atomic.add(z, 0, float32(total))


@cuda.jit
def divide(x, y, val, n):
    """y[i] = x[i] / val[0]."""
    d = val[0]
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] = x[i] / d


ANNOTATIONS = {
    "spmv": {"const": ["ptr", "idx", "val", "vec"], "out": ["out"]},   # row_counter: atomic
    "vsum": {"const": ["x"], "out": []},
    "divide": {"const": ["x", "val"], "out": ["y"]},
}
