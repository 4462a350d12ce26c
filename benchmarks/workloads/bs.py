"""B&S: Black and Scholes call prices for 10 independent stocks, in double precision.

DAG of one run (10 kernels, no edges, 10 streams)::

    bs(x0 -> y0) [s0]   bs(x1 -> y1) [s1]   ...   bs(x9 -> y9) [s9]   -> host reads y_i[0], y_i[-1]

Compute- and transfer-bound: every x_i is rewritten by the host each iteration. Same DAG as the
paper's Figure 6. The host reads the first and the last price of every stock (the original read
only y_i[0] and checked only stock 0, with a CPU formula that used x instead of K in the
discount term); the reference uses the same Abramowitz-Stegun CDF in float64.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import kernel_module
from ._common import compare, streamed_bytes, threads

K = kernel_module("bs")

STOCKS = 10
R, V, T, STRIKE = 0.08, 0.3, 1.0, 60.0


def _cnd(d: np.ndarray) -> np.ndarray:
    k = 1.0 / (1.0 + 0.2316419 * np.abs(d))
    poly = k * (K.A1 + k * (K.A2 + k * (K.A3 + k * (K.A4 + k * K.A5))))
    c = K.RSQRT2PI * np.exp(-0.5 * d * d) * poly
    return np.where(d > 0, 1.0 - c, c)


def black_scholes(s: np.ndarray) -> np.ndarray:
    """Call prices for spots ``s`` (float64), the formula the kernel computes."""
    d1 = (np.log(s / STRIKE) + (R + 0.5 * V * V) * T) / (V * np.sqrt(T))
    d2 = d1 - V * np.sqrt(T)
    return s * _cnd(d1) - STRIKE * np.exp(-R * T) * _cnd(d2)


class BlackScholes:
    name = "bs"
    two_d = False
    SIZES = {"tiny": 256, "small": 32_768, "medium": 6_000_000, "large": 30_000_000}
    expected_dag = {"nodes": STOCKS, "edges": 0, "streams": STOCKS}
    #: Check tolerance relative to the largest price (double precision on both sides).
    rtol = 1e-10

    def __init__(self, ag: Any, scale: str, seed: int = 0) -> None:
        self.n = n = self.SIZES[scale]
        rng = np.random.default_rng(seed)
        self._x0 = [60.0 + rng.uniform(-0.5, 0.5, n) for _ in range(STOCKS)]
        self.x = [ag.empty(n, np.float64) for _ in range(STOCKS)]
        self.y = [ag.empty(n, np.float64) for _ in range(STOCKS)]
        self.k_bs = ag.kernel(K.bs, **K.ANNOTATIONS["bs"])

    def streamed_bytes(self) -> int:
        """Bytes a streaming iteration must move to the device: the ten price vectors."""
        return streamed_bytes(*self.x)

    def reset(self) -> None:
        for x, x0 in zip(self.x, self._x0):
            x[...] = x0

    def read(self) -> np.ndarray:
        return np.array([[float(y[0]), float(y[self.n - 1])] for y in self.y])

    def run(self, block: Any, num_blocks: int) -> np.ndarray:
        self.run_device(block, num_blocks)
        return self.read()

    def run_device(self, block: Any, num_blocks: int) -> None:
        """The launches of ``run`` (no host access: what ``recorded_static`` replays)."""
        b, n = threads(block), self.n
        for x, y in zip(self.x, self.y):
            self.k_bs[num_blocks, b](x, y, n, R, V, T, STRIKE)

    def run_handopt(self, h: Any, block: Any, num_blocks: int) -> np.ndarray:
        b, n = threads(block), self.n
        for i, (x, y) in enumerate(zip(self.x, self.y)):
            s = h.stream(i)
            h.prefetch(x, s)
            h.launch(self.k_bs, num_blocks, b, s, x, y, n, R, V, T, STRIKE)
        h.sync()
        return self.read()

    def reference(self) -> np.ndarray:
        return np.array([black_scholes(x0[[0, -1]]) for x0 in self._x0])

    def check(self, result: Any) -> tuple[bool, str]:
        return compare(result, self.reference(), self.rtol)
