"""Do kernels enqueued through one-node graph lanes on different streams run side by side?

A kernel spinning about 50 ms on one stream, then a short kernel on another stream, each
enqueued through ``DriverCalls.launchKernel`` (lanes on or off); the host waits for the short
one's stream alone: milliseconds until it is done, which must stay far below 50 with either.
The same through asyncgpu: a spin launch, an independent short launch, a host read of the short
one's output (the GPU test ``test_a_host_read_that_fetches_waits_only_for_its_writer``).

usage: PYTHONPATH=. python3 tools/lanes_overlap_probe.py [repeats]
"""

from __future__ import annotations

import sys
import time

import numpy as np

SPIN = r'''extern "C" __global__ void spin(float* x, long long cycles) {
    long long t0 = clock64(); while (clock64() - t0 < cycles) {} x[0] = 5.0f; }'''
SHORT = r'''extern "C" __global__ void short_k(float* y) { y[threadIdx.x] += 1.0f; }'''


def main() -> None:
    import cupy

    import asyncgpu as ag
    from asyncgpu._runtime import current_runtime

    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    driver = current_runtime().backend.driver
    spin_raw = cupy.RawKernel(SPIN, "spin")
    short_raw = cupy.RawKernel(SHORT, "short_k")
    x = cupy.zeros(1, np.float32)
    y = cupy.zeros(32, np.float32)
    a, b = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    spin_raw((1,), (1,), (x, np.int64(1000)), stream=a)
    short_raw((1,), (32,), (y,), stream=b)
    cupy.cuda.Device().synchronize()
    rate = 1.7e9                                   # cycles per second, roughly (H100)
    cycles = int(50e-3 * rate)

    def packed(kernel, *ptrs_and_values):
        buf = np.array(ptrs_and_values, dtype=np.uint64)
        size = np.array([buf.nbytes], np.uint64)
        extra = np.array([1, buf.ctypes.data, 2, size.ctypes.data, 0], np.uint64)
        return kernel.kernel.ptr, (buf, size, extra)

    for lanes in (True, False, True):
        driver.single_node_graphs = lanes
        out = []
        for _ in range(repeats):
            f1, keep1 = packed(spin_raw, x.data.ptr, cycles)
            f2, keep2 = packed(short_raw, y.data.ptr)
            t0 = time.perf_counter()
            driver.launchKernel(f1, 1, 1, 1, 1, 1, 1, 0, a.ptr, 0, keep1[2].ctypes.data)
            driver.launchKernel(f2, 1, 1, 1, 32, 1, 1, 0, b.ptr, 0, keep2[2].ctypes.data)
            b.synchronize()
            short_ms = (time.perf_counter() - t0) * 1e3
            a.synchronize()
            spin_ms = (time.perf_counter() - t0) * 1e3
            out.append(f"{short_ms:.2f}/{spin_ms:.1f}")
        print(f"driver calls, lanes={lanes}: short/spin ms", " ".join(out))
    driver.single_node_graphs = True

    spin = ag.cuda_kernel(SPIN, "spin")
    short = ag.cuda_kernel(SHORT, "short_k")
    slow = ag.zeros(1, np.float32)
    for lanes in (True, False, True):
        driver.single_node_graphs = lanes
        out = []
        for _ in range(repeats):
            other = ag.zeros(32, np.float32)
            ag.synchronize()
            t0 = time.perf_counter()
            spin[1, 1](slow, cycles)
            short[1, 32](other)
            assert float(other[3]) == 1.0
            read_ms = (time.perf_counter() - t0) * 1e3
            float(slow[0])
            spin_ms = (time.perf_counter() - t0) * 1e3
            out.append(f"{read_ms:.2f}/{spin_ms:.1f}")
        print(f"asyncgpu, lanes={lanes}: read/spin ms", " ".join(out))
    driver.single_node_graphs = True


if __name__ == "__main__":
    main()
