"""Where a high-priority tenant's step time goes beside another workload.

Runs one workload of the suite as a high-priority tenant, step after step, while others run
their steps as normal tenants, each on a thread of its own, and times each high-priority step's
phases on the host: the reset of its accumulators, its launches, and its read of the result
(which waits for its kernels), with the objects made in the warm-up frozen out of the garbage
collector as in the benchmark. The same with the high-priority tenant made exclusive
(``exclusive=True``), and for the workload alone. Medians, 90th percentiles and maxima in ms.

With ``--stalls``, a sampler thread wakes every 0.3 ms during the steps beside the other
workloads; a gap between its wake-ups means some thread held the GIL that long (a C call
that waits without releasing it). It prints the longest gaps and where every thread was
just before and after each.

With ``--trace``, the steps beside the other workloads are traced too (``asyncgpu.trace``), and
for the median and the slowest high-priority step it prints what ran on the device meanwhile:
each node's kind, name and stream, and its enqueue, start and end in ms from the step's start
(``*``: the high-priority tenant's). A kernel of the high-priority tenant that takes twice
its time alone while the other's kernels run beside it is sharing multiprocessors, which
stream priorities do not prevent.

usage: PYTHONPATH=. python3 tools/tenant_phases.py [HIGH] [OTHER[,OTHER...]] [--scale medium]
       [--steps 25] [--num-blocks 4*SMs] [--backend cuda] [--trace] [--stalls]
       (default: dl beside ml; ``--backend sim --scale tiny`` checks that it runs, its times
       are the simulator's)
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import threading
import time

PHASES = ("reset", "launch", "read", "step")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("high", nargs="?", default="dl")
    parser.add_argument("other", nargs="?", default="ml",
                        help="the normal tenants' workloads, comma-separated")
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--num-blocks", type=int, default=0,
                        help="blocks per kernel launch (default: 4 per multiprocessor, as the "
                             "benchmark's)")
    parser.add_argument("--backend", default="cuda", choices=("cuda", "sim"))
    parser.add_argument("--trace", action="store_true",
                        help="trace the steps beside the other workload and print what ran "
                             "on the device during the median and the slowest one")
    parser.add_argument("--stalls", action="store_true",
                        help="sample every thread's stack beside the other workloads and print "
                             "the longest spells in which no thread gave up the GIL")
    args = parser.parse_args()

    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime
    from benchmarks import tenants

    ag.configure(backend=args.backend)
    rt = current_runtime()
    # (the benchmark's launch shape; the simulator runs a block's threads one by one)
    gpu = args.backend == "cuda"
    block, blocks = (256, 4 * rt.backend.sm_count) if gpu else (32, 2)
    blocks = args.num_blocks or blocks
    high = tenants._Member(ag, args.high, args.scale, block, blocks, False)
    others = [tenants._Member(ag, name, args.scale, block, blocks, False)
              for name in args.other.split(",")]
    for member in (high, *others):
        for _ in range(3):
            member.step(False)
    # (as the tenants benchmark does after its warm-up: a full collection, up to 110 ms with
    # the GIL held, would land in some step of both threads)
    gc.collect()
    gc.freeze()
    times: dict[str, list[float]] = {p: [] for p in PHASES}
    spans: list[tuple[float, float]] = []      # each high-priority step's start and end

    def high_step() -> None:
        wl = high.wl
        t0 = time.perf_counter()
        reset = getattr(wl, "reset_accumulators", None)
        if reset is not None:
            reset()
        t1 = time.perf_counter()
        wl.run_device(block, blocks)
        t2 = time.perf_counter()
        wl.read()
        t3 = time.perf_counter()
        for phase, seconds in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t3 - t0)):
            times[phase].append(seconds * 1e3)
        spans.append((t0, t3))

    def run(label: str, beside: bool, traced: bool = False, exclusive: bool = False) -> None:
        for v in times.values():
            v.clear()
        spans.clear()
        scope = ag.tenant(f"{args.high} ({label})", priority="high", exclusive=exclusive)
        stop = threading.Event()

        def other_steps(member: object, other_scope: object) -> None:
            while not stop.is_set():
                with other_scope:
                    member.step(False)

        threads = [threading.Thread(target=other_steps, name=member.name,
                                    args=(member, ag.tenant(f"{member.name} ({label})")))
                   for member in others] if beside else []
        sampler = _Sampler(args.high) if beside and args.stalls else None
        if sampler is not None:
            threads.append(threading.Thread(target=sampler.run, args=(stop,), name="sampler"))
        trace = ag.trace() if traced else None
        if trace is not None:
            trace.start()
        for thread in threads:
            thread.start()
        if threads:
            time.sleep(0.05)
        try:
            for _ in range(args.steps):
                with scope:
                    high_step()
        finally:
            stop.set()
            for thread in threads:
                thread.join()
            if trace is not None:
                trace.stop()
        ag.synchronize()
        print(f"{label:34s} " + "  ".join(f"{p} {_median(times[p]):7.3f} / {_p90(times[p]):7.3f}"
                                           f" / {max(times[p]):7.3f}" for p in PHASES),
              flush=True)
        if trace is not None:
            _print_device(trace, spans, scope.name)
        if sampler is not None:
            sampler.report()

    print(f"{args.high} (high priority), ms, median / p90 / max, {args.steps} steps")
    # (alone first and exclusive last: once a tenant is exclusive, every other tenant keeps
    # one launch in flight for as long as it exists)
    run("alone", False)
    run(f"beside {args.other}", True, args.trace)
    run(f"beside {args.other}, exclusive", True, args.trace, exclusive=True)


def _print_device(trace: object, spans: list[tuple[float, float]], high: str) -> None:
    """What ran on the device during the median and the slowest step of tenant ``high``."""
    if trace.logical_clock:
        print("  (the simulator's device clock is logical: it does not line up with host times)")
        return
    origin = trace.started
    steps = [(a - origin, b - origin) for a, b in spans]
    order = sorted(range(len(steps)), key=lambda i: steps[i][1] - steps[i][0])
    nodes = sorted([n for n in trace.device_nodes if n.start_s is not None],
                   key=lambda n: n.start_s)
    for i in dict.fromkeys((order[len(order) // 2], order[-1])):
        a, b = steps[i]
        print(f"  step {i}: {(b - a) * 1e3:.2f} ms; on the device meanwhile (ms from its start; "
              "* its tenant's):")
        for n in nodes:
            if n.end_s >= a and n.start_s <= b:
                own = "*" if n.tenant == high else " "
                print(f"    {own} {n.kind:6s} {n.name[:24]:24s} stream {n.stream:<3} enqueued "
                      f"{(n.enqueue_s - a) * 1e3:8.2f}  start {(n.start_s - a) * 1e3:8.2f}  end "
                      f"{(n.end_s - a) * 1e3:8.2f}")


class _Sampler:
    """Wakes every 0.3 ms and notes each thread's innermost frames; a long gap between two
    wake-ups is a spell in which some thread kept the GIL."""

    def __init__(self, main: str) -> None:
        self.main = main                # (the name the main thread's frames are shown under)
        self.samples: list[tuple[float, dict[str, list[str]]]] = []

    def run(self, stop: threading.Event) -> None:
        names = {t.ident: t.name for t in threading.enumerate()}
        names[threading.main_thread().ident] = self.main
        while not stop.is_set():
            frames = sys._current_frames()
            snap = {}
            for ident, frame in frames.items():
                name = names.get(ident)
                if name is None or name == "sampler":
                    continue
                where = []
                while frame is not None and len(where) < 4:
                    code = frame.f_code
                    where.append(f"{code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno} "
                                 f"{code.co_name}")
                    frame = frame.f_back
                snap[name] = where
            self.samples.append((time.perf_counter(), snap))
            time.sleep(0.0003)

    def report(self, shown: int = 3) -> None:
        s = self.samples
        gaps = sorted(((s[i + 1][0] - s[i][0], i) for i in range(len(s) - 1)), reverse=True)
        print(f"  longest spells without the GIL for the sampler, ms: "
              f"{', '.join(f'{g * 1e3:.1f}' for g, _ in gaps[:8])}")
        for gap, i in gaps[:shown]:
            if gap < 0.002:
                break
            print(f"  {gap * 1e3:.1f} ms; each thread before -> after:")
            before, after = s[i][1], s[i + 1][1]
            for name in sorted(set(before) | set(after)):
                print(f"    {name:12s} {' < '.join(before.get(name, ['-'])[:2])}  ->  "
                      f"{' < '.join(after.get(name, ['-'])[:2])}")


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


if __name__ == "__main__":
    main()
