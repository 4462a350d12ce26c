"""Device time of CUDA launches alone: the spin kernel ``tools/kernel_times.py`` puts before each
launch, and a helper that times a set of launches on the device only.

A one-thread kernel spins about 4.5 ms first, so the host has enqueued every launch of a set
before the GPU reaches them, and the two CUDA events around the set time the device's work
only. Microseconds per launch: median of ``sets`` sets of ``reps`` launches on one stream.
"""

from __future__ import annotations

import statistics
from typing import Any, Callable

SPIN = r'''extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64(); while (clock64() - t0 < cycles) {} }'''


class AloneTimer:
    """``timer(launch)``: microseconds per call of ``launch`` (which enqueues on
    ``timer.stream``, or ``timer.numba_stream`` for a Numba kernel), timed alone."""

    def __init__(self, spin_cycles: int = 8_000_000) -> None:
        import cupy
        from numba import cuda

        self.cupy = cupy
        self.spin = cupy.RawKernel(SPIN, "spin")
        self.spin_cycles = spin_cycles
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.numba_stream = cuda.external_stream(self.stream.ptr)

    def __call__(self, launch: Callable[[], Any], reps: int = 10, sets: int = 7) -> float:
        cupy, s = self.cupy, self.stream
        launch()            # compiled and warm before the first set
        s.synchronize()
        out = []
        for _ in range(sets):
            a, b = cupy.cuda.Event(), cupy.cuda.Event()
            self.spin((1,), (1,), (cupy.int64(self.spin_cycles),), stream=s)
            a.record(s)
            for _ in range(reps):
                launch()
            b.record(s)
            b.synchronize()
            out.append(cupy.cuda.get_elapsed_time(a, b) * 1e3 / reps)
        return statistics.median(out)
