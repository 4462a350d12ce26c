"""A/B host-time comparison of two source trees on one GPU machine, interleaved in time.

The GPU machine's host changes speed from second to second (the same launch loop measured
5 to 7.6 us in processes a few seconds apart), so two runs one after the other, or even two
fresh processes in turn, do not resolve a few percent. This keeps one worker process per tree
alive (``cwd`` the tree, ``PYTHONPATH=.``), each with every case set up once, and asks them in
turn for short bursts of the same case (about ``burst_ms`` each, the order alternating between
rounds), so both trees' samples of a round are taken within a fraction of a second of each
other. Per case it reports each tree's median and the median over the rounds of the paired
ratio new over old; ``over_control`` divides each round's ratio by that round's ratio of the
raw CuPy launch (the same code in both trees), which takes out what drift is left. A worker
of a tree with the interference rule names, at the end, the pairs it kept apart (on stderr).

usage: PYTHONPATH=. python3 tools/ab_host.py OLD_TREE [rounds] [VAR=VALUE ...] > ab.json
  (the current directory is the new tree; each VAR=VALUE is set in the old side's environment
  only, so ``. 30 ASYNCGPU_SINGLE_NODE_GRAPHS=0`` compares one option within this tree;
  ``taskset -c 4-7`` around it keeps both workers on the same cores; ``AB_BURST_MS``, default
  40, the length of a burst; ``AB_SUITE=medium:vec,bs:serial,parallel`` adds those cells of
  the benchmark suite (several such specs joined by ``;``), each burst a block of iterations timed as the suite times them
  (``benchmarks.harness.ModeRun``, streaming inputs, block size 256), its median reported;
  ``AB_WORKERS=3`` keeps three workers per tree, asked in turn each round: one process can
  run steadily slower than another of the same code (by 15% for the same small launches on
  an H200 machine), which more processes average out; each case then also reports the
  median ratio of each pair of processes)

Cases (host microseconds; eager launches per launch, replays per kernel of a body of 10):
the 3-array CUDA C and Numba kernels of ``benchmarks.overhead``, independent and with one
cross-stream wait, the raw CuPy launch of the same CUDA C kernel (the control), the bodies of
``benchmarks.replay`` (a chain and 10 independent kernels: eager, recorded, recorded_static;
each call timed alone, the device synchronized between calls outside the timing), and a
launch followed by a host read of one element of the array it wrote.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from typing import Any

WORKER = r"""
import json, os, statistics, sys, time
SUITE = os.environ.get("AB_SUITE", "")
import cupy, numpy as np
import asyncgpu as ag
from asyncgpu.runtime.current import current_runtime
from benchmarks import overhead, replay
stream = cupy.cuda.Stream(non_blocking=True)
def sync():
    stream.synchronize(); ag.synchronize()
cases = {}
k3 = ag.cuda_kernel(overhead._c_source(3), "k3")
for name, fn in overhead._ag_cases(ag, k3, 3).items():
    cases[f"launch {name}"] = (fn, 1)
nb = ag.kernel(overhead._numba_kernel(3), const=["a0", "a1"])
for name, fn in overhead._ag_cases(ag, nb, 3).items():
    cases[f"launch numba {name}"] = (fn, 1)
raw = cupy.RawKernel(overhead._c_source(3), "k3")
arrays = [cupy.ones(32, np.float32) for _ in range(3)]
def cupy_raw(n):
    for _ in range(n):
        raw((1,), (32,), tuple(arrays), stream=stream)
cases["launch cupy_raw"] = (cupy_raw, 1)
inc = ag.cuda_kernel(replay.INC, "inc")
for shape in ("chain", "independent"):
    xs = [ag.zeros(32, np.float32) for _ in range(1 if shape == "chain" else 10)]
    def body(xs=xs):
        for i in range(10):
            inc[1, 32](xs[i % len(xs)], 32)
    for mode, fn in (("eager", body), ("recorded", ag.graph(body)),
                     ("recorded_static", ag.graph(body, static=True))):
        def calls(n, fn=fn):
            spent = 0.0
            clock = time.perf_counter
            for _ in range(n):
                t0 = clock()
                fn()
                spent += clock() - t0
                ag.synchronize()
            return spent
        cases[f"{shape}/10 {mode}"] = (calls, 10)
x = ag.zeros(32, np.float32)
def launch_then_read(n):
    for _ in range(n):
        inc[1, 32](x, 32)
        float(x[0])
cases["launch then read one element"] = (launch_then_read, 1)
least = {}      # case -> the fewest calls in a burst
if SUITE:      # suite cells: per iteration (host and device), streaming inputs
    from benchmarks import harness
    from benchmarks.handopt import Hand
    from benchmarks.workloads import WORKLOADS
    from benchmarks.cudagraph import GraphHand
    num_blocks = 4 * current_runtime().backend.sm_count
    for spec in SUITE.split(";"):
        scale, names, modes = spec.split(":")
        for name in names.split(","):
            wl = WORKLOADS[name](ag, scale)
            hand, graph_hand = Hand(current_runtime()), GraphHand(current_runtime())
            block = (8, 8) if getattr(wl, "two_d", False) else 256
            for mode in modes.split(","):
                try:
                    run = harness.ModeRun(ag, wl, mode, block, num_blocks, "streaming",
                                          graph_hand if mode == "cudagraph" else hand)
                except Exception as exc:      # (left out of the comparison)
                    print(f"{scale} {name} {mode}: {exc!r}", file=sys.stderr)
                    continue
                def cell(n, run=run):
                    times = run.iterations(n)
                    return statistics.median(times) * n     # (per iteration: the median)
                cases[f"{scale} {name} {mode}"] = (cell, 1)
                least[f"{scale} {name} {mode}"] = 5
def burst(fn, n):
    sync()
    t0 = time.perf_counter()
    own = fn(n)
    spent = own if own is not None else time.perf_counter() - t0
    sync()
    return spent
counts = {}
for name, (fn, per) in cases.items():       # warm up, and size each burst
    n = least.get(name, 20)
    burst(fn, n)
    while (spent := burst(fn, n)) < 0.005:
        n *= 2
    counts[name] = max(least.get(name, 1), int(n * float(sys.argv[1]) / 1000 / spent))
print(json.dumps(sorted(cases)), flush=True)
for line in sys.stdin:
    fn, per = cases[line.strip()]
    n = counts[line.strip()]
    print(json.dumps(burst(fn, n) / (n * per) * 1e6), flush=True)
rule = getattr(current_runtime(), "interference", None)     # (a tree with the rule)
if rule is not None:
    kept = sorted({(a[0].name, b[0].name) for (a, b), apart in rule.verdicts.items() if apart})
    print(f"{os.getcwd()}: pairs kept apart by the interference rule: {kept}", file=sys.stderr)
"""

CONTROL = "launch cupy_raw"      # the case whose code does not change between the trees


def build(tree: str) -> None:
    """Compile a tree's launch path in place: ``setup.py build_ext --inplace`` (Cython), or,
    in an older tree, its ``tools/build_speedups.py``."""
    script = os.path.join(os.path.abspath(tree), "tools", "build_speedups.py")
    command = [sys.executable, script] if os.path.exists(script) else \
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace"]
    subprocess.run(command, cwd=tree, check=True, capture_output=True)


class Worker:
    """One tree's worker process running ``code`` (default: this tool's ``WORKER``) with
    ``args``: its first line is the JSON list of its cases; then ``ask(case)`` returns the
    JSON answer of one line (here: the host us of one burst)."""

    def __init__(self, tree: str, extra: dict[str, str], *args: str, code: str = WORKER
                 ) -> None:
        env = dict(os.environ, PYTHONPATH=".", PYTHONWARNINGS="ignore", **extra)
        self.proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=tree,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.cases = json.loads(self._line())

    def _line(self) -> str:
        line = self.proc.stdout.readline()
        if not line:
            sys.exit(f"ab_host.py: a worker stopped (exit status {self.proc.wait()})")
        return line

    def ask(self, case: str) -> Any:
        self.proc.stdin.write(case + "\n")
        return json.loads(self._line())

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main() -> None:
    old_tree = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    old_env = dict(arg.split("=", 1) for arg in sys.argv[3:])
    burst_ms = float(os.environ.get("AB_BURST_MS", "40"))
    for tree in (".", old_tree):
        build(tree)
    pairs = [(Worker(".", {}, str(burst_ms)), Worker(old_tree, old_env, str(burst_ms)))
             for _ in range(int(os.environ.get("AB_WORKERS", "1")))]
    cases = [c for c in pairs[0][0].cases if c in pairs[0][1].cases]
    samples: dict[str, list[tuple[float, float]]] = {c: [] for c in cases}
    for r in range(rounds):
        for case in cases:
            for new, old in pairs:
                if r % 2 == 0:
                    a = new.ask(case)
                    b = old.ask(case)
                else:
                    b = old.ask(case)
                    a = new.ask(case)
                samples[case].append((a, b))
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
    control = [a / b for a, b in samples[CONTROL]] if CONTROL in samples else None
    summary = {}
    for case, timed in samples.items():
        ratios = [a / b for a, b in timed]
        summary[case] = {
            "new_median_us": statistics.median(a for a, _ in timed),
            "old_median_us": statistics.median(b for _, b in timed),
            "new_over_old_median": statistics.median(ratios),
            "new_over_old_quartiles": statistics.quantiles(ratios, n=4)[::2],
        }
        if control is not None:
            summary[case]["over_control_median"] = statistics.median(
                r / c for r, c in zip(ratios, control))
        if len(pairs) > 1:      # (how far the pairs of processes disagree)
            summary[case]["per_pair_ratio_median"] = [
                statistics.median(ratios[i::len(pairs)]) for i in range(len(pairs))]
    json.dump({"rounds": rounds, "burst_ms": burst_ms, "samples": samples,
               "summary": summary}, sys.stdout, indent=1)
    sys.stdout.flush()
    for new, old in pairs:      # (after the results: a worker can hang in CUDA's teardown)
        new.close()
        old.close()


if __name__ == "__main__":
    main()
