"""HITS kernels: sparse matrix-vector product (CSR), sum, and division by a scalar.

``spmv`` is LightSpMV-style: blocks take the next rows from a global row counter with one atomic
per grab, and each row is handled by a vector of ``TPV`` threads that stride over its nonzeros.
The original combined the vector's partial sums with warp shuffles; here they go through shared
memory, so the kernel also runs in Numba's simulator and with any block size that is a multiple of
``TPV``. The counter must be 0 before each launch (the host resets it).
"""

from numba import cuda, float32, float64, int32

from .blockops import BLOCK_MAX, SUM, block_reduce, thread_rank

#: Threads per row.
TPV = 4


@cuda.jit
def spmv(row_counter, ptr, idx, val, vec, out, n):
    """out[row] = sum_k val[k] vec[idx[k]] over ptr[row] <= k < ptr[row + 1], for row < n."""
    base_s = cuda.shared.array(1, int32)
    part = cuda.shared.array(BLOCK_MAX, float32)
    tid = cuda.threadIdx.x
    rows_per_grab = cuda.blockDim.x // TPV
    lane = tid % TPV
    row_in_grab = tid // TPV
    while True:
        if tid == 0:
            base_s[0] = cuda.atomic.add(row_counter, 0, rows_per_grab)
        cuda.syncthreads()
        base = base_s[0]
        if base >= n:                 # the same for the whole block: all threads leave together
            break
        row = base + row_in_grab
        acc = float32(0.0)
        if row < n and row_in_grab < rows_per_grab:
            for k in range(ptr[row] + lane, ptr[row + 1], TPV):
                acc += val[k] * vec[idx[k]]
        part[tid] = acc
        cuda.syncthreads()
        if lane == 0 and row < n and row_in_grab < rows_per_grab:
            s = part[tid]
            for t in range(1, TPV):
                s += part[tid + t]
            out[row] = s
        cuda.syncthreads()            # base_s and part are rewritten by the next grab


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
