"""IMG kernels: Gaussian blurs, Sobel edges, min/max, contrast extension, unsharpen, combine.

Images are 2D float32 arrays (rows, cols), zero-padded at the borders. The 2D kernels
(``gaussian_blur``, ``sobel``) are launched on a 2D grid but number the pixels flat, row by row,
over all of the grid's threads (``grid_rank_from``), so a warp reads and writes 32 consecutive
pixels of a row (an 8 x 8 block's warp used to touch four rows, 8 pixels each), and declare a
grid offset (``first``, ``total``) and a grid-stride loop, so a tenant or a regulation plan may
run them in pieces, each on the whole grid over a part of the pixels, which leaves the device
to other tenants' kernels between the pieces; the others
are 1D over the pixels of flat (``ravel``-ed) views. Fixes over the original: the Gaussian
weights are centred (the host builds them with an integer centre), the minimum starts at +inf
(the host resets the accumulator, every thread starts its partial there), and every read-only
input is annotated ``const`` (the original left unsharpen's and Sobel's inputs unannotated).
"""

import math

from numba import cuda, float32

from .blockops import BLOCK_MAX, MAX, MIN, block_reduce, grid_rank_from, thread_rank

#: Room for the largest filter staged in shared memory (5 x 5 = 25 weights).
FILTER_MAX = 64


@cuda.jit
def gaussian_blur(img, out, weights, first, total):
    """out = img convolved with the d x d filter ``weights`` (d odd), zero padding; blocks
    ``first`` on of a grid of ``total`` in x (``grid_offset``: whole, ``0`` and the grid's)."""
    w = cuda.shared.array(FILTER_MAX, float32)
    d = weights.shape[0]
    r = d // 2
    tid = thread_rank()
    nt = cuda.blockDim.x * cuda.blockDim.y
    for t in range(tid, d * d, nt):            # stage the weights once per block
        w[t] = weights[t // d, t % d]
    cuda.syncthreads()
    rows, cols = img.shape[0], img.shape[1]
    start, step = grid_rank_from(first, total)
    for t in range(start, rows * cols, step):
        i = t // cols
        j = t - i * cols
        acc = float32(0.0)
        for a in range(-r, r + 1):
            ii = i + a
            if ii < 0 or ii >= rows:
                continue
            for b in range(-r, r + 1):
                jj = j + b
                if jj >= 0 and jj < cols:
                    acc += w[(a + r) * d + b + r] * img[ii, jj]
        out[i, j] = acc


@cuda.jit(device=True)
def _px(img, i, j):
    """img[i, j], or 0 outside the image."""
    if i < 0 or j < 0 or i >= img.shape[0] or j >= img.shape[1]:
        return float32(0.0)
    return img[i, j]


@cuda.jit
def sobel(img, out, first, total):
    """out = sqrt(gx^2 + gy^2) with the 3x3 Sobel operators (gx: along rows), zero padding;
    blocks ``first`` on of a grid of ``total`` in x (as :func:`gaussian_blur`)."""
    rows, cols = img.shape[0], img.shape[1]
    start, step = grid_rank_from(first, total)
    for t in range(start, rows * cols, step):
        i = t // cols
        j = t - i * cols
        tl, tc, tr = _px(img, i - 1, j - 1), _px(img, i - 1, j), _px(img, i - 1, j + 1)
        ml, mr = _px(img, i, j - 1), _px(img, i, j + 1)
        bl, bc, br = _px(img, i + 1, j - 1), _px(img, i + 1, j), _px(img, i + 1, j + 1)
        two = float32(2.0)               # float32 literals keep the math in single precision
        gx = (bl + two * bc + br) - (tl + two * tc + tr)
        gy = (tr + two * mr + br) - (tl + two * ml + bl)
        out[i, j] = math.sqrt(gx * gx + gy * gy)


@cuda.jit
def maximum(x, res, n):
    """res[0] = max(res[0], max_i x[i]) (one float atomic per block)."""
    buf = cuda.shared.array(BLOCK_MAX, float32)
    m = float32(-math.inf)
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        m = max(m, x[i])
    m = block_reduce(buf, m, MAX)
    if thread_rank() == 0:
        cuda.atomic.max(res, 0, m)


@cuda.jit
def minimum(x, res, n):
    """res[0] = min(res[0], min_i x[i]); partials start at +inf (the original started at 0)."""
    buf = cuda.shared.array(BLOCK_MAX, float32)
    m = float32(math.inf)
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        m = min(m, x[i])
    m = block_reduce(buf, m, MIN)
    if thread_rank() == 0:
        cuda.atomic.min(res, 0, m)


@cuda.jit
def extend(x, lo, hi, n):
    """Contrast extension in place: x = min(1, 5 (x - lo) / (hi - lo))."""
    a = lo[0]
    scale = float32(5.0) / (hi[0] - a)
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        x[i] = min(float32(1.0), (x[i] - a) * scale)


@cuda.jit
def unsharpen(x, y, res, amount, n):
    """res = clamp(x (1 + amount) - y amount, 0, 1)."""
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        v = x[i] * (float32(1.0) + amount) - y[i] * amount
        res[i] = min(float32(1.0), max(float32(0.0), v))


@cuda.jit
def combine(x, y, mask, res, n):
    """res = x mask + y (1 - mask)."""
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        m = mask[i]
        res[i] = x[i] * m + y[i] * (float32(1.0) - m)


ANNOTATIONS = {
    "gaussian_blur": {"const": ["img", "weights"], "out": ["out"],
                      "grid_offset": ("first", "total"), "grid_stride": True},
    "sobel": {"const": ["img"], "out": ["out"], "grid_offset": ("first", "total"),
              "grid_stride": True},
    "maximum": {"const": ["x"], "out": []},        # res: atomic accumulator, read-write
    "minimum": {"const": ["x"], "out": []},
    "extend": {"const": ["lo", "hi"], "out": []},  # x is updated in place
    "unsharpen": {"const": ["x", "y"], "out": ["res"]},
    "combine": {"const": ["x", "y", "mask"], "out": ["res"]},
}
