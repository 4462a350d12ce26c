"""Kernels of the row-partitioned linear algebra workloads: matrix-vector products and CG.

``matvec`` adds the product of a block of rows by a slice of columns, so a product over a
row-partitioned matrix whose vector is split in parts is one launch per part of the vector,
each reading only that part. ``dot`` and the two CG steps add their partial sums
into one float64 scalar with an atomic per block. Scalars are one-element arrays: a step reads
the sums of every part (``rr``, ``pap``) after they were added up on the device.

``fill_spd`` writes rows of a symmetric, diagonally dominant matrix from a hash of the (row,
column) pair (so every GPU makes its own rows and the host can recompute any row:
:func:`spd_rows`).
"""

import numpy as np
from numba import cuda, float32, float64, uint64

from .blockops import BLOCK_MAX, SUM, block_reduce, grid_rank, thread_rank

#: The hash's 32 bits (products are taken in 64 bits and cut back: no overflow anywhere).
MASK = 0xFFFFFFFF


@cuda.jit(device=True)
def _hash(i, j):
    """A value in [0, 1) of the unordered pair (i, j)."""
    lo = uint64(min(i, j))
    hi = uint64(max(i, j))
    h = ((lo * uint64(2654435761)) & uint64(MASK)) ^ ((hi * uint64(40503) + uint64(12345))
                                                      & uint64(MASK))
    h = h ^ (h >> uint64(15))
    h = (h * uint64(2246822519)) & uint64(MASK)
    h = h ^ (h >> uint64(13))
    return float32(h >> uint64(8)) * float32(1.0 / (1 << 24))


@cuda.jit
def fill_spd(a, row0, n):
    """a[i, j] = hash(row0 + i, j) / n, plus 2 on the diagonal: symmetric over the whole
    matrix, each row's off-diagonal sum below 1, so positive definite."""
    rows = a.shape[0]
    first, step = grid_rank()
    for t in range(first, rows * n, step):
        i = t // n
        j = t - i * n
        v = _hash(row0 + i, j) / float32(n)
        if row0 + i == j:
            v += float32(2.0)
        a[i, j] = v


def spd_rows(rows: np.ndarray, n: int) -> np.ndarray:
    """Rows ``rows`` of the matrix :func:`fill_spd` makes, in float64 on the host."""
    i = rows.astype(np.uint64)[:, None]
    j = np.arange(n, dtype=np.uint64)[None, :]
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    mask = np.uint64(MASK)
    h = ((lo * np.uint64(2654435761)) & mask) ^ ((hi * np.uint64(40503) + np.uint64(12345))
                                                 & mask)
    h ^= h >> np.uint64(15)
    h = (h * np.uint64(2246822519)) & mask
    h ^= h >> np.uint64(13)
    v = ((h >> np.uint64(8)).astype(np.float32) * np.float32(1.0 / (1 << 24))
         / np.float32(n)).astype(np.float64)
    v[np.arange(len(rows)), rows] += 2.0
    return v


#: Columns of ``matvec``'s tile; rows of the tile: ``TILE_ROWS``, the most threads a block of
#: ``matvec`` may have.
TILE = 32
TILE_ROWS = 256
#: A tile row's length in shared memory: one more than ``TILE``, so a thread reading its row
#: and its neighbours reading theirs hit different banks.
TILE_STRIDE = 33
#: Columns of one work item of ``matvec``.
SPAN = 256


@cuda.jit
def matvec(a, x, off, y):
    """y[i] += sum_q a[i, off + q] x[q] (zero ``y`` first for the product alone).

    A work item is a block's worth of rows (a thread each) by ``SPAN`` columns, so a product
    of few rows still has enough items to fill the device; each thread adds its share with
    one atomic. The rows pass through shared memory ``TILE`` columns at a time: each warp
    loads whole 128-byte row segments (coalesced, where a thread walking its own row would
    not be), then each thread sums its row's segment. Blocks of at most ``TILE_ROWS`` threads,
    a multiple of ``TILE``. (Two barriers per tile, none per row: cheap in the simulator too.)
    """
    tile = cuda.shared.array((TILE_ROWS, TILE_STRIDE), float32)
    rows, m = y.shape[0], x.shape[0]
    nt = cuda.blockDim.x
    tid = cuda.threadIdx.x
    lane = tid % TILE
    warps = nt // TILE
    spans = (m + SPAN - 1) // SPAN
    for item in range(cuda.blockIdx.x, ((rows + nt - 1) // nt) * spans, cuda.gridDim.x):
        base = (item // spans) * nt
        lo = (item % spans) * SPAN
        hi = min(m, lo + SPAN)
        i = base + tid
        acc = float32(0.0)
        for c0 in range(lo, hi, TILE):
            col = c0 + lane
            for r in range(tid // TILE, nt, warps):
                row = base + r
                tile[r, lane] = a[row, off + col] if row < rows and col < hi else float32(0.0)
            cuda.syncthreads()
            if i < rows:
                for q in range(min(TILE, hi - c0)):
                    acc += tile[tid, q] * x[c0 + q]
            cuda.syncthreads()
        if i < rows:
            cuda.atomic.add(y, i, acc)


@cuda.jit
def zero(s):
    """s[:] = 0."""
    for i in range(cuda.grid(1), s.shape[0], cuda.gridsize(1)):
        s[i] = 0.0


@cuda.jit
def add_to(total, part):
    """total[i] += part[i]."""
    for i in range(cuda.grid(1), total.shape[0], cuda.gridsize(1)):
        total[i] += part[i]


@cuda.jit
def copy_to(dst, src):
    """dst[i] = src[i]."""
    for i in range(cuda.grid(1), dst.shape[0], cuda.gridsize(1)):
        dst[i] = src[i]


@cuda.jit
def dot(x, y, out):
    """out[0] += sum_i x[i] y[i] (float64)."""
    buf = cuda.shared.array(BLOCK_MAX, float64)
    acc = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        acc += float64(x[i]) * float64(y[i])
    total = block_reduce(buf, acc, SUM)
    if thread_rank() == 0:
        cuda.atomic.add(out, 0, total)


@cuda.jit
def cg_xr(x, r, p, ap, rr, pap, rr_next):
    """CG's update of x and r with alpha = rr / pap; rr_next[0] += sum r^2 (the new r)."""
    buf = cuda.shared.array(BLOCK_MAX, float64)
    alpha = float32(rr[0] / pap[0])
    acc = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        x[i] += alpha * p[i]
        v = r[i] - alpha * ap[i]
        r[i] = v
        acc += float64(v) * float64(v)
    total = block_reduce(buf, acc, SUM)
    if thread_rank() == 0:
        cuda.atomic.add(rr_next, 0, total)


@cuda.jit
def cg_p(p, r, rr_next, rr):
    """CG's new direction: p = r + (rr_next / rr) p."""
    beta = float32(rr_next[0] / rr[0])
    for i in range(cuda.grid(1), p.shape[0], cuda.gridsize(1)):
        p[i] = r[i] + beta * p[i]


ANNOTATIONS = {
    "fill_spd": {"const": [], "out": ["a"]},
    "matvec": {"const": ["a", "x"], "out": []},     # y is added to
    "zero": {"const": [], "out": ["s"]},
    "add_to": {"const": ["part"], "out": []},
    "copy_to": {"const": ["src"], "out": ["dst"]},
    "dot": {"const": ["x", "y"], "out": []},
    "cg_xr": {"const": ["p", "ap", "rr", "pap"], "out": []},
    "cg_p": {"const": ["r", "rr_next", "rr"], "out": []},
}
