"""What running a mix's steps as tenants costs, against the same steps outside any tenant.

Runs the benchmark's workloads (``benchmarks/tenants.py``'s members) on one host thread, a round
being ``repeats`` steps of each, in six ways taking turns block by block:

* ``sequential``: each step, then its host read, outside any tenant;
* ``tenants, every step timed`` / ``tenants, sampled``: the same steps, each inside its
  workload's tenant scope, every step timed by timing events, or the runtime's default
  (``step_timing="sampled"``: a tenant's steps less than 10 ms apart are timed a sample of);
* ``one thread`` and its two tenant variants: every workload's launches are issued before any
  of their results is read (the benchmark's ``one thread``).

Prints each way's host microseconds per round (the median block), its speedup over
``sequential`` (the median of the blocks' ratios), and the time spent issuing (the reset and
the launches, scopes included) and reading (which waits for the device).

usage: PYTHONPATH=. python3 tools/tenant_step_cost.py [WORKLOADS] [--scale small]
       [--balance] [--rounds 10] [--turns 6] [--num-blocks 4*SMs]
       (default: dl,img,ml; ``ASYNCGPU_BACKEND=sim ... --scale tiny --rounds 1 --turns 1``
       checks that it runs, its times are the simulator's)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import asyncgpu as ag  # noqa: E402
from asyncgpu.core.tenants import Tenant  # noqa: E402
from asyncgpu.runtime.current import current_runtime  # noqa: E402
from benchmarks import tenants as bench  # noqa: E402


def _rounds(members, scopes, interleaved):
    """One round; returns the seconds spent issuing and reading."""
    issuing = reading = 0.0
    if not interleaved:
        for m, scope in zip(members, scopes):
            for _ in range(m.repeats):
                t0 = time.perf_counter()
                with scope:
                    m.begin()
                t1 = time.perf_counter()
                m.end(False)
                issuing += t1 - t0
                reading += time.perf_counter() - t1
        return issuing, reading
    for p in range(max(m.repeats for m in members)):
        issued = [(m, s) for m, s in zip(members, scopes) if p < m.repeats]
        t0 = time.perf_counter()
        for m, scope in issued:
            with scope:
                m.begin()
        t1 = time.perf_counter()
        for m, _ in issued:
            m.end(False)
        issuing += t1 - t0
        reading += time.perf_counter() - t1
    return issuing, reading


@contextlib.contextmanager
def _every_step_timed():
    """Every tenant step timed, as ``step_timing="every"`` does (without rebuilding the
    runtime's streams, as ``configure`` would)."""
    sample = Tenant.sample
    Tenant.sample = lambda self, now: True
    try:
        yield
    finally:
        Tenant.sample = sample


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workloads", nargs="?", default="dl,img,ml")
    p.add_argument("--scale", default="small")
    p.add_argument("--balance", action="store_true",
                   help="as many steps of each workload a round as take as long as the "
                        "longest's one")
    p.add_argument("--rounds", type=int, default=10, help="rounds per block")
    p.add_argument("--turns", type=int, default=6, help="blocks per way")
    p.add_argument("--num-blocks", type=int, default=None)
    args = p.parse_args(argv)
    mix = tuple(args.workloads.split(","))
    rt = current_runtime()
    blocks = args.num_blocks or (4 * getattr(rt.backend, "sm_count", 1)
                                 if rt.backend.name == "cuda" else 2)
    with bench._warm_members(ag, mix, args.scale, 256, blocks, False, 3) as members:
        alone = []
        for m in members:
            taken = []
            for _ in range(10):
                t0 = time.perf_counter()
                m.step(False)
                taken.append(time.perf_counter() - t0)
            alone.append(statistics.median(taken))
        if args.balance:
            for m, repeats in zip(members, bench.balanced(alone)):
                m.repeats = repeats
        outside = [contextlib.nullcontext() for _ in mix]
        scopes = [ag.tenant(f"{name}-step-cost") for name in mix]
        ways = {}
        for label, interleaved in (("", False), ("one thread", True)):
            prefix = f"{label}, " if label else ""
            ways[label or "sequential"] = (outside, interleaved, False)
            ways[f"{prefix}tenants, every step timed"] = (scopes, interleaved, True)
            ways[f"{prefix}tenants, sampled"] = (scopes, interleaved, False)
        names = list(ways)

        def run(name):
            scope_list, interleaved, every = ways[name]
            with _every_step_timed() if every else contextlib.nullcontext():
                spent = [_rounds(members, scope_list, interleaved) for _ in range(args.rounds)]
            return [sum(s[i] for s in spent) / args.rounds for i in (0, 1)]

        for name in names:          # (untimed: each way's first steps)
            run(name)
        per_round = {n: [] for n in names}
        split = {n: [] for n in names}
        for turn in range(args.turns):
            for name in names[turn % len(names):] + names[:turn % len(names)]:
                ag.synchronize()
                t0 = time.perf_counter()
                split[name].append(run(name))
                ag.synchronize()
                per_round[name].append((time.perf_counter() - t0) / args.rounds)
        for m in members:
            m.check()
    print(f"{','.join(mix)} ({args.scale}, steps a round: "
          f"{', '.join(f'{m.name} {m.repeats}' for m in members)}; us per round)")
    for name in names:
        speedup = statistics.median(s / t for s, t in zip(per_round["sequential"],
                                                           per_round[name]))
        issuing = statistics.median(s[0] for s in split[name]) * 1e6
        reading = statistics.median(s[1] for s in split[name]) * 1e6
        print(f"  {name:38s} {statistics.median(per_round[name]) * 1e6:9.1f}  "
              f"speedup {speedup:.3f}  issuing {issuing:8.1f}  reading {reading:8.1f}")


if __name__ == "__main__":
    main()
