"""Command line: ``asyncgpu bench ...`` (the benchmark suite), ``asyncgpu trace ...`` (one
workload traced: timeline, DAG, overlap metrics) and ``asyncgpu info``.

``python -m asyncgpu`` works the same as the installed ``asyncgpu`` command. This is an
application, so unlike the library it writes to the terminal (through ``rich``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import sys
from typing import Any

SCALES = ("tiny", "small", "medium", "large")
WORKLOAD_NAMES = "vec bs img ml hits dl"
#: Timed and untimed iterations per mode: (on a GPU, on the simulator). Simulated times are not
#: GPU times, so the simulator runs each mode once, which is enough to check its results.
ITERATIONS = (20, 1)
WARMUP = (3, 0)

DESCRIPTION = """\
asyncgpu runs plain sequential CuPy and Numba GPU code asynchronously: every
kernel launch and library call becomes a node of a dependency graph, independent
work overlaps on CUDA streams, and the host waits only for the data it reads.

commands:
  bench   run the benchmark suite (the GrCUDA paper's workloads in every mode,
          each result checked) and print a table of times
  trace   run one workload traced; write the timeline, the DAG, pictures and
          overlap metrics
  info    show the backend, the device and the options in force

Without a usable NVIDIA GPU (or with ASYNCGPU_BACKEND=sim) everything runs on
the CPU simulator: results are checked, but times are not GPU times.
'asyncgpu COMMAND --help' gives each command's options. 'python -m asyncgpu'
works the same as 'asyncgpu'."""


def _backend_here() -> str:
    """The backend a run would use here, found without starting a runtime (for the help)."""
    from asyncgpu import backends
    from asyncgpu.runtime.current import current_options

    return backends.resolve(current_options())


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("asyncgpu")
    except PackageNotFoundError:   # a source tree run without installing
        from asyncgpu import __version__

        return __version__


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
    gpu = _backend_here() == "cuda"
    here = "here: cuda" if gpu else "here: sim, the CPU simulator"
    scale_help = (f"problem size; without a GPU only 'tiny' runs (default: medium on a GPU, "
                  f"tiny on the simulator; {here})")
    blocks_help = (f"blocks per launch (default: 4 x the SM count on a GPU, 2 on the simulator; "
                   f"{here})")
    inputs_help = ("streaming: the host rewrites the inputs before every iteration, so the "
                   "host-to-device transfer is timed; resident: the inputs are written and "
                   "moved once, so only the kernels are timed (default: streaming)")
    p = argparse.ArgumentParser(prog="asyncgpu", description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"asyncgpu {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    b = sub.add_parser("bench", help="run the benchmark suite (the GrCUDA paper's workloads)",
                       description="Run the benchmark workloads in every requested mode, check "
                                   "every result against serial and a reference, and print "
                                   "the median times.")
    b.add_argument("names", nargs="*", default=["all"],
                   help=f"workloads ({WORKLOAD_NAMES}) or 'all' (default), or the "
                        "micro-benchmarks 'overlap', 'overhead', 'inception', 'replay', "
                        "'multigpu', 'tenants'")
    b.add_argument("--scale", choices=SCALES, default=None, help=scale_help)
    b.add_argument("--modes", default="serial,parallel,handopt",
                   help="comma-separated, from: serial, parallel, handopt, cudagraph, recorded, "
                        "recorded_static (default: serial,parallel,handopt)")
    b.add_argument("--block-sizes", default=None,
                   help="comma-separated 1D block sizes (default: 32,128,256,1024 on a GPU, 32 "
                        f"on the simulator; {here})")
    b.add_argument("--num-blocks", type=int, default=None, help=blocks_help)
    b.add_argument("--inputs", choices=("streaming", "resident"), default="streaming",
                   help=inputs_help)
    b.add_argument("--iterations", type=int, default=None,
                   help=f"timed iterations per mode (default: {ITERATIONS[0]} on a GPU, "
                        f"{ITERATIONS[1]} on the simulator; {here})")
    b.add_argument("--warmup", type=int, default=None,
                   help=f"untimed iterations per mode before the timed ones (default: "
                        f"{WARMUP[0]} on a GPU, {WARMUP[1]} on the simulator; {here})")
    b.add_argument("--rounds", type=int, default=1,
                   help="split each mode's timed iterations into this many blocks taken in "
                        "turn with the other modes' (default: 1, one mode after the other)")
    b.add_argument("--json", default=None, metavar="PATH",
                   help="write every iteration's time and the machine's details here")
    b.add_argument("--plot", default=None, metavar="PATH",
                   help="write a speedup plot (PNG) here (needs matplotlib)")
    b.add_argument("--metrics", action="store_true",
                   help="trace one extra untimed iteration per mode: overlap metrics CT/TC/CC/TOT")
    b.add_argument("--no-bounds", action="store_true",
                   help="skip the transfer and compute bounds (measured on a GPU, with the "
                        "serial and parallel modes)")
    b.add_argument("--workloads", default=None, metavar="NAMES",
                   help="multigpu: the workloads to run, e.g. bs,vec (default: all of bs, vec, "
                        "ml, mv, cg); tenants: the mix (default: dl,img,ml; a workload may "
                        "name its own scale: dl,img,ml:small)")
    b.add_argument("--steps", choices=("eager", "recorded"), default="eager",
                   help="tenants: each workload's step launches eagerly, or replays its "
                        "launches recorded as a graph")
    b.add_argument("--devices", default=None, metavar="COUNTS",
                   help="multigpu: the GPU counts to compare, e.g. 1,2,4 (default: 1, 2, 4 "
                        "up to the GPUs of the host; on the simulator, virtual devices)")
    b.add_argument("--memory", choices=("managed", "explicit", "both"), default=None,
                   help="memory model(s) to measure, side by side with 'both' (default: the "
                        "one in force, ASYNCGPU_MEMORY)")
    t = sub.add_parser("trace", help="run one workload traced; write the trace, DAG, pictures "
                                     "and overlap metrics",
                       description="Run one iteration of a workload under asyncgpu.trace() "
                                   "(after an untraced one) and write its trace, DAG and "
                                   "pictures, and print its overlap metrics.")
    t.add_argument("name", help=f"workload ({WORKLOAD_NAMES})")
    t.add_argument("--scale", choices=SCALES, default=None, help=scale_help)
    t.add_argument("--mode", choices=("serial", "parallel", "handopt"), default="parallel",
                   help="serial: one launch after the other; parallel: asyncgpu's scheduler; "
                        "handopt: hand-chosen streams and events (default: parallel)")
    t.add_argument("--block-size", type=int, default=256, help="1D block size (default: 256)")
    t.add_argument("--num-blocks", type=int, default=None, help=blocks_help)
    t.add_argument("--inputs", choices=("streaming", "resident"), default="streaming",
                   help=inputs_help)
    t.add_argument("--out", default="asyncgpu-trace", metavar="DIR",
                   help="directory for the files (default: ./asyncgpu-trace)")
    sub.add_parser("info", help="show the backend, the device and the options in force",
                   description="Show the backend, the device and the options in force.")
    return p


def _console() -> Any:
    from rich.console import Console

    return Console()     # the terminal's width: the tables fold their columns to fit


def _bench_module(name: str) -> Any:
    """``benchmarks.<name>`` of the repository in a source tree (run as ``python -m asyncgpu``
    with the tree on the path), else ``asyncgpu.benchmarks.<name>`` of an installed wheel."""
    import importlib

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isfile(os.path.join(root, "benchmarks", "harness.py")):
        if root not in sys.path:
            sys.path.insert(0, root)
        return importlib.import_module(f"benchmarks.{name}")
    return importlib.import_module(f"asyncgpu.benchmarks.{name}")


def _write_micro(path: str, name: str, values: dict[str, float], machine: dict[str, Any]) -> None:
    with open(path, "w") as f:
        json.dump({name: values, "machine": machine}, f, indent=1)


def _scale(ag: Any, console: Any, requested: str | None) -> tuple[bool, str]:
    from asyncgpu.backends import resolve

    on_gpu = resolve(ag.options()) == "cuda"
    scale = requested or ("medium" if on_gpu else "tiny")
    if not on_gpu:
        console.print("[yellow]No usable GPU: running on the CPU simulator (sim backend). "
                      "Every result is checked, but times are simulator times, not GPU "
                      "times: no speedups are reported.[/]")
        if scale != "tiny":
            console.print(f"[yellow]The '{scale}' scale needs a GPU: running the 'tiny' scale "
                          "instead.[/]")
        scale = "tiny"
    return on_gpu, scale


def _fmt(v: Any, scale: float = 1.0, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v * scale:.{digits}f}"


def _metrics_table(rows: list[dict[str, Any]], title: str) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col in ("workload", "block", "mode", "CT", "TC", "CC", "TOT"):
        table.add_column(col, justify="right")
    for row in rows:
        for mode, m in row.get("metrics", {}).items():
            table.add_row(row["workload"], row["block"], mode,
                          *[_fmt(m[k], digits=2) for k in ("CT", "TC", "CC", "TOT")])
    return table


def cmd_trace(args: argparse.Namespace) -> int:
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    harness = _bench_module("harness")
    WORKLOADS = _bench_module("workloads").WORKLOADS
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
    return _bench_module("handopt").Hand(rt)


def _table(title: str) -> Any:
    from rich import box
    from rich.table import Table

    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                 collapse_padding=True)


def _bench_multigpu(ag: Any, console: Any, args: argparse.Namespace, on_gpu: bool, scale: str,
                    harness: Any, json_too: bool) -> None:
    """``asyncgpu bench multigpu``: strong scaling and the device policies (multigpu.py)."""
    from rich.table import Table

    multigpu = _bench_module("multigpu")
    if on_gpu:
        import cupy

        available = cupy.cuda.runtime.getDeviceCount()
    else:
        available = 4
    if args.devices:
        counts = sorted({int(c) for c in args.devices.split(",") if c.strip()})
    else:
        counts = [c for c in (1, 2, 4) if c <= available]
    if max(counts) > available:
        raise SystemExit(f"asyncgpu bench multigpu: --devices asks for {max(counts)} GPUs; "
                         f"this host has {available}")
    workloads = multigpu.WORKLOADS
    if args.workloads:
        workloads = tuple(w.strip() for w in args.workloads.split(",") if w.strip())
        unknown = [w for w in workloads if w not in multigpu.WORKLOADS]
        if unknown:
            raise SystemExit(f"asyncgpu bench multigpu: unknown workload(s) {unknown}; "
                             f"choose from {', '.join(multigpu.WORKLOADS)}")
    result = multigpu.measure(ag, counts, scale, iterations=args.iterations or 5,
                              warmup=args.warmup if args.warmup is not None else 2,
                              on_gpu=on_gpu, workloads=workloads)
    if on_gpu:
        table = Table(title=f"multigpu ({scale}, {multigpu.CHUNKS} chunks; ms, medians)",
                      title_justify="left")
        for col in ("workload", "inputs", "GPUs", "asyncgpu ms", "x one GPU", "of CuPy",
                    "x bound"):
            table.add_column(col, justify="right")
        for r in multigpu.speedups(result):
            table.add_row(r["workload"], r["inputs"], str(r["devices"]),
                          _fmt(r["ms"], digits=2), _fmt(r["over_one_gpu"], digits=2),
                          _fmt(r["of_cupy"], digits=2), _fmt(r["over_bound"], digits=2))
    else:       # simulator times are no GPU times: what ran where, and that it was right
        table = Table(title=f"multigpu ({scale}, {multigpu.CHUNKS} chunks, checked)",
                      title_justify="left")
        for col in ("workload", "inputs", "devices", "nodes per device", "peer copies"):
            table.add_column(col, justify="right")
        for r in result["rows"]:
            placed = r.get("placed") or {}
            table.add_row(r["workload"], r["inputs"], str(r["devices"]),
                          " ".join(str(placed[d]) for d in sorted(placed)) or "-",
                          str(r.get("copies_peer", 0)))
    console.print(table)
    if result["policies"]:
        policies = Table(title="device policies (resident inputs"
                         + (", ms)" if on_gpu else ")"), title_justify="left")
        for col in ("workload", "GPUs" if on_gpu else "devices", "policy") + (
                ("ms",) if on_gpu else ()) + ("peer copies",):
            policies.add_column(col, justify="right")
        for r in result["policies"]:
            policies.add_row(r["workload"], str(r["devices"]), r["policy"],
                             *((_fmt(r["ms"], digits=2),) if on_gpu else ()),
                             str(r["copies_peer"]))
        console.print(policies)
    if not on_gpu:
        console.print("[yellow]multigpu on the simulator: every result was checked; no times "
                      "are reported[/]")
    if args.plot:
        multigpu.plot(args.plot, result)
    if args.json and json_too:
        result["speedups"] = multigpu.speedups(result)
        _write_micro(args.json, "multigpu", result, harness.machine_info(ag))


def _bench_tenants(ag: Any, console: Any, args: argparse.Namespace, on_gpu: bool, scale: str,
                   harness: Any, json_too: bool) -> None:
    """``asyncgpu bench tenants``: a mix of workloads as tenants sharing the GPU (tenants.py)."""
    from rich.table import Table

    from asyncgpu.runtime.current import current_runtime

    tenants = _bench_module("tenants")
    workloads = _bench_module("workloads").WORKLOADS
    mix = tenants.MIX
    if args.workloads:
        mix = tuple(w.strip() for w in args.workloads.split(",") if w.strip())
        unknown = [w for w in mix if w.partition(":")[0] not in workloads
                   or w.partition(":")[2] not in ("", *SCALES)]
        if unknown:
            raise SystemExit(f"asyncgpu bench tenants: unknown workload(s) {unknown}; choose "
                             f"from {', '.join(workloads)} (a scale of its own: ml:small)")
    num_blocks = args.num_blocks or (4 * current_runtime().backend.sm_count if on_gpu else 2)
    result = tenants.measure(ag, scale, rounds=args.iterations or (20 if on_gpu else 1),
                             warmup=args.warmup if args.warmup is not None else 2,
                             mix=mix, num_blocks=num_blocks,
                             # (the simulator runs a block's threads as Python threads)
                             block=256 if on_gpu else 32,
                             recorded=args.steps == "recorded",
                             check_rounds=tenants.CHECK_ROUNDS if on_gpu else 0)
    if on_gpu:
        table = Table(title=f"tenants ({scale}, {args.steps} steps; {mix[0]} has priority "
                            "high; ms)",
                      title_justify="left")
        for col in ("mode", "mix ms", "speedup", *(f"{w} p50/p99" for w in mix)):
            table.add_column(col, justify="right")
        bound = result["bound"]     # (the longest workload's rounds alone: no mode beats it)
        rows = [("alone", bound["ms"], bound["speedup"], result["alone"])] + [
            (r["mode"], r["ms"], r["speedup"], r["latency"]) for r in result["rows"]]
        for mode, ms, speedup, latency in rows:
            table.add_row(mode, _fmt(ms, digits=1), _fmt(speedup, digits=2),
                          *(f"{latency[w]['p50_ms']:.2f}/{latency[w]['p99_ms']:.2f}"
                            for w in mix))
        console.print(table)
        console.print("alone: each workload by itself; its mix ms, the longest workload's "
                      "rounds alone, and its speedup, the most any mode can reach on this mix")
        console.print(f"regulated: {result['plan']['plan']}")
    else:
        console.print(f"tenants ({scale}): {', '.join(mix)} checked in every mode "
                      f"({', '.join(tenants.MODES)}); [yellow]no times on the simulator[/]")
    if args.json and json_too:
        _write_micro(args.json, "tenants", result, harness.machine_info(ag))


def cmd_bench(args: argparse.Namespace) -> int:
    import asyncgpu as ag

    console = _console()
    on_gpu, scale = _scale(ag, console, args.scale)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    harness = _bench_module("harness")
    WORKLOADS = _bench_module("workloads").WORKLOADS
    ag.configure(backend="cuda" if on_gpu else "sim")
    names = list(WORKLOADS) if args.names in (["all"], []) else args.names
    if "overlap" in names:
        names = [n for n in names if n != "overlap"]
        m = _bench_module("overlap").measure(ag)
        console.print("overlap of two independent ~5 ms kernels: "
                      + ", ".join(f"{k}={v:.3f}" for k, v in m.items()))
        if args.json and not names:
            _write_micro(args.json, "overlap", m, harness.machine_info(ag))
    if "overhead" in names:
        names = [n for n in names if n != "overhead"]
        overhead = _bench_module("overhead")
        if on_gpu:
            m = overhead.measure(ag)
        else:
            console.print("[yellow]overhead: no GPU; measuring only the runtime's own Python "
                          "work (a backend that does nothing)[/]")
            m = {"runtime_only": overhead.runtime_only()}
        _print_overhead(console, m)
        if args.json and not names:
            _write_micro(args.json, "overhead", m, harness.machine_info(ag))
    if "multigpu" in names:
        names = [n for n in names if n != "multigpu"]
        _bench_multigpu(ag, console, args, on_gpu, scale, harness, json_too=not names)
    if "tenants" in names:
        names = [n for n in names if n != "tenants"]
        _bench_tenants(ag, console, args, on_gpu, scale, harness, json_too=not names)
    for micro in ("inception", "replay"):
        if micro not in names:
            continue
        names = [n for n in names if n != micro]
        mod = _bench_module(micro)
        if micro == "inception":
            # (on the simulator: every configuration checked, no times to take)
            m = mod.measure(ag, scale) if on_gpu else mod.measure(ag, scale, iterations=1,
                                                                   block=32)
        else:
            m = mod.measure(ag)
        for key, value in m.items():
            console.print(f"{micro} {key}: {value}")
        if args.json and not names:
            _write_micro(args.json, micro, m, harness.machine_info(ag))
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        console.print(f"[red]unknown workload(s) {unknown}; known: {sorted(WORKLOADS)}, "
                      "overlap, overhead, inception, replay, multigpu, tenants[/]")
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
    from asyncgpu.runtime.current import current_options, current_runtime

    if args.num_blocks:
        num_blocks = args.num_blocks
    else:
        num_blocks = 4 * current_runtime().backend.sm_count if on_gpu else 2
    at = 0 if on_gpu else 1
    iterations = args.iterations or ITERATIONS[at]
    warmup = WARMUP[at] if args.warmup is None else args.warmup
    bounds_mod = _bench_module("bounds")
    # bounds are physical (a measured bandwidth, device times): none on the simulator
    want_bounds = (on_gpu and not args.no_bounds and "serial" in modes and "parallel" in modes)
    memories = (harness.MEMORY_MODELS if args.memory == "both"
                else (args.memory or current_options().memory,))
    bandwidths: dict[str, float | None] = {}
    results: list[Any] = []
    cells = sum(1 if getattr(WORKLOADS[n], "two_d", False) else len(blocks) for n in names)
    columns = (TextColumn("{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("benchmarks", total=cells * len(modes) * len(memories))
        for memory in memories:
            with ag.configure(memory=memory):      # a runtime of its own, for this pass only
                bandwidth = None
                if want_bounds:
                    # the bandwidth of the mechanism this memory model moves inputs with
                    rt = current_runtime()
                    bandwidth = (bounds_mod.h2d_bandwidth(rt) if memory == "managed"
                                 else bounds_mod.pinned_bandwidth(rt))
                    bandwidths[memory] = bandwidth
                    how = "prefetch" if memory == "managed" else "pinned copy"
                    console.print(f"host-to-device {how} bandwidth: {bandwidth / 1e9:.2f} GB/s")
                for name in names:
                    def started(mode: str, name: str = name, memory: str = memory) -> None:
                        progress.update(task, description=f"{name} {mode} ({memory})")

                    results += harness.bench_workload(
                        ag, WORKLOADS[name], scale, modes, blocks, num_blocks, warmup,
                        iterations, args.inputs, lambda: progress.advance(task),
                        metrics=args.metrics, bounds=want_bounds, bandwidth=bandwidth,
                        rounds=max(1, min(args.rounds, iterations)), started=started)
    rows = harness.summarize(results)
    _print_results(console, args, rows, modes, memories, scale, iterations, on_gpu, want_bounds)
    bandwidth = bandwidths.get(memories[0])
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


#: Short column names of the modes (the table must fit an 80-column terminal).
_MODE_COLUMNS = {"serial": "serial", "parallel": "parallel", "handopt": "handopt",
                 "cudagraph": "cudagraph", "recorded": "recorded",
                 "recorded_static": "recorded\nstatic"}


def _print_results(console: Any, args: argparse.Namespace, rows: list[dict[str, Any]],
                   modes: tuple[str, ...], memories: tuple[str, ...], scale: str,
                   iterations: int, on_gpu: bool, want_bounds: bool) -> None:
    """The results table and the ratios that mean something on this backend."""
    harness = _bench_module("harness")
    if on_gpu:
        title = f"{scale} scale, {args.inputs} inputs, median ms of {iterations}"
    else:
        title = f"{scale} scale, {args.inputs} inputs, simulator ms"
    ratios = []
    if on_gpu and "serial" in modes and "parallel" in modes:
        ratios.append(("speedup", "par/ser\nspeedup"))
    if on_gpu and "handopt" in modes and "parallel" in modes:
        ratios.append(("vs_handopt", "hand/par"))
    bound_cols = ("xfer\nbound ms", "comp.\nbound ms", "par/\nbound") if want_bounds else ()
    memory_cols = ("memory",) if len(memories) > 1 else ()
    # Two tables, so that each fits an 80-column terminal whole: the times, then what is
    # derived from them (ratios, bounds).
    table = _table(title)
    derived = _table("ratios and bounds") if ratios or bound_cols else None
    for t in (table, derived):
        if t is not None:
            t.add_column("work\nload")
            t.add_column("block", justify="right")
            for col in memory_cols:
                t.add_column(col)
    for m in modes:
        table.add_column(_MODE_COLUMNS.get(m, m), justify="right")
    table.add_column("check")
    for _, col in ratios:
        derived.add_column(col, justify="right")
    for col in bound_cols:
        derived.add_column(col, justify="right")
    for row in rows:
        head = [row["workload"], row["block"]] + [row["memory"]] * len(memory_cols)
        cells = head + [f"{row[m] * 1e3:.3f}" if row.get(m) else "-" for m in modes]
        cells.append("[red]FAIL[/]" if not row["ok"] else "SKIP" if not any(
            row.get(m) for m in modes) else "PASS")
        table.add_row(*cells)
        if derived is not None:
            cells = head + [f"{row[key]:.2f}" if row.get(key) else "-" for key, _ in ratios]
            if want_bounds:
                b = row.get("bounds") or {}
                cells += [_fmt(b.get("transfer_bound_s"), 1e3),
                          _fmt(b.get("compute_bound_s"), 1e3),
                          _fmt(b.get("parallel_over_bound"), digits=2)]
            derived.add_row(*cells)
    console.print(table)
    if derived is not None:
        console.print(derived)
    if args.metrics:
        console.print(_metrics_table(rows, "overlap metrics (one traced iteration per mode)"
                                     + ("" if on_gpu else "; sim: logical clock")))
    if on_gpu:
        speedups = [r["speedup"] for r in rows if r.get("speedup")]
        if speedups:
            console.print(f"geometric mean speedup parallel/serial: "
                          f"{harness.geomean(speedups):.3f}")
        for row in rows:
            if row.get("pinned_bound_s"):
                console.print(
                    f"{row['workload']} block {row['block']} {row['memory']}: transfer bound "
                    f"(one pinned copy of the streamed bytes, this run) "
                    f"{row['pinned_bound_s'] * 1e3:.3f} ms; parallel/bound "
                    f"{_fmt(row.get('parallel_over_pinned'), digits=3)}")
        if len(memories) > 1:
            values = [r["vs_other_memory"] for r in rows
                      if r["memory"] == "explicit" and r.get("vs_other_memory")]
            if values:
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


def cmd_info() -> int:
    import asyncgpu as ag
    from asyncgpu.backends import resolve

    console = _console()
    # the backend named outright: 'auto' would log its own "no usable GPU" line on top of ours
    ag.configure(backend=resolve(ag.options()))
    info = _bench_module("harness").machine_info(ag)
    table = _table(f"asyncgpu {_version()}")
    table.show_header = False
    table.add_column("")
    table.add_column("")
    for key, value in info.items():
        table.add_row(key, str(value))
    console.print(table)
    options = _table("options in force")
    options.add_column("option")
    options.add_column("value")
    for field in dataclasses.fields(ag.options()):
        options.add_row(field.name, repr(getattr(ag.options(), field.name)))
    console.print(options)
    return 0


class _Prefixed(logging.Formatter):
    """``logger: message``, unless the message names asyncgpu already (the library's warnings
    carry the prefix for Python's last-resort handler, which prints the message alone)."""

    def format(self, record: logging.LogRecord) -> str:
        message = super().format(record)
        return message if message.startswith("asyncgpu") else f"{record.name}: {message}"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``asyncgpu`` command."""
    args = _parser().parse_args(argv)
    from asyncgpu.core.config import cli_log_level

    handler = logging.StreamHandler()
    handler.setFormatter(_Prefixed("%(message)s"))
    # (the level is asyncgpu's own: at INFO, Numba's and CuPy's loggers would print their
    # module unloads and the like)
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    logging.getLogger("asyncgpu").setLevel(cli_log_level())
    try:
        if args.command == "bench":
            return cmd_bench(args)
        if args.command == "trace":
            return cmd_trace(args)
        return cmd_info()
    except KeyboardInterrupt:
        # one line, not the traceback of wherever the interrupt landed
        print(f"asyncgpu {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
