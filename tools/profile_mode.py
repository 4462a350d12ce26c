"""Profile one mode of one workload on the current backend: where an iteration's time goes.

usage: PYTHONPATH=. python3 tools/profile_mode.py WORKLOAD MODE [iterations] [scale] [rows]
       (e.g. ``vec cudagraph 200 small``; prints the functions with the most own time in the
       timed part of the iterations)
"""

from __future__ import annotations

import cProfile
import pstats
import sys

import asyncgpu as ag
from asyncgpu.runtime.current import current_runtime
from benchmarks import harness
from benchmarks.cudagraph import GraphHand
from benchmarks.handopt import Hand
from benchmarks.workloads import WORKLOADS

name, mode = sys.argv[1], sys.argv[2]
count = int(sys.argv[3]) if len(sys.argv) > 3 else 200
scale = sys.argv[4] if len(sys.argv) > 4 else "small"
wl = WORKLOADS[name](ag, scale)
on_gpu = current_runtime().backend.name == "cuda"
blocks = 4 * current_runtime().backend.sm_count if on_gpu else 2
block = (8, 8) if wl.two_d else 256
rt = current_runtime()
hand = GraphHand(rt) if mode == "cudagraph" else Hand(rt) if mode == "handopt" else None
run = harness.ModeRun(ag, wl, mode, block, blocks, "streaming", hand)
run.iterations(20)
profile = cProfile.Profile()
once = run._once


def profiled_once() -> object:
    # only the timed part of an iteration (the untimed reset of the inputs is left out)
    profile.enable()
    try:
        return once()
    finally:
        profile.disable()


run._once = profiled_once
times = run.iterations(count)
run.close()
times.sort()
print(f"{name} {mode}: median {times[len(times) // 2] * 1e6:.1f} us per iteration (profiled)")
pstats.Stats(profile).sort_stats("tottime").print_stats(int(sys.argv[5]) if len(sys.argv) > 5 else 18)
