"""B&S kernel: European call prices by Black and Scholes, in double precision.

The normal CDF is the Abramowitz-Stegun polynomial (the original stored its constants as float
literals; here they are exact doubles, as in the NumPy reference).
"""

import math

from numba import cuda

A1, A2, A3, A4, A5 = 0.31938153, -0.356563782, 1.781477937, -1.821255978, 1.330274429
RSQRT2PI = 0.39894228040143267794


@cuda.jit(device=True)
def cnd(d):
    """Standard normal CDF, Abramowitz-Stegun 26.2.17."""
    k = 1.0 / (1.0 + 0.2316419 * abs(d))
    poly = k * (A1 + k * (A2 + k * (A3 + k * (A4 + k * A5))))
    c = RSQRT2PI * math.exp(-0.5 * d * d) * poly
    if d > 0:
        c = 1.0 - c
    return c


@cuda.jit
def bs(x, y, n, r, v, t, k):
    """y[i] = call price for spot x[i], strike k, rate r, volatility v, maturity t."""
    sqrt_t = math.sqrt(t)
    discount = k * math.exp(-r * t)
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        s = x[i]
        d1 = (math.log(s / k) + (r + 0.5 * v * v) * t) / (v * sqrt_t)
        d2 = d1 - v * sqrt_t
        y[i] = s * cnd(d1) - discount * cnd(d2)


ANNOTATIONS = {
    # grid-stride over n elements, element i from element i: chunkable (explicit memory)
    "bs": {"const": ["x"], "out": ["y"], "elementwise": "n"},
}
