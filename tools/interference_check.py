"""A workload with and without the interference rule, in one process (on the GPU by default).

Runs a workload of the suite (default HITS, the one the rule is for) in ``serial``,
``parallel``, ``parallel`` with the rule off, and ``parallel`` on one stream; prints each one's
median time over 9 runs, the kernels' mean device times from a trace of one more run, and the
rule's verdicts (its log lines too: each pair's side-by-side and in-sequence times); writes it
all to ``$OUT/WORKLOAD_interference.json`` (default: the current directory).

usage: PYTHONPATH=. python3 tools/interference_check.py [workload] [scale]   (default: hits medium)
       B=sim G=2 PYTHONPATH=. python3 tools/interference_check.py img tiny     (the simulator)
"""

import json
import logging
import os
import statistics
import sys
import time

import asyncgpu as ag
from asyncgpu.runtime.current import current_runtime
from benchmarks.workloads import WORKLOADS

logging.basicConfig(level=logging.INFO, format="%(message)s")
BACKEND = os.environ.get("B", "cuda")
BLOCKS = int(os.environ.get("G", 528))          # 4 x the H200's 132 SMs
WORKLOAD = sys.argv[1] if len(sys.argv) > 1 else "hits"
SCALE = sys.argv[2] if len(sys.argv) > 2 else "medium"
#: the 2D workloads take a 2D block, as in the suite
BLOCK = (8, 8) if getattr(WORKLOADS[WORKLOAD], "two_d", False) else 256
SETUPS = [("serial", {"execution": "sync"}), ("parallel", {"execution": "async"}),
          ("parallel_off", {"execution": "async", "interference": False}),
          ("parallel_1stream", {"execution": "async", "max_streams": 1})]


def measure(options: dict) -> dict:
    with ag.configure(backend=BACKEND, **options):
        w = WORKLOADS[WORKLOAD](ag, SCALE)
        w.reset()
        w.run(BLOCK, BLOCKS)
        ag.synchronize()
        times = []
        for _ in range(9):
            w.reset()
            ag.synchronize()
            t0 = time.perf_counter()
            w.run(BLOCK, BLOCKS)
            ag.synchronize()
            times.append(time.perf_counter() - t0)
        with ag.trace() as t:
            w.reset()
            ag.synchronize()
            w.run(BLOCK, BLOCKS)
            ag.synchronize()
        by_name: dict[str, list[float]] = {}
        for k in t.kernels:
            by_name.setdefault(k.name, []).append((k.end_s - k.start_s) * 1e3)
        rule = current_runtime().interference
        return {"median_ms": statistics.median(times) * 1e3,
                "kernel_ms": {n: round(statistics.mean(v), 3) for n, v in by_name.items()},
                "streams": t.streams,
                "verdicts": None if rule is None else
                [(a[0].name, b[0].name, v) for (a, b), v in rule.verdicts.items()]}


def main() -> None:
    out = {}
    for label, options in SETUPS:
        out[label] = measure(options)
        print(label, json.dumps(out[label]))
    path = os.path.join(os.environ.get("OUT", "."), f"{WORKLOAD}_interference.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
