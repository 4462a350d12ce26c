"""ML's ``rr_1`` (one thread per feature) in variants, each timed alone on the GPU.

Every variant keeps one thread per feature and the first warp of each block working; they
differ in rows loaded per batch (UN), int32 batch sums (acc32), a float32 write pass (f32),
loading the next batch before summing the current one (pipe) and unsigned row indices (uns,
which spare Numba's negative-index wraparound). Each line: microseconds per launch (median
of 7 sets of 10 launches behind a spin), the largest error against NumPy's float64
standardization, and counts from the PTX. Results: docs/data/h100_rr1_variants_stop25.txt.

usage: PYTHONPATH=. python3 tools/rr1_variants.py   (a CUDA GPU)
"""
import math
import numpy as np
import cupy
from numba import cuda, float32, float64, int32, int64, uint32
import asyncgpu  # noqa: F401  (numpy 2.5 shim)
from alone_timing import AloneTimer
import kernels.ml as ML
from kernels.blockops import thread_rank

t = AloneTimer()
s, ns = t.stream, t.numba_stream
WARP = 32


def make(UN, acc32, f32, pipe, unsigned):
    @cuda.jit(device=True, inline=True)
    def load(x, vals, i0, q):
        for u in range(UN):
            if unsigned:
                vals[u] = x[uint32(i0 + u), uint32(q)]
            else:
                vals[u] = x[i0 + u, q]

    @cuda.jit(device=True, inline=True)
    def acc(vals, s, ss):
        if acc32:
            ps = int32(0)
            pss = int32(0)
            for u in range(UN):
                v = vals[u]
                ps = int32(ps + v)
                pss = int32(pss + v * v)
            return s + ps, ss + pss
        for u in range(UN):
            v = int64(vals[u])
            s += v
            ss += v * v
        return s, ss

    @cuda.jit(device=True, inline=True)
    def store(z, vals, i0, q, mean, inv, m32, c32):
        for u in range(UN):
            if f32:
                r = float32(vals[u]) * m32 + c32
            else:
                r = float32((float64(vals[u]) - mean) * inv)
            if unsigned:
                z[uint32(i0 + u), uint32(q)] = r
            else:
                z[i0 + u, q] = r

    @cuda.jit
    def k(x, z):
        n, f = x.shape[0], x.shape[1]
        lane = thread_rank()
        if lane >= WARP:
            return
        a = cuda.local.array(UN, int32)
        b = cuda.local.array(UN, int32)
        full = n - n % UN
        for q in range(cuda.blockIdx.x * WARP + lane, f, cuda.gridDim.x * WARP):
            s = int64(0)
            ss = int64(0)
            if pipe:
                if full > 0:
                    load(x, a, 0, q)
                for i0 in range(0, full, 2 * UN):
                    if i0 + UN < full:
                        load(x, b, i0 + UN, q)
                    s, ss = acc(a, s, ss)
                    if i0 + 2 * UN < full:
                        load(x, a, i0 + 2 * UN, q)
                    if i0 + UN < full:
                        s, ss = acc(b, s, ss)
            else:
                for i0 in range(0, full, UN):
                    load(x, a, i0, q)
                    s, ss = acc(a, s, ss)
            for i in range(full, n):
                v = int64(x[i, q])
                s += v
                ss += v * v
            mean = float64(s) / n
            var = float64(ss) / n - mean * mean
            inv = 1.0 / math.sqrt(var) if var > 0.0 else 1.0
            m32 = float32(inv)
            c32 = float32(-mean * inv)
            if pipe:
                if full > 0:
                    load(x, a, 0, q)
                for i0 in range(0, full, 2 * UN):
                    if i0 + UN < full:
                        load(x, b, i0 + UN, q)
                    store(z, a, i0, q, mean, inv, m32, c32)
                    if i0 + 2 * UN < full:
                        load(x, a, i0 + 2 * UN, q)
                    if i0 + UN < full:
                        store(z, b, i0 + UN, q, mean, inv, m32, c32)
            else:
                for i0 in range(0, full, UN):
                    load(x, a, i0, q)
                    store(z, a, i0, q, mean, inv, m32, c32)
            for i in range(full, n):
                z[i, q] = float32((float64(x[i, q]) - mean) * inv)
    return k


def ptx_stats(kern):
    try:
        ptx = list(kern.inspect_asm().values())[0]
        return f"ld.local {ptx.count('ld.local')} st.local {ptx.count('st.local')} ld.global {ptx.count('ld.global')} lines {ptx.count(chr(10))}"
    except Exception as e:
        return f"(ptx: {type(e).__name__}: {e})"[:120]


rng = np.random.default_rng(0)
for n in (2000, 600_000 // 8):
    X = cupy.asarray(rng.integers(0, 10, (n, 200), dtype=np.int32))
    Z = cupy.empty((n, 200), np.float32)
    ML.rr_1[528, 256, ns](X, Z); s.synchronize(); ref = Z.get()
    xs = X.get().astype(np.float64)
    exact = ((xs - xs.mean(0)) / xs.std(0)).astype(np.float32)
    print(f"n={n} current rr_1 {t(lambda: ML.rr_1[528, 256, ns](X, Z)):.1f} us  err {np.abs(ref - exact).max():.2g}  {ptx_stats(ML.rr_1)}", flush=True)
    for UN in (32, 64):
        for acc32 in (0, 1):
            for f32 in (0, 1):
                for pipe in (0, 1):
                    for uns in (0, 1):
                        if not acc32 and (f32 or uns):
                            continue
                        try:
                            k = make(UN, acc32, f32, pipe, uns)
                            us = t(lambda: k[528, 256, ns](X, Z))
                            d = float(np.abs(Z.get() - exact).max())
                            print(f"  UN{UN} acc32={acc32} f32={f32} pipe={pipe} uns={uns}: {us:7.1f} us  err {d:.2g}  {ptx_stats(k)}", flush=True)
                        except Exception as e:
                            print(f"  UN{UN} acc32={acc32} f32={f32} pipe={pipe} uns={uns}: FAILED {type(e).__name__}: {str(e)[:200]}", flush=True)
