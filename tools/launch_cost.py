"""Host microseconds per launch on a runtime over 1, 2 and 4 GPUs (as many as the host has).

One small CUDA C kernel launched on 8 arrays in turn, the arrays made inside
``asyncgpu.device(c % n)`` (so launch ``i`` runs on GPU ``i % n``); after 2,000 untimed
launches, the host time of ``--launches`` more, before and after the device finishes them.

usage: ``PYTHONPATH=. python3 tools/launch_cost.py [--launches 20000]``
"""

from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np

import asyncgpu as ag
from benchmarks import replay


def per_launch_us(n: int, count: int) -> tuple[float, float]:
    """(host us per launch, us per launch until the device finished) on ``n`` GPUs."""
    with ag.configure(backend="cuda", devices=n):
        inc = ag.cuda_kernel(replay.INC, "inc")
        xs = []
        for c in range(8):
            with ag.device(c % n) if n > 1 else contextlib.nullcontext():
                xs.append(ag.zeros(1 << 10, np.float32))
        for i in range(2000):
            inc[1, 32](xs[i % 8], 32)
        ag.synchronize()
        t0 = time.perf_counter()
        for i in range(count):
            inc[1, 32](xs[i % 8], 32)
        host = time.perf_counter() - t0
        ag.synchronize()
        total = time.perf_counter() - t0
        return host / count * 1e6, total / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=20000)
    args = parser.parse_args()
    import cupy

    gpus = cupy.cuda.runtime.getDeviceCount()
    for n in (c for c in (1, 2, 4) if c <= gpus):
        host, total = per_launch_us(n, args.launches)
        print(f"{n} GPU(s): host {host:.2f} us per launch, {total:.2f} with the device")


if __name__ == "__main__":
    main()
