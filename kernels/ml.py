"""ML kernels: an ensemble of categorical Naive Bayes and Ridge Regression classifiers.

All matrices are row-major: X[row, feature], weights[class, feature], scores[row, class]. The
original ridge standardization (``rr_1``) indexed X as feature-major by mistake; here every kernel
uses the one layout. Rows are spread over threads with grid-stride loops, except in the two
matrix products (``nb_1``, ``rr_2``: one thread per (row, class) score, 10 times the threads of
one per row, which left most of the GPU idle: 172 us against 16.6 us at 2,000 rows on an H100,
``tools/kernel_times.py``) and in ``rr_1``, which gives one thread per feature (only F threads
work: the slow, low-occupancy kernel of the benchmark).
"""

import math

from numba import cuda, float32, float64, int32, int64, uint32

from .blockops import grid_rank, thread_rank

#: Rows ``rr_1`` loads per thread before using them (loads in flight per thread); also the rows
#: it sums in int32 before adding to its int64 totals, exact while ``UNROLL * x**2 < 2**31``
#: (the workload's X holds 0..9).
UNROLL = 64
#: Threads of a warp: ``rr_1`` gives each block's first warp 32 consecutive features.
WARP = 32


@cuda.jit
def rr_1(x, z):
    """Standardize each column: z[:, q] = (x[:, q] - mean_q) / std_q (population std; 1 if 0).

    One thread per feature, the only threads that work: the first warp of each block takes 32
    consecutive features (its loads coalesce), so the F threads sit on F / 32 multiprocessors
    rather than all in the first block. One warp per multiprocessor has no other warp to hide
    its latencies behind, so the kernel's time is its instruction count and its waits:

    - each thread loads ``UNROLL`` rows before using them, to keep that many loads in flight;
    - row indices are unsigned, which spares every access Numba's negative-index wraparound
      (about half of the kernel's time);
    - a batch of rows is summed in int32 (one add and one multiply-add per value, where int64
      takes several), then added to exact int64 totals;
    - the write pass computes ``x * (1 / std) - mean / std`` in float32 (one multiply-add;
      the result is float32 anyway, within 2.4e-7 of the float64 formula).

    H100, 2,000 rows: 149 -> 51 us (docs/benchmarks.md, "`rr_1` and four more kernels without
    the wraparound").
    """
    n, f = x.shape[0], x.shape[1]
    rank = thread_rank()
    if rank >= WARP:
        return
    vals = cuda.local.array(UNROLL, int32)
    full = n - n % UNROLL
    # (a block of fewer than WARP threads: each thread also takes the lanes no thread has)
    threads = cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z
    for lane in range(rank, WARP, min(threads, WARP)):
        for q in range(cuda.blockIdx.x * WARP + lane, f, cuda.gridDim.x * WARP):
            col = uint32(q)
            s = int64(0)
            ss = int64(0)
            for i0 in range(0, full, UNROLL):
                for u in range(UNROLL):             # constant trip count: unrolled, in registers
                    vals[u] = x[uint32(i0 + u), col]
                ps = int32(0)
                pss = int32(0)
                for u in range(UNROLL):
                    v = vals[u]
                    ps = int32(ps + v)              # Numba widens int32 arithmetic to int64
                    pss = int32(pss + v * v)
                s += ps
                ss += pss
            for i in range(full, n):
                v = int64(x[i, q])
                s += v
                ss += v * v
            mean = float64(s) / n
            var = float64(ss) / n - mean * mean
            inv = 1.0 / math.sqrt(var) if var > 0.0 else 1.0
            scale = float32(inv)
            shift = float32(-mean * inv)
            for i0 in range(0, full, UNROLL):
                for u in range(UNROLL):
                    vals[u] = x[uint32(i0 + u), col]
                for u in range(UNROLL):
                    z[uint32(i0 + u), col] = float32(vals[u]) * scale + shift
            for i in range(full, n):
                z[i, q] = float32(x[i, q]) * scale + shift


@cuda.jit(device=True)
def _row_dot(a, w, i, k):
    """sum_q a[i, q] w[k, q] in float32, over four partial sums (four independent chains of
    multiply-adds, so one thread keeps more loads in flight); unsigned indices, as in
    ``rr_1`` (13.6 -> 9.3 us for ``rr_2`` at 2,000 rows on an H100, the same sums)."""
    f = uint32(a.shape[1])
    full = uint32(f - f % uint32(4))
    p0 = float32(0.0)
    p1 = float32(0.0)
    p2 = float32(0.0)
    p3 = float32(0.0)
    q = uint32(0)
    while q < full:
        q1, q2, q3 = uint32(q + uint32(1)), uint32(q + uint32(2)), uint32(q + uint32(3))
        p0 += float32(a[i, q]) * w[k, q]        # int32 * float32 would be float64
        p1 += float32(a[i, q1]) * w[k, q1]
        p2 += float32(a[i, q2]) * w[k, q2]
        p3 += float32(a[i, q3]) * w[k, q3]
        q = uint32(q + uint32(4))
    while q < f:
        p0 += float32(a[i, q]) * w[k, q]
        q = uint32(q + uint32(1))
    return (p0 + p1) + (p2 + p3)


@cuda.jit(device=True)
def _scores(a, w, r):
    """r[i, k] += sum_q a[i, q] w[k, q]; a thread per (i, k), unsigned indices."""
    n, c = uint32(a.shape[0]), uint32(w.shape[0])
    total = n * c
    t = uint32(cuda.grid(1))
    while t < total:
        i = uint32(t // c)
        k = uint32(t - i * c)
        r[i, k] += _row_dot(a, w, i, k)
        t = uint32(t + uint32(cuda.gridsize(1)))


@cuda.jit
def nb_1(x, w, r):
    """r[i, k] += sum_q x[i, q] w[k, q] (r holds the class log prior); a thread per (i, k)."""
    _scores(x, w, r)


@cuda.jit
def rr_2(z, w, r):
    """r[i, k] += sum_q z[i, q] w[k, q] (r starts at 0); a thread per (i, k)."""
    _scores(z, w, r)


@cuda.jit
def nb_2(r, amax):
    """amax[i] = max_k r[i, k]."""
    n, c = r.shape[0], r.shape[1]
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        m = r[i, 0]
        for k in range(1, c):
            m = max(m, r[i, k])
        amax[i] = m


@cuda.jit
def nb_3(r, amax, lse):
    """lse[i] = log sum_k exp(r[i, k] - amax[i]) + amax[i] (row-wise log-sum-exp)."""
    n, c = r.shape[0], r.shape[1]
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        m = amax[i]
        s = float32(0.0)
        for k in range(c):
            s += math.exp(r[i, k] - m)
        lse[i] = math.log(s) + m


@cuda.jit
def rr_3(r, intercept):
    """r[i, k] += intercept[k]."""
    n, c = r.shape[0], r.shape[1]
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        for k in range(c):
            r[i, k] += intercept[k]


@cuda.jit
def nb_4(r, lse):
    """r[i, k] = exp(r[i, k] - lse[i]): the Naive Bayes class probabilities."""
    n, c = r.shape[0], r.shape[1]
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        l = lse[i]
        for k in range(c):
            r[i, k] = math.exp(r[i, k] - l)


#: Most classes a row of ``softmax`` may have: it holds a row in registers (the workload has 10).
CLASSES_MAX = 16


@cuda.jit
def softmax(r):
    """Row-wise softmax in place (the row maximum is subtracted first, unlike the original).

    A thread per row loads its row once into registers (a constant-bound loop, unrolled), so
    its loads are in flight together, instead of three passes over global memory (6.8 -> 5.0
    us at 2,000 rows on an H100, the same operations in the same order). Rows of at most
    ``CLASSES_MAX`` values.
    """
    n, c = r.shape[0], r.shape[1]
    vals = cuda.local.array(CLASSES_MAX, float32)
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        row = uint32(i)
        for k in range(CLASSES_MAX):
            if k < c:
                vals[k] = r[row, uint32(k)]
        m = vals[0]
        for k in range(1, CLASSES_MAX):
            if k < c:
                m = max(m, vals[k])
        s = float32(0.0)
        for k in range(CLASSES_MAX):
            if k < c:
                e = math.exp(vals[k] - m)
                vals[k] = e
                s += e
        for k in range(CLASSES_MAX):
            if k < c:
                r[row, uint32(k)] = vals[k] / s


@cuda.jit
def argmax(r1, r2, labels):
    """labels[i] = argmax_k (r1[i, k] + r2[i, k]) (the first one on ties)."""
    n, c = r1.shape[0], r1.shape[1]
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        best = 0
        bv = r1[i, 0] + r2[i, 0]
        for k in range(1, c):
            v = r1[i, k] + r2[i, k]
            if v > bv:
                bv = v
                best = k
        labels[i] = best


#: Rows of one work item of ``col_stats``.
STATS_ROWS = 256


@cuda.jit
def col_stats(x, s):
    """s[q] += sum_i x[i, q], s[f + q] += sum_i x[i, q]^2 (float64): the column sums of a
    block of rows, so a matrix split by rows standardizes with the statistics of all its rows
    (the parts' sums added up, then ``standardize``). A work item is ``STATS_ROWS`` rows of one
    column; neighbouring threads take neighbouring columns (coalesced)."""
    n, f = x.shape[0], x.shape[1]
    blocks = (n + STATS_ROWS - 1) // STATS_ROWS
    first, step = grid_rank()
    for t in range(first, blocks * f, step):
        b = t // f
        q = t - b * f
        total = int64(0)
        squares = int64(0)
        for i in range(b * STATS_ROWS, min(n, (b + 1) * STATS_ROWS)):
            v = int64(x[uint32(i), uint32(q)])
            total += v
            squares += v * v
        cuda.atomic.add(s, q, float64(total))
        cuda.atomic.add(s, f + q, float64(squares))


@cuda.jit
def standardize(x, s, rows, z):
    """z = (x - mean) / std per column, from the column sums ``s`` of all ``rows`` rows
    (population std; 1 where it is 0), as ``rr_1`` computes it."""
    n, f = x.shape[0], x.shape[1]
    first, step = grid_rank()
    for t in range(first, n * f, step):
        i = t // f
        q = t - i * f
        mean = s[q] / rows
        var = s[f + q] / rows - mean * mean
        std = math.sqrt(var) if var > 0 else 1.0
        z[i, q] = float32(x[i, q]) * float32(1.0 / std) - float32(mean / std)


@cuda.jit
def init_scores(r1, prior, r2):
    """r1[i, k] = prior[k] (Naive Bayes adds to the class log prior), r2[i, k] = 0."""
    n, c = r1.shape[0], r1.shape[1]
    first, step = grid_rank()
    for t in range(first, n * c, step):
        i = t // c
        k = t - i * c
        r1[i, k] = prior[k]
        r2[i, k] = 0.0


ANNOTATIONS = {
    "init_scores": {"const": ["prior"], "out": ["r1", "r2"]},
    "col_stats": {"const": ["x"], "out": []},
    "standardize": {"const": ["x", "s"], "out": ["z"]},
    "rr_1": {"const": ["x"], "out": ["z"]},
    "nb_1": {"const": ["x", "w"], "out": [], "elementwise": True, "broadcast": ["w"]},
    "rr_2": {"const": ["z", "w"], "out": [], "elementwise": True, "broadcast": ["w"]},
    "nb_2": {"const": ["r"], "out": ["amax"], "elementwise": True},
    "nb_3": {"const": ["r", "amax"], "out": ["lse"], "elementwise": True},
    "rr_3": {"const": ["intercept"], "out": [], "elementwise": True,
             "broadcast": ["intercept"]},
    "nb_4": {"const": ["lse"], "out": [], "elementwise": True},
    "softmax": {"const": [], "out": [], "elementwise": True},
    "argmax": {"const": ["r1", "r2"], "out": ["labels"], "elementwise": True},
}
