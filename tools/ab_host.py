"""A/B host-time comparison of two trees on one GPU machine, in alternating processes.

The device tool's host changes speed from minute to minute (eager launches measured 13 to 28 us
in one run), so two benchmark runs one after the other do not compare. This runs each tree in
turn, ``rounds`` times, each in a fresh process (the order alternates), and reports per round
the ratio of the two trees' numbers measured a few seconds apart, then the median ratio.

usage: PYTHONPATH=. python3 tools/ab_host.py OLD_TREE [rounds] [all|reads] [VAR=VALUE ...]
  (the current directory is tree B, "new"; OLD_TREE is tree A; ``reads``: only the two
  probes of host reads after a launch, a few seconds per process; each VAR=VALUE is set in
  the old side's environment only, so ``. 8 all ASYNCGPU_DIRECT_DRIVER=0`` compares one
  option within this tree)

Each case's summary also gives ``over_control_median``: the median over the rounds of its ratio
divided by that round's ratio of the raw CuPy launch, the same code in both trees (present
when that probe ran), which takes out how much faster the host ran for one tree's process.

Measured per process: the replay micro-benchmark's host us per kernel (10-kernel chain and
10 independent kernels: eager, recorded, recorded_static; ``benchmarks.replay``) and the eager
launch of the 3-array CUDA C kernel (independent and with one cross-stream wait) next to the
raw CuPy launch (``benchmarks.overhead``), the same two for the 3-array Numba kernel, and a
launch followed by a host read of one element of the array it wrote (the read waits for the
kernel and copies the bytes back), or of eight elements one by one (a small array: fetched
whole by the first read). On the GPU machine, ``taskset -c 4-7`` around it gave the quietest
rounds (one core slows the processes' own helper threads).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

PROBE = r"""
import json, sys
import cupy, numpy as np
import asyncgpu as ag
from benchmarks import overhead, replay
out = {}
stream = cupy.cuda.Stream(non_blocking=True)
def sync():
    stream.synchronize(); ag.synchronize()
if sys.argv[1] == "all":
    for case, v in replay.measure(ag, sizes=(10,), iterations=40).items():
        for mode in ("eager", "recorded", "recorded_static"):
            out[f"{case} {mode}"] = v[f"{mode}_host_us"]
    k = ag.cuda_kernel(overhead._c_source(3), "k3")
    raw = cupy.RawKernel(overhead._c_source(3), "k3")
    arrays = [cupy.ones(32, np.float32) for _ in range(3)]
    loops = dict(overhead._ag_cases(ag, k, 3))
    nb = ag.kernel(overhead._numba_kernel(3), const=["a0", "a1"])
    loops.update({f"numba {case}": fn for case, fn in overhead._ag_cases(ag, nb, 3).items()})
    loops["cupy_raw"] = lambda n: [raw((1,), (32,), tuple(arrays), stream=stream)
                                   for _ in range(n)] and None
    for name, fn in loops.items():
        fn(50); sync()
        out[f"launch {name}"] = overhead._per_launch(fn, 2000, sync, 5)["median_us"]
inc = ag.cuda_kernel(replay.INC, "inc")
x = ag.zeros(32, np.float32)
for reads, name, count in ((1, "one element", 1000), (8, "8 elements", 500)):
    def launch_then_read(n, reads=reads):
        for _ in range(n):
            inc[1, 32](x, 32)
            for i in range(reads):
                float(x[i])
    launch_then_read(50)
    out[f"launch then read {name}"] = overhead._per_launch(launch_then_read, count, sync, 5)[
        "median_us"]
print(json.dumps(out))
"""


def probe(tree: str, which: str, extra: dict[str, str] | None = None) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=".", PYTHONWARNINGS="ignore", **(extra or {}))
    done = subprocess.run([sys.executable, "-c", PROBE, which], cwd=tree, env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def build(tree: str) -> None:
    """Compile a tree's launch path in place: ``setup.py build_ext --inplace`` (Cython), or,
    in an older tree, its ``tools/build_speedups.py``."""
    script = os.path.join(os.path.abspath(tree), "tools", "build_speedups.py")
    command = [sys.executable, script] if os.path.exists(script) else \
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace"]
    subprocess.run(command, cwd=tree, check=True, capture_output=True)


CONTROL = "launch cupy_raw"      # the probe whose code does not change between the trees


def main() -> None:
    old = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    which = sys.argv[3] if len(sys.argv) > 3 else "all"
    if which not in ("all", "reads"):
        sys.exit(f"ab_host.py: the probes are 'all' or 'reads', not {which!r}")
    old_env = dict(arg.split("=", 1) for arg in sys.argv[4:])
    for tree in (".", old):
        build(tree)
    runs: list[dict[str, dict[str, float]]] = []
    for r in range(rounds):
        order = (("new", "."), ("old", old)) if r % 2 == 0 else (("old", old), ("new", "."))
        runs.append({name: probe(tree, which, old_env if name == "old" else None)
                     for name, tree in order})
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
    keys = list(runs[0]["new"])
    # The raw CuPy launch is the same code in both trees: its ratio in a round is how much
    # faster or slower the host ran for the new tree's process than for the old one's.
    control = ([run["new"][CONTROL] / run["old"][CONTROL] for run in runs]
               if CONTROL in keys else None)
    summary = {}
    for key in keys:
        ratios = [run["new"][key] / run["old"][key] for run in runs]
        summary[key] = {
            "new_median_us": statistics.median(run["new"][key] for run in runs),
            "old_median_us": statistics.median(run["old"][key] for run in runs),
            "new_over_old_median": statistics.median(ratios),
            "new_over_old_per_round": ratios,
        }
        if control is not None:
            summary[key]["over_control_median"] = statistics.median(
                r / c for r, c in zip(ratios, control))
    json.dump({"rounds": runs, "summary": summary}, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
