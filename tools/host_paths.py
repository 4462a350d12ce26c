"""The host-side Python of the cuda backend's hot paths, timed on a machine without a GPU.

The GPU machine's host changes speed from minute to minute, which hides changes of 10-20% in
asyncgpu's own Python. This runs the real ``CudaBackend`` over a stand-in CuPy whose CUDA calls
do nothing (``tools/fakecupy``), so what is timed is asyncgpu's Python alone, and it is stable
on an idle CPU: host microseconds per launch of the overhead benchmark's 3-array CUDA C kernel
(independent, with one cross-stream wait, as a tenant's step, and as one cut in 8 pieces by a
tenant's split), of a launch followed by a one-element host read
of what it wrote, of a read of an element current on the host, and per kernel of the replay
benchmark's bodies of 10 (eager, recorded, recorded_static). Medians of 9 repeats. The
recorded bodies are also timed *cold*: one call right after a 32 MiB host copy, the state a
benchmark iteration starts in after its inputs were rewritten (per call, not per kernel); and
per call with one input rewritten by the host before each call, warm and cold (the replay then
chooses the variant of its graph that copies that input in).

usage: PYTHONPATH=. python3 tools/host_paths.py      (compare two trees: run it in each;
       without `python3 setup.py build_ext --inplace` it times the uncompiled launch path)
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fakecupy"))

import numpy as np  # noqa: E402

import asyncgpu as ag  # noqa: E402
from asyncgpu.runtime import current  # noqa: E402
from asyncgpu.runtime.context import Runtime  # noqa: E402
from asyncgpu.runtime.array import HOST, new_array  # noqa: E402
from asyncgpu.core.config import Options  # noqa: E402
from asyncgpu.backends.cuda.backend import CudaBackend  # noqa: E402
from benchmarks import overhead, replay  # noqa: E402


SPLIT_ROWS = r"""
extern "C" __global__ void rows3(const float* a, const float* b, float* c, int n) {}
"""
SPLIT_GRID = r"""
extern "C" __global__ void grid3(const float* a, const float* b, float* c, int n, int first,
                                 int total) {}
"""


def _median_us(fn, count: int, per: int = 1, repeats: int = 9) -> float:
    fn(200)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        own = fn(count)
        elapsed = own if own is not None else time.perf_counter() - t0
        samples.append(elapsed / (count * per) * 1e6)
    return statistics.median(samples)


def stand_in_runtime() -> Runtime:
    """A ``cuda`` runtime over the stand-in CuPy, made the process's runtime (no timing of
    launches at capture: the stand-in's events measure nothing)."""
    opts = Options(backend="cuda", graph_measure=False, graph_lane_cost_us=0)
    rt = Runtime(opts, backend=CudaBackend(opts))
    current._runtime, current._options = rt, opts
    return rt


def main() -> None:
    rt = stand_in_runtime()
    out: dict[str, float] = {}
    k3 = ag.cuda_kernel(overhead._c_source(3), "k3")
    for case, fn in overhead._ag_cases(ag, k3, 3).items():
        out[f"launch {case}"] = _median_us(fn, 20000)
    out["launch as a tenant's step"] = _median_us(overhead._tenant_steps(ag, k3, 3), 20000)
    for label, k, extra in (("element-wise", ag.cuda_kernel(SPLIT_ROWS, "rows3",
                                                            elementwise="n"), ()),
                            ("by its grid", ag.cuda_kernel(SPLIT_GRID, "grid3",
                                                           grid_offset=("first", "total"),
                                                           grid_stride=True), (0, 132))):
        n = 1 << 16
        arrays = [ag.zeros(n, np.float32) for _ in range(3)]
        scope = ag.tenant(f"split {label}", split={k.name: 8})

        def split_steps(count: int, k=k, arrays=arrays, extra=extra, scope=scope) -> None:
            for _ in range(count):
                with scope:
                    k[132, 256](*arrays, n, *extra)
        out[f"launch in 8 pieces, {label}, as a tenant's step"] = _median_us(split_steps, 2000)
        rt.synchronize()
    inc = ag.cuda_kernel(replay.INC, "inc")
    x = ag.zeros(32, np.float32)

    for reads, name, count in ((1, "one element", 5000), (8, "8 elements", 2000)):
        def launch_then_read(n: int, reads: int = reads) -> None:
            for _ in range(n):
                inc[1, 32](x, 32)
                for i in range(reads):
                    float(x[i])     # waits for the launch; the first read fetches x whole
        out[f"launch then read {name}"] = _median_us(launch_then_read, count)
    h = ag.zeros(32, np.float32)     # never on the device: a read needs no fetch

    def read_settled(n: int) -> None:
        for _ in range(n):
            float(h[0])
    out["read one element on the host"] = _median_us(read_settled, 20000)
    for shape in ("chain", "independent"):
        arrays = [new_array(rt, (32,), np.dtype(np.float32), HOST)
                  for _ in range(1 if shape == "chain" else 10)]

        def body(arrays=arrays) -> None:
            for i in range(10):
                inc[1, 32](arrays[i % len(arrays)], 32)

        for mode, fn in (("eager", body), ("recorded", ag.graph(body)),
                         ("recorded_static", ag.graph(body, static=True))):
            fn()
            fn()

            def calls(n: int, fn=fn) -> None:
                for _ in range(n):
                    fn()
            out[f"{shape}/10 {mode}"] = _median_us(calls, 2000, per=10)
            if mode != "eager":
                out[f"{shape}/10 {mode}, cold"] = _cold_us(fn)
                if shape == "independent":
                    # an input rewritten by the host before each call (as a benchmark's reset
                    # does): the replay picks the variant that copies it in
                    def rewrite_then(fn=fn, a=arrays[0]) -> None:
                        a[...] = 1.0
                        fn()
                    out[f"{shape}/10 {mode}, input rewritten"] = _median_us(
                        lambda n: [rewrite_then() for _ in range(n)] and None, 2000)
                    out[f"{shape}/10 {mode}, input rewritten, cold"] = _cold_us(
                        fn, before=lambda a=arrays[0]: a.__setitem__(Ellipsis, 1.0))
            rt.synchronize()
    print(json.dumps(out, indent=1))


def _cold_us(fn, before=None) -> float:
    """Median us of one call right after the host has copied 32 MiB (as a program's own host
    work between steps does: the caches hold none of asyncgpu's code or objects then), after
    ``before()`` (untimed) if given."""
    src = np.ones(4 << 20, np.float32)
    dst = np.empty_like(src)
    samples = []
    for _ in range(400):
        if before is not None:
            before()
        dst[...] = src
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6


if __name__ == "__main__":
    main()
