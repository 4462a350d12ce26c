"""Helpers shared by the workloads: launch shapes and result comparison."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

#: The 2D block every 2D kernel uses (the harness passes it to two_d workloads).
BLOCK_2D = (8, 8)


def streamed_bytes(*arrays: Any) -> int:
    """Total size of the arrays the host rewrites each iteration and the kernels then read."""
    return sum(int(a.nbytes) for a in arrays)


def threads(block: Any) -> int:
    """Threads per block for the 1D kernels: the block itself, or all threads of a 2D block.

    (``math.prod``, not NumPy's: every iteration of a body calls this, in every mode that runs
    the body, and ``np.prod`` of a 2-tuple cost 8.7 us on the development CPU against 0.3.)
    """
    return int(math.prod(block)) if isinstance(block, tuple) else int(block)


def block2d(block: Any) -> tuple[int, int]:
    """The 2D block: the one given, or 8 x 8 when a workload receives a 1D block size."""
    return tuple(block) if isinstance(block, tuple) else BLOCK_2D


@functools.lru_cache(maxsize=64)     # (called every iteration with the same count)
def grid2d(num_blocks: int) -> tuple[int, int]:
    """``num_blocks`` blocks as a 2D grid (x, y), as square as the divisors allow.

    Kernels use 2D grid-stride loops, so any grid is correct; keeping the total equal to the 1D
    block count keeps it a multiple of the SM count.
    """
    gy = max(d for d in range(1, math.isqrt(num_blocks) + 1) if num_blocks % d == 0)
    return num_blocks // gy, gy


def compare(result: Any, ref: Any, rtol: float, scale: float | None = None) -> tuple[bool, str]:
    """|result - ref| <= rtol * scale elementwise (scale: max |ref| unless given).

    The message gives the max error.
    """
    got = np.asarray(result, np.float64)
    want = np.asarray(ref, np.float64)
    if got.shape != want.shape:
        return False, f"shape {got.shape} != reference {want.shape}"
    if scale is None:
        scale = float(np.max(np.abs(want))) if want.size else 1.0
    scale = scale or 1.0
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    ok = bool(np.all(np.isfinite(got))) and err <= rtol * scale
    return ok, (f"max abs error {err:.3g} (relative {err / scale:.3g}, "
                f"tolerance {rtol:g} x {scale:.3g})")


def compare_dict(result: dict[str, Any], ref: dict[str, Any], rtol: float) -> tuple[bool, str]:
    """``compare`` per key; fails on the first key that does not match."""
    if not isinstance(result, dict) or result.keys() != ref.keys():
        return False, f"result keys {sorted(result) if isinstance(result, dict) else type(result)}"
    msgs = []
    for k in ref:
        ok, msg = compare(result[k], ref[k], rtol)
        msgs.append(f"{k}: {msg}")
        if not ok:
            return False, "; ".join(msgs)
    return True, "; ".join(msgs)


class SumOfTerms:
    """A workload of two inputs, ``x`` and ``y`` (rewritten from ``_x0`` and ``_y0`` by
    ``reset``), whose launches (``run_device``) add up ``self._terms()`` into the one-element
    accumulator ``res``: its host side and its check (against a float64 reference).

    The tolerance is ``rtol`` times the sum of the absolute terms: float32 products and float
    atomics make the error grow with the terms, not with their (possibly cancelling) sum.
    """

    rtol: float
    x: Any
    y: Any
    res: Any
    _x0: np.ndarray
    _y0: np.ndarray

    def run_device(self, block: Any, num_blocks: int) -> None:
        raise NotImplementedError

    def streamed_bytes(self) -> int:
        """Bytes a streaming iteration must move to the device: the inputs (rewritten every
        iteration) and the accumulator."""
        return streamed_bytes(self.x, self.y, self.res)

    def reset(self) -> None:
        self.x[...] = self._x0
        self.y[...] = self._y0
        self.reset_accumulators()

    def reset_accumulators(self) -> None:
        self.res[...] = 0

    def read(self) -> float:
        return float(self.res[0])

    def run(self, block: Any, num_blocks: int) -> float:
        self.run_device(block, num_blocks)
        return self.read()

    def _terms(self) -> np.ndarray:
        raise NotImplementedError

    @functools.cached_property
    def _expected(self) -> tuple[float, float]:
        t = self._terms()
        return float(np.sum(t)), float(np.sum(np.abs(t)))

    def reference(self) -> float:
        return self._expected[0]

    def check(self, result: Any) -> tuple[bool, str]:
        ref, scale = self._expected
        return compare(result, ref, self.rtol, scale)
