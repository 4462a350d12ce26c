"""The compiled CUDA calls of a launch against the Python ones, on the CPU.

``CudaBackend.kernel_launch``, ``launch``, ``graph_launch``, ``record``, ``wait``,
``event_done`` and ``PackedLaunch.__call__`` have compiled twins (``asyncgpu/csrc/device.c``),
as has ``Runtime.launch_graph`` (``issue.c``). This runs the real
``cuda`` backend over the stand-in CuPy of ``tools/fakecupy`` in fresh interpreters, one
with the compiled methods and one with ``ASYNCGPU_SPEEDUPS=0``, logs every CUDA call the
stand-in receives (each ``cuLaunchKernel`` with the bytes of its parameter buffer; each graph
launch and the record of its completion event), for eager launches and for plain and static
recorded graphs, and
requires the two logs to be the same call for call. A third interpreter makes the calls
through ``DriverCalls`` (``asyncgpu/csrc/driver.c``) over C entry points that log the same way
(ctypes callbacks standing in for the driver's), and must log the same calls again, every one
of them through those entry points. A fresh interpreter allocates the same stand-in addresses
in the same order, so pointers compare as they are.
"""

from __future__ import annotations

import json
import textwrap

import pytest
import stand_in

from asyncgpu.core import compiled as _compiled

pytestmark = pytest.mark.skipif(_compiled.speedups is None,
                                reason="asyncgpu._speedups is not built")

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

    import os
    import asyncgpu as ag
    from asyncgpu.core import compiled as _compiled
    from tools.host_paths import stand_in_runtime

    rt = stand_in_runtime()
    direct = []
    if os.environ.get("DIRECT") == "1":
        from asyncgpu import _speedups
        P, U, I = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
        log_launch, log_record, log_wait = logged("launch"), logged("record"), logged("wait")

        def c_launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            direct.append("launch")
            log_launch(f, gx, gy, gz, bx, by, bz, shared, stream, params or 0, extra)
            return 0

        def c_record(event, stream):
            direct.append("record")
            log_record(event, stream)
            return 0

        def c_wait(stream, event, flags):
            direct.append("wait")
            log_wait(stream, event, flags)
            return 0

        def c_query(event):
            direct.append("query")
            return 0

        def c_graph(exec_, stream):
            direct.append("graph")
            log.append(["graph", exec_, stream])
            return 0

        entry = [ctypes.CFUNCTYPE(I, P, U, U, U, U, U, U, U, P, P, P)(c_launch),
                 ctypes.CFUNCTYPE(I, P, P)(c_record), ctypes.CFUNCTYPE(I, P, P, U)(c_wait),
                 ctypes.CFUNCTYPE(I, P)(c_query), ctypes.CFUNCTYPE(I, P, P)(c_graph)]
        rt.backend.use_calls(_speedups.DriverCalls(
            tuple(ctypes.cast(e, ctypes.c_void_p).value for e in entry),
            cupy.cuda.driver.launchKernel, cupy.cuda.runtime.eventRecord,
            cupy.cuda.runtime.streamWaitEvent))
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
    s = rt.statistics()
    print(json.dumps({"compiled": _compiled.in_use(), "log": log, "direct": direct,
                      "stats": [s.nodes, s.event_waits, s.events_recorded, s.streams_used,
                                s.nodes_retired, s.retired_by_poll, dict(s.edges)]}))
""")


def test_compiled_and_python_make_the_same_cuda_calls(monkeypatch):
    monkeypatch.delenv("ASYNCGPU_SPEEDUPS", raising=False)
    monkeypatch.delenv("DIRECT", raising=False)
    compiled = json.loads(stand_in.run(SCRIPT))
    monkeypatch.setenv("DIRECT", "1")
    direct = json.loads(stand_in.run(SCRIPT))
    monkeypatch.setenv("ASYNCGPU_SPEEDUPS", "0")
    monkeypatch.delenv("DIRECT")
    python = json.loads(stand_in.run(SCRIPT))
    assert compiled["compiled"] and direct["compiled"] and not python["compiled"]
    assert len(compiled["log"]) > 300
    assert {c[0] for c in compiled["log"]} == {"launch", "record", "wait", "read", "graph"}
    assert compiled["log"] == python["log"] == direct["log"]
    assert compiled["stats"] == python["stats"] == direct["stats"]
    # every CUDA call of the direct run went through the driver's entry points
    assert compiled["direct"] == python["direct"] == []
    calls = [c[0] for c in direct["log"] if c[0] != "read"]
    assert [c for c in direct["direct"] if c != "query"] == calls
    assert "query" in direct["direct"]
