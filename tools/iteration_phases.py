"""Where one benchmark iteration's wall time goes: until the workload's host read starts, and
the read itself (which waits for the device), per mode, at the small scale, streaming inputs.

In ``recorded`` mode a split recording launches its graph at the read, so "before read" is the
body's remembered launches and "read" holds the graph's launch and run; in ``recorded_static``
"before read" is the graph call. Medians of 35 iterations after 5 untimed ones.

usage: PYTHONPATH=. python3 tools/iteration_phases.py [workload ...]   (a CUDA GPU)
"""

from __future__ import annotations

import statistics
import sys
import time

import asyncgpu as ag
from asyncgpu._runtime import current_runtime
from benchmarks import harness
from benchmarks.workloads import WORKLOADS


def main() -> None:
    nb = 4 * current_runtime().backend.sm_count
    for name in sys.argv[1:] or list(WORKLOADS):
        wl = WORKLOADS[name](ag, "small")
        block = (8, 8) if wl.two_d else 256
        marks: dict[str, float] = {}
        read = wl.read

        def timed_read(read=read):
            marks.setdefault("read0", time.perf_counter())
            value = read()
            marks["read1"] = time.perf_counter()
            return value

        wl.read = timed_read
        for mode in ("parallel", "recorded", "recorded_static"):
            run = harness.ModeRun(ag, wl, mode, block, nb, "streaming", None)
            rows = []
            for it in range(40):
                harness._prepare(ag, wl, "streaming")
                marks.clear()
                t0 = time.perf_counter()
                run._once()
                t1 = time.perf_counter()
                if it >= 5:
                    rows.append((marks["read0"] - t0, marks["read1"] - marks["read0"], t1 - t0))
            run.close()
            before, reading, total = (statistics.median(r[i] for r in rows) * 1e6
                                      for i in range(3))
            print(f"{name:5s} {mode:16s} before read {before:7.1f}  read {reading:7.1f}  "
                  f"total {total:7.1f} us", flush=True)


if __name__ == "__main__":
    main()
