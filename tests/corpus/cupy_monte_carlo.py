"""Monte Carlo pricing of European call options, ported from CuPy's examples.

Origin: repository ``cupy/cupy``, ``examples/finance/monte_carlo.py`` (``monte_carlo_kernel``,
a ``cupy.ElementwiseKernel`` with its own xorshift128+ generator, ``compute_option_prices``,
and ``main``'s comparison with the Black-Scholes closed form of
``examples/finance/black_scholes.py``). The kernel is CUDA C through ``ag.cuda_kernel``, with a
NumPy twin (the same generator, vectorized over the threads) for the simulator. The timer and
the argument parser are left out.
"""

from __future__ import annotations

import numpy

import asyncgpu as ag  # asyncgpu: the runtime (for the CUDA C kernel)
import asyncgpu.cupy as acp  # asyncgpu: the scheduled CuPy namespace replaces ``import cupy``

from .cupy_black_scholes import black_scholes_kernel  # asyncgpu: the corpus's port of it

# (options, threads per option, samples per thread)
SIZES = {"sim": (32, 64, 256), "gpu": (1000, 1000, 1000)}
# Monte Carlo against the closed form: the statistical error of 16384 samples per option on sim
# (the longest options are worth up to ~25, with a spread of the same order; the generators of
# one option start from nearly equal states, so their first draws are correlated), of 10^6 on
# a GPU. ``error`` is the original's figure, the standard deviation of the difference.
TOLERANCE = {"sim": {"rtol": 0.0, "atol": 1.5, "error": {"rtol": 0.0, "atol": 0.4}},
             "gpu": {"rtol": 0.0, "atol": 0.2, "error": {"rtol": 0.0, "atol": 0.05}}}

# asyncgpu: the ElementwiseKernel ('T s, T x, T t, T r, T v, int32 n_samples, int32 seed',
# 'T call') as a CUDA C kernel with T = double: the broadcasting of the (n_options, 1) inputs
# over the (n_options, n_threads_per_option) output becomes the explicit option index
# i / n_threads, and the element count n is a parameter.
_MONTE_CARLO = r'''
typedef unsigned long long uint64_t;

__device__
inline double get_call_value(double s, double x, double p, double mu_by_t,
                             double v_by_sqrt_t) {
    const double call_value = s * exp(mu_by_t + v_by_sqrt_t * p) - x;
    return (call_value > 0) ? call_value : 0;
}

// Initialize state
__device__ inline void init_state(uint64_t* a, int i, int seed) {
    a[0] = i + 1;
    a[1] = 0x5c721fd808f616b6 + seed;
}

__device__ inline uint64_t xorshift128plus(uint64_t* x) {
    uint64_t s1 = x[0];
    uint64_t s0 = x[1];
    x[0] = s0;
    s1 = s1 ^ (s1 << 23);
    s1 = s1 ^ (s1 >> 17);
    s1 = s1 ^ s0;
    s1 = s1 ^ (s0 >> 26);
    x[1] = s1;
    return s0 + s1;
}

// Draw a sample from an uniform distribution in a range of [0, 1]
__device__ inline double sample_uniform(uint64_t* state) {
    const uint64_t x = xorshift128plus(state);
    // 18446744073709551615 = 2^64 - 1
    return double(x) / double(18446744073709551615ULL);
}

// Draw a sample from a normal distribution with N(0, 1)
__device__ inline double sample_normal(uint64_t* state) {
    double x = sample_uniform(state);
    double s = double(-1.4142135623730950488016887242097);  // = -sqrt(2)
    if (x > 0.5) {
        x = 1 - x;
        s = -s;
    }
    double p = x + double(0.5);
    return s * erfcinv(2 * p);
}

extern "C" __global__ void monte_carlo_kernel(
        const double* s_, const double* x_, const double* t_, double r, double v,
        int n_samples, int seed, int n_threads, double* call, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double s = s_[i / n_threads], x = x_[i / n_threads], t = t_[i / n_threads];
    // We can use special variables i and _ind to get the index of the thread.
    // In this case, we used an index as a seed of random sequence.
    uint64_t rand_state[2];
    init_state(rand_state, i, seed);

    double call_sum = 0;
    const double v_by_sqrt_t = v * sqrt(t);
    const double mu_by_t = (r - v * v / 2) * t;

    // compute the price of the call option with Monte Carlo method
    for (int k = 0; k < n_samples; ++k) {
        const double p = sample_normal(rand_state);
        call_sum += get_call_value(s, x, p, mu_by_t, v_by_sqrt_t);
    }
    // convert the future value of the call option to the present value
    const double discount_factor = exp(- r * t);
    call[i] = discount_factor * call_sum / n_samples;
}
'''


def _monte_carlo_twin(s, x, t, r, v, n_samples, seed, n_threads, call, n):
    # The simulator's version of the launch: every thread's generator at once, as uint64
    # arrays (NumPy's uint64 shifts and sums wrap as C's do).
    from scipy.special import erfcinv

    u64 = numpy.uint64
    call = call.reshape(-1)
    i = numpy.arange(n)
    option = i // n_threads
    s, x, t = s.reshape(-1)[option], x.reshape(-1)[option], t.reshape(-1)[option]
    state0 = (i + 1).astype(u64)
    state1 = numpy.full(n, (0x5c721fd808f616b6 + int(seed)) % 2**64, u64)
    call_sum = numpy.zeros(n)
    v_by_sqrt_t = v * numpy.sqrt(t)
    mu_by_t = (r - v * v / 2) * t
    for _ in range(n_samples):
        s1, s0 = state0, state1
        state0 = s0
        s1 = s1 ^ (s1 << u64(23))
        s1 = s1 ^ (s1 >> u64(17))
        s1 = s1 ^ s0
        s1 = s1 ^ (s0 >> u64(26))
        state1 = s1
        uniform = (s0 + s1).astype(numpy.float64) / numpy.float64(18446744073709551615)
        sign = numpy.where(uniform > 0.5, numpy.sqrt(2.0), -numpy.sqrt(2.0))
        uniform = numpy.where(uniform > 0.5, 1 - uniform, uniform)
        p = sign * erfcinv(2 * (uniform + 0.5))
        call_sum += numpy.maximum(s * numpy.exp(mu_by_t + v_by_sqrt_t * p) - x, 0)
    call[:n] = numpy.exp(-r * t) * call_sum / n_samples


monte_carlo_kernel = ag.cuda_kernel(  # asyncgpu: see above
    _MONTE_CARLO, "monte_carlo_kernel", sim=_monte_carlo_twin)


def compute_option_prices(
        stock_price, option_strike, option_years, risk_free, volatility,
        n_threads_per_option, n_samples_per_thread, seed=0):

    n_options = len(stock_price)
    call_prices = acp.empty(  # asyncgpu: acp for cupy
        (n_options, n_threads_per_option), dtype=numpy.float64)
    # Because of the broadcasting rule, in this case this kernel
    # launches n_options * n_threads_per_options threads
    # each of which corresponds to the element of 'call_prices'.
    n = n_options * n_threads_per_option  # asyncgpu: the launch's extent
    monte_carlo_kernel[(n + 255) // 256, 256](  # asyncgpu: a launch, the count explicit
        stock_price, option_strike, option_years,
        risk_free, volatility, n_samples_per_thread, seed, n_threads_per_option,
        call_prices, n)
    return call_prices.mean(axis=1)


def run(size, seed=0):
    n_options, n_threads_per_option, n_samples_per_thread = size
    # asyncgpu: an explicit generator for cupy.random.rand (whose global state asyncgpu
    # cannot order)
    rng = acp.random.default_rng(seed)

    def rand_range(m, M):
        samples = rng.random(n_options)  # asyncgpu: the generator's random for rand
        return (m + (M - m) * samples).astype(numpy.float64)

    stock_price = rand_range(5, 30)
    option_strike = rand_range(1, 100)
    option_years = rand_range(0.25, 10)
    risk_free = 0.02
    volatility = 0.3

    call_mc = compute_option_prices(
        stock_price, option_strike, option_years, risk_free, volatility,
        n_threads_per_option, n_samples_per_thread)

    # Compute the error between the value of the exact solution
    # and that of the Monte-Carlo simulation
    # asyncgpu: the kernel's outputs allocated and its launch configured explicitly
    call_bs, put_bs = acp.empty_like(stock_price), acp.empty_like(stock_price)
    black_scholes_kernel[(n_options + 255) // 256, 256](
        stock_price, option_strike, option_years, risk_free, volatility,
        call_bs, put_bs, n_options)
    error = acp.std(call_mc - call_bs)
    return {"inputs": numpy.stack([stock_price.get(), option_strike.get(),
                                   option_years.get()]),
            "call_mc": call_mc.get(), "call_bs": call_bs.get(), "error": float(error)}


def reference(size, got):
    # the closed form in NumPy, on the inputs the run drew
    from .cupy_black_scholes import black_scholes

    s, x, t = got["inputs"]
    call, _ = black_scholes(numpy, s, x, t, 0.02, 0.3)
    return {"call_mc": call, "call_bs": call, "error": 0.0}
