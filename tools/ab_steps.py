"""Where two source trees differ inside one iteration of a suite cell: host time per step.

``tools/ab_host.py`` says that a cell is slower; this says in which of its steps. One worker
process per tree (``cwd`` the tree, ``PYTHONPATH=.``) sets up each cell once, with a host clock
around every launch of the workload's kernels (its ``k_*`` attributes), its ``read``, and, for
``handopt``, the hand-written schedule's calls (``prefetch``, ``launch``, ``record``, ``wait``,
``sync_stream``, ...). The workers are asked in turn for blocks of iterations (streaming
inputs, block size 256, the reset untimed as the suite does), the order alternating between
rounds; per step it prints each tree's median over the rounds of the per-block median of the
step's time in one iteration (us), and their difference. Both trees are compiled first, as
``tools/ab_host.py`` compiles them. ``once`` is the iteration's host
part, ``sync`` the wait for the device after it, ``total`` both.

Two more cells time the replay micro-benchmark's and the overhead benchmark's operations:
``micro:lr`` (a launch, then a host read of one element it wrote) and ``micro:MODE`` with
``MODE`` one of ``eager``, ``recorded``, ``recorded_static`` (the chain of 10 of
``benchmarks.replay``, per call).

usage: PYTHONPATH=. taskset -c 4,5 python3 tools/ab_steps.py OLD_TREE [rounds] CELLS
       CELLS: comma-separated NAME:MODE, e.g. vec:parallel,img:handopt,micro:lr
       (AB_SCALE, default small, the workloads' scale; AB_ITERATIONS, default 100, per block;
       AB_WARMUP, default 20, untimed iterations per cell first)
"""

from __future__ import annotations

import statistics
import sys

from ab_host import Worker, build     # (this directory: run as ``python3 tools/ab_steps.py``)

WORKER = r"""
import json, os, statistics, sys, time
import numpy as np
import asyncgpu as ag
from asyncgpu.runtime.current import current_runtime
from benchmarks import harness, replay
from benchmarks.handopt import Hand
from benchmarks.workloads import WORKLOADS
rt = current_runtime()
num_blocks = 4 * getattr(rt.backend, "sm_count", 8)
clock = time.perf_counter
spent = {}          # step -> seconds in the current iteration


def add(step, t0):
    spent[step] = spent.get(step, 0.0) + clock() - t0


def timed(step, fn):
    def call(*args, **kwargs):
        t0 = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            add(step, t0)
    return call


class TimedLauncher:
    def __init__(self, step, launcher):
        self.step, self.launcher = step, launcher

    def __call__(self, *args):
        t0 = clock()
        try:
            return self.launcher(*args)
        finally:
            add(self.step, t0)

    def __getattr__(self, name):
        return getattr(self.launcher, name)


class TimedKernel:
    def __init__(self, step, kernel):
        self.step, self.kernel = step, kernel

    def __getitem__(self, config):
        return TimedLauncher(self.step, self.kernel[config])

    def __getattr__(self, name):
        return getattr(self.kernel, name)


inc = ag.cuda_kernel(replay.INC, "inc")
x = ag.zeros(32, np.float32)


def chain():
    for _ in range(10):
        inc[1, 32](x, 32)


bodies = {"eager": chain, "recorded": ag.graph(chain),
          "recorded_static": ag.graph(chain, static=True)}


def micro(mode):
    t0 = clock()
    if mode == "lr":
        inc[1, 32](x, 32)
        add("launch", t0)
        t0 = clock()
        float(x[0])
        add("read", t0)
    else:
        bodies[mode]()
        add("call", t0)


cells = {}
for spec in sys.argv[1].split(","):
    name, mode = spec.split(":")
    if name == "micro":
        cells[spec] = (None, mode)
        continue
    wl = WORKLOADS[name](ag, os.environ.get("AB_SCALE", "small"))
    if mode != "handopt":       # (the hand-written schedule launches the kernels itself)
        for attr in list(vars(wl)):
            if attr.startswith("k_"):
                setattr(wl, attr, TimedKernel(attr, getattr(wl, attr)))
    wl.read = timed("read", wl.read)
    hand = Hand(rt)
    for method in ("begin", "prefetch", "launch", "event", "record", "wait", "sync_stream"):
        setattr(hand, method, timed("hand." + method, getattr(hand, method)))
    block = (8, 8) if getattr(wl, "two_d", False) else 256
    cells[spec] = (wl, harness.ModeRun(ag, wl, mode, block, num_blocks, "streaming", hand))


def block(spec, n):
    wl, run = cells[spec]
    steps = {}
    with ag.configure(execution="async" if wl is None else run.execution):
        for _ in range(n):
            if wl is not None:
                harness._prepare(ag, wl, "streaming")      # (untimed, as the suite does)
            spent.clear()
            t0 = clock()
            if wl is None:
                micro(run)
            else:
                run._once()
            t1 = clock()
            ag.synchronize()
            t2 = clock()
            spent.update(once=t1 - t0, sync=t2 - t1, total=t2 - t0)
            for step, seconds in spent.items():
                steps.setdefault(step, []).append(seconds * 1e6)
    return {step: statistics.median(us) for step, us in steps.items()}


for spec in cells:
    block(spec, int(os.environ.get("AB_WARMUP", "20")))     # warm up: compile, record, capture
print(json.dumps(list(cells)), flush=True)
iterations = int(os.environ.get("AB_ITERATIONS", "100"))
for line in sys.stdin:
    print(json.dumps(block(line.strip(), iterations)), flush=True)
"""


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__.split("usage: ")[1])
    old_tree = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 3 else 8
    cells = sys.argv[-1].split(",")
    for tree in (".", old_tree):
        build(tree)
    workers = {tag: Worker(tree, {}, ",".join(cells), code=WORKER)
               for tag, tree in (("new", "."), ("old", old_tree))}
    samples: dict[str, dict[str, dict[str, list[float]]]] = {}
    for r in range(rounds):
        for spec in cells:
            for tag in (("new", "old") if r % 2 == 0 else ("old", "new")):
                for step, us in workers[tag].ask(spec).items():
                    samples.setdefault(spec, {}).setdefault(step, {}).setdefault(
                        tag, []).append(us)
    for worker in workers.values():
        worker.close()
    for spec, steps in samples.items():
        print(f"{spec}  (us per iteration: new, old, new - old)")
        for step, by_tree in steps.items():
            new, old = (statistics.median(by_tree.get(t, [0.0])) for t in ("new", "old"))
            print(f"  {step:18s} {new:10.2f} {old:10.2f} {new - old:+9.2f}")


if __name__ == "__main__":
    main()
