"""Micro-benchmark: host and total time per kernel of a recorded graph versus eager launches.

A body of ``k`` tiny CUDA C kernels (one block of 32 threads), as a ``chain`` (every launch
increments the same array: one dependency chain) or ``independent`` (each launch its own array),
run ``eager`` (asyncgpu's launch path, one node per kernel) and ``recorded`` (the same body under
:func:`asyncgpu.graph`, replayed: one node per call). Per case, in microseconds per kernel:
``host_us`` (host time of issuing the body, no waiting) and ``total_us`` (issuing plus a host
synchronization: the device time shows once launches stop hiding it); medians over
``iterations`` calls. The recorded host time includes running the body with its launches
deferred and validated (the key), which is what the recorder costs per kernel on top of the
graph launch; the issue's target is 1.5 us per kernel. ``recorded_static`` is the same body
under ``asyncgpu.graph(static=True)``: once captured, a call launches the graph without running
the body. ``graph_launch_us`` (GPU only) is CUDA's own floor: the same executable graph
launched straight through CuPy, per kernel; ``graph_lanes`` the streams inside that graph
(after the lane budget, ``Options.graph_lane_cost_us``) and, on the GPU, ``lane_cost_us`` the
cost of one more branch the budget used (measured once per process).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from asyncgpu.runtime.current import current_runtime

INC = r"""extern "C" __global__ void inc(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}"""


def _inc(x: Any, n: int) -> None:
    x[:n] += np.float32(1)


def _case(ag: Any, k: int, shape: str, iterations: int) -> dict[str, float]:
    inc = ag.cuda_kernel(INC, "inc", sim=_inc)
    arrays = [ag.zeros(32, np.float32) for _ in range(1 if shape == "chain" else k)]

    def body() -> None:
        for i in range(k):
            inc[1, 32](arrays[i % len(arrays)], 32)

    step = ag.graph(body)
    static = ag.graph(body, static=True)     # the body is not run again once captured
    out: dict[str, float] = {}
    for mode, fn in (("eager", body), ("recorded", step), ("recorded_static", static)):
        fn()
        fn()                                    # recorded: captured here
        ag.synchronize()
        host, total = [], []
        for _ in range(iterations):
            t0 = time.perf_counter()
            fn()
            t1 = time.perf_counter()
            ag.synchronize()
            t2 = time.perf_counter()
            host.append(t1 - t0)
            total.append(t2 - t0)
        out[f"{mode}_host_us"] = 1e6 * statistics.median(host) / k
        out[f"{mode}_total_us"] = 1e6 * statistics.median(total) / k
    frozen = next(iter(next(iter(static._static.values())).values()))[0]
    out["graph_lanes"] = frozen.lanes
    lane_cost = getattr(current_runtime().backend, "lane_cost_s", None)    # (cuda: measured)
    if lane_cost is not None:
        out["lane_cost_us"] = 1e6 * lane_cost()
    raw = _raw_graph_launch_us(frozen, iterations)
    if raw is not None:
        out["graph_launch_us"] = raw / k
    step.clear()
    static.clear()
    calls = 3 * (2 + iterations)            # three modes, each 2 untimed calls + the timed ones
    calls += iterations if raw is not None else 0
    want = np.full(32, calls * (k if shape == "chain" else 1), np.float32)
    for a in arrays:
        np.testing.assert_array_equal(a.numpy(), want)
    return out


def _raw_graph_launch_us(frozen: Any, iterations: int) -> float | None:
    """CUDA's own floor: host microseconds of one launch of the same executable graph straight
    through CuPy (``cudaGraphLaunch``, no asyncgpu bookkeeping); None on the simulator."""
    rt = current_runtime()
    if rt.backend.name != "cuda":
        return None
    from asyncgpu.backends.cuda.timing import graph_launch_s

    rt.synchronize()
    return 1e6 * graph_launch_s(frozen.graph.handle, rt.backend.create_stream(), iterations)


def measure(ag: Any, sizes: tuple[int, ...] = (10, 100), iterations: int = 50,
            ) -> dict[str, dict[str, float]]:
    """``{"chain/10": {...}, "independent/10": {...}, ...}``; every result checked."""
    return {f"{shape}/{k}": _case(ag, k, shape, iterations)
            for shape in ("chain", "independent") for k in sizes}
