"""Profile the launch path on the current backend: where do a launch's microseconds go?

usage: PYTHONPATH=. python3 tools/profile_launch.py [cuda|numba] [launches]
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

import numpy as np

import asyncgpu as ag

kind = sys.argv[1] if len(sys.argv) > 1 else "cuda"
count = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
src = ('extern "C" __global__ void k3(const float* a0, const float* a1, float* out) '
       "{ out[threadIdx.x] = a0[threadIdx.x] + a1[threadIdx.x]; }")
if kind == "numba":
    from numba import cuda

    @ag.kernel(const=["a0", "a1"])
    @cuda.jit
    def k(a0, a1, out):
        out[cuda.threadIdx.x] = a0[cuda.threadIdx.x] + a1[cuda.threadIdx.x]
else:
    k = ag.cuda_kernel(src, "k3", sim=lambda a0, a1, out: None)
a = [ag.ones(32, np.float32) for _ in range(2)]
outs = [ag.zeros(32, np.float32) for _ in range(64)]


def run(n: int) -> None:
    for i in range(n):
        k[1, 32](*a, outs[i % 64])


run(200)
ag.synchronize()
t0 = time.perf_counter()
run(count)
print(f"{kind}: {(time.perf_counter() - t0) / count * 1e6:.2f} us per launch")
ag.synchronize()
cProfile.run("run(count)", "/tmp/launch.prof")
pstats.Stats("/tmp/launch.prof").sort_stats("tottime").print_stats(25)
