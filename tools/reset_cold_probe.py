"""What a benchmark iteration's device part costs the host right after the untimed reset.

Every timed iteration of the suite starts right after the host rewrote the workload's inputs
(``reset``) and synchronized: the host's caches then hold the inputs, not asyncgpu's or the
driver's state. This times the device part of one iteration (``run_device`` eagerly, or the
``recorded_static`` graph call), host time only, in four states: warm (no reset), after the
reset, after a 4 MiB NumPy copy that changes nothing else (cold caches alone), and after the
reset with the host idle 1 ms before the call. Medians of 50 calls.

usage: PYTHONPATH=. python3 tools/reset_cold_probe.py [workload ...]   (a CUDA GPU)
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import asyncgpu as ag
from asyncgpu._runtime import current_runtime
from benchmarks import harness
from benchmarks.workloads import WORKLOADS

STATES = ("no reset", "reset", "evict 4 MiB", "reset, 1 ms idle")


def main() -> None:
    nb = 4 * current_runtime().backend.sm_count
    src = np.ones(1 << 20, np.float32)
    dst = np.empty_like(src)
    for name in sys.argv[1:] or ["vec", "bs", "dl"]:
        wl = WORKLOADS[name](ag, "small")
        block = (8, 8) if wl.two_d else 256
        for mode in ("recorded_static", "parallel"):
            run = harness.ModeRun(ag, wl, mode, block, nb, "streaming", None)
            device = (run.recorded.device if mode == "recorded_static"
                      else lambda b, n: wl.run_device(b, n))
            for state in STATES:
                samples = []
                for it in range(60):
                    if state.startswith("reset"):
                        wl.reset()
                    elif state.startswith("evict"):
                        dst[...] = src
                    ag.synchronize()
                    if state.endswith("idle"):
                        end = time.perf_counter() + 1e-3
                        while time.perf_counter() < end:
                            pass
                    t0 = time.perf_counter()
                    device(block, nb)
                    if it >= 10:
                        samples.append((time.perf_counter() - t0) * 1e6)
                    ag.synchronize()
                print(f"{name:4s} {mode:16s} {state:18s} host us {statistics.median(samples):7.1f}",
                      flush=True)
            run.close()


if __name__ == "__main__":
    main()
