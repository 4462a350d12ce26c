"""``asyncgpu trace NAME``: one workload traced (timeline, DAG, pictures, overlap metrics)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .suite import bench_module, hand_schedule, pick_scale
from .tables import make_console, metrics_table, usage_error


def cmd_trace(args: argparse.Namespace) -> int:
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    harness = bench_module("harness")
    WORKLOADS = bench_module("workloads").WORKLOADS
    console = make_console()
    if args.name not in WORKLOADS:
        return usage_error("asyncgpu trace", f"unknown workload {args.name!r}; known: "
                           f"{sorted(WORKLOADS)}")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        # (before the run: the files go into a directory of that name)
        return usage_error("asyncgpu trace", f"--out {args.out!r} is a file; give a directory "
                           "(made if it does not exist)")
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as exc:
        return usage_error("asyncgpu trace", f"--out {args.out!r}: the directory cannot be "
                           f"made ({exc})")
    on_gpu, scale = pick_scale(ag, console, args.scale)
    ag.configure(backend="cuda" if on_gpu else "sim")
    cls = WORKLOADS[args.name]
    num_blocks = args.num_blocks or (4 * current_runtime().backend.sm_count if on_gpu else 2)
    two_d = getattr(cls, "two_d", False)
    block: Any = (8, 8) if two_d else args.block_size or 256
    if two_d and args.block_size is not None:
        console.print(f"[yellow]--block-size: {args.name} runs 2D blocks of (8, 8); the 1D "
                      "size is ignored[/]")
    wl = cls(ag, scale)
    # one untraced iteration first: compilation and first-touch costs stay out of the trace
    harness.run_mode(ag, wl, args.mode, block, num_blocks, 1, 0, args.inputs,
                     hand_schedule(current_runtime()))
    t = harness.traced_iteration(ag, wl, args.mode, block, num_blocks, args.inputs)
    stem = f"{args.name}_{args.mode}"
    paths = t.save(args.out, stem)
    m = t.metrics()
    table = metrics_table([{"workload": args.name, "block": str(block),
                            "metrics": {args.mode: m}}],
                          f"overlap of one traced {args.mode} iteration ({scale}, "
                          f"{'cuda' if on_gpu else 'sim: logical clock'})")
    console.print(table)
    # the kernels' streams only: a copy may have a stream to itself (Trace.streams counts it)
    kernel_streams = len({k.stream for k in t.kernels})
    console.print(f"{len(t.kernels)} kernels on {kernel_streams} streams, {len(t.copies)} copies, "
                  f"{len(t.prefetches)} prefetches, {len(t.syncs)} host waits")
    for kind, path in paths.items():
        console.print(f"wrote {kind}: {path}")
    return 0
