"""DL's and ML's kernels as they are against their signed-index versions of before stop 25,
each timed alone on the GPU (``alone_timing``), with the largest difference between outputs.

The "before" kernels below are copies of the ones ``kernels/`` held until then (DL's
``conv2d`` and ``mean_pool``, ML's row dot ``rr_2``, and ML's ``softmax`` in three passes over
global memory); the current ones index with unsigned 32-bit integers (Numba checks every
signed index for a negative value to wrap it around) and ``softmax`` holds a row in
registers. Both compute the same sums in the same order, so the differences must be 0.
Results: docs/data/h100_kernel_variants_stop25.txt (measured when the current kernels were
the candidates, with two more that lost: an unsigned-index ``softmax``, 6.81 -> 6.87 us, and a
register ``argmax``, 3.42 -> 3.17).

usage: PYTHONPATH=. python3 tools/kernel_variants.py   (a CUDA GPU)
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

import asyncgpu  # noqa: F401  (numba-cuda's NumPy 2.5 shim)
import kernels.dl as DL
import kernels.ml as ML
from alone_timing import AloneTimer
from kernels.blockops import grid_rank, thread_rank

K = DL.K
WEIGHTS_MAX = DL.WEIGHTS_MAX


@cuda.jit(device=True)
def _place_signed(t, cols, channels):
    p = t // channels
    return p // cols, p % cols, t % channels


@cuda.jit
def conv2d_before(x, w, out, stride):
    ws = cuda.shared.array(WEIGHTS_MAX, float32)
    cin, cout = x.shape[2], out.shape[2]
    nw = cout * K * K * cin
    tid = thread_rank()
    nt = cuda.blockDim.x * cuda.blockDim.y
    for t in range(tid, nw, nt):
        ws[t] = w[t]
    cuda.syncthreads()
    first, step = grid_rank()
    cols = out.shape[1]
    for t in range(first, out.shape[0] * cols * cout, step):
        i, j, m = _place_signed(t, cols, cout)
        acc = float32(0.0)
        for a in range(K):
            for b in range(K):
                base = ((m * K + a) * K + b) * cin
                for l in range(cin):
                    acc += ws[base + l] * x[i * stride + a, j * stride + b, l]
        out[i, j, m] = max(acc, float32(0.0))


@cuda.jit
def mean_pool_before(x, out, window):
    inv = float32(1.0 / (window * window))
    first, step = grid_rank()
    cols, ch = out.shape[1], out.shape[2]
    for t in range(first, out.shape[0] * cols * ch, step):
        i, j, c = _place_signed(t, cols, ch)
        acc = float32(0.0)
        for a in range(window):
            for b in range(window):
                acc += x[i * window + a, j * window + b, c]
        out[i, j, c] = acc * inv


@cuda.jit
def rr_2_before(z, w, r):
    n, c, f = z.shape[0], w.shape[0], z.shape[1]
    full = f - f % 4
    for t in range(cuda.grid(1), n * c, cuda.gridsize(1)):
        i = t // c
        k = t - i * c
        p0 = float32(0.0)
        p1 = float32(0.0)
        p2 = float32(0.0)
        p3 = float32(0.0)
        for q in range(0, full, 4):
            p0 += float32(z[i, q]) * w[k, q]
            p1 += float32(z[i, q + 1]) * w[k, q + 1]
            p2 += float32(z[i, q + 2]) * w[k, q + 2]
            p3 += float32(z[i, q + 3]) * w[k, q + 3]
        for q in range(full, f):
            p0 += float32(z[i, q]) * w[k, q]
        r[i, k] += (p0 + p1) + (p2 + p3)


@cuda.jit
def softmax_before(r):
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


def main() -> None:
    import cupy

    timer = AloneTimer()
    ns = timer.numba_stream
    rng = np.random.default_rng(0)
    g2, b2 = (24, 22), (8, 8)          # the small scale's 528 blocks as DL launches them

    def pair(name, before, after, outs):
        tb, ta = timer(before), timer(after)
        timer.stream.synchronize()
        diff = max((float(cupy.abs(a - b).max()) for a, b in outs), default=0.0)
        print(f"{name:28s} before {tb:7.2f} us  now {ta:7.2f} us  max diff {diff:.3g}", flush=True)

    def f32(*shape):
        return cupy.asarray(rng.random(shape, dtype=np.float32))

    x, w1, x11, w2 = f32(400, 400, 1), f32(8 * 9 * 1), f32(39, 39, 8), f32(16 * 9 * 8)
    o1, o1b, o2, o2b = (cupy.empty(s, np.float32) for s in [(199, 199, 8)] * 2 + [(19, 19, 16)] * 2)
    p1, p1b = cupy.empty((39, 39, 8), np.float32), cupy.empty((39, 39, 8), np.float32)
    pair("conv1 400x400x1->8", lambda: conv2d_before[g2, b2, ns](x, w1, o1, 2),
         lambda: DL.conv2d[g2, b2, ns](x, w1, o1b, 2), [(o1, o1b)])
    pair("conv2 39x39x8->16", lambda: conv2d_before[g2, b2, ns](x11, w2, o2, 2),
         lambda: DL.conv2d[g2, b2, ns](x11, w2, o2b, 2), [(o2, o2b)])
    pair("mean_pool 199->39", lambda: mean_pool_before[g2, b2, ns](o1, p1, 5),
         lambda: DL.mean_pool[g2, b2, ns](o1, p1b, 5), [(p1, p1b)])

    z, w = f32(2000, 200), f32(10, 200)
    ra, rb = cupy.zeros((2000, 10), np.float32), cupy.zeros((2000, 10), np.float32)
    rr_2_before[528, 256, ns](z, w, ra)
    ML.rr_2[528, 256, ns](z, w, rb)
    timer.stream.synchronize()
    print("rr_2 one launch: max diff", float(cupy.abs(ra - rb).max()))
    pair("rr_2 2000x200 (accumulates)", lambda: rr_2_before[528, 256, ns](z, w, ra),
         lambda: ML.rr_2[528, 256, ns](z, w, rb), [])
    src = f32(2000, 10)
    sa, sb = src.copy(), src.copy()
    softmax_before[528, 256, ns](sa)
    ML.softmax[528, 256, ns](sb)
    timer.stream.synchronize()
    print("softmax one launch: max diff", float(cupy.abs(sa - sb).max()))
    pair("softmax 2000x10", lambda: softmax_before[528, 256, ns](sa),
         lambda: ML.softmax[528, 256, ns](sb), [])


if __name__ == "__main__":
    main()
