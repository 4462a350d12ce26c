"""HITS: hubs and authorities by five rounds of two SpMVs with L1 normalization.

The graph has N vertices with 3 distinct random out-edges each: A in CSR (``ptr``, ``idx``,
``val``) and its true transpose A^T in CSR, i.e. A in CSC (``ptr_t``, ...). The original used the
same matrix twice. One iteration (6 kernels, 6 edges; 5 iterations per run: 30 kernels, 30 edges,
2 streams)::

    host: auth_norm = hub_norm = row_cnt_a = row_cnt_h = 0      (waits for the last iteration)
    spmv(A^T, hub1 -> auth2) [s0]           spmv(A, auth1 -> hub2) [s1]
         |            \\_________   _________/            |
    sum(auth2) [s0]             \\ /                 sum(hub2) [s1]
         |                       X                       |
    divide(auth2 -> auth1) [s0]  / \\   divide(hub2 -> hub1) [s1]

Edges: spmv_a->sum_a, spmv_h->sum_h, sum_a->div_a, spmv_h->div_a (write after read of auth1),
sum_h->div_h, spmv_a->div_h (hub1): the cross-synchronizations. The host's resets of the norms and
row counters at the start of each iteration wait for the previous iteration, so no edge crosses
iterations. Same DAG as the paper's Figure 6.

``streams`` counts a fresh runtime: two streams at a time, and since every iteration starts with
all streams free, the ``reuse`` policy (longest-free first) may rotate through older streams of the
pool, so a runtime that already holds more streams shows up to 10 distinct ones in a run.

The host reads the first 4096 entries of auth1 and hub1 at the end (all of them at the tiny
scale; the original read nothing it checked). Host writes to the size-1 scalars use ``[...]``
(``a[0] = 0`` is equivalent: both wait for the kernels using the element).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import kernel_module
from ._common import compare_dict, streamed_bytes, threads

K = kernel_module("hits")

DEGREE, ITERATIONS, READ = 3, 5, 4096


def random_graph(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """CSR (ptr, idx) of a graph where every vertex has DEGREE distinct random out-edges."""
    idx = rng.integers(0, n, (n, DEGREE))
    while True:
        s = np.sort(idx, axis=1)
        dup = np.any(s[:, 1:] == s[:, :-1], axis=1)
        if not dup.any():
            break
        idx[dup] = rng.integers(0, n, (int(dup.sum()), DEGREE))
    ptr = np.arange(0, DEGREE * n + 1, DEGREE, dtype=np.int64)
    return ptr, idx.ravel()


def transpose(ptr: np.ndarray, idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the transpose: for each column, the rows that have an entry in it."""
    rows = np.repeat(np.arange(n), np.diff(ptr))
    order = np.argsort(idx, kind="stable")
    ptr_t = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(idx, minlength=n), out=ptr_t[1:])
    return ptr_t, rows[order]


class Hits:
    name = "hits"
    two_d = False
    SIZES = {"tiny": 128, "small": 65_536, "medium": 14_000_000, "large": 60_000_000}
    expected_dag = {"nodes": 6 * ITERATIONS, "edges": 6 * ITERATIONS, "streams": 2}
    #: The norms are float atomics: runs agree within this.
    atomic_tolerance = 1e-5
    #: Check tolerance relative to the largest score (float32 SpMV and sums, 5 rounds).
    rtol = 1e-4

    def __init__(self, ag: Any, scale: str, seed: int = 0) -> None:
        self.n = n = self.SIZES[scale]
        rng = np.random.default_rng(seed)
        ptr, idx = random_graph(n, rng)
        ptr_t, idx_t = transpose(ptr, idx, n)
        self._graph = (ptr, idx, ptr_t, idx_t)
        val = np.ones(DEGREE * n, np.float32)
        self.ptr, self.idx, self.val = ag.array(ptr.astype(np.int32)), ag.array(
            idx.astype(np.int32)), ag.array(val)
        self.ptr_t, self.idx_t, self.val_t = ag.array(ptr_t.astype(np.int32)), ag.array(
            idx_t.astype(np.int32)), ag.array(val)
        self.auth1, self.hub1 = ag.empty(n, np.float32), ag.empty(n, np.float32)
        self.auth2, self.hub2 = ag.empty(n, np.float32), ag.empty(n, np.float32)
        self.auth_norm, self.hub_norm = ag.zeros(1, np.float32), ag.zeros(1, np.float32)
        self.cnt_a, self.cnt_h = ag.zeros(1, np.int32), ag.zeros(1, np.int32)
        self.k_spmv = ag.kernel(K.spmv, **K.ANNOTATIONS["spmv"])
        self.k_sum = ag.kernel(K.vsum, **K.ANNOTATIONS["vsum"])
        self.k_divide = ag.kernel(K.divide, **K.ANNOTATIONS["divide"])
        self.read_count = min(n, READ)

    def streamed_bytes(self) -> int:
        """Bytes a streaming iteration must move to the device: the score vectors the reset
        sets to 1, and the four scalars that each of the ``ITERATIONS`` zeroes from the host."""
        scalars = streamed_bytes(self.auth_norm, self.hub_norm, self.cnt_a, self.cnt_h)
        return streamed_bytes(self.auth1, self.hub1) + ITERATIONS * scalars

    def reset(self) -> None:
        self.reset_accumulators()

    def reset_accumulators(self) -> None:
        """The score vectors start at 1 (the kernels overwrite them every run)."""
        self.auth1[...] = 1.0
        self.hub1[...] = 1.0

    def _zero_scalars(self) -> None:
        # [...], not [0]: see the module docstring
        self.auth_norm[...] = 0
        self.hub_norm[...] = 0
        self.cnt_a[...] = 0
        self.cnt_h[...] = 0

    def read(self) -> dict[str, np.ndarray]:
        k = self.read_count
        return {"auth": np.asarray(self.auth1[:k]), "hub": np.asarray(self.hub1[:k])}

    def run(self, block: Any, num_blocks: int) -> dict[str, np.ndarray]:
        g, b, n = num_blocks, threads(block), self.n
        for _ in range(ITERATIONS):
            self._zero_scalars()
            self.iteration(g, b, n)
        return self.read()

    def iteration(self, g: int, b: int, n: int) -> None:
        """One iteration's launches (the host zeroes the scalars before it)."""
        self.k_spmv[g, b](self.cnt_a, self.ptr_t, self.idx_t, self.val_t, self.hub1,
                          self.auth2, n)
        self.k_spmv[g, b](self.cnt_h, self.ptr, self.idx, self.val, self.auth1, self.hub2, n)
        self.k_sum[g, b](self.auth2, self.auth_norm, n)
        self.k_sum[g, b](self.hub2, self.hub_norm, n)
        self.k_divide[g, b](self.auth2, self.auth1, self.auth_norm, n)
        self.k_divide[g, b](self.hub2, self.hub1, self.hub_norm, n)

    def static_runner(self, ag: Any) -> Any:
        """``recorded_static``: the host zeroes the scalars, then one static graph function
        replays an iteration's launches (host writes cannot be inside a static graph)."""
        step = ag.graph(self.iteration, static=True)

        def run(block: Any, num_blocks: int) -> dict[str, np.ndarray]:
            g, b, n = num_blocks, threads(block), self.n
            for _ in range(ITERATIONS):
                self._zero_scalars()
                step(g, b, n)
            return self.read()

        run.clear = step.clear      # type: ignore[attr-defined]
        return run

    def run_handopt(self, h: Any, block: Any, num_blocks: int) -> dict[str, np.ndarray]:
        """Authorities on s0, hubs on s1; each divide waits for the other stream's SpMV."""
        g, b, n = num_blocks, threads(block), self.n
        s0, s1 = h.stream(0), h.stream(1)
        for it in range(ITERATIONS):
            self._zero_scalars()          # the previous iteration ended with a device sync
            if it == 0:
                h.prefetch(self.hub1, s0)
                h.prefetch(self.auth1, s1)
            h.prefetch(self.cnt_a, s0)
            h.prefetch(self.auth_norm, s0)
            h.prefetch(self.cnt_h, s1)
            h.prefetch(self.hub_norm, s1)
            h.launch(self.k_spmv, g, b, s0, self.cnt_a, self.ptr_t, self.idx_t, self.val_t,
                     self.hub1, self.auth2, n)
            e_a = h.event()
            h.record(e_a, s0)
            h.launch(self.k_spmv, g, b, s1, self.cnt_h, self.ptr, self.idx, self.val,
                     self.auth1, self.hub2, n)
            e_h = h.event()
            h.record(e_h, s1)
            h.launch(self.k_sum, g, b, s0, self.auth2, self.auth_norm, n)
            h.launch(self.k_sum, g, b, s1, self.hub2, self.hub_norm, n)
            h.wait(s0, e_h)
            h.launch(self.k_divide, g, b, s0, self.auth2, self.auth1, self.auth_norm, n)
            h.wait(s1, e_a)
            h.launch(self.k_divide, g, b, s1, self.hub2, self.hub1, self.hub_norm, n)
            h.sync_stream(s0)
            h.sync_stream(s1)
        return self.read()

    def reference(self) -> dict[str, np.ndarray]:
        return self._expected

    @functools.cached_property
    def _expected(self) -> dict[str, np.ndarray]:
        """Computed once: the inputs never change after __init__."""
        ptr, idx, _, _ = self._graph
        n = self.n
        rows = np.repeat(np.arange(n), np.diff(ptr))
        auth, hub = np.ones(n), np.ones(n)
        for _ in range(ITERATIONS):
            auth2 = np.bincount(idx, weights=hub[rows], minlength=n)     # A^T hub
            hub2 = np.bincount(rows, weights=auth[idx], minlength=n)     # A auth
            auth, hub = auth2 / auth2.sum(), hub2 / hub2.sum()
        return {"auth": auth[:self.read_count], "hub": hub[:self.read_count]}

    def check(self, result: Any) -> tuple[bool, str]:
        return compare_dict(result, self._expected, self.rtol)
