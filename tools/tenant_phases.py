"""Where a high-priority tenant's step time goes beside another workload.

Runs one workload of the suite as a high-priority tenant, step after step, while another runs
its steps as a normal tenant on a second thread, and times each high-priority step's phases on
the host: the reset of its accumulators, its launches, and its read of the result (which waits
for its kernels). The same for the workload alone, and beside the other with chunked copies
off (``copy_chunks=1``). Medians and 90th percentiles in ms.

usage: PYTHONPATH=. python3 tools/tenant_phases.py [HIGH] [OTHER] [--scale medium]
       [--steps 25] [--backend cuda]      (default: dl beside ml; ``--backend sim --scale
       tiny`` checks that it runs, its times are the simulator's)
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

PHASES = ("reset", "launch", "read", "step")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("high", nargs="?", default="dl")
    parser.add_argument("other", nargs="?", default="ml")
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--backend", default="cuda", choices=("cuda", "sim"))
    args = parser.parse_args()

    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime
    from benchmarks import tenants

    ag.configure(backend=args.backend)
    rt = current_runtime()
    # (the benchmark's launch shape; the simulator runs a block's threads one by one)
    gpu = args.backend == "cuda"
    block, blocks = (256, 4 * rt.backend.sm_count) if gpu else (32, 2)
    high = tenants._Member(ag, args.high, args.scale, block, blocks, False)
    other = tenants._Member(ag, args.other, args.scale, block, blocks, False)
    for member in (high, other):
        for _ in range(3):
            member.step(False)
    times: dict[str, list[float]] = {p: [] for p in PHASES}

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

    def run(label: str, beside: bool) -> None:
        for v in times.values():
            v.clear()
        scope = ag.tenant(f"{args.high} ({label})", priority="high")
        other_scope = ag.tenant(f"{args.other} ({label})")
        stop = threading.Event()

        def other_steps() -> None:
            while not stop.is_set():
                with other_scope:
                    other.step(False)

        thread = threading.Thread(target=other_steps) if beside else None
        if thread is not None:
            thread.start()
            time.sleep(0.05)
        try:
            for _ in range(args.steps):
                with scope:
                    high_step()
        finally:
            stop.set()
            if thread is not None:
                thread.join()
        ag.synchronize()
        print(f"{label:34s} " + "  ".join(f"{p} {_median(times[p]):7.3f} / {_p90(times[p]):7.3f}"
                                           for p in PHASES), flush=True)

    print(f"{args.high} (high priority), ms, median / p90, {args.steps} steps")
    run(f"beside {args.other}", True)
    chunks = rt.options.copy_chunks
    ag.configure(copy_chunks=1)         # (the same runtime: only the option changes)
    try:
        run(f"beside {args.other}, copy_chunks=1", True)
    finally:
        ag.configure(copy_chunks=chunks)
    run("alone", False)


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


if __name__ == "__main__":
    main()
