"""Time the parts of one eager launch on the GPU, for a CUDA C and a Numba kernel of 3 arrays.

The overhead benchmark gives a launch's whole host cost; this splits it into what the runtime
calls in turn, each timed alone in a loop of its own (so each part runs warm, and the sum is a
little less than a whole launch): ``bind`` (validation), ``prepare`` (the backend's launch
object: the packed values), ``launch`` (packing the parameters and ``cuLaunchKernel``) and the
whole launch through the launcher. Host microseconds, medians of 7.

usage: PYTHONPATH=. python3 tools/launch_parts.py
"""

from __future__ import annotations

import json

import numpy as np

import asyncgpu as ag
from asyncgpu._runtime import current_runtime
from benchmarks.overhead import _c_source, _numba_kernel, _per_launch


def _median_us(fn, n: int = 20000) -> float:
    fn(500)
    return _per_launch(fn, n, lambda: None, 7)["median_us"]


def parts(k) -> dict[str, float]:
    rt = current_runtime()
    arrays = [ag.ones(32, np.float32) for _ in range(3)]
    launcher = k[1, 32]
    launcher(*arrays)
    ag.synchronize()
    args = tuple(arrays)
    bound = k.bind(rt, args, None)
    be = rt.backend
    launch = be.kernel_launch(k, launcher, bound[0], bound[1], None)
    stream = rt.streams.streams[0].handle
    # (plain loops that drop each result: a list of them would time the allocator instead)
    def bind(n: int) -> None:
        for _ in range(n):
            k.bind(rt, args, None)

    def prepare(n: int) -> None:
        for _ in range(n):
            be.kernel_launch(k, launcher, bound[0], bound[1], None)

    def enqueue(n: int) -> None:
        for _ in range(n):
            launch(stream)

    def whole(n: int) -> None:
        for _ in range(n):
            launcher(*args)

    out = {"bind": _median_us(bind), "prepare": _median_us(prepare),
           "launch": _median_us(enqueue), "whole": _median_us(whole)}
    ag.synchronize()
    return out


def main() -> None:
    ag.configure(backend="cuda")
    cuda_c = ag.cuda_kernel(_c_source(3), "k3")
    numba = ag.kernel(_numba_kernel(3), const=["a0", "a1"])
    print(json.dumps({"cuda_c": parts(cuda_c), "numba": parts(numba)}, indent=1))


if __name__ == "__main__":
    main()
