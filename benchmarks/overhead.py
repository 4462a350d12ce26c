"""Micro-benchmark: host time per launch through asyncgpu versus raw CuPy and plain Numba.

Tiny kernels (one block of 32 threads) with 1, 3 and 8 array arguments, launched back to back
without host access: ``independent`` (each launch writes its own array, so no edges) and
``dependent`` (each launch reads the previous one's output from another stream's work: one
cross-stream edge per launch). The raw baselines launch the same kernels on one CuPy stream.
Reported: median microseconds per launch over repeated runs, and the per-launch cost measured
after 10, 1,000 and 100,000 launches (it must stay flat).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np


def _c_source(nargs: int) -> str:
    params = ", ".join([f"const float* a{i}" for i in range(nargs - 1)] + ["float* out"])
    reads = " + ".join([f"a{i}[t]" for i in range(nargs - 1)] or ["1.0f"])
    return (f'extern "C" __global__ void k{nargs}({params}) {{\n'
            f"    int t = threadIdx.x; out[t] = {reads};\n}}\n")


def _numba_kernel(nargs: int) -> Any:
    from numba import cuda

    names = [f"a{i}" for i in range(nargs - 1)] + ["out"]
    body = " + ".join([f"{n}[t]" for n in names[:-1]] or ["1.0"])
    src = (f"def k{nargs}({', '.join(names)}):\n    t = cuda.threadIdx.x\n"
           f"    out[t] = {body}\n")
    scope: dict[str, Any] = {"cuda": cuda}
    exec(src, scope)  # noqa: S102 - generating a kernel of n parameters
    return cuda.jit(scope[f"k{nargs}"])


def _per_launch(fn: Any, count: int, sync: Any, repeats: int = 5) -> float:
    samples = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn(count)
        samples.append((time.perf_counter() - t0) / count)
        sync()
    return statistics.median(samples) * 1e6


def measure(ag: Any, launches: int = 2000) -> dict[str, float]:
    """Median host microseconds per launch for each case (``cuda`` backend only)."""
    import cupy
    from numba import cuda

    out: dict[str, float] = {}
    stream = cupy.cuda.Stream(non_blocking=True)
    nstream = cuda.external_stream(stream.ptr)
    for nargs in (1, 3, 8):
        src = _c_source(nargs)
        raw = cupy.RawKernel(src, f"k{nargs}")
        cp_arrays = [cupy.ones(32, np.float32) for _ in range(nargs)]
        ag_k = ag.cuda_kernel(src, f"k{nargs}")
        ag_in = [ag.ones(32, np.float32) for _ in range(nargs - 1)]
        ag_outs = [ag.zeros(32, np.float32) for _ in range(64)]
        nb = _numba_kernel(nargs)
        nb_arrays = [cuda.to_device(np.ones(32, np.float32)) for _ in range(nargs)]
        ag_nb = ag.kernel(nb, const=[f"a{i}" for i in range(nargs - 1)])

        def raw_run(n: int) -> None:
            for _ in range(n):
                raw((1,), (32,), tuple(cp_arrays), stream=stream)

        def numba_run(n: int) -> None:
            for _ in range(n):
                nb[1, 32, nstream](*nb_arrays)

        def ag_independent(n: int, k: Any = ag_k) -> None:
            for i in range(n):
                k[1, 32](*ag_in, ag_outs[i % 64])

        def ag_dependent(n: int, k: Any = ag_k) -> None:
            # out_i is read by launch i+1: every launch has a RAW edge to the previous one,
            # and the alternating writers make those edges cross streams
            # (with one argument there is no input: each launch overwrites the same output, WAW)
            prev = ag_in[0] if ag_in else None
            for i in range(n):
                dst = ag_outs[i % 64] if ag_in else ag_outs[0]
                k[1, 32](*([prev] + ag_in[1:] if ag_in else []), dst)
                prev = dst

        def sync() -> None:
            stream.synchronize()
            ag.synchronize()

        for fn in (raw_run, numba_run, ag_independent, ag_dependent):
            fn(50)          # compile and warm up
        sync()
        out[f"cupy_raw_{nargs}args_us"] = _per_launch(raw_run, launches, sync)
        out[f"numba_plain_{nargs}args_us"] = _per_launch(numba_run, launches, sync)
        out[f"ag_cuda_c_independent_{nargs}args_us"] = _per_launch(ag_independent, launches, sync)
        out[f"ag_cuda_c_dependent_{nargs}args_us"] = _per_launch(ag_dependent, launches, sync)
        out[f"ag_numba_independent_{nargs}args_us"] = _per_launch(
            lambda n: ag_independent(n, ag_nb), launches, sync)
    # flatness: the cost of 1,000 launches after 10, 1,000 and 100,000 without a host access
    k3 = ag.cuda_kernel(_c_source(3), "k3")
    a = [ag.ones(32, np.float32) for _ in range(2)]
    outs = [ag.zeros(32, np.float32) for _ in range(64)]
    ag.synchronize()
    done = 0
    for mark in (10, 1000, 100_000):
        for i in range(mark - done):
            k3[1, 32](*a, outs[i % 64])
        t0 = time.perf_counter()
        for i in range(1000):
            k3[1, 32](*a, outs[i % 64])
        out[f"ag_per_launch_after_{mark}_us"] = (time.perf_counter() - t0) / 1000 * 1e6
        done = mark + 1000
    ag.synchronize()
    return out
