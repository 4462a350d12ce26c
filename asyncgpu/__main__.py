"""Command line: ``asyncgpu bench ...`` (the benchmark suite), ``asyncgpu trace ...`` (one
workload traced: timeline, DAG, overlap metrics) and ``asyncgpu info``.

``python -m asyncgpu`` works the same as the installed ``asyncgpu`` command. This is an
application, so unlike the library it writes to the terminal (through ``rich``).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from typing import Any

SCALES = ("tiny", "small", "medium", "large")


def _print_overhead(console: Any, m: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title="host microseconds per launch (median, p10-p90)")
    for col in ("case", "median", "p10", "p90"):
        table.add_column(col, justify="left" if col == "case" else "right")
    for group in ("cases", "components", "options", "runtime_only"):
        for name, v in m.get(group, {}).items():
            label = name if group == "cases" else f"{group.replace('_', ' ')}: {name}"
            table.add_row(label, f"{v['median_us']:.2f}", f"{v['p10_us']:.2f}",
                          f"{v['p90_us']:.2f}")
    console.print(table)
    for group in ("event_waits_per_timed_launch", "event_queries_per_launch", "ratios", "floor",
                  "flat"):
        for name, v in m.get(group, {}).items():
            console.print(f"{group}: {name} = {v:.3f}")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="asyncgpu", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench", help="run the benchmark suite (GrCUDA's workloads)")
    b.add_argument("names", nargs="*", default=["all"],
                   help="workloads (vec bs img ml hits dl), 'all', or 'overlap', 'overhead', "
                        "'inception', 'replay'")
    b.add_argument("--scale", choices=SCALES, default=None,
                   help="problem size (default: medium on a GPU, tiny on the simulator)")
    b.add_argument("--modes", default="serial,parallel,handopt",
                   help="comma-separated: serial, parallel, handopt, cudagraph, recorded")
    b.add_argument("--block-sizes", default=None,
                   help="comma-separated 1D block sizes (default 32,128,256,1024; 32 on sim)")
    b.add_argument("--num-blocks", type=int, default=None,
                   help="blocks per launch (default: 4 x the SM count; 2 on sim)")
    b.add_argument("--inputs", choices=("streaming", "resident"), default="streaming")
    b.add_argument("--iterations", type=int, default=None, help="timed iterations (default 20)")
    b.add_argument("--warmup", type=int, default=3, help="untimed iterations first (default 3)")
    b.add_argument("--rounds", type=int, default=1,
                   help="split each mode's timed iterations into this many blocks taken in "
                        "turn with the other modes' (default 1: one mode after the other)")
    b.add_argument("--json", default=None, help="write every iteration's time here")
    b.add_argument("--plot", default=None, help="write a speedup plot (PNG) here")
    b.add_argument("--metrics", action="store_true",
                   help="trace one extra untimed iteration per mode: overlap metrics CT/TC/CC/TOT")
    b.add_argument("--no-bounds", action="store_true",
                   help="skip the transfer and compute bounds (they need serial and parallel)")
    b.add_argument("--memory", choices=("managed", "explicit", "both"), default=None,
                   help="memory model(s) to measure, side by side with 'both' (default: the "
                        "one in force, ASYNCGPU_MEMORY)")
    t = sub.add_parser("trace", help="run one workload traced; write trace, DOT, pictures, metrics")
    t.add_argument("name", help="workload (vec bs img ml hits dl)")
    t.add_argument("--scale", choices=SCALES, default=None,
                   help="problem size (default: medium on a GPU, tiny on the simulator)")
    t.add_argument("--mode", choices=("serial", "parallel", "handopt"), default="parallel")
    t.add_argument("--block-size", type=int, default=256, help="1D block size (default 256)")
    t.add_argument("--num-blocks", type=int, default=None,
                   help="blocks per launch (default: 4 x the SM count; 2 on sim)")
    t.add_argument("--inputs", choices=("streaming", "resident"), default="streaming")
    t.add_argument("--out", required=True, help="directory for the files")
    sub.add_parser("info", help="show the backend, device and options in force")
    return p


def _console() -> Any:
    from rich.console import Console

    return Console(width=max(Console().width, 130))


def _write_micro(path: str, name: str, values: dict[str, float], machine: dict[str, Any]) -> None:
    with open(path, "w") as f:
        json.dump({name: values, "machine": machine}, f, indent=1)


def _scale(ag: Any, console: Any, requested: str | None) -> tuple[bool, str]:
    from asyncgpu.backends import resolve

    on_gpu = resolve(ag.options()) == "cuda"
    scale = requested or ("medium" if on_gpu else "tiny")
    if not on_gpu:
        if scale != "tiny":
            console.print(f"[yellow]no GPU: the '{scale}' scale needs one; running 'tiny'[/]")
        scale = "tiny"
        console.print("[yellow]No usable GPU: running the tiny scale on the CPU simulator "
                      "(sim backend). Results are checked; times are not GPU times.[/]")
    return on_gpu, scale


def _fmt(v: Any, scale: float = 1.0, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v * scale:.{digits}f}"


def _metrics_table(rows: list[dict[str, Any]], title: str) -> Any:
    from rich.table import Table

    table = Table(title=title)
    for col in ("workload", "block", "mode", "CT", "TC", "CC", "TOT"):
        table.add_column(col, justify="right")
    for row in rows:
        for mode, m in row.get("metrics", {}).items():
            table.add_row(row["workload"], row["block"], mode,
                          *[_fmt(m[k], digits=2) for k in ("CT", "TC", "CC", "TOT")])
    return table


def cmd_trace(args: argparse.Namespace) -> int:
    import asyncgpu as ag
    from asyncgpu._runtime import current_runtime

    from benchmarks import harness
    from benchmarks.workloads import WORKLOADS

    console = _console()
    if args.name not in WORKLOADS:
        console.print(f"[red]unknown workload {args.name!r}; known: {sorted(WORKLOADS)}[/]")
        return 2
    on_gpu, scale = _scale(ag, console, args.scale)
    ag.configure(backend="cuda" if on_gpu else "sim")
    cls = WORKLOADS[args.name]
    num_blocks = args.num_blocks or (4 * current_runtime().backend.sm_count if on_gpu else 2)
    block: Any = (8, 8) if getattr(cls, "two_d", False) else args.block_size
    wl = cls(ag, scale)
    # one untraced iteration first: compilation and first-touch costs stay out of the trace
    harness.run_mode(ag, wl, args.mode, block, num_blocks, 1, 0, args.inputs,
                     _hand(current_runtime()))
    t = harness.traced_iteration(ag, wl, args.mode, block, num_blocks, args.inputs)
    stem = f"{args.name}_{args.mode}"
    paths = t.save(args.out, stem)
    m = t.metrics()
    table = _metrics_table([{"workload": args.name, "block": str(block),
                             "metrics": {args.mode: m}}],
                           f"overlap of one traced {args.mode} iteration ({scale}, "
                           f"{'cuda' if on_gpu else 'sim: logical clock'})")
    console.print(table)
    console.print(f"{len(t.kernels)} kernels on {t.streams} streams, {len(t.copies)} copies, "
                  f"{len(t.prefetches)} prefetches, {len(t.syncs)} host waits")
    for kind, path in paths.items():
        console.print(f"wrote {kind}: {path}")
    return 0


def _hand(rt: Any) -> Any:
    from benchmarks.handopt import Hand

    return Hand(rt)


def cmd_bench(args: argparse.Namespace) -> int:
    import asyncgpu as ag

    console = _console()
    on_gpu, scale = _scale(ag, console, args.scale)
    from rich.progress import Progress
    from rich.table import Table

    from benchmarks import harness

    try:
        from benchmarks.workloads import WORKLOADS
    except ImportError:  # a checkout without the workloads still runs the micro-benchmarks
        WORKLOADS = {}

    ag.configure(backend="cuda" if on_gpu else "sim")
    names = list(WORKLOADS) if args.names in (["all"], []) else args.names
    if "overlap" in names:
        from benchmarks.overlap import measure

        names = [n for n in names if n != "overlap"]
        m = measure(ag)
        console.print("overlap of two independent ~5 ms kernels: "
                      + ", ".join(f"{k}={v:.3f}" for k, v in m.items()))
        if args.json and not names:
            _write_micro(args.json, "overlap", m, harness.machine_info(ag))
    if "overhead" in names:
        names = [n for n in names if n != "overhead"]
        from benchmarks import overhead

        if on_gpu:
            m = overhead.measure(ag)
        else:
            console.print("[yellow]overhead: no GPU; measuring only the runtime's own Python "
                          "work (a backend that does nothing)[/]")
            m = {"runtime_only": overhead.runtime_only()}
        _print_overhead(console, m)
        if args.json and not names:
            _write_micro(args.json, "overhead", m, harness.machine_info(ag))
    for micro in ("inception", "replay"):
        if micro not in names:
            continue
        names = [n for n in names if n != micro]
        import importlib

        mod = importlib.import_module(f"benchmarks.{micro}")
        m = mod.measure(ag, scale) if micro == "inception" else mod.measure(ag)
        for key, value in m.items():
            console.print(f"{micro} {key}: {value}")
        if args.json and not names:
            _write_micro(args.json, micro, m, harness.machine_info(ag))
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        console.print(f"[red]unknown workload(s) {unknown}; known: {sorted(WORKLOADS)}, overlap[/]")
        return 2
    if not names:
        return 0
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    future = [m for m in modes if m in harness.FUTURE_MODES]
    if future:
        console.print(f"[red]mode(s) {future} not implemented yet; "
                      f"available: {', '.join(harness.MODES)}[/]")
        return 2
    bad = [m for m in modes if m not in harness.MODES]
    if bad:
        console.print(f"[red]unknown mode(s) {bad}; available: {', '.join(harness.MODES)}[/]")
        return 2
    if args.block_sizes:
        blocks = [int(b) for b in args.block_sizes.split(",")]
    else:
        blocks = list(harness.BLOCK_SIZES) if on_gpu else [32]
    if args.num_blocks:
        num_blocks = args.num_blocks
    elif on_gpu:
        from asyncgpu._runtime import current_runtime

        num_blocks = 4 * current_runtime().backend.sm_count
    else:
        num_blocks = 2
    iterations = args.iterations or (20 if on_gpu else 3)
    warmup = args.warmup if on_gpu else min(args.warmup, 1)
    from benchmarks import bounds as bounds_mod

    want_bounds = not args.no_bounds and "serial" in modes and "parallel" in modes
    from asyncgpu._runtime import current_options, current_runtime

    memories = (harness.MEMORY_MODELS if args.memory == "both"
                else (args.memory or current_options().memory,))
    bandwidths: dict[str, float | None] = {}
    results: list[Any] = []
    cells = sum(1 if getattr(WORKLOADS[n], "two_d", False) else len(blocks) for n in names)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("benchmarks", total=cells * len(modes) * len(memories))
        for memory in memories:
            with ag.configure(memory=memory):      # a runtime of its own, for this pass only
                bandwidth = None
                if want_bounds and on_gpu:
                    # the bandwidth of the mechanism this memory model moves inputs with
                    rt = current_runtime()
                    bandwidth = (bounds_mod.h2d_bandwidth(rt) if memory == "managed"
                                 else bounds_mod.pinned_bandwidth(rt))
                    bandwidths[memory] = bandwidth
                    how = "prefetch" if memory == "managed" else "pinned copy"
                    console.print(f"host-to-device {how} bandwidth: {bandwidth / 1e9:.2f} GB/s")
                for name in names:
                    progress.update(task, description=f"{name} ({scale}, {memory})")
                    results += harness.bench_workload(
                        ag, WORKLOADS[name], scale, modes, blocks, num_blocks, warmup,
                        iterations, args.inputs, lambda: progress.advance(task),
                        metrics=args.metrics, bounds=want_bounds, bandwidth=bandwidth,
                        rounds=max(1, min(args.rounds, iterations)))
    bandwidth = bandwidths.get(memories[0])
    table = Table(title=f"asyncgpu bench: scale={scale}, inputs={args.inputs}, "
                        f"backend={'cuda' if on_gpu else 'sim'}, medians of {iterations}")
    bound_cols = ("transfer bound ms", "compute bound ms", "parallel/bound") if want_bounds else ()
    memory_cols = ("memory",) if len(memories) > 1 else ()
    for col in ("workload", "block", *memory_cols, *[f"{m} ms" for m in modes],
                "parallel/serial speedup",
                "handopt/parallel", *bound_cols, "check"):
        table.add_column(col, justify="right")
    rows = harness.summarize(results)
    for row in rows:
        cells_ = [row["workload"], row["block"]] + [row["memory"]] * len(memory_cols)
        cells_ += [f"{row[m] * 1e3:.3f}" if row.get(m) else "-" for m in modes]
        cells_ += [f"{row['speedup']:.2f}" if row["speedup"] else "-",
                   f"{row['vs_handopt']:.2f}" if row["vs_handopt"] else "-"]
        if want_bounds:
            b = row.get("bounds") or {}
            cells_ += [_fmt(b.get("transfer_bound_s"), 1e3), _fmt(b.get("compute_bound_s"), 1e3),
                       _fmt(b.get("parallel_over_bound"), digits=2)]
        cells_.append("[red]FAIL[/]" if not row["ok"] else "SKIP" if not any(
            row.get(m) for m in modes) else "PASS")
        table.add_row(*cells_)
    console.print(table)
    if want_bounds and not on_gpu:
        console.print("bounds: n/a on the simulator (no physical transfer; logical clock)")
    if args.metrics:
        console.print(_metrics_table(rows, "overlap metrics (one traced iteration per mode)"
                                     + ("" if on_gpu else "; sim: logical clock")))
    console.print(f"geometric mean speedup parallel/serial: "
                  f"{harness.geomean([r['speedup'] for r in rows]):.3f}")
    for row in rows:
        if row.get("pinned_bound_s"):
            console.print(
                f"{row['workload']} block {row['block']} {row['memory']}: transfer bound (one "
                f"pinned copy of the streamed bytes, this run) {row['pinned_bound_s'] * 1e3:.3f} "
                f"ms; parallel/bound {_fmt(row.get('parallel_over_pinned'), digits=3)}")
    if len(memories) > 1:
        values = [r["vs_other_memory"] for r in rows
                  if r["memory"] == "explicit" and r.get("vs_other_memory")]
        console.print("geometric mean speed of explicit vs managed memory (parallel): "
                      f"{harness.geomean(values):.3f} (> 1: explicit faster)")
    for ratio in ("recorded_vs_cudagraph", "recorded_vs_parallel",
                  "recorded_static_vs_cudagraph"):
        values = [r[ratio] for r in rows if r.get(ratio)]
        if values:
            console.print(f"geometric mean {ratio.replace('_vs_', ' speed vs ')}: "
                          f"{harness.geomean(values):.3f}")
    for row in rows:
        for f in row.get("failures", []):
            console.print(f"[red]FAIL {row['workload']} block {row['block']}: {f}[/]")
        for f in row.get("skipped", []):
            console.print(f"SKIP {row['workload']} block {row['block']}: {f}")
    options = dict(vars(args), scale=scale, iterations=iterations, warmup=warmup,
                   num_blocks=num_blocks, blocks=blocks, h2d_bytes_per_s=bandwidth,
                   h2d_bytes_per_s_by_memory=bandwidths, memories=list(memories))
    if args.json:
        harness.write_json(args.json, results, harness.machine_info(ag), options)
        console.print(f"wrote {args.json}")
    if args.plot:
        harness.plot(args.plot, results)
        console.print(f"wrote {args.plot}")
    return 0 if all(r["ok"] for r in rows) else 1


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``asyncgpu`` command."""
    args = _parser().parse_args(argv)
    from asyncgpu._config import cli_log_level

    logging.basicConfig(level=cli_log_level(), format="%(name)s: %(message)s")
    # the repository root, so that `python -m asyncgpu bench` finds benchmarks/ and kernels/
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if root not in sys.path:
        sys.path.insert(0, root)
    if args.command == "bench":
        return cmd_bench(args)
    if args.command == "trace":
        return cmd_trace(args)
    import asyncgpu as ag
    from benchmarks.harness import machine_info

    _console().print(machine_info(ag), ag.options())
    return 0


if __name__ == "__main__":
    sys.exit(main())
