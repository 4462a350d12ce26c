"""Device time of every kernel of a benchmark workload, measured with the GPU kept busy.

A trace times each node between two events recorded around its launch; when the GPU is idle the
first event fires at once and the node's time then includes the host's own launch work, so the
traces' kernel times of a small, launch-bound scale are mostly host time. Here every launch of
``run_handopt`` is preceded, on its stream, by a one-thread kernel that spins about 0.3 ms and
a timing event: the kernel is enqueued while the spin runs, so the two events around it time the
kernel alone. Each launch runs where the schedule puts it, with the data the schedule leaves
(HITS's row counters included); kernels of other streams may run beside it, as they do in the
schedule. Medians of ``RUNS`` runs.

usage: PYTHONPATH=. python3 tools/kernel_times.py [scale] [workload ...]   (a CUDA GPU)
"""

from __future__ import annotations

import statistics
import sys
from typing import Any

from alone_timing import SPIN     # (tools/ is the script's directory: a sibling module)

RUNS = 5


def main() -> None:
    import cupy

    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime
    from benchmarks.handopt import Hand
    from benchmarks.workloads import WORKLOADS

    scale = sys.argv[1] if len(sys.argv) > 1 else "small"
    names = sys.argv[2:] or list(WORKLOADS)
    be = current_runtime().backend
    spin = cupy.RawKernel(SPIN, "spin")
    nb = 4 * cupy.cuda.Device().attributes["MultiProcessorCount"]

    class Timed(Hand):
        """The hand-written schedule, each launch between two timing events behind a spin."""

        def __init__(self, runtime: Any) -> None:
            super().__init__(runtime)
            self.marks: list[tuple[str, Any, Any]] = []

        def launch(self, kernel: Any, num_blocks: Any, block: Any, s: Any, *args: Any) -> None:
            start, end = be.timing_event(), be.timing_event()
            spin((1,), (1,), (cupy.int64(600_000),), stream=s)
            be.record(start, s)
            super().launch(kernel, num_blocks, block, s, *args)
            be.record(end, s)
            self.marks.append((kernel.name, start, end))

    for name in names:
        cls = WORKLOADS[name]
        wl = cls(ag, scale)
        block = (8, 8) if getattr(cls, "two_d", False) else 256
        hand = Timed(current_runtime())
        runs: list[list[tuple[str, float]]] = []
        for r in range(RUNS + 1):           # the first run compiles
            hand.marks.clear()
            wl.reset()
            ag.synchronize()
            hand.begin()
            wl.run_handopt(hand, block, nb)
            ag.synchronize()
            if r:
                runs.append([(k, be.elapsed_s(a, b) * 1e6) for k, a, b in hand.marks])
        print(f"== {name} ({scale}, block {block}, {nb} blocks): {len(runs[0])} launches, "
              f"medians of {RUNS} runs")
        total = 0.0
        for i, (kname, _) in enumerate(runs[0]):
            us = statistics.median(run[i][1] for run in runs)
            total += us
            print(f"   {kname:16s} {us:8.2f} us")
        print(f"   sum {total:.1f} us")


if __name__ == "__main__":
    main()
