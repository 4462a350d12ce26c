"""Does a long run of launches without a host access stay flat? Host us per launch of each
window of 5,000 launches over 150,000 (the overhead benchmark's independent 3-array CUDA C
loop), with the live state's size beside it, single_node_graphs on and then off; and the GPU's
own rate (wall time of a final window including the synchronize).

usage: PYTHONPATH=. python3 tools/flat_probe.py
"""

from __future__ import annotations

import time

import numpy as np

import asyncgpu as ag
from asyncgpu._runtime import current_runtime
from benchmarks import overhead


def run(lanes: bool) -> None:
    with ag.configure(backend="cuda", single_node_graphs=lanes):
        rt = current_runtime()
        k = ag.cuda_kernel(overhead._c_source(3), "k3")
        loop = overhead._ag_cases(ag, k, 3)["independent"]
        loop(1000)
        ag.synchronize()
        windows = []
        for w in range(30):
            t0 = time.perf_counter()
            loop(5000)
            t1 = time.perf_counter()
            windows.append(((t1 - t0) / 5000 * 1e6, rt.streams._inflight,
                            len(rt.streams._events), len(rt.deps._live)))
        t0 = time.perf_counter()
        ag.synchronize()
        drain = time.perf_counter() - t0
        t0 = time.perf_counter()
        loop(5000)
        ag.synchronize()
        wall = (time.perf_counter() - t0) / 5000 * 1e6
        print(f"lanes={lanes}: host us per launch by window of 5000:")
        print("  ", " ".join(f"{w[0]:.1f}" for w in windows))
        print("   inflight", [w[1] for w in windows[::6]], "event pool", [w[2] for w in windows[::6]],
              "live allocations", [w[3] for w in windows[::6]])
        print(f"   synchronize after the run {drain * 1e3:.2f} ms; one window with its "
              f"synchronize {wall:.2f} us per launch")


if __name__ == "__main__":
    run(True)
    run(False)
    run(True)
