"""VEC kernels: squares of two vectors and the sum of their difference.

``square(x -> y)`` twice (independent), then ``reduce(x1, y1 -> res)`` adds sum(x1 - y1) to
``res[0]``: per-thread grid-stride partial sums in float64, a shared-memory block reduction and one
float atomic per block (the original reduced with warp shuffles, one atomic per warp).
"""

from numba import cuda, float32, float64

from .blockops import BLOCK_MAX, SUM, block_reduce, thread_rank


@cuda.jit
def square(x, y, n):
    """y[i] = x[i]^2."""
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] = x[i] * x[i]


@cuda.jit
def reduce(x, y, z, n):
    """z[0] += sum_i (x[i] - y[i])."""
    buf = cuda.shared.array(BLOCK_MAX, float64)
    acc = 0.0
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        acc += float64(x[i]) - float64(y[i])
    total = block_reduce(buf, acc, SUM)
    if thread_rank() == 0:
        cuda.atomic.add(z, 0, float32(total))


ANNOTATIONS = {
    # grid-stride over n elements, element i from element i: chunkable (explicit memory)
    "square": {"const": ["x"], "out": ["y"], "elementwise": "n"},
    "reduce": {"const": ["x", "y"], "out": []},   # z is an atomic accumulator: read-write
}
