"""Would a body's first launches, launched as their own graph (a head), start the GPU early enough
to pay for a second graph launch?

For each small workload the launches of ``run_device`` are collected once, then timed per
iteration (after an untimed reset, as in the benchmark, up to the end of the host read) as one
plain ``ag.graph`` of all of them (a steady segment, launched at its last kernel call: the
``recorded`` mode) and as two plain graphs, the first K launches and the rest ("cutK"). Medians
of six rounds of 27 timed iterations, the modes interleaved by round.
Results: docs/data/h100_head_cut_probe_stop25.txt.

usage: PYTHONPATH=. python3 tools/head_cut_probe.py [workload ...]   (a CUDA GPU)
"""
import json, statistics, sys, time
import asyncgpu as ag
from asyncgpu._runtime import current_runtime
from benchmarks.workloads import WORKLOADS

nb = 4 * current_runtime().backend.sm_count
out = {}
for name in sys.argv[1:] or ["vec", "bs", "img", "ml", "dl"]:
    wl = WORKLOADS[name](ag, "small")
    block = (8, 8) if wl.two_d else 256
    launches = []
    real = {k: v for k, v in vars(wl).items() if k.startswith("k_")}
    class Shim:
        def __init__(self, k): self.k = k
        def __getitem__(self, cfg):
            return lambda *a: launches.append((self.k, cfg, a))
    for k, v in real.items(): setattr(wl, k, Shim(v))
    wl.run_device(block, nb)
    for k, v in real.items(): setattr(wl, k, v)
    n = len(launches)
    def part(lo, hi):
        def f():
            for k, cfg, a in launches[lo:hi]:
                k[cfg](*a)
        return ag.graph(f)
    modes = {"whole": [part(0, n)]}
    for c in sorted({1, 2, n // 2}):
        if 0 < c < n:
            modes[f"cut{c}"] = [part(0, c), part(c, n)]
    times = {m: [] for m in modes}
    for rnd in range(6):
        for m, fns in modes.items():
            for i in range(30):
                wl.reset(); ag.synchronize()
                t0 = time.perf_counter()
                for f in fns: f()
                wl.read()
                if i >= 3: times[m].append((time.perf_counter() - t0) * 1e6)
    out[name] = {m: round(statistics.median(v), 1) for m, v in times.items()}
    out[name]["launches"] = n
    print(name, json.dumps(out[name]), flush=True)
