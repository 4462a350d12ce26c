"""DL kernels: a two-tower CNN (convolution, mean pooling) with a dense output layer.

Tensors are channel-last 3D arrays (rows, cols, channels). Convolutions are 3x3, "valid" (no
padding) with a stride, followed by ReLU; their weights, flat in [out_channel][ki][kj][in_channel]
order, are staged in shared memory once per block. The spatial kernels are launched on a 2D grid
but number their outputs (row, column, channel) flat over all of the grid's threads
(``grid_rank_from``): one thread per output value, consecutive threads on consecutive values,
so every channel of every position is a thread of its own (with one thread per position, the
second convolution's 361 positions kept 361 threads busy for 1,152 multiply-adds each, 80 us
on an H100; 10.9 us now, ``tools/kernel_times.py``). They declare a grid offset (``first``,
``total``) over grid-stride loops, so a tenant or a regulation plan may run them in pieces,
each on the whole grid over a part of the outputs. ``concat`` and ``dot`` are 1D.
"""

from numba import cuda, float32, float64, uint32

from .blockops import BLOCK_MAX, SUM, block_reduce, grid_rank_from, thread_rank

#: Convolution window.
K = 3
#: Room for the largest weight set staged in shared memory (16 x 3 x 3 x 8 = 1152).
WEIGHTS_MAX = 2048


@cuda.jit(device=True)
def _place(t, cols, channels):
    """(row, column, channel) of value number ``t`` of a (rows, cols, channels) array, all
    unsigned 32-bit: no wraparound check where they index, and 32-bit divisions (a signed
    64-bit one is several times longer)."""
    p = uint32(t // channels)
    i = uint32(p // cols)
    return i, uint32(p - i * cols), uint32(t - p * channels)


@cuda.jit
def conv2d(x, w, out, stride, first, total):
    """out[i, j, m] = ReLU(sum_{a, b < K, l} w[m, a, b, l] x[i stride + a, j stride + b, l]);
    blocks ``first`` on of a grid of ``total`` in x (``grid_offset``: whole, ``0`` and the
    grid's; a grid-stride loop, so a piece may run the whole grid as a part of a larger one).

    Indices are unsigned: Numba checks every signed index for a negative value to wrap it
    around, which in this loop was about a third of the time (conv1 at the small scale
    25.3 -> 17.5 us on an H100, the same sums in the same order; docs/benchmarks.md,
    "`rr_1` and four more kernels without the wraparound").
    """
    ws = cuda.shared.array(WEIGHTS_MAX, float32)
    cin, cout = uint32(x.shape[2]), uint32(out.shape[2])
    nw = cout * uint32(K * K) * cin
    tid = thread_rank()
    nt = cuda.blockDim.x * cuda.blockDim.y
    for u in range(tid, nw, nt):     # (not ``t``: one name, one type, or t turns signed)
        ws[u] = w[u]
    cuda.syncthreads()
    start, step = grid_rank_from(first, total)
    cols = uint32(out.shape[1])
    count = uint32(out.shape[0]) * cols * cout
    st = uint32(stride)
    t = uint32(start)
    while t < count:
        i, j, m = _place(t, cols, cout)
        acc = float32(0.0)
        for a in range(K):
            for b in range(K):
                base = uint32((m * uint32(K) + uint32(a)) * uint32(K) + uint32(b)) * cin
                row = uint32(i * st + uint32(a))
                col = uint32(j * st + uint32(b))
                for l in range(cin):
                    acc += ws[uint32(base + l)] * x[row, col, uint32(l)]
        out[i, j, m] = max(acc, float32(0.0))
        t = uint32(t + uint32(step))


@cuda.jit
def mean_pool(x, out, window, first, total):
    """out[i, j, c] = mean of x over the window x window tile at (i window, j window)
    (unsigned indices, and a grid offset, as in ``conv2d``)."""
    win = uint32(window)
    inv = float32(1.0 / (window * window))
    start, step = grid_rank_from(first, total)
    cols, ch = uint32(out.shape[1]), uint32(out.shape[2])
    count = uint32(out.shape[0]) * cols * ch
    t = uint32(start)
    while t < count:
        i, j, c = _place(t, cols, ch)
        acc = float32(0.0)
        for a in range(window):
            for b in range(window):
                acc += x[uint32(i * win + uint32(a)), uint32(j * win + uint32(b)), c]
        out[i, j, c] = acc * inv
        t = uint32(t + uint32(step))


@cuda.jit
def concat(x, y, z):
    """z = [ravel(x), ravel(y)] for two arrays of the same shape (rows, cols, channels)."""
    cols, ch = x.shape[1], x.shape[2]
    n = x.shape[0] * cols * ch
    for t in range(cuda.grid(1), n, cuda.gridsize(1)):
        i = t // (cols * ch)
        j = (t // ch) % cols
        c = t % ch
        z[t] = x[i, j, c]
        z[n + t] = y[i, j, c]


@cuda.jit
def dot(x, y, res, n):
    """res[0] += sum_i x[i] y[i] (float64 partials, one float atomic per block)."""
    buf = cuda.shared.array(BLOCK_MAX, float64)
    acc = 0.0
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        acc += float64(x[i]) * float64(y[i])
    total = block_reduce(buf, acc, SUM)
    if thread_rank() == 0:
        cuda.atomic.add(res, 0, float32(total))


ANNOTATIONS = {
    "conv2d": {"const": ["x", "w"], "out": ["out"], "grid_offset": ("first", "total"),
               "grid_stride": True},
    "mean_pool": {"const": ["x"], "out": ["out"], "grid_offset": ("first", "total"),
                  "grid_stride": True},
    "concat": {"const": ["x", "y"], "out": ["z"]},
    "dot": {"const": ["x", "y"], "out": []},      # res: atomic accumulator
}
