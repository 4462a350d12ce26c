"""What a CUDA graph's launch costs the host, by what it holds: host-to-device copies from pinned
memory (4 KiB to 1 MiB, on 1, 2 or 10 branches) or kernels (on 1 or 10 branches). Captured
with CuPy's stream capture; host us of ``Graph.launch``, medians of 7 x 200 launches, each
followed by a synchronize (so every launch finds the GPU idle, as a benchmark iteration's does).

usage: PYTHONPATH=. python3 tools/graph_copy_launch_probe.py    (a CUDA GPU)
"""

from __future__ import annotations

import statistics

import cupy
import numpy as np

from asyncgpu.backends._cuda_timing import graph_launch_s

INC = r'''extern "C" __global__ void inc(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}'''
H2D = 1     # cudaMemcpyHostToDevice


def capture(build, branches: int):
    """A graph of ``build(side_streams)``'s work, forked onto ``branches`` streams and joined."""
    main = cupy.cuda.Stream(non_blocking=True)
    side = [cupy.cuda.Stream(non_blocking=True) for _ in range(branches)]
    main.begin_capture()
    fork = cupy.cuda.Event(disable_timing=True)
    fork.record(main)
    for s in side:
        s.wait_event(fork)
    build(side)
    for s in side:
        join = cupy.cuda.Event(disable_timing=True)
        join.record(s)
        main.wait_event(join)
    return main.end_capture(), main


def launch_us(graph, stream, count: int = 200) -> float:
    graph.launch(stream)        # (the first launch uploads the graph)
    stream.synchronize()
    return statistics.median(graph_launch_s(graph, stream, count) for _ in range(7)) * 1e6


def main() -> None:
    for nbytes in (4 << 10, 256 << 10, 1 << 20):
        hosts = [cupy.cuda.alloc_pinned_memory(nbytes) for _ in range(10)]
        devs = [cupy.empty(nbytes, np.uint8) for _ in range(10)]
        for copies, branches in ((1, 1), (2, 2), (10, 10), (10, 1)):
            def build(side, copies=copies, branches=branches):
                for i in range(copies):
                    cupy.cuda.runtime.memcpyAsync(devs[i].data.ptr, hosts[i].ptr, nbytes, H2D,
                                                  side[i % branches].ptr)
            graph, stream = capture(build, branches)
            print(f"{copies:2d} H2D copies of {nbytes >> 10:5d} KiB on {branches:2d} branches: "
                  f"launch {launch_us(graph, stream):6.2f} us", flush=True)
    inc = cupy.RawKernel(INC, "inc")
    xs = [cupy.zeros(1024, np.float32) for _ in range(10)]
    for kernels, branches in ((1, 1), (10, 10), (10, 1)):
        def build(side, kernels=kernels, branches=branches):
            for i in range(kernels):
                inc((4,), (256,), (xs[i], np.int32(1024)), stream=side[i % branches])
        graph, stream = capture(build, branches)
        print(f"{kernels:2d} kernels on {branches:2d} branches: launch "
              f"{launch_us(graph, stream):6.2f} us", flush=True)


if __name__ == "__main__":
    main()
