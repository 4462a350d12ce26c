"""Where do one-node graph lanes' savings go in an asyncgpu launch? Host and wall us per launch,
lanes on and off (``DriverCalls.single_node_graphs`` toggled in one runtime), alternating
rounds, medians:

* ``ag_independent``: the overhead benchmark's independent 3-array CUDA C loop;
* ``ag_independent_nopoll``: the same with polling off (``poll_threshold`` huge);
* ``seq_rot``: the CUDA calls alone (packed launch + record + query) over the runtime's own
  streams taken in turn, as the independent loop takes them;
* ``seq_one``: the same on one stream.

usage: PYTHONPATH=. python3 tools/lanes_probe.py [rounds]
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np


def main() -> None:
    import cupy

    import asyncgpu as ag
    from asyncgpu._runtime import current_runtime
    from asyncgpu.backends._packed import cuda_c_plan
    from benchmarks import overhead

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    rt = current_runtime()
    be = rt.backend
    driver = be.driver
    k = ag.cuda_kernel(overhead._c_source(3), "k3")
    loops = {"ag_independent": overhead._ag_cases(ag, k, 3)["independent"]}
    loops["ag_independent"](200)
    ag.synchronize()
    streams = [s.handle for s in rt.streams.streams]
    raw = cupy.RawKernel(overhead._c_source(3), "k3")
    arrays = [cupy.ones(32, np.float32) for _ in range(3)]
    values = tuple(a.data.ptr for a in arrays)
    plan = cuda_c_plan(raw.kernel.ptr, k.params, be.driver_launch)
    events = [be.create_event() for _ in range(64)]
    record, done = be._event_record, be._event_done
    m = len(streams)
    print(f"{m} streams in the runtime")

    def seq(ss):
        def loop(n):
            for i in range(n):
                sp = ss[i % len(ss)].ptr
                plan.launch(values, (1, 1, 1), (32, 1, 1), 0, sp)
                record(events[i & 63].ptr, sp)
                done(events[(i - 1) & 63])
        return loop

    loops["seq_rot"] = seq(streams)
    loops["seq_one"] = seq(streams[:1])
    host: dict[str, list[float]] = {}
    wall: dict[str, list[float]] = {}
    n = 2000
    for _ in range(rounds):
        for lanes in (True, False):
            driver.single_node_graphs = lanes
            for name, fn in loops.items():
                key = f"{name}_{'lanes' if lanes else 'kernel'}"
                cupy.cuda.Device().synchronize()
                ag.synchronize()
                t0 = time.perf_counter()
                fn(n)
                t1 = time.perf_counter()
                cupy.cuda.Device().synchronize()
                ag.synchronize()
                t2 = time.perf_counter()
                host.setdefault(key, []).append((t1 - t0) / n * 1e6)
                wall.setdefault(key, []).append((t2 - t0) / n * 1e6)
    driver.single_node_graphs = True
    for key in host:
        print(f"{key:28s} host {statistics.median(host[key]):6.2f}  "
              f"wall {statistics.median(wall[key]):6.2f}")
    print("lane launches", driver.lane_launches)


if __name__ == "__main__":
    main()
