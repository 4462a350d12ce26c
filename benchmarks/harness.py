"""The benchmark harness: every workload in every mode, side by side, checked every time.

Per workload, scale and block size, each mode runs ``warmup`` untimed iterations (they include
compilation) then ``iterations`` timed ones (with ``rounds`` > 1 in that many blocks, the modes'
blocks taken in turn, so a slow spell of the host is shared by every mode: ``run_modes``); before every iteration the host rewrites the inputs
(``reset``, untimed), which puts the host-to-device transfer inside the timed region as in the
GrCUDA paper (``--inputs streaming``); with ``--inputs resident`` the inputs are rewritten once
and prefetched, so only the kernels are timed. A result that fails its check reports FAIL and no
time. Times are host wall-clock from the first launch until the iteration's device work is
complete: after the workload's host read every mode waits for all the device work it enqueued
(``asyncgpu.synchronize()``, as ``handopt`` does by hand). A host read can return while work it
does not depend on (other chunks, other streams) is still running; ending the timed region
there would leave that work to the next iteration's untimed reset, time the modes for
different amounts of work and let a mode come in under the transfer and compute bounds.

Modes: ``serial`` (asyncgpu, ``execution="sync"``), ``parallel`` (asyncgpu's default
asynchronous policies), ``handopt`` (the same kernels on hand-chosen streams and events, see
``handopt.py``), ``cudagraph`` (``handopt``'s device work captured once into CUDA graphs,
untimed, then replayed every iteration: see ``cudagraph.py``), ``recorded`` (the workload's
own ``run()`` under asyncgpu's graph recorder, ``asyncgpu.graph(run, split=True)``: every
stretch of launches between two host operations is one graph; two untimed iterations record and
capture them, the timed ones replay them; a workload may define ``run_recorded`` instead),
``recorded_static`` (the workload's device part, ``run_device``, under
``asyncgpu.graph(static=True)``, then its host read ``read()``: once captured, a call replays
the graph from its arguments alone, without running the body, so the per-replay key work of
``recorded`` disappears; a workload whose device part has host steps in it defines
``static_runner(ag)`` instead).

With ``metrics`` each mode runs one more iteration, untimed and traced (so the timed ones stay
untraced), whose trace gives the GrCUDA paper's overlap metrics (CT, TC, CC, TOT). With
``bounds`` the serial and parallel traces of such iterations give the compute bound and the
workload's ``streamed_bytes()`` over the measured prefetch bandwidth the transfer bound (see
``bounds.py``).
"""

from __future__ import annotations

import json
import logging
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from asyncgpu import BlockTooLargeError

log = logging.getLogger("asyncgpu.bench")

MODES = ("serial", "parallel", "handopt", "cudagraph", "recorded", "recorded_static")
#: Memory models (``asyncgpu bench --memory``).
MEMORY_MODELS = ("managed", "explicit")
#: Workloads whose transfer bound is also timed as one pinned copy of their streamed bytes.
PINNED_BOUND_WORKLOADS = ("vec", "bs")
#: Modes with a place in the reports but no implementation yet.
FUTURE_MODES: tuple[str, ...] = ()
BLOCK_SIZES = (32, 128, 256, 1024)
#: The clock of the timed iterations (a name of its own, so that a test can watch the ends of
#: the timed regions).
_clock = time.perf_counter


@dataclass
class Result:
    """One (workload, block size, mode) measurement."""

    workload: str
    scale: str
    inputs: str
    block: Any
    num_blocks: int
    mode: str
    ok: bool
    message: str
    times_s: list[float] = field(default_factory=list)
    #: Overlap metrics of a traced, untimed iteration (``metrics=True``).
    metrics: dict[str, float] | None = None
    #: Physical bounds of this workload and block size (``bounds=True``; same for every mode).
    bounds: dict[str, Any] | None = None
    #: The memory model of the run (``Options.memory``).
    memory: str = "managed"
    #: A pinned host-to-device copy of the workload's streamed bytes, timed in the same run
    #: (median seconds; VEC and B&S with ``bounds=True`` on a GPU).
    pinned_bound_s: float | None = None
    #: Not run: the kernel cannot run this block size on this device (``BlockTooLargeError``,
    #: refused before anything was enqueued); not a failure.
    skipped: bool = False

    @property
    def median(self) -> float:
        return statistics.median(self.times_s) if self.times_s else float("nan")

    @property
    def spread(self) -> tuple[float, float]:
        if not self.times_s:
            return (float("nan"), float("nan"))
        q = np.percentile(self.times_s, [10, 90])
        return float(q[0]), float(q[1])


def _same(a: Any, b: Any) -> bool:
    """Exact equality of two results (floats, arrays, or dicts of them); NaNs compare equal."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True))


def _close(a: Any, b: Any, rtol: float) -> bool:
    if isinstance(a, dict):
        return all(_close(a[k], b[k], rtol) for k in a)
    return bool(np.allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol,
                            atol=rtol, equal_nan=True))


class ModeRun:
    """One mode of one workload and block size: set up once (captures, recordings), then timed
    in one or more blocks of iterations (``rounds`` interleave the modes' blocks), then closed.

    Setup, every block and ``close`` each run under the mode's ``execution`` option. With
    resident inputs every block starts with the inputs rewritten and one untimed iteration, so
    no timed iteration pays for a transfer another mode's block caused.
    """

    def __init__(self, ag: Any, wl: Any, mode: str, block: Any, num_blocks: int, inputs: str,
                 hand: Any) -> None:
        self.ag, self.wl, self.mode, self.hand = ag, wl, mode, hand
        self.block, self.num_blocks, self.inputs = block, num_blocks, inputs
        self.execution = "sync" if mode == "serial" else "async"
        self.result: Any = None
        self.schedule: Any = None
        self.recorded: Any = None
        with ag.configure(execution=self.execution):
            if inputs == "resident" and mode in ("cudagraph", "recorded", "recorded_static"):
                wl.reset()      # captured with the inputs where the timed blocks find them
                ag.synchronize()
            if mode == "cudagraph":
                self.schedule = getattr(wl, "run_cudagraph", wl.run_handopt)
                _capture(ag, wl, self.schedule, hand, block, num_blocks, inputs)
            if mode in ("recorded", "recorded_static"):
                self.recorded = (static_runner(ag, wl) if mode == "recorded_static" else
                                 getattr(wl, "run_recorded", None)
                                 or ag.graph(wl.run, split=True))
                for _ in range(2):  # untimed: record, then capture (as cudagraph's capture)
                    _prepare(ag, wl, inputs)
                    self.recorded(block, num_blocks)

    def iterations(self, count: int, warmup: int = 0) -> list[float]:
        """``warmup`` untimed iterations, then ``count`` timed ones; their seconds."""
        ag, wl, inputs = self.ag, self.wl, self.inputs
        times: list[float] = []
        with ag.configure(execution=self.execution):
            if inputs == "resident":
                wl.reset()
                ag.synchronize()
                warmup = max(warmup, 1)     # the rewritten inputs move before the timing
            for it in range(warmup + count):
                _prepare(ag, wl, inputs)
                t0 = _clock()
                self.result = self._once()
                ag.synchronize()    # the iteration's device work is part of its time
                elapsed = _clock() - t0
                if it >= warmup:
                    times.append(elapsed)
        return times

    def _once(self) -> Any:
        mode, wl, hand, block, nb = self.mode, self.wl, self.hand, self.block, self.num_blocks
        if mode == "handopt":
            hand.begin()
            return wl.run_handopt(hand, block, nb)
        if mode == "cudagraph":
            return hand.replay(self.schedule, block, nb)
        if self.recorded is not None:
            return self.recorded(block, nb)
        return wl.run(block, nb)

    def close(self) -> None:
        """Destroy what setup captured."""
        with self.ag.configure(execution=self.execution):
            if self.mode == "cudagraph":
                self.hand.release()
            if self.recorded is not None and hasattr(self.recorded, "clear"):
                self.recorded.clear()


def run_mode(ag: Any, wl: Any, mode: str, block: Any, num_blocks: int, warmup: int,
             iterations: int, inputs: str, hand: Any) -> tuple[list[float], Any]:
    """Run one mode on its own; returns the timed iterations and the last result."""
    run = ModeRun(ag, wl, mode, block, num_blocks, inputs, hand)
    try:
        times = run.iterations(iterations, warmup)
    finally:
        run.close()
    return times, run.result


def run_modes(ag: Any, wl: Any, modes: tuple[str, ...], block: Any, num_blocks: int,
              warmup: int, iterations: int, inputs: str, hands: dict[str, Any], rounds: int,
              started: Callable[[str], None] = lambda mode: None,
              ) -> dict[str, tuple[list[float], Any, Exception | None]]:
    """Every mode of one cell, their timed iterations split into ``rounds`` blocks taken in
    turn (mode order rotated each round), so a slow spell of the host lands on every mode
    rather than on one; per mode (times, last result, error or None). ``rounds=1`` runs each
    mode's iterations in one block, one mode after the other. ``started(mode)`` is called
    before each mode's setup and each of its blocks (progress reports)."""
    out: dict[str, tuple[list[float], Any, Exception | None]] = {}
    runs: dict[str, ModeRun] = {}
    for mode in modes:
        started(mode)
        try:
            runs[mode] = ModeRun(ag, wl, mode, block, num_blocks, inputs, hands[mode])
        except Exception as exc:  # a crash is a FAIL of this cell, not of the suite
            _log_failure(exc, "%s %s %s failed", wl.name, mode, block)
            out[mode] = ([], None, exc)
    times: dict[str, list[float]] = {m: [] for m in runs}
    per = [iterations // rounds + (1 if r < iterations % rounds else 0) for r in range(rounds)]
    order = list(runs)
    for r in range(rounds):
        turn = r % len(order) if order else 0
        for mode in order[turn:] + order[:turn]:
            if mode in out:
                continue
            started(mode)
            try:
                times[mode] += runs[mode].iterations(per[r], warmup if r == 0 else 0)
            except Exception as exc:
                _log_failure(exc, "%s %s %s failed", wl.name, mode, block)
                out[mode] = ([], None, exc)
    for mode, run in runs.items():
        try:
            run.close()
        except Exception as exc:
            log.exception("%s %s %s: close failed", wl.name, mode, block)
            out.setdefault(mode, ([], None, exc))
        out.setdefault(mode, (times[mode], run.result, None))
    return {m: out[m] for m in modes}


def _log_failure(exc: Exception, *args: Any) -> None:
    """A block the kernel cannot run is a skipped cell (logged briefly); anything else a
    failure, logged with its traceback."""
    if isinstance(exc, BlockTooLargeError):
        log.info(*args)
        return
    log.exception(*args)


class _StaticRun:
    """``recorded_static``: ``run_device`` as a static graph function, then ``read()``."""

    def __init__(self, ag: Any, wl: Any) -> None:
        self.device = ag.graph(wl.run_device, static=True)
        self.read = wl.read

    def __call__(self, block: Any, num_blocks: int) -> Any:
        self.device(block, num_blocks)
        return self.read()

    def clear(self) -> None:
        self.device.clear()


def static_runner(ag: Any, wl: Any) -> Any:
    """The ``recorded_static`` callable of a workload (``static_runner`` or ``run_device``)."""
    make = getattr(wl, "static_runner", None)
    return make(ag) if make is not None else _StaticRun(ag, wl)


def _prepare(ag: Any, wl: Any, inputs: str) -> None:
    if inputs == "streaming":
        wl.reset()
    elif hasattr(wl, "reset_accumulators"):
        wl.reset_accumulators()
    ag.synchronize()


#: Modes with overlap metrics. Not ``cudagraph``: its kernels run inside graphs, where the
#: per-launch timing events a trace records around each kernel do not exist.
TRACEABLE = ("serial", "parallel", "handopt")


def traced_iteration(ag: Any, wl: Any, mode: str, block: Any, num_blocks: int,
                     inputs: str) -> Any:
    """One untimed iteration of ``mode`` under ``asyncgpu.trace()``; returns the trace."""
    from asyncgpu.runtime.current import current_runtime

    from .handopt import Hand

    with ag.configure(execution="sync" if mode == "serial" else "async"):
        if inputs == "streaming":
            wl.reset()
        elif hasattr(wl, "reset_accumulators"):
            wl.reset_accumulators()
        ag.synchronize()
        with ag.trace() as t:
            if mode == "handopt":
                hand = Hand(current_runtime())   # made inside: it drives the traced backend
                hand.begin()
                wl.run_handopt(hand, block, num_blocks)
            else:
                wl.run(block, num_blocks)
        t.metrics()   # resolves the device times while the mode's options are in force
    return t


def _observe(ag: Any, wl: Any, cell: list[Result], block: Any, num_blocks: int, inputs: str,
             metrics: bool, bounds: bool, bandwidth: float | None) -> None:
    """Traced iterations for the metrics and bounds of one block size's results."""
    from . import bounds as B

    traces = {}
    for r in cell:
        if r.ok and r.mode in TRACEABLE and (metrics or r.mode in ("serial", "parallel")):
            traces[r.mode] = traced_iteration(ag, wl, r.mode, block, num_blocks, inputs)
            if metrics:
                r.metrics = traces[r.mode].metrics()
    if bounds and "serial" in traces and "parallel" in traces:
        par = next(r for r in cell if r.mode == "parallel")
        streamed = wl.streamed_bytes() if inputs == "streaming" else 0
        b = B.bounds(streamed, bandwidth, traces["parallel"], traces["serial"], par.median)
        for r in cell:
            r.bounds = b


def _capture(ag: Any, wl: Any, schedule: Any, hand: Any, block: Any, num_blocks: int,
             inputs: str) -> None:
    """Untimed: capture the schedule's device work into graphs (``hand`` is a ``GraphHand``).

    On a GPU one eager run comes first: a kernel's first launch compiles it and loads its module,
    which must not happen inside a capture.
    """
    from asyncgpu.runtime.current import current_runtime

    if current_runtime().backend.name == "cuda":
        if inputs == "streaming":
            wl.reset()
        elif hasattr(wl, "reset_accumulators"):
            wl.reset_accumulators()
        ag.synchronize()
        hand.begin()
        schedule(hand, block, num_blocks)
        ag.synchronize()
    hand.capture(schedule, block, num_blocks)


def bench_workload(ag: Any, cls: Any, scale: str, modes: tuple[str, ...], blocks: list[Any],
                   num_blocks: int, warmup: int, iterations: int, inputs: str,
                   progress: Callable[[], None] = lambda: None, metrics: bool = False,
                   bounds: bool = False, bandwidth: float | None = None,
                   rounds: int = 1, started: Callable[[str], None] = lambda mode: None,
                   ) -> list[Result]:
    """All requested modes and block sizes of one workload.

    ``metrics``: overlap metrics per mode; ``bounds``: transfer and compute bounds per block
    size (needs the serial and parallel modes; ``bandwidth`` from ``bounds.h2d_bandwidth``);
    ``rounds``: the timed iterations in that many interleaved blocks per mode (``run_modes``);
    ``progress()`` after each mode's result, ``started(mode)`` as each mode begins to run.
    """
    from asyncgpu.runtime.current import current_options, current_runtime

    from . import bounds as B
    from .cudagraph import GraphHand
    from .handopt import Hand

    memory = current_options().memory
    wl = cls(ag, scale)
    pinned_s = None
    if bounds and inputs == "streaming" and cls.name in PINNED_BOUND_WORKLOADS:
        times = B.pinned_copy_times(current_runtime(), wl.streamed_bytes())
        pinned_s = statistics.median(times) if times else None
    hand = Hand(current_runtime())
    graph_hand = GraphHand(current_runtime())
    out: list[Result] = []
    for block in blocks:
        if getattr(cls, "two_d", False) and isinstance(block, int):
            block = (8, 8)
        serial_result = None
        cell: list[Result] = []
        hands = {m: graph_hand if m == "cudagraph" else hand for m in modes}
        runs = run_modes(ag, wl, modes, block, num_blocks, warmup, iterations, inputs, hands,
                         rounds, started)
        for mode in modes:
            times, result, error = runs[mode]
            skipped = isinstance(error, BlockTooLargeError)
            if error is not None:
                ok, message = False, f"{type(error).__name__}: {error}"
            else:
                try:
                    ok, message = wl.check(result)
                except Exception as exc:
                    log.exception("%s %s %s: check failed", cls.name, mode, block)
                    ok, message = False, f"{type(exc).__name__}: {exc}"
                if ok and serial_result is not None and not _same(result, serial_result):
                    tolerance = getattr(wl, "atomic_tolerance", None)
                    if tolerance is None or not _close(result, serial_result, tolerance):
                        ok, message = False, f"{mode} result differs from serial"
                    else:
                        message += f"; within {tolerance:g} of serial (float atomics)"
                if mode == "serial":
                    serial_result = result
            cell.append(Result(cls.name, scale, inputs, block, num_blocks, mode, ok, message,
                               times if ok else [], memory=memory, pinned_bound_s=pinned_s,
                               skipped=skipped))
            progress()
        if metrics or bounds:
            try:
                _observe(ag, wl, cell, block, num_blocks, inputs, metrics, bounds, bandwidth)
            except Exception:  # observing must not turn a passing cell into a crash
                log.exception("%s %s: traced iterations failed", cls.name, block)
        out += cell
        if getattr(cls, "two_d", False):
            break   # one 2D block shape
    return out


class KernelRecorder:
    """An instrument that keeps the kernel nodes the runtime issues (for DAG shapes and figures)."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []

    def node_issued(self, node: Any) -> None:
        if node.kind == "kernel":
            self.nodes.append(node)


def record_run(ag: Any, cls: Any, scale: str = "tiny", seed: int = 0) -> list[Any]:
    """The kernel nodes (with streams and edges) of one ``run()`` on the sim backend."""
    from asyncgpu.runtime.current import current_runtime

    with ag.configure(backend="sim", sim_seed=seed, sim_strategy="random"):
        wl = cls(ag, scale)
        wl.reset()
        ag.synchronize()
        rec = KernelRecorder()
        with current_runtime().instrument(rec):
            wl.run((8, 8) if getattr(cls, "two_d", False) else 32, 2)
    return rec.nodes


def machine_info(ag: Any) -> dict[str, Any]:
    import numba

    from asyncgpu.core.compiled import is_compiled
    from asyncgpu.runtime.current import current_runtime

    rt = current_runtime()
    be = getattr(rt.backend, "inner", rt.backend)
    info = {
        "backend": be.name, "python": platform.python_version(), "numpy": np.__version__,
        "numba": numba.__version__, "platform": platform.platform(),
        "compiled": is_compiled(), "devices": list(rt.devices),
    }
    if is_compiled():   # (the driver calls are compiled with the launch path, or not at all)
        from asyncgpu.backends.cuda.driver import missing_reason

        reason = missing_reason()
        info["driver_calls"] = "compiled" if reason is None else f"CuPy's ({reason})"
    else:
        info["compiled"] = ("False (plain Python: not compiled at install, for want of a C "
                            "compiler or Cython, or with ASYNCGPU_BUILD=python)")
        info["driver_calls"] = "CuPy's (not compiled: they are compiled with the launch path)"
    if be.name == "cuda":
        import cupy

        first = getattr(be, "parts", [be])[0]     # (several GPUs: one part per device)
        info.update(gpu=first.device_name, sms=first.sm_count, cupy=cupy.__version__,
                    gpus_on_host=cupy.cuda.runtime.getDeviceCount(),
                    cuda_runtime=cupy.cuda.runtime.runtimeGetVersion(),
                    driver=cupy.cuda.runtime.driverGetVersion())
    return info


#: The summary's ratios of two times: null where the times are the simulator's.
RATIOS = ("speedup", "vs_handopt", "vs_cudagraph", "recorded_vs_cudagraph",
          "recorded_vs_parallel", "recorded_static_vs_cudagraph", "parallel_over_pinned",
          "vs_other_memory")


def summarize(results: list[Result], ratios: bool = True) -> list[dict[str, Any]]:
    """One row per (workload, block): median per mode and the ratios we report; with
    ``ratios=False`` (the simulator) every key of :data:`RATIOS` is None."""
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in results:
        key = (r.workload, str(r.block), r.memory)
        row = rows.setdefault(key, {"workload": r.workload, "block": str(r.block),
                                    "memory": r.memory, "ok": True})
        if r.pinned_bound_s is not None:
            row["pinned_bound_s"] = r.pinned_bound_s
        row[r.mode] = r.median if r.ok else None
        if r.metrics is not None:
            row.setdefault("metrics", {})[r.mode] = r.metrics
        if r.bounds is not None:
            row["bounds"] = r.bounds
        if r.skipped:
            row.setdefault("skipped", []).append(f"{r.mode}: {r.message}")
            continue
        row["ok"] = row["ok"] and r.ok
        if not r.ok:
            row.setdefault("failures", []).append(f"{r.mode}: {r.message}")
    for row in rows.values():
        s, p, h = row.get("serial"), row.get("parallel"), row.get("handopt")
        row["speedup"] = s / p if s and p else None          # serial time / parallel time
        row["vs_handopt"] = h / p if h and p else None       # >= 1: parallel at least as fast
        g = row.get("cudagraph")
        row["vs_cudagraph"] = g / p if g and p else None     # >= 1: parallel at least as fast
        rec = row.get("recorded")
        # > 1: recorded faster than the hand-captured graph, than the eager parallel mode
        row["recorded_vs_cudagraph"] = g / rec if g and rec else None
        row["recorded_vs_parallel"] = p / rec if p and rec else None
        st = row.get("recorded_static")
        row["recorded_static_vs_cudagraph"] = g / st if g and st else None
        pinned = row.get("pinned_bound_s")
        # how far parallel is above one pinned copy of the streamed bytes (1: at the bound)
        row["parallel_over_pinned"] = p / pinned if p and pinned else None
    for (workload, block, memory), row in rows.items():
        # > 1: this memory model's parallel run is faster than the other model's
        other = rows.get((workload, block, "managed" if memory == "explicit" else "explicit"))
        p = row.get("parallel")
        q = other.get("parallel") if other else None
        row["vs_other_memory"] = q / p if p and q else None
        if not ratios:
            # (simulator times are no GPU times: a ratio of two says nothing of a speedup; the
            # keys stay, so that a file has the same shape on every backend)
            row.update(dict.fromkeys(RATIOS))
    return list(rows.values())


def geomean(values: list[float]) -> float:
    vals = [v for v in values if v]
    return float(np.exp(np.mean(np.log(vals)))) if vals else float("nan")


def write_json(path: str, results: list[Result], info: dict[str, Any], options: dict[str, Any],
               micro: dict[str, Any] | None = None, ratios: bool = True) -> None:
    """The suite's results (every iteration's time), and the micro-benchmarks' run beside it
    (``micro``, by name); ``ratios`` as :func:`summarize`'s."""
    doc = {
        **(micro or {}),
        "machine": info, "options": options,
        "results": [dict(asdict(r), median_s=r.median, spread_s=r.spread) for r in results],
        "summary": summarize(results, ratios),
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, default=str)


def plot(path: str, results: list[Result]) -> None:
    """Speedup of parallel (and handopt) over serial per workload and block size (Fig. 7 style)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summarize(results)
    workloads = sorted({r["workload"] for r in rows})
    blocks = sorted({r["block"] for r in rows}, key=lambda b: (len(b), b))
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(workloads) * len(blocks) / 2), 4))
    width = 0.8 / max(len(blocks), 1)
    for j, b in enumerate(blocks):
        ys = []
        for w in workloads:
            row = next((r for r in rows if r["workload"] == w and r["block"] == b), None)
            ys.append(row["speedup"] if row and row["speedup"] else 0.0)
        ax.bar(np.arange(len(workloads)) + j * width, ys, width, label=f"block {b}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(np.arange(len(workloads)) + width * (len(blocks) - 1) / 2, workloads)
    ax.set_ylabel("speedup of parallel over serial")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
