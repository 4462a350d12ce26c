"""The CUDA calls a program makes on the ``cuda`` backend, on the CPU.

This runs the real ``cuda`` backend over the stand-in CuPy of ``tools/fakecupy`` in a fresh
interpreter and logs every CUDA call the stand-in receives (each ``cuLaunchKernel`` with the
bytes of its parameter buffer, each event record and stream wait, each graph launch), for eager
launches across streams and for plain and static recorded graphs. What a user relies on: every
eager launch reaches the driver exactly once, with its own grid, block and parameter values
packed as the kernel declares them; a stream waits only for events recorded before; a graph
launch is followed at once by the record of its completion event on the same stream.
"""

from __future__ import annotations

import json
import struct
import textwrap
from collections import Counter

import stand_in

SCRIPT = textwrap.dedent(r"""
    import ctypes, json
    import numpy as np
    import cupy
    log = []

    def logged(name):
        def call(*args):
            if name == "launch":
                extra = (ctypes.c_void_p * 5).from_address(args[-1])
                size = ctypes.c_size_t.from_address(extra[3]).value
                args = args[1:-1] + (ctypes.string_at(extra[1], size).hex(),)
            log.append([name, *args])
        return call

    def graph_launch(self, stream):
        log.append(["graph", self.graphExec, stream.ptr])

    cupy.cuda.runtime.eventRecord = logged("record")
    cupy.cuda.runtime.streamWaitEvent = logged("wait")
    cupy.cuda.driver.launchKernel = logged("launch")
    cupy._Graph.launch = graph_launch

    import asyncgpu as ag
    from tools.host_paths import stand_in_runtime

    rt = stand_in_runtime()
    axpy = ag.cuda_kernel(r'''
        extern "C" __global__ void axpy(const float* x, float* y, float a, int n) {
            int i = threadIdx.x; if (i < n) y[i] += a * x[i];
        }''', "axpy")
    fill = ag.cuda_kernel(r'''
        extern "C" __global__ void fill(double* y, double v, long long n) {
            int i = threadIdx.x; if (i < n) y[i] = v;
        }''', "fill")
    xs = [ag.ones(32, np.float32) for _ in range(4)]
    ds = [ag.zeros(16, np.float64) for _ in range(2)]

    @ag.graph
    def step(i):
        axpy[1, 32](xs[2], xs[3], 2.0, 32)
        fill[1, 16](ds[i % 2], 1.0, 16)

    @ag.graph(static=True)
    def frozen():
        axpy[1, 32](xs[0], xs[2], 1.0, 32)
        axpy[1, 32](xs[1], xs[3], 1.0, 32)

    for i in range(60):
        step(i % 2)                                             # replayed from the 3rd call
        frozen()
        axpy[1, 32](xs[i % 4], xs[(i + 1) % 4], 0.5 * i, 32)   # chains across streams
        axpy[2, 16](xs[0], xs[(i + 2) % 4], -1.0, i % 33)
        fill[1, 16](ds[i % 2], float(i), 16)                    # independent of the rest
        if i % 17 == 16:
            log.append(["read", float(xs[1][0])])               # the host waits
    rt.synchronize()
    ptrs = {"xs": [x._alloc.buffer.ptr + x._offset for x in xs],
            "ds": [d._alloc.buffer.ptr + d._offset for d in ds]}
    print(json.dumps({"log": log, "ptrs": ptrs, "outcomes": [step.outcome, frozen.outcome]}))
""")


def _launches(log, ptrs):
    """Each logged kernel launch as (kernel, grid, block, destination, source, value, n)."""
    xs, ds = ptrs["xs"], ptrs["ds"]
    out = []
    for entry in log:
        if entry[0] != "launch":
            continue
        gx, gy, gz, bx, by, bz, shared, _stream, params, buf = entry[1:]
        assert (gy, gz, by, bz, shared, params) == (1, 1, 1, 1, 0, 0)
        raw = bytes.fromhex(buf)
        if (gx, bx) == (1, 16):
            y, v, n = struct.unpack("@Qdq", raw)
            out.append(("fill", gx, bx, ds.index(y), None, v, n))
        else:
            x, y, a, n = struct.unpack("@QQfi", raw)
            out.append(("axpy", gx, bx, xs.index(y), xs.index(x), a, n))
    return out


def test_the_cuda_calls_of_eager_launches_and_graph_replays():
    run = json.loads(stand_in.run(SCRIPT))
    log = run["log"]
    assert run["outcomes"][0] == "replayed"
    launches = Counter(_launches(log, run["ptrs"]))
    eager = Counter()
    for i in range(60):
        eager[("axpy", 1, 32, (i + 1) % 4, i % 4, 0.5 * i, 32)] += 1
        eager[("axpy", 2, 16, (i + 2) % 4, 0, -1.0, i % 33)] += 1
        eager[("fill", 1, 16, i % 2, None, float(i), 16)] += 1
    # every eager launch exactly once, with its own values; the rest are the recorded
    # functions' launches (run while recording), never anything else
    assert launches & eager == eager
    recorded = {("axpy", 1, 32, 3, 2, 2.0, 32), ("fill", 1, 16, 0, None, 1.0, 16),
                ("fill", 1, 16, 1, None, 1.0, 16), ("axpy", 1, 32, 2, 0, 1.0, 32),
                ("axpy", 1, 32, 3, 1, 1.0, 32)}
    assert set(launches - eager) <= recorded
    # a wait is for an event recorded before it; a graph launch's completion is recorded at once
    recorded_events = set()
    graphs = 0
    for k, entry in enumerate(log):
        if entry[0] == "record":
            recorded_events.add(entry[1])
        elif entry[0] == "wait":
            assert entry[2] in recorded_events, entry
        elif entry[0] == "graph":
            graphs += 1
            assert log[k + 1][0] == "record" and log[k + 1][2] == entry[2], log[k:k + 2]
    assert graphs >= 2 * 57         # (each function replayed from its third call on)
    assert sum(entry[0] == "read" for entry in log) == 3


def test_a_gpu_the_machine_lacks_is_a_device_error_naming_the_option():
    """The stand-in has 4 GPUs: device 7 is refused as the simulator refuses a virtual device
    it lacks, naming the option and the choice (it was a BackendUnavailableError)."""
    out = stand_in.run(
        "import os\n"
        "os.environ.update(ASYNCGPU_BACKEND='cuda', ASYNCGPU_DEVICE='7')\n"
        "import asyncgpu as ag\n"
        "try:\n"
        "    ag.zeros(1)\n"
        "except ag.DeviceError as e:\n"
        "    print(type(e).__name__, e)\n"
        "ag.configure(device=1)\n"
        "print(float(ag.ones(4).numpy().sum()))\n")
    assert out.splitlines() == [
        "DeviceError device=7 (the option device, or ASYNCGPU_DEVICE): this machine has 4 GPUs "
        "(0-3); choose among those", "4.0"]
