"""Instructions per host operation (callgrind), on the real ``cuda`` backend over the stand-in
CuPy (``tools/fakecupy``): counts that do not drift with the host's speed, so two trees (or
two versions of one) compare to a fraction of a percent where timings on a shared GPU
machine's host cannot resolve 10%.

Operations: an eager launch of a 1-array CUDA C kernel on the array the previous launch wrote
(``launch``), a synchronize with nothing pending (``sync``), the two together (``launch_sync``:
the first launch after a synchronize), a launch then a host read of one element
(``launch_read``), a host write of a 256 KiB array (``write``), a launch of the ``handopt``
baseline's hand-written schedule (``hand``), and ten launches then a ``synchronize``, on one
array (``chain10``) or on ten (``indep10``), and the chain of ten as a recorded body replayed
(``rec10``: the body runs with its launches deferred, then one graph launch) or replayed
without running it (``static10``). Each is counted inside a loop run by ``eval``
(``--toggle-collect``), at two loop lengths, so that what is counted once (the start of the
loop) cancels out: the result is ``(count(3000) - count(1000)) / 2000``.

With ``--pending`` the stand-in's events complete only at the next synchronize (a device,
stream or event synchronize), as on a GPU that is busy: launches then retire by polling and
at the synchronize, paths that the stand-in's always-complete events never take.

With ``--misses`` callgrind also simulates the caches (the host's sizes, as valgrind finds
them) and each operation reports, beside its instructions, its first-level cache misses:
instruction fetches (``I1mr``) and data reads (``D1mr``). Two trees that execute as many
instructions can still differ in time by how scattered the memory they touch is.

With ``--cold`` each run of an operation comes right after the host wrote 2 MiB (one byte per
64-byte line, as a benchmark iteration's reset rewrites its inputs), in a simulated last-level
cache of 1 MiB, the size of one core's second-level cache on the GPU hosts: the operation
then finds little of its code or data cached, as in a program that does other work between
launches, and each reports also its misses past that level (``ILmr``, ``DLmr``), less those
of the write alone. Code that runs once per iteration costs its size there: every cache line
of machine code it executes is fetched again.

usage: python3 tools/host_instructions.py [TREE ...] [--ops launch,sync] [--pending] [--misses]
       [--cold] [--json PATH]
       (default: the current tree; each TREE compiled as it is, or its launch path plain
       Python where it is not; needs valgrind, about half a minute per operation and loop,
       twice that with --misses)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile

DRIVER = r"""
import sys
sys.path[:0] = [".", "tools"]      # (host_paths puts the tree's tools/fakecupy first)
import numpy as np
import host_paths
import asyncgpu as ag
from asyncgpu.runtime.current import current_runtime
from benchmarks import overhead, replay
from benchmarks.handopt import Hand
if sys.argv[3] == "pending":     # (events complete at the next synchronize, not at once)
    import cupy
    epoch, by_handle = [1], {}

    class PendingEvent(cupy.cuda.Event):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.recorded = 0
            by_handle[self.ptr] = self
        done = property(lambda self: self.recorded < epoch[0])

        def synchronize(self):
            epoch[0] += 1

    def synchronized(*args):
        epoch[0] += 1

    def record(handle, stream):
        by_handle[handle].recorded = epoch[0]

    cupy.cuda.Event = PendingEvent
    cupy.cuda.Stream.synchronize = synchronized
    cupy.cuda.runtime.deviceSynchronize = synchronized
    cupy.cuda.runtime.streamSynchronize = synchronized
    cupy.cuda.runtime.eventRecord = record
host_paths.stand_in_runtime()
inc = ag.cuda_kernel(replay.INC, "inc")
k3 = ag.cuda_kernel(overhead._c_source(3), "k3")
three = tuple(ag.ones(32, np.float32) for _ in range(3))
x = ag.zeros(1 << 16, np.float32)
x0 = np.ones(1 << 16, np.float32)
res = ag.zeros(4, np.float32)
hand = Hand(current_runtime())
stream = hand.stream(0)
xs = [ag.zeros(32, np.float32) for _ in range(10)]


def ten(arrays):
    for i in range(10):
        inc[1, 32](arrays[i], 32)
    ag.synchronize()


def body():
    for _ in range(10):
        inc[1, 32](x, 32)


recorded, static = ag.graph(body), ag.graph(body, static=True)


OPS = {
    "chain10": lambda: ten([x] * 10),
    "indep10": lambda: ten(xs),
    "launch": lambda: inc[1, 32](x, 32),
    "sync": ag.synchronize,
    "launch_sync": lambda: (inc[1, 32](x, 32), ag.synchronize()),
    "launch_read": lambda: (inc[1, 32](res, 4), float(res[0])),
    "write": lambda: x.__setitem__(Ellipsis, x0),
    "hand": lambda: hand.launch(k3, 1, 32, stream, *three),
    "rec10": recorded,
    "static10": static,
    "nothing": lambda: None,        # (what --cold subtracts: the host's write alone)
}
op = OPS[sys.argv[1]]
if sys.argv[4] == "cold":       # (each run after the host wrote 2 MiB, one byte per line)
    junk = np.ones(2 << 20, np.uint8)
    warm_op = op

    def op():
        junk[::64] += 1
        warm_op()
for _ in range(300):
    op()
ag.synchronize()
eval("[op() for _ in range(n)]", {"op": op, "n": int(sys.argv[2])})
"""

OPS = ("launch", "sync", "launch_sync", "launch_read", "write", "hand", "chain10", "indep10",
       "rec10", "static10")


#: The events reported per operation: without and with ``--misses``.
EVENTS = ("Ir",)
MISS_EVENTS = ("Ir", "I1mr", "D1mr")
COLD_EVENTS = ("Ir", "I1mr", "D1mr", "ILmr", "DLmr")


def _count(tree: str, op: str, n: int, events: str, misses: bool, cold: bool = False
           ) -> dict[str, int]:
    """Callgrind's counts inside the loop of ``n`` runs of ``op``, by event name."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        env = dict(os.environ, PYTHONPATH=".", PYTHONHASHSEED="0")
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
             f"--cache-sim={'yes' if misses else 'no'}", "--toggle-collect=builtin_eval*",
             *(["--LL=1048576,16,64"] if cold else []),
             sys.executable, "-c", DRIVER, op, str(n), events, "cold" if cold else "warm"],
            cwd=tree, env=env, capture_output=True, text=True, check=False)
        found = re.search(r"Collected : ([\d ]+)", done.stderr)
        names = None
        if not done.returncode and os.path.exists(out):
            with open(out) as f:
                names = next((line.split()[1:] for line in f if line.startswith("events:")),
                             None)
        if done.returncode or not found or names is None:
            sys.exit(f"host_instructions.py: {op} in {tree} failed:\n{done.stderr[-3000:]}")
        return dict(zip(names, (int(v) for v in found.group(1).split())))


def per_op(tree: str, op: str, events: str = "done", misses: bool = False,
           cold: bool = False) -> dict[str, int]:
    """Per ``op`` in ``tree`` (``events``: ``done`` or ``pending``): its instructions
    (``Ir``) and, with ``misses``, its first-level cache misses (``I1mr``, ``D1mr``); with
    ``cold``, run after the host's 2 MiB write, also its last-level misses (``ILmr``,
    ``DLmr``), less those of the write alone."""
    if not cold:
        short, long = (_count(tree, op, n, events, misses) for n in (1000, 3000))
        return {e: round((long[e] - short[e]) / 2000)
                for e in (MISS_EVENTS if misses else EVENTS)}
    # (shorter loops: every run walks 2 MiB in the simulated caches)
    (a, b), (c, d) = ([_count(tree, name, n, events, True, True) for n in (200, 600)]
                      for name in (op, "nothing"))
    return {e: round(((b[e] - a[e]) - (d[e] - c[e])) / 400) for e in COLD_EVENTS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", default=["."])
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--pending", action="store_true",
                        help="events complete at the next synchronize, not at once")
    parser.add_argument("--misses", action="store_true",
                        help="also the first-level cache misses (callgrind's cache simulation)")
    parser.add_argument("--cold", action="store_true",
                        help="each run after the host wrote 2 MiB, in a simulated 1 MiB last "
                             "level: also the misses that go past it")
    parser.add_argument("--json")
    args = parser.parse_args()
    ops = args.ops.split(",")
    jobs = [(tree, op) for op in ops for tree in args.trees]
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        counts = dict(zip(jobs, pool.map(
            lambda job: per_op(*job, "pending" if args.pending else "done", args.misses,
                               args.cold),
            jobs)))
    events = COLD_EVENTS if args.cold else MISS_EVENTS if args.misses else EVENTS
    print(f"{'operation':12s}" + "".join(f"{tree + ' ' + e:>20s}" for tree in args.trees
                                         for e in events))
    for op in ops:
        print(f"{op:12s}" + "".join(f"{counts[tree, op][e]:20,d}" for tree in args.trees
                                    for e in events))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({tree: {op: counts[tree, op] if args.misses or args.cold
                              else counts[tree, op]["Ir"]
                              for op in ops} for tree in args.trees}, f, indent=1)


if __name__ == "__main__":
    main()
