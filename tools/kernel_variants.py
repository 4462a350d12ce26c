"""DL's and ML's kernels against variants, each timed alone on the GPU.

Written when the variants were candidates (stop 25): unsigned 32-bit index math for DL's
``conv2d`` and ``mean_pool`` and ML's row dots (``rr_2``), and ML's ``softmax`` and ``argmax``
with a row held in registers. The variants that won are now the kernels in ``kernels/``, so
run today it compares them with these copies of themselves (and the two that lost). Each
line: microseconds per launch (median of 7 sets of 10 launches behind a spin), and the
largest difference between the two outputs. Results: docs/data/h100_kernel_variants_stop25.txt.

usage: PYTHONPATH=. python3 tools/kernel_variants.py   (a CUDA GPU)
"""
import math
import numpy as np
import cupy
from numba import cuda, float32, int32, uint32
import asyncgpu  # noqa: F401
from alone_timing import AloneTimer
import kernels.dl as DL
import kernels.ml as ML
from kernels.blockops import grid_rank, thread_rank

t = AloneTimer()
s, ns = t.stream, t.numba_stream
K = 3
CMAX = 16
WEIGHTS_MAX = DL.WEIGHTS_MAX


@cuda.jit
def conv2d_u(x, w, out, stride):
    ws = cuda.shared.array(WEIGHTS_MAX, float32)
    cin = uint32(x.shape[2])
    cout = uint32(out.shape[2])
    nw = cout * uint32(K * K) * cin
    tid = thread_rank()
    nt = cuda.blockDim.x * cuda.blockDim.y
    for q in range(tid, nw, nt):
        ws[q] = w[q]
    cuda.syncthreads()
    first, step = grid_rank()
    cols = uint32(out.shape[1])
    total = uint32(out.shape[0]) * cols * cout
    st = uint32(stride)
    tt = uint32(first)
    while tt < total:
        p = uint32(tt // cout)
        m = uint32(tt - p * cout)
        i = uint32(p // cols)
        j = uint32(p - i * cols)
        acc = float32(0.0)
        for a in range(K):
            for b in range(K):
                base = uint32((m * uint32(K) + uint32(a)) * uint32(K) + uint32(b)) * cin
                r0 = uint32(i * st + uint32(a))
                c0 = uint32(j * st + uint32(b))
                for l in range(cin):
                    acc += ws[uint32(base + l)] * x[r0, c0, uint32(l)]
        out[i, j, m] = max(acc, float32(0.0))
        tt = uint32(tt + uint32(step))


@cuda.jit
def pool_u(x, out, window):
    win = uint32(window)
    inv = float32(1.0 / (window * window))
    first, step = grid_rank()
    cols = uint32(out.shape[1])
    ch = uint32(out.shape[2])
    total = uint32(out.shape[0]) * cols * ch
    tt = uint32(first)
    while tt < total:
        p = uint32(tt // ch)
        c = uint32(tt - p * ch)
        i = uint32(p // cols)
        j = uint32(p - i * cols)
        acc = float32(0.0)
        for a in range(window):
            for b in range(window):
                acc += x[uint32(i * win + uint32(a)), uint32(j * win + uint32(b)), c]
        out[i, j, c] = acc * inv
        tt = uint32(tt + uint32(step))


@cuda.jit(device=True)
def _row_dot_u(a, w, i, k):
    f = uint32(a.shape[1])
    full = uint32(f - f % uint32(4))
    p0 = float32(0.0); p1 = float32(0.0); p2 = float32(0.0); p3 = float32(0.0)
    q = uint32(0)
    while q < full:
        p0 += float32(a[i, q]) * w[k, q]
        p1 += float32(a[i, uint32(q + uint32(1))]) * w[k, uint32(q + uint32(1))]
        p2 += float32(a[i, uint32(q + uint32(2))]) * w[k, uint32(q + uint32(2))]
        p3 += float32(a[i, uint32(q + uint32(3))]) * w[k, uint32(q + uint32(3))]
        q = uint32(q + uint32(4))
    while q < f:
        p0 += float32(a[i, q]) * w[k, q]
        q = uint32(q + uint32(1))
    return (p0 + p1) + (p2 + p3)


@cuda.jit
def rr_2_u(z, w, r):
    n, c = uint32(z.shape[0]), uint32(w.shape[0])
    total = n * c
    tt = uint32(cuda.grid(1))
    while tt < total:
        i = uint32(tt // c)
        k = uint32(tt - i * c)
        r[i, k] += _row_dot_u(z, w, i, k)
        tt = uint32(tt + uint32(cuda.gridsize(1)))


@cuda.jit
def softmax_reg(r):
    n, c = r.shape[0], r.shape[1]
    vals = cuda.local.array(CMAX, float32)
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        row = uint32(i)
        for k in range(CMAX):
            if k < c:
                vals[k] = r[row, uint32(k)]
        m = vals[0]
        for k in range(1, CMAX):
            if k < c:
                m = max(m, vals[k])
        tot = float32(0.0)
        for k in range(CMAX):
            if k < c:
                e = math.exp(vals[k] - m)
                vals[k] = e
                tot += e
        for k in range(CMAX):
            if k < c:
                r[row, uint32(k)] = vals[k] / tot


@cuda.jit
def softmax_u(r):
    n, c = uint32(r.shape[0]), uint32(r.shape[1])
    for ii in range(cuda.grid(1), n, cuda.gridsize(1)):
        i = uint32(ii)
        m = r[i, 0]
        for k in range(uint32(1), c):
            m = max(m, r[i, uint32(k)])
        tot = float32(0.0)
        for k in range(c):
            e = math.exp(r[i, uint32(k)] - m)
            r[i, uint32(k)] = e
            tot += e
        for k in range(c):
            r[i, uint32(k)] /= tot


@cuda.jit
def argmax_reg(r1, r2, labels):
    n, c = r1.shape[0], r1.shape[1]
    a = cuda.local.array(CMAX, float32)
    b = cuda.local.array(CMAX, float32)
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        row = uint32(i)
        for k in range(CMAX):
            if k < c:
                a[k] = r1[row, uint32(k)]
                b[k] = r2[row, uint32(k)]
        best = 0
        bv = a[0] + b[0]
        for k in range(1, CMAX):
            if k < c:
                v = a[k] + b[k]
                if v > bv:
                    bv = v
                    best = k
        labels[row] = best


rng = np.random.default_rng(0)
G2, B2 = (24, 22), (8, 8)
x = cupy.asarray(rng.random((400, 400, 1), dtype=np.float32))
w1 = cupy.asarray(rng.standard_normal(8 * 9 * 1, dtype=np.float32))
o1 = cupy.empty((199, 199, 8), np.float32); o1b = cupy.empty_like(o1)
x11 = cupy.asarray(rng.random((39, 39, 8), dtype=np.float32))
w2 = cupy.asarray(rng.standard_normal(16 * 9 * 8, dtype=np.float32))
o2 = cupy.empty((19, 19, 16), np.float32); o2b = cupy.empty_like(o2)
p1 = cupy.empty((39, 39, 8), np.float32); p1b = cupy.empty_like(p1)

def pair(name, cur, new, outs):
    tc = t(cur); tn = t(new); s.synchronize()
    d = max((float(cupy.abs(a - b).max()) for a, b in outs), default=0.0)
    print(f"{name:28s} current {tc:7.2f} us  variant {tn:7.2f} us  max diff {d:.3g}", flush=True)

pair("conv1 400x400x1->8", lambda: DL.conv2d[G2, B2, ns](x, w1, o1, 2), lambda: conv2d_u[G2, B2, ns](x, w1, o1b, 2), [(o1, o1b)])
pair("conv2 39x39x8->16", lambda: DL.conv2d[G2, B2, ns](x11, w2, o2, 2), lambda: conv2d_u[G2, B2, ns](x11, w2, o2b, 2), [(o2, o2b)])
pair("mean_pool 199->39", lambda: DL.mean_pool[G2, B2, ns](o1, p1, 5), lambda: pool_u[G2, B2, ns](o1, p1b, 5), [(p1, p1b)])

z = cupy.asarray(rng.standard_normal((2000, 200), dtype=np.float32))
w = cupy.asarray(rng.standard_normal((10, 200), dtype=np.float32))
ra = cupy.zeros((2000, 10), np.float32); rb = cupy.zeros_like(ra)
ML.rr_2[528, 256, ns](z, w, ra); rr_2_u[528, 256, ns](z, w, rb); s.synchronize()
print("rr_2 one-launch diff", float(cupy.abs(ra - rb).max()))
pair("rr_2 2000x200 (accumulates)", lambda: ML.rr_2[528, 256, ns](z, w, ra), lambda: rr_2_u[528, 256, ns](z, w, rb), [])
src = cupy.asarray(rng.standard_normal((2000, 10), dtype=np.float32))
sa, sb, sc = src.copy(), src.copy(), src.copy()
ML.softmax[528, 256, ns](sa); softmax_reg[528, 256, ns](sb); softmax_u[528, 256, ns](sc); s.synchronize()
print("softmax diffs reg", float(cupy.abs(sa - sb).max()), "u", float(cupy.abs(sa - sc).max()))
pair("softmax 2000x10 (reg)", lambda: ML.softmax[528, 256, ns](sa), lambda: softmax_reg[528, 256, ns](sb), [])
pair("softmax 2000x10 (u)", lambda: ML.softmax[528, 256, ns](sa), lambda: softmax_u[528, 256, ns](sc), [])
la = cupy.empty(2000, np.int32); lb = cupy.empty_like(la)
pair("argmax 2000x10 (reg)", lambda: ML.argmax[528, 256, ns](src, src, la), lambda: argmax_reg[528, 256, ns](src, src, lb), [(la, lb)])
