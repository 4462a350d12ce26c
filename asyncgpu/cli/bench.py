"""``asyncgpu bench``: the benchmark suite in every mode, and the micro-benchmarks
(``overhead``, ``replay``, ``overlap``, ``multigpu``, ``tenants``, ...), each result checked."""

from __future__ import annotations

import argparse
import importlib.util
from typing import Any

from .suite import (
    ITERATIONS,
    SCALES,
    WARMUP,
    bench_module,
    output_problem,
    pick_scale,
    write_json,
)
from .tables import (fmt, make_console, metrics_table, plain_table, print_overhead,
                     usage_error)


#: What ``asyncgpu bench`` runs besides the suite's workloads.
MICRO_BENCHMARKS = ("overlap", "overhead", "inception", "replay", "multigpu", "tenants")


class UsageError(Exception):
    """An option this run cannot take: said in one line, and the command exits with 2."""


def bench_multigpu(ag: Any, console: Any, args: argparse.Namespace, on_gpu: bool, scale: str,
                   harness: Any, micro: dict[str, Any]) -> None:
    """``asyncgpu bench multigpu``: strong scaling and the device policies (multigpu.py)."""
    from rich.table import Table

    multigpu = bench_module("multigpu")
    available = devices_available(on_gpu)
    counts, workloads = multigpu_args(args, available)
    counts = counts or [c for c in (1, 2, 4) if c <= available]
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
                          fmt(r["ms"], digits=2), fmt(r["over_one_gpu"], digits=2),
                          fmt(r["of_cupy"], digits=2), fmt(r["over_bound"], digits=2))
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
                             *((fmt(r["ms"], digits=2),) if on_gpu else ()),
                             str(r["copies_peer"]))
        console.print(policies)
    if not on_gpu:
        console.print("[yellow]multigpu on the simulator: every result was checked; no times "
                      "are reported[/]")
    if args.plot:
        multigpu.plot(args.plot, result)
    if args.json:
        result["speedups"] = multigpu.speedups(result)
        if not on_gpu:
            for r in result["speedups"]:
                r.update(over_one_gpu=None, of_cupy=None, over_bound=None)
        micro["multigpu"] = result


def devices_available(on_gpu: bool) -> int:
    """The GPUs of this host, or the simulator's most virtual devices."""
    if not on_gpu:
        return 64
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


def multigpu_args(args: argparse.Namespace, available: int
                  ) -> tuple[list[int], tuple[str, ...]]:
    """``bench multigpu``'s GPU counts (empty: the default) and workloads, from the command
    line; :class:`UsageError` naming the option where one cannot be run (checked before
    anything runs)."""
    multigpu = bench_module("multigpu")
    # (--devices: integers from 1 on, as the argument parser checks them)
    counts = sorted({int(c) for c in args.devices.split(",") if c.strip()}) if args.devices else []
    if counts and counts[-1] > available:
        raise UsageError(f"multigpu: --devices asks for {counts[-1]} GPUs; "
                         f"this host has {available}")
    workloads = multigpu.WORKLOADS
    if args.workloads:
        workloads = tuple(w.strip() for w in args.workloads.split(",") if w.strip())
        unknown = [w for w in workloads if w not in multigpu.WORKLOADS]
        if unknown:
            raise UsageError(f"multigpu: unknown workload(s) {unknown}; "
                             f"choose from {', '.join(multigpu.WORKLOADS)}")
    return counts, workloads


def tenants_mix(args: argparse.Namespace) -> tuple[str, ...]:
    """``bench tenants``' mix, from the command line; :class:`UsageError` naming the option
    where it cannot be run (checked before anything runs)."""
    tenants = bench_module("tenants")
    workloads = tenants.WORKLOADS
    mix = tenants.MIX
    if args.workloads:
        mix = tuple(w.strip() for w in args.workloads.split(",") if w.strip())
        unknown = [w for w in mix if w.partition(":")[0] not in workloads
                   or w.partition(":")[2] not in ("", *SCALES)]
        if not mix:
            raise UsageError(f"tenants: --workloads names no workload; choose from "
                             f"{', '.join(workloads)}")
        if unknown:
            raise UsageError(f"tenants: unknown workload(s) {unknown}; choose "
                             f"from {', '.join(workloads)} (a scale of its own: ml:small)")
        names = [w.partition(":")[0] for w in mix]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            # (each workload is a tenant named for it: a second would be the same tenant)
            raise UsageError(f"tenants: --workloads names {twice[0]} more than once; a mix "
                             "runs each workload once, as a tenant of its own (more steps of "
                             "one: --balance)")
    if args.partitions and args.steps == "recorded":
        raise UsageError("tenants: --partitions runs eager steps only (a CUDA "
                         "graph's kernels run on every SM); drop --steps recorded or "
                         "--partitions")
    if args.period is not None:
        if args.balance or args.no_priority:
            raise UsageError("tenants: --balance and --no-priority apply to "
                             "workloads run back to back, not with --period (a service's "
                             "steps come at its rate, and its tenant has priority high)")
        if not args.period > 0:
            raise UsageError(f"tenants: --period must be positive; got "
                             f"{args.period}")
    return mix


def bench_tenants(ag: Any, console: Any, args: argparse.Namespace, on_gpu: bool, scale: str,
                  harness: Any, micro: dict[str, Any]) -> None:
    """``asyncgpu bench tenants``: a mix of workloads as tenants sharing the GPU (tenants.py)."""
    from rich.table import Table

    from asyncgpu.runtime.current import current_runtime
    from asyncgpu.runtime.plan_check import PLAN_GAIN

    tenants = bench_module("tenants")
    mix = tenants_mix(args)
    num_blocks = args.num_blocks or (4 * current_runtime().backend.sm_count if on_gpu else 2)
    if args.period is not None:
        result = tenants.measure_served(
            ag, scale, steps=args.iterations or (40 if on_gpu else 2),
            warmup=args.warmup if args.warmup is not None else 2, mix=mix,
            period=args.period, block=256 if on_gpu else 32, num_blocks=num_blocks,
            recorded=args.steps == "recorded")
        _served_table(console, result, on_gpu, scale)
        if not on_gpu:
            for row in result["rows"].values():
                for other in row["others"].values():
                    other["of_alone"] = None
        micro["tenants_served"] = result
        return
    if args.balance and not on_gpu:
        # (balanced by the simulator's step times, a round of DL and VEC would run hundreds of
        # VEC steps to one of DL's: the simulator runs a block's threads as Python threads)
        console.print("[yellow]--balance: the simulator's step times say nothing of a GPU's; "
                      "a round here is one step of each workload[/]")
    result = tenants.measure(ag, scale, rounds=args.iterations or (20 if on_gpu else 1),
                             warmup=args.warmup if args.warmup is not None else 2,
                             mix=mix, num_blocks=num_blocks,
                             # (the simulator runs a block's threads as Python threads)
                             block=256 if on_gpu else 32,
                             recorded=args.steps == "recorded",
                             check_rounds=tenants.CHECK_ROUNDS if on_gpu else 0,
                             turns=args.rounds or (tenants.TURNS if on_gpu else 1),
                             partitions=args.partitions, balance=args.balance and on_gpu,
                             priority=not args.no_priority)
    if on_gpu:
        ranks = (f"{mix[0]} has priority high" if result["high_priority"]
                 else "no priorities")
        if args.balance:
            ranks += "; steps a round: " + ", ".join(
                f"{w} {n}" for w, n in result["repeats"].items())
        table = Table(title=f"tenants ({scale}, {args.steps} steps, the modes taking "
                            f"{result['turns']} turns; {ranks}; ms)", title_justify="left")
        for col in ("mode", "mix ms", "speedup", *(f"{w} p50/p99" for w in mix)):
            table.add_column(col, justify="right")
        bound = result["bound"]     # (the longest workload's rounds alone: no mode beats it)
        rows = [("alone", bound["ms"], bound["speedup"], result["alone"])] + [
            (r["mode"], r["ms"], r["speedup"], r["latency"]) for r in result["rows"]]
        for mode, ms, speedup, latency in rows:
            table.add_row(mode, fmt(ms, digits=1), fmt(speedup, digits=2),
                          *(f"{latency[w]['p50_ms']:.2f}/{latency[w]['p99_ms']:.2f}"
                            for w in mix))
        console.print(table)
        console.print("alone: each workload by itself; its mix ms, the longest workload's "
                      "rounds alone, and its speedup, the most any mode can reach on this mix")
        for mode, plan in (("regulated", result["plan"]),
                           ("regulated, one thread", result["plan_one_thread"])):
            if plan is None:
                continue
            console.print(f"{mode}: {plan['plan']}")
            scores = plan.get("measured") or {}
            if "own" in scores:
                console.print(f"{mode}: the plan measured {scores['plan']:.2f} against the "
                              f"tenants' own settings' {scores['own']:.2f} (the largest "
                              "slowdown, plus a high-priority tenant's lateness; the plan is "
                              f"kept at {PLAN_GAIN} of theirs or less)")
            if plan.get("checking"):
                console.print(f"[yellow]{mode}: the plan's check was still at stage "
                              f"{plan['checking']!r} when the timed rounds began[/]")
    else:
        console.print(f"tenants ({scale}): {', '.join(mix)} checked in every mode "
                      f"({', '.join(row['mode'] for row in result['rows'])}); "
                      "[yellow]no times on the simulator[/]")
        # (as the suite's ratios in the JSON: null, their keys kept)
        for row in [*result["rows"], result["bound"]]:
            row["speedup"] = None
    micro["tenants"] = result


def _served_table(console: Any, result: dict[str, Any], on_gpu: bool, scale: str) -> None:
    """``bench tenants --period``'s table: the service's latency, the others' throughput."""
    from rich.table import Table

    service, others = result["service"], result["mix"][1:]
    if not on_gpu:
        console.print(f"tenants ({scale}), {service} served: checked in every mode; "
                      "[yellow]no times on the simulator[/]")
        return
    table = Table(title=f"tenants ({scale}): {service} served every "
                        f"{result['interval_ms']:.2f} ms ({result['period']:g}x its step alone), "
                        f"{', '.join(others)} back to back; ms", title_justify="left")
    for col in ("mode", f"{service} p50/p99", *(f"{w} steps/s (of alone)" for w in others)):
        table.add_column(col, justify="right")
    for mode, summary in result["alone"].items():
        table.add_row(mode, f"{summary['p50_ms']:.2f}/{summary['p99_ms']:.2f}",
                      *("-" for _ in others))
    for mode, row in result["rows"].items():
        s = row["service"]
        table.add_row(mode, f"{s['p50_ms']:.2f}/{s['p99_ms']:.2f}",
                      *(f"{row['others'][w]['steps_per_s']:.1f} "
                        f"({row['others'][w]['of_alone']:.2f})" for w in others))
    console.print(table)
    plan = result["rows"].get("regulated", {}).get("plan")
    if plan is not None:
        console.print(f"regulated: {plan['plan']}")


def cmd_bench(args: argparse.Namespace) -> int:
    import asyncgpu as ag

    console = make_console()
    on_gpu, scale = pick_scale(ag, console, args.scale)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    harness = bench_module("harness")
    WORKLOADS = bench_module("workloads").WORKLOADS
    names = list(args.names or ["all"])
    if "all" in names:              # (beside micro-benchmarks too: bench all overlap)
        names = [n for n in names if n != "all"] + list(WORKLOADS)
    # (what cannot run is refused before anything runs)
    unknown = [n for n in names if n not in WORKLOADS and n not in MICRO_BENCHMARKS]
    if unknown:
        return usage_error("asyncgpu bench", f"unknown workload(s) {unknown}; known: "
                           f"{sorted(WORKLOADS)}, {', '.join(MICRO_BENCHMARKS)}")
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    if any(n in WORKLOADS for n in names):
        future = [m for m in modes if m in harness.FUTURE_MODES]
        bad = [m for m in modes if m not in harness.MODES and m not in future]
        if future or bad or not modes:
            return usage_error(
                "asyncgpu bench", ("no modes" if not modes else f"unknown mode(s) {bad}")
                + (f"; not implemented yet: {future}" if future else "")
                + f"; available: {', '.join(harness.MODES)}")
    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        problem = output_problem(flag, path)
        if problem:
            return usage_error("asyncgpu bench", problem)
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        return usage_error("asyncgpu bench", "--plot draws with matplotlib, which is not "
                           "installed: pip install matplotlib (or asyncgpu[bench])")
    if args.plot and not on_gpu:
        return usage_error("asyncgpu bench", "--plot draws the speedups measured on a GPU; the "
                           "simulator measures none (it checks every result): run on a GPU, "
                           "or leave --plot out")
    try:
        if "multigpu" in names:
            multigpu_args(args, devices_available(on_gpu))
        if "tenants" in names:
            tenants_mix(args)
    except UsageError as exc:
        return usage_error("asyncgpu bench", str(exc))
    _say_unused(console, args, names, WORKLOADS)
    ag.configure(backend="cuda" if on_gpu else "sim")
    #: the micro-benchmarks' results, for --json (every one named, beside the suite's)
    micro: dict[str, Any] = {}
    if "overlap" in names:
        names = [n for n in names if n != "overlap"]
        m = bench_module("overlap").measure(ag)
        console.print("overlap of two independent ~5 ms kernels: "
                      + ", ".join(f"{k}={v:.3f}" for k, v in m.items()))
        micro["overlap"] = m
    if "overhead" in names:
        names = [n for n in names if n != "overhead"]
        overhead = bench_module("overhead")
        if on_gpu:
            m = overhead.measure(ag)
        else:
            console.print("[yellow]overhead: no GPU; measuring only the runtime's own Python "
                          "work (a backend that does nothing)[/]")
            m = {"runtime_only": overhead.runtime_only()}
        print_overhead(console, m)
        micro["overhead"] = m
    if "multigpu" in names:
        names = [n for n in names if n != "multigpu"]
        bench_multigpu(ag, console, args, on_gpu, scale, harness, micro)
    if "tenants" in names:
        names = [n for n in names if n != "tenants"]
        bench_tenants(ag, console, args, on_gpu, scale, harness, micro)
    for name in ("inception", "replay"):
        if name not in names:
            continue
        names = [n for n in names if n != name]
        mod = bench_module(name)
        if name == "inception":
            # (on the simulator: every configuration checked, no times to take)
            m = mod.measure(ag, scale) if on_gpu else mod.measure(ag, scale, iterations=1,
                                                                   block=32)
        else:
            m = mod.measure(ag)
        for key, value in m.items():
            console.print(f"{name} {key}: {value}")
        micro[name] = m
    if not names:
        if args.json and micro:
            write_json(args.json, micro, harness.machine_info(ag))
        return 0
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
    bounds_mod = bench_module("bounds")
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
                        rounds=max(1, min(args.rounds or 1, iterations)), started=started)
    rows = harness.summarize(results, ratios=on_gpu)
    print_results(console, args, rows, modes, memories, scale, iterations, on_gpu, want_bounds)
    bandwidth = bandwidths.get(memories[0])
    options = dict(vars(args), scale=scale, iterations=iterations, warmup=warmup,
                   num_blocks=num_blocks, blocks=blocks, h2d_bytes_per_s=bandwidth,
                   h2d_bytes_per_s_by_memory=bandwidths, memories=list(memories))
    if args.json:
        harness.write_json(args.json, results, harness.machine_info(ag), options, micro,
                           ratios=on_gpu)
        console.print(f"wrote {args.json}")
    if args.plot:
        harness.plot(args.plot, results)
        console.print(f"wrote {args.plot}")
    return 0 if all(r["ok"] for r in rows) else 1


_MODE_COLUMNS = {"serial": "serial", "parallel": "parallel", "handopt": "handopt",
                 "cudagraph": "cudagraph", "recorded": "recorded",
                 "recorded_static": "recorded\nstatic"}


#: Options that only some of what ``asyncgpu bench`` runs reads: option -> (its attribute, the
#: value it has when not given, what reads it).
_FOR = {"--modes": ("modes", "serial,parallel,handopt", ("suite",)),
        "--metrics": ("metrics", False, ("suite",)),
        "--devices": ("devices", None, ("multigpu",)),
        "--workloads": ("workloads", None, ("multigpu", "tenants")),
        "--steps": ("steps", "eager", ("tenants",)),
        "--period": ("period", None, ("tenants",)),
        "--partitions": ("partitions", False, ("tenants",)),
        "--balance": ("balance", False, ("tenants",)),
        "--no-priority": ("no_priority", False, ("tenants",)),
        "--plot": ("plot", None, ("suite", "multigpu"))}


def _say_unused(console: Any, args: argparse.Namespace, names: list[str],
                workloads: Any) -> None:
    """One line per option given that nothing of this run reads (it ran without it before)."""
    running = set(names) | ({"suite"} if any(n in workloads for n in names) else set())
    for flag, (attr, unset, readers) in _FOR.items():
        if getattr(args, attr) != unset and not running & set(readers):
            what = " and ".join("the suite's workloads" if r == "suite" else r for r in readers)
            console.print(f"[yellow]{flag} applies to {what}, which this run does not include: "
                          "it is ignored[/]")


def print_results(console: Any, args: argparse.Namespace, rows: list[dict[str, Any]],
                  modes: tuple[str, ...], memories: tuple[str, ...], scale: str,
                  iterations: int, on_gpu: bool, want_bounds: bool) -> None:
    """The results table and the ratios that mean something on this backend."""
    harness = bench_module("harness")
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
    table = plain_table(title)
    derived = plain_table("ratios and bounds") if ratios or bound_cols else None
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
                cells += [fmt(b.get("transfer_bound_s"), 1e3),
                          fmt(b.get("compute_bound_s"), 1e3),
                          fmt(b.get("parallel_over_bound"), digits=2)]
            derived.add_row(*cells)
    console.print(table)
    if derived is not None:
        console.print(derived)
    if args.metrics:
        console.print(metrics_table(rows, "overlap metrics (one traced iteration per mode)"
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
                    f"{fmt(row.get('parallel_over_pinned'), digits=3)}")
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
