"""When a launch runs in chunks: rules side by side on the multi-GPU benchmark's streaming step,
in one process.

A launch that qualifies for chunks (``asyncgpu.runtime.chunks.chunk_plan``) runs in them, on a
runtime over one device, while that device's link carries no earlier copy in; over several,
while it does (``chunks.runs_whole``). This times the streaming B&S (or VEC) step of
``benchmarks.multigpu`` under that rule and others, each round in a new order, so that a
change of the rule is measured against the one in force on the same host in the same minute:

``runtime``  the runtime's rule
``link``     chunks while this launch's GPU has no copy in running, on any number of GPUs
             (the first launch of a streaming burst on each GPU in chunks)
``busy``     chunks while this launch's GPU has a copy in running, on any number of GPUs
             (every launch of a streaming burst on a GPU but its first in chunks)
``whole``    never in chunks
``always``   in chunks whenever the launch qualifies

It prints, per rule, the median step in ms over the rounds (each round's value the median of
its iterations) and, on a GPU, the hand-written CuPy step and the transfer bound (the step's
copies alone, to every GPU at once) of the same rounds.

usage: PYTHONPATH=. python3 tools/chunk_rules.py [devices] [bs|vec] [rounds] [iterations]
       (default 2 bs 5 7; without a GPU it runs on the simulator at tiny scale, with chunks
       down to 8 bytes, and checks the results of every rule, with no times worth reading)

Beside the times it gives the nodes issued per step under each rule (a launch in 8 chunks is
16 nodes, whole it is one kernel and its copies).
"""

from __future__ import annotations

import json
import statistics
import sys

import asyncgpu as ag
from asyncgpu.backends import cuda_usable
from asyncgpu.runtime import chunks
from benchmarks import multigpu

RULES = ("runtime", "link", "busy", "whole", "always")


def rules() -> dict[str, object]:
    """Per rule: the ``chunks.runs_whole`` to run it with."""
    own, link = chunks.runs_whole, chunks.link_busy
    return {"runtime": own, "link": link, "busy": lambda rt, device: not link(rt, device),
            "whole": lambda rt, device: True, "always": lambda rt, device: False}


def main() -> None:
    devices = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    name = sys.argv[2] if len(sys.argv) > 2 else "bs"
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    iterations = int(sys.argv[4]) if len(sys.argv) > 4 else 7
    on_gpu = cuda_usable()
    scale = "medium" if on_gpu else "tiny"
    multigpu.BLOCKS, multigpu.THREADS = multigpu.GRID[scale]
    work = multigpu._Chunks(name, scale)
    options = {"devices": devices} if on_gpu else {
        "backend": "sim", "devices": devices, "sim_devices": devices}
    by_rule = rules()
    times: dict[str, list[float]] = {r: [] for r in (*RULES, "cupy", "transfer bound")}
    nodes: dict[str, float] = {}
    own = chunks.runs_whole
    if not on_gpu:
        chunks.MIN_CHUNK_BYTES = 8       # (tiny inputs: chunks all the same)
    with ag.configure(**options):
        step, rewrite = work.asyncgpu(ag, devices, streaming=True)
        try:
            for r in range(rounds):
                order = RULES[r % len(RULES):] + RULES[:r % len(RULES)]
                for rule in order:
                    chunks.runs_whole = by_rule[rule]
                    before = ag.statistics().nodes
                    ms, got = multigpu._timed(step, rewrite, iterations, 2)
                    work.check(got)
                    times[rule].append(ms)
                    nodes[rule] = (ag.statistics().nodes - before) / (iterations + 2)
                chunks.runs_whole = own
                if on_gpu:
                    cupy_step, bound = work.cupy(devices, streaming=True)
                    ms, got = multigpu._timed(cupy_step, lambda: None, iterations, 2)
                    work.check(got)
                    times["cupy"].append(ms)
                    times["transfer bound"].append(bound())
                    del cupy_step, bound
                print(f"round {r + 1}/{rounds} done", file=sys.stderr)
        finally:
            chunks.runs_whole = own
    summary = {k: statistics.median(v) for k, v in times.items() if v}
    print(json.dumps({"devices": devices, "workload": name, "scale": scale, "rounds": rounds,
                      "median_ms": summary, "nodes_per_step": nodes, "ms": times}, indent=1))


if __name__ == "__main__":
    main()
