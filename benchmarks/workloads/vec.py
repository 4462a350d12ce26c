"""VEC: vector squares, sum(x^2 - y^2).

DAG of one run (3 kernels, 2 edges, 2 streams)::

    square(x -> x1)  [s0]     square(y -> y1)  [s1]
              \\                   /
               reduce(x1, y1 -> res)  [s0, waits for s1]   -> host reads res[0]

The gain comes from overlapping the transfer of y (rewritten by the host every iteration) with
the squaring of x. Same DAG as the GrCUDA paper's Figure 6: the paper-era ``square`` left x
unannotated, but nothing else uses x in a run, so it changed nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import kernel_module
from ._common import SumOfTerms, threads

K = kernel_module("vec")


class Vec(SumOfTerms):
    name = "vec"
    two_d = False
    SIZES = {"tiny": 2048, "small": 1 << 18, "medium": 1 << 26, "large": 400_000_000}
    expected_dag = {"nodes": 3, "edges": 2, "streams": 2}
    #: Float atomics add the block partials in any order: runs agree within this (relative).
    atomic_tolerance = 1e-4
    #: Check tolerance, relative to sum |x^2 - y^2| (float32 squares and float32 atomics).
    rtol = 1e-4

    def __init__(self, ag: Any, scale: str, seed: int = 0) -> None:
        self.n = n = self.SIZES[scale]
        rng = np.random.default_rng(seed)
        self._x0 = rng.random(n, dtype=np.float32)
        self._y0 = 2 * rng.random(n, dtype=np.float32)
        self.x = ag.empty(n, np.float32)
        self.y = ag.empty(n, np.float32)
        self.x1 = ag.empty(n, np.float32)
        self.y1 = ag.empty(n, np.float32)
        self.res = ag.zeros(1, np.float32)
        self.k_square = ag.kernel(K.square, **K.ANNOTATIONS["square"])
        self.k_reduce = ag.kernel(K.reduce, **K.ANNOTATIONS["reduce"])

    def run_device(self, block: Any, num_blocks: int) -> None:
        """The launches of ``run`` (no host access: what ``recorded_static`` replays)."""
        b, n = threads(block), self.n
        self.k_square[num_blocks, b](self.x, self.x1, n)
        self.k_square[num_blocks, b](self.y, self.y1, n)
        self.k_reduce[num_blocks, b](self.x1, self.y1, self.res, n)

    def run_handopt(self, h: Any, block: Any, num_blocks: int) -> float:
        b, n = threads(block), self.n
        s0, s1 = h.stream(0), h.stream(1)
        h.prefetch(self.x, s0)
        h.prefetch(self.res, s0)
        h.prefetch(self.y, s1)
        h.launch(self.k_square, num_blocks, b, s0, self.x, self.x1, n)
        h.launch(self.k_square, num_blocks, b, s1, self.y, self.y1, n)
        e = h.event()
        h.record(e, s1)
        h.wait(s0, e)
        h.launch(self.k_reduce, num_blocks, b, s0, self.x1, self.y1, self.res, n)
        h.sync_stream(s0)
        return float(self.res[0])

    def _terms(self) -> np.ndarray:
        x, y = self._x0.astype(np.float64), self._y0.astype(np.float64)
        return x * x - y * y
