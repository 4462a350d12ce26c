"""Where the host's time goes in the multi-GPU benchmark's streaming B&S step.

``benchmarks.multigpu``'s streaming B&S step launches the kernel on each of 8 chunks whose
inputs the host has just rewritten (so each launch copies its 128 MiB input in first), then
reads two prices of every chunk, each read waiting for its chunk's kernel alone. This times,
per step, each launch's host time and each chunk's two reads, medians over the steps after
two warm-up steps, beside the step's transfer bound (its copies alone, to every GPU at once)
measured in the same process: what separates the step from the bound is the time before each
GPU's first copy starts (the launches before it), the last kernel on each GPU, and the reads
of the last chunks.

usage: PYTHONPATH=. python3 tools/multigpu_phases.py [devices] [steps]
       (default 2 10; without a GPU it runs on the simulator at tiny scale, whose times say
       nothing)
"""

from __future__ import annotations

import sys
import time

import numpy as np

import asyncgpu as ag
from asyncgpu.backends import cuda_usable
from benchmarks import multigpu
from benchmarks.multigpu import STRIKE, R, T, V


def main() -> None:
    devices = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    gpu = cuda_usable()
    scale = "medium" if gpu else "tiny"
    multigpu.BLOCKS, multigpu.THREADS = multigpu.GRID[scale]
    work = multigpu._Chunks("bs", scale)
    options = {"devices": devices} if gpu else {"backend": "sim", "devices": devices,
                                                "sim_devices": devices}
    with ag.configure(**options):
        run = multigpu.AsyncgpuRun(ag, "bs", work.data, devices, 1)
        rows = []
        for step in range(steps + 2):
            run.rewrite()
            marks = [time.perf_counter()]
            for x, y in zip(run.x, run.y):
                run.k[multigpu.BLOCKS, multigpu.THREADS](x, y, x.shape[0], R, V, T, STRIKE)
                marks.append(time.perf_counter())
            got = []
            for y in run.y:
                got.append(np.array([float(y[0]), float(y[y.shape[0] - 1])]))
                marks.append(time.perf_counter())
            work.check(got)
            if step >= 2:
                rows.append(np.diff(marks) * 1e3)
        ms = np.median(np.array(rows), axis=0)
    launches = len(run.x)
    print(f"streaming B&S on {devices} device(s), {steps} steps, medians in ms")
    print("  each launch: " + " ".join(f"{v:.3f}" for v in ms[:launches]))
    print("  each chunk's reads: " + " ".join(f"{v:.3f}" for v in ms[launches:]))
    print(f"  the step: {np.median(np.array(rows).sum(axis=1)):.3f}")
    if gpu:
        base = multigpu.CupyRun("bs", work.data, devices, 1)
        print(f"  transfer bound: {multigpu.transfer_bound_ms(base):.3f}")


if __name__ == "__main__":
    main()
