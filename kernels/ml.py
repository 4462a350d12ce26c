"""ML kernels: an ensemble of categorical Naive Bayes and Ridge Regression classifiers.

All matrices are row-major: X[row, feature], weights[class, feature], scores[row, class]. The
original ridge standardization (``rr_1``) indexed X as feature-major by mistake; here every kernel
uses the one layout. Rows are spread over threads with grid-stride loops; ``rr_1`` gives one thread
per feature (only F threads work: the slow, low-occupancy kernel of the benchmark).
"""

import math

from numba import cuda, float32, float64, int32, int64

#: Rows ``rr_1`` loads per thread before using them (loads in flight per thread).
UNROLL = 16


@cuda.jit
def rr_1(x, z):
    """Standardize each column: z[:, q] = (x[:, q] - mean_q) / std_q (population std; 1 if 0).

    One pass for the sum and the sum of squares, both exact in int64 (X holds small integers),
    then one pass to write. Consecutive threads take consecutive features, so each warp's loads
    coalesce; with only F threads at work the kernel is latency-bound, so each thread loads
    ``UNROLL`` rows before using them, to keep that many loads in flight.
    """
    n, f = x.shape[0], x.shape[1]
    vals = cuda.local.array(UNROLL, int32)
    full = n - n % UNROLL
    for q in range(cuda.grid(1), f, cuda.gridsize(1)):
        s = int64(0)
        ss = int64(0)
        for i0 in range(0, full, UNROLL):
            for u in range(UNROLL):             # constant trip count: unrolled, in registers
                vals[u] = x[i0 + u, q]
            for u in range(UNROLL):
                v = int64(vals[u])
                s += v
                ss += v * v
        for i in range(full, n):
            v = int64(x[i, q])
            s += v
            ss += v * v
        mean = float64(s) / n
        var = float64(ss) / n - mean * mean
        std = math.sqrt(var) if var > 0.0 else 1.0
        for i0 in range(0, full, UNROLL):
            for u in range(UNROLL):
                vals[u] = x[i0 + u, q]
            for u in range(UNROLL):
                z[i0 + u, q] = float32((float64(vals[u]) - mean) / std)
        for i in range(full, n):
            z[i, q] = float32((float64(x[i, q]) - mean) / std)


@cuda.jit
def nb_1(x, w, r):
    """r[i, k] += sum_q x[i, q] w[k, q] (r holds the class log prior)."""
    n, f, c = x.shape[0], x.shape[1], w.shape[0]
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        for k in range(c):
            acc = float32(0.0)
            for q in range(f):
                acc += float32(x[i, q]) * w[k, q]   # int32 * float32 would be float64
            r[i, k] += acc


@cuda.jit
def rr_2(z, w, r):
    """r[i, k] += sum_q z[i, q] w[k, q] (r starts at 0)."""
    n, f, c = z.shape[0], z.shape[1], w.shape[0]
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        for k in range(c):
            acc = float32(0.0)
            for q in range(f):
                acc += z[i, q] * w[k, q]
            r[i, k] += acc


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


@cuda.jit
def softmax(r):
    """Row-wise softmax in place (the row maximum is subtracted first, unlike the original)."""
    n, c = r.shape[0], r.shape[1]
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        m = r[i, 0]
        for k in range(1, c):
            m = max(m, r[i, k])
        s = float32(0.0)
        for k in range(c):
            e = math.exp(r[i, k] - m)
            r[i, k] = e
            s += e
        for k in range(c):
            r[i, k] /= s


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


ANNOTATIONS = {
    "rr_1": {"const": ["x"], "out": ["z"]},
    "nb_1": {"const": ["x", "w"], "out": []},
    "rr_2": {"const": ["z", "w"], "out": []},
    "nb_2": {"const": ["r"], "out": ["amax"]},
    "nb_3": {"const": ["r", "amax"], "out": ["lse"]},
    "rr_3": {"const": ["intercept"], "out": []},
    "nb_4": {"const": ["lse"], "out": []},
    "softmax": {"const": [], "out": []},
    "argmax": {"const": ["r1", "r2"], "out": ["labels"]},
}
