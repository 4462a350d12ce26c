"""Black-Scholes pricing of European options, ported from CuPy's examples.

Origin: repository ``cupy/cupy``, ``examples/finance/black_scholes.py``: the naive NumPy-style
``black_scholes(xp, ...)`` run with the scheduled CuPy namespace, and ``black_scholes_kernel``
(a ``cupy.ElementwiseKernel``) as CUDA C through ``ag.cuda_kernel``; the inputs are drawn on
the device and read back for the NumPy run, as the original's main block does. The timer and
the argument parser are left out.
"""

from __future__ import annotations

import numpy

import asyncgpu as ag  # asyncgpu: the runtime (for the CUDA C kernel)
import asyncgpu.cupy as acp  # asyncgpu: the scheduled CuPy namespace replaces ``import cupy``

SIZES = {"sim": 4096, "gpu": 10_000_000}
# The naive version runs NumPy's ufuncs on sim (exact); the kernel's twin is that same NumPy
# code, and on the GPU libdevice's exp/log differ from NumPy's in the last bits (the original
# compares with assert_allclose's default rtol=1e-7).
TOLERANCE = {"sim": {"rtol": 0.0, "atol": 0.0},
             "gpu": {"rtol": 1e-7, "atol": 1e-12}}


# Naive implementation of the pricing of options with NumPy.
def black_scholes(xp, s, x, t, r, v):
    sqrt_t = xp.sqrt(t)
    d1 = (xp.log(s / x) + (r + v * v / 2) * t) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t

    def get_cumulative_normal_distribution(x):
        A1 = 0.31938153
        A2 = -0.356563782
        A3 = 1.781477937
        A4 = -1.821255978
        A5 = 1.330274429
        RSQRT2PI = 0.39894228040143267793994605993438
        W = 0.2316419

        k = 1 / (1 + W * xp.abs(x))
        cnd = RSQRT2PI * xp.exp(-x * x / 2) * \
            (k * (A1 + k * (A2 + k * (A3 + k * (A4 + k * A5)))))
        cnd = xp.where(x > 0, 1 - cnd, cnd)
        return cnd

    cnd_d1 = get_cumulative_normal_distribution(d1)
    cnd_d2 = get_cumulative_normal_distribution(d2)

    exp_rt = xp.exp(- r * t)
    call = s * cnd_d1 - x * exp_rt * cnd_d2
    put = x * exp_rt * (1 - cnd_d2) - s * (1 - cnd_d1)
    return call, put


# asyncgpu: the ElementwiseKernel's body and preamble as a CUDA C kernel: the element index,
# its bound and the scalar parameters become explicit (ElementwiseKernel derives them from the
# arguments' shapes), T is double.
_BLACK_SCHOLES = r'''
__device__ inline double get_cumulative_normal_distribution(double x) {
    const double A1 = 0.31938153;
    const double A2 = -0.356563782;
    const double A3 = 1.781477937;
    const double A4 = -1.821255978;
    const double A5 = 1.330274429;
    const double RSQRT2PI = 0.39894228040143267793994605993438;
    const double W = 0.2316419;

    const double k = 1 / (1 + W * abs(x));
    double cnd = RSQRT2PI * exp(- x * x / 2) *
        (k * (A1 + k * (A2 + k * (A3 + k * (A4 + k * A5)))));
    if (x > 0) {
        cnd = 1 - cnd;
    }
    return cnd;
}

extern "C" __global__ void black_scholes_kernel(
        const double* s_, const double* x_, const double* t_, double r, double v,
        double* call, double* put, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double s = s_[i], x = x_[i], t = t_[i];
    const double sqrt_t = sqrt(t);
    const double d1 = (log(s / x) + (r + v * v / 2) * t) / (v * sqrt_t);
    const double d2 = d1 - v * sqrt_t;

    const double cnd_d1 = get_cumulative_normal_distribution(d1);
    const double cnd_d2 = get_cumulative_normal_distribution(d2);

    const double exp_rt = exp(- r * t);
    call[i] = s * cnd_d1 - x * exp_rt * cnd_d2;
    put[i] = x * exp_rt * (1 - cnd_d2) - s * (1 - cnd_d1);
}
'''


def _black_scholes_twin(s, x, t, r, v, call, put, n):
    # the simulator's version of the kernel: the naive implementation above, with NumPy
    call[:n], put[:n] = black_scholes(numpy, s[:n], x[:n], t[:n], r, v)


black_scholes_kernel = ag.cuda_kernel(  # asyncgpu: see above
    _BLACK_SCHOLES, "black_scholes_kernel", sim=_black_scholes_twin)


def run(n_options, seed=0):
    # asyncgpu: cupy.random.rand draws from a hidden global state that asyncgpu cannot order;
    # the draws come from an explicit generator
    rng = acp.random.default_rng(seed)

    def rand_range(m, M):
        samples = rng.random(n_options)  # asyncgpu: the generator's random for rand
        return (m + (M - m) * samples).astype(numpy.float64)

    stock_price_gpu = rand_range(5, 30)
    option_strike_gpu = rand_range(1, 100)
    option_years_gpu = rand_range(0.25, 10)

    stock_price_cpu = stock_price_gpu.get()
    option_strike_cpu = option_strike_gpu.get()
    option_years_cpu = option_years_gpu.get()

    risk_free = 0.02
    volatility = 0.3
    call_gpu1, put_gpu1 = black_scholes(
        acp, stock_price_gpu, option_strike_gpu, option_years_gpu,  # asyncgpu: acp
        risk_free, volatility)

    # asyncgpu: the outputs are allocated and the launch configured explicitly
    call_gpu2 = acp.empty_like(stock_price_gpu)
    put_gpu2 = acp.empty_like(stock_price_gpu)
    black_scholes_kernel[(n_options + 255) // 256, 256](
        stock_price_gpu, option_strike_gpu, option_years_gpu,
        risk_free, volatility, call_gpu2, put_gpu2, n_options)

    return {"inputs": numpy.stack([stock_price_cpu, option_strike_cpu, option_years_cpu]),
            "call_naive": call_gpu1.get(), "put_naive": put_gpu1.get(),
            "call_kernel": call_gpu2.get(), "put_kernel": put_gpu2.get()}


def reference(n_options, got):
    # the original's CPU run: the naive implementation with NumPy on the inputs read back
    s, x, t = got["inputs"]
    call, put = black_scholes(numpy, s, x, t, 0.02, 0.3)
    return {"call_naive": call, "put_naive": put, "call_kernel": call, "put_kernel": put}
