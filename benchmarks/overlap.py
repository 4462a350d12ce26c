"""Micro-benchmark: two independent kernels of about 5 ms each, issued back to back.

In ``async`` mode they run on two streams at once (ratio to one kernel near 1); in ``sync`` mode
one after the other (ratio near 2). Each kernel is one block that spins on ``clock64``, so two of
them never compete for the GPU's resources: the ratio measures scheduling alone.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

SPIN = r'''
extern "C" __global__ void spin(float* out, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
    if (threadIdx.x == 0) out[0] += 1.0f;
}
'''


def _spin_twin(out: np.ndarray, cycles: Any) -> None:
    time.sleep(min(int(cycles), 5_000_000) / 1e9)
    out[0] += 1.0


def spin_kernel(ag: Any) -> Any:
    """The spin kernel (``spin[1, 32](out, cycles)``), with a sleeping twin for the simulator."""
    return ag.cuda_kernel(SPIN, "spin", sim=_spin_twin)


def timed(ag: Any, spin: Any, outs: list[Any], cycles: int) -> float:
    """Wall time of one spin kernel per output, issued back to back, until the host reads all."""
    ag.synchronize()
    t0 = time.perf_counter()
    for o in outs:
        spin[1, 32](o, cycles)
    for o in outs:
        o[0]
    return time.perf_counter() - t0


def calibrate(ag: Any, spin: Any, out: Any, target_s: float) -> int:
    """Spin cycles for one kernel of about ``target_s`` seconds (four refinements)."""
    cycles = 1_000_000
    for _ in range(4):
        cycles = max(1, int(cycles * target_s / timed(ag, spin, [out], cycles)))
    return cycles


def measure(ag: Any, target_s: float = 5e-3, repeats: int = 21) -> dict[str, float]:
    """Median wall times of one kernel and of two independent ones, per execution mode."""
    spin = spin_kernel(ag)
    out: dict[str, float] = {}
    for execution in ("async", "sync"):
        with ag.configure(execution=execution):
            a, b = ag.zeros(1, np.float32), ag.zeros(1, np.float32)
            cycles = calibrate(ag, spin, a, target_s)
            one = statistics.median(timed(ag, spin, [a], cycles) for _ in range(repeats))
            two = statistics.median(timed(ag, spin, [a, b], cycles) for _ in range(repeats))
            out[f"{execution}_one_ms"] = one * 1e3
            out[f"{execution}_two_ms"] = two * 1e3
            out[f"{execution}_ratio"] = two / one
    return out
