"""Monte Carlo integration with Numba's xoroshiro128+ generator, ported from numba-cuda's docs.

Origin: repository ``NVIDIA/numba-cuda``, the documentation's "Monte Carlo Integration"
example (``numba_cuda/numba/cuda/tests/doc_examples/test_montecarlo.py``:
``mc_integrator_kernel``, ``mc_integrate`` and ``func``). The generator's states come from
Numba's ``create_xoroshiro128p_states`` and go to the asyncgpu kernel as they are; the output
is an asyncgpu array, and Numba's ``cuda.reduce`` sum is the array's ``sum``.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import cuda
from numba.cuda.random import (
    create_xoroshiro128p_states,
    xoroshiro128p_uniform_float32,
)

import asyncgpu as ag  # asyncgpu: the runtime

# number of samples, higher will lead to a more accurate answer
# (on sim, create_xoroshiro128p_states runs Numba's initializer in pure Python under the CUDA
# simulator, about 0.1 s a state: the sim size is tiny)
NEEDS_NUMBA_SIMULATOR = True  # create_xoroshiro128p_states, on a machine without a GPU
SIZES = {"sim": 16, "gpu": 20_000}
# The reference draws the same numbers (xoroshiro128+ from the same seed) and sums in float64;
# the device sums float32 in its own order.
TOLERANCE = {"sim": {"rtol": 1e-5, "atol": 0.0}, "gpu": {"rtol": 1e-4, "atol": 0.0}}


# define a function to integrate
@numba.jit
def func(x):
    return 1.0 / x


@ag.kernel(out=["out"])  # asyncgpu: scheduled; every element of out is written
@cuda.jit
def mc_integrator_kernel(out, rng_states, lower_lim, upper_lim):
    """
    kernel to draw random samples and evaluate the function to
    be integrated at those sample values
    """
    size = len(out)

    gid = cuda.grid(1)
    if gid < size:
        # draw a sample between 0 and 1 on this thread
        samp = xoroshiro128p_uniform_float32(rng_states, gid)

        # normalize this sample to the limit range
        samp = samp * (upper_lim - lower_lim) + lower_lim

        # evaluate the function to be
        # integrated at the normalized
        # value of the sample
        y = func(samp)
        out[gid] = y


def mc_integrate(lower_lim, upper_lim, nsamps):
    """
    approximate the definite integral of `func` from
    `lower_lim` to `upper_lim`
    """
    out = ag.array(np.zeros(nsamps, dtype="float32"))  # asyncgpu: ag.array for to_device
    rng_states = create_xoroshiro128p_states(nsamps, seed=42)

    # jit the function for use in CUDA kernels
    # asyncgpu: an explicit launch configuration for ``forall(nsamps)``
    mc_integrator_kernel[(nsamps + 127) // 128, 128](
        out, rng_states, lower_lim, upper_lim
    )
    # normalization factor to convert
    # to the average: (b - a)/(N - 1)
    factor = (upper_lim - lower_lim) / (nsamps - 1)

    return float(out.sum()) * factor  # asyncgpu: the array's sum for cuda.reduce's


def run(nsamps):
    return {"integral_1_2": mc_integrate(1, 2, nsamps),
            "integral_2_3": mc_integrate(2, 3, nsamps)}


_MASK = 2**64 - 1


def _rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & _MASK


def _next(s0, s1):
    # one step of xoroshiro128+, on Python integers
    result = (s0 + s1) & _MASK
    s1 ^= s0
    return result, _rotl(s0, 55) ^ s1 ^ ((s1 << 14) & _MASK), _rotl(s1, 36)


def _states(n, seed):
    # SplitMix64 of the seed for the first generator, then each one 2^64 steps after the
    # previous (xoroshiro128+'s jump polynomial): the scheme create_xoroshiro128p_states
    # documents, written again on Python integers
    z = (seed + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    z ^= z >> 31
    states = [(z, z)]
    for _ in range(1, n):
        s0, s1 = states[-1]
        j0 = j1 = 0
        for word in (0xBEAC0467EBA5FACB, 0xD86B048B86AA9922):
            for b in range(64):
                if word >> b & 1:
                    j0, j1 = j0 ^ s0, j1 ^ s1
                _, s0, s1 = _next(s0, s1)
        states.append((j0, j1))
    return states


def _reference_integral(lower, upper, nsamps):
    # each thread's first draw, converted to float32 in [0, 1) as Numba does (53 high bits)
    draws = np.array([_next(s0, s1)[0] >> 11 for s0, s1 in _states(nsamps, 42)],
                     dtype=np.float64)
    samples = (draws * (1.0 / 2**53)).astype(np.float32)
    # the kernel's arithmetic: float32 sample, float64 integrand, stored as float32
    values = (1.0 / (samples.astype(np.float64) * (upper - lower) + lower)).astype(np.float32)
    return float(np.sum(values, dtype=np.float64)) * (upper - lower) / (nsamps - 1)


def reference(nsamps, got=None):
    want = {"integral_1_2": _reference_integral(1, 2, nsamps),
            "integral_2_3": _reference_integral(2, 3, nsamps)}
    # the values computed independently with maple in the original (at 10^6 samples there;
    # 0.005 is five standard errors at 2 x 10^4)
    if nsamps >= 20_000:
        np.testing.assert_allclose(want["integral_1_2"], 0.69315, atol=0.005)
        np.testing.assert_allclose(want["integral_2_3"], 0.4055, atol=0.005)
    return want
