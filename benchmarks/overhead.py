"""Micro-benchmark: host time per launch through asyncgpu versus raw CuPy and plain Numba.

Tiny kernels (one block of 32 threads) with 1, 3 and 8 array arguments, launched back to back
without host access, for CUDA C (CuPy ``RawKernel``) and Numba kernels:

* ``independent``: each launch writes its own output, so there are no edges;
* ``cross-stream``: each timed launch reads the output of the previous timed launch, whose stream
  was already handed to another child, so it gets another stream and one event wait (the untimed
  sibling launch in between is what hands the stream over). ``statistics().event_waits`` confirms
  one wait per timed launch.

Baselines, same kernels, same run: ``cupy_raw`` (``RawKernel.__call__`` on CuPy arrays, one
stream), ``numba_device`` (Numba's launch with Numba device arrays) and ``numba_cupy`` (Numba's
launch with CuPy arrays on an external stream: the same arguments asyncgpu hands Numba).
Each case is timed over ``launches`` launches, ``repeats`` times, the cases taking turns; the
report gives the median and the 10th/90th percentiles in microseconds per launch.

``cuda_sequence_*`` are the CUDA calls an asyncgpu launch makes (launch, event record, a poll's
query, and the event wait of a cross-stream launch) made straight through CuPy: the floor under
the ``ag_*`` cases, measured in the same rounds. ``flat`` gives the per-launch cost of 1,000
launches after 10, 1,000 and 100,000 launches without a host access (it must stay flat), and
the same comparison side by side: a runtime after 1,000 launches and one after 100,000, timed in
alternating windows (``side_by_side_ratio``), which the host's drift cannot tilt.

``threads``: the same launches made by :data:`THREADS` host threads at once, each with arrays
of its own, against one thread making all of them: host us per launch and the process's
voluntary context switches per launch (a thread giving up the CPU, mostly to wait for the GIL
another thread took). Cases: independent 3-argument CUDA C launches through asyncgpu and
through raw CuPy, and asyncgpu launches with a host read of one element after every second
launch (a small step: its launches, then its result).

``runtime_only`` measures asyncgpu's own Python work per launch with a backend that does nothing
(no CUDA at all), so it runs anywhere, the simulator's machines included.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any, Callable

import numpy as np

from asyncgpu.core.backend import Backend

ARGS = (1, 3, 8)
#: Host threads of the ``threads`` cases.
THREADS = 3


def _c_source(nargs: int) -> str:
    params = ", ".join([f"const float* a{i}" for i in range(nargs - 1)] + ["float* out"])
    reads = " + ".join([f"a{i}[t]" for i in range(nargs - 1)] or ["1.0f"])
    return (f'extern "C" __global__ void k{nargs}({params}) {{\n'
            f"    int t = threadIdx.x; out[t] = {reads};\n}}\n")


def _numba_kernel(nargs: int) -> Any:
    from numba import cuda

    names = [f"a{i}" for i in range(nargs - 1)] + ["out"]
    body = " + ".join([f"{n}[t]" for n in names[:-1]] or ["1.0"])
    src = (f"def k{nargs}({', '.join(names)}):\n    t = cuda.threadIdx.x\n"
           f"    out[t] = {body}\n")
    scope: dict[str, Any] = {"cuda": cuda}
    exec(src, scope)  # noqa: S102 - generating a kernel of n parameters
    return cuda.jit(scope[f"k{nargs}"])


def _summary(samples: list[float]) -> dict[str, float]:
    q = np.percentile(samples, [10, 90])
    return {"median_us": statistics.median(samples), "p10_us": float(q[0]),
            "p90_us": float(q[1])}


def _timed(fn: Callable[[int], float | None], count: int, sync: Callable[[], None]) -> float:
    """Host us per launch of one ``fn(count)``, between two synchronizations."""
    sync()
    t0 = time.perf_counter()
    own = fn(count)
    elapsed = own if own is not None else time.perf_counter() - t0
    sync()
    return elapsed / count * 1e6


def _per_launch(fn: Callable[[int], float | None], count: int, sync: Callable[[], None],
                repeats: int) -> dict[str, float]:
    """``fn(count)`` launches ``count`` times; it returns the seconds it timed itself, or None
    to be timed as a whole."""
    return _summary([_timed(fn, count, sync) for _ in range(repeats)])


def _ag_cases(ag: Any, k: Any, nargs: int) -> dict[str, Callable[[int], float | None]]:
    """The independent and cross-stream loops of one asyncgpu kernel."""
    ins = [ag.ones(32, np.float32) for _ in range(max(nargs - 1, 1))]
    outs = [ag.zeros(32, np.float32) for _ in range(64)]
    sink = [ag.zeros(32, np.float32) for _ in range(64)]

    def independent(n: int) -> None:
        for i in range(n):
            k[1, 32](*ins[: nargs - 1], outs[i % 64])

    def cross_stream(n: int) -> float:
        # timed launch i reads out[i-1]; the untimed sibling took out[i-1]'s producer's stream,
        # so launch i runs on another stream behind one event wait
        spent = 0.0
        clock = time.perf_counter
        prev = outs[63]
        for i in range(n):
            dst = outs[i % 64]
            args = [prev, *ins[1: nargs - 1], dst] if nargs > 1 else [dst]
            t0 = clock()
            k[1, 32](*args)
            spent += clock() - t0
            k[1, 32](*([dst] * (nargs - 1)), sink[i % 64])
            prev = dst
        return spent

    if nargs == 1:      # no input to depend on
        return {"independent": independent}
    return {"independent": independent, "cross_stream": cross_stream}


def _tenant_steps(ag: Any, k: Any, nargs: int) -> Callable[[int], None]:
    """Each independent launch as one step of a tenant (``with ag.tenant(...)``): what a step's
    own timing events and bookkeeping add to the launch in it."""
    scope = ag.tenant("overhead")
    ins = [ag.ones(32, np.float32) for _ in range(nargs - 1)]
    outs = [ag.zeros(32, np.float32) for _ in range(64)]

    def steps(n: int) -> None:
        for i in range(n):
            with scope:
                k[1, 32](*ins, outs[i % 64])

    return steps


def measure(ag: Any, launches: int = 2000, repeats: int = 7) -> dict[str, Any]:
    """Host microseconds per launch for every case (``cuda`` backend only).

    The cases take turns: each round times every case once, so every case sees the same
    stretches of the host (whose speed drifts by tens of percent within a run), and the ratios
    the targets name are also given per round (``ratios_per_round``, then their median)."""
    import cupy
    from numba import cuda

    stream = cupy.cuda.Stream(non_blocking=True)
    nstream = cuda.external_stream(stream.ptr)

    def sync() -> None:
        stream.synchronize()
        ag.synchronize()

    loops: dict[str, Callable[[int], float | None]] = {}
    for nargs in ARGS:
        src = _c_source(nargs)
        raw = cupy.RawKernel(src, f"k{nargs}")
        cp_arrays = [cupy.ones(32, np.float32) for _ in range(nargs)]
        nb = _numba_kernel(nargs)
        nb_arrays = [cuda.to_device(np.ones(32, np.float32)) for _ in range(nargs)]
        const = [f"a{i}" for i in range(nargs - 1)]
        case_loops: dict[str, Callable[[int], float | None]] = {
            "cupy_raw": lambda n, raw=raw, a=tuple(cp_arrays): [
                raw((1,), (32,), a, stream=stream) for _ in range(n)] and None,
            "numba_device": lambda n, nb=nb, a=nb_arrays: [
                nb[1, 32, nstream](*a) for _ in range(n)] and None,
            "numba_cupy": lambda n, nb=nb, a=cp_arrays: [
                nb[1, 32, nstream](*a) for _ in range(n)] and None,
        }
        for kind, k in (("cuda_c", ag.cuda_kernel(src, f"k{nargs}")),
                        ("numba", ag.kernel(nb, const=const))):
            for case, fn in _ag_cases(ag, k, nargs).items():
                case_loops[f"ag_{kind}_{case}"] = fn
            if kind == "cuda_c" and nargs == 3:
                case_loops["ag_cuda_c_tenant_step"] = _tenant_steps(ag, k, nargs)
        loops.update({f"{name}_{nargs}args": fn for name, fn in case_loops.items()})
    loops.update(_sequences(ag, stream))
    loops.update(_without_lanes(ag, loops))
    for fn in loops.values():
        fn(50)                                      # compile and warm up
    sync()
    lanes_before = _lanes_used(ag)["lane_launches"]
    samples: dict[str, list[float]] = {name: [] for name in loops}
    waits = dict.fromkeys((n for n in loops if n.startswith("ag_") and "cross_stream" in n), 0)
    queries = dict.fromkeys((n for n in loops if n.startswith("ag_")), 0)
    for _ in range(repeats):
        for name, fn in loops.items():
            before = ag.statistics()
            samples[name].append(_timed(fn, launches, sync))
            after = ag.statistics()
            if name in waits:
                waits[name] += after.event_waits - before.event_waits
            if name in queries:
                queries[name] += after.events_queried - before.events_queried
    lanes = _lanes_used(ag)
    lanes["lane_launches"] -= lanes_before
    cases = {name: _summary(s) for name, s in samples.items()}
    components = _components(ag, stream, launches, repeats, sync)
    per_round = {
        "cuda_c_cross_stream_over_cupy_raw_3args": _round_ratios(
            samples, "ag_cuda_c_cross_stream_3args", "cupy_raw_3args"),
        "numba_cupy_over_ag_numba_independent_3args": _round_ratios(
            samples, "numba_cupy_3args", "ag_numba_independent_3args"),
        "cuda_c_tenant_step_over_independent_3args": _round_ratios(
            samples, "ag_cuda_c_tenant_step_3args", "ag_cuda_c_independent_3args"),
        "cuda_sequence_cross_stream_over_cupy_raw_3args": _round_ratios(
            samples, "cuda_sequence_cross_stream_3args", "cupy_raw_3args"),
    }
    if "ag_cuda_c_cross_stream_3args_no_lanes" in samples:
        per_round["no_lanes_cuda_c_cross_stream_over_cupy_raw_3args"] = _round_ratios(
            samples, "ag_cuda_c_cross_stream_3args_no_lanes", "cupy_raw_3args")
    if "driver_sequence_cross_stream_3args" in samples:
        per_round["driver_sequence_cross_stream_over_cupy_raw_3args"] = _round_ratios(
            samples, "driver_sequence_cross_stream_3args", "cupy_raw_3args")
    return {"cases": cases, "components": components,
            "event_waits_per_timed_launch": {n: w / (launches * repeats)
                                             for n, w in waits.items()},
            # (the cross-stream loops also make an untimed launch per timed one: per launch
            # of the loop, both counted)
            "event_queries_per_launch": {
                n: q / (launches * repeats * (2 if "cross_stream" in n else 1))
                for n, q in queries.items()},
            "ratios": {name: statistics.median(r) for name, r in per_round.items()},
            "ratios_per_round": per_round,
            "floor": cuda_floor(components, cases["cupy_raw_3args"]["median_us"]),
            "flat": flatness(ag), "options": options_effect(ag), "threads": threads(ag),
            "runtime_only": runtime_only(),
            "single_node_graphs": lanes}


def _driver_calls() -> Any:
    """The current runtime's ``DriverCalls``, or None (direct calls off, or a wrapped backend)."""
    from asyncgpu.runtime.current import current_runtime

    return getattr(current_runtime().backend, "driver", None)


def _without_lanes(ag: Any, loops: dict[str, Callable[[int], float | None]]
                   ) -> dict[str, Callable[[int], float | None]]:
    """The 3-array asyncgpu cases again with every kernel through ``cuLaunchKernel`` instead of
    its stream's one-node graph (``single_node_graphs`` off for the loop, same runtime), where
    the lanes are in use: their effect, measured in the same rounds."""
    driver = _driver_calls()
    if driver is None or not driver.single_node_graphs:
        return {}

    def off(fn: Callable[[int], float | None]) -> Callable[[int], float | None]:
        def loop(n: int) -> float | None:
            driver.single_node_graphs = False
            try:
                return fn(n)
            finally:
                driver.single_node_graphs = True
        return loop

    return {f"{name}_no_lanes": off(fn) for name, fn in loops.items()
            if name.startswith("ag_") and name.endswith("_3args")}


def _lanes_used(ag: Any) -> dict[str, Any]:
    """Whether the current runtime's kernels go through one-node graphs, and how many have
    (the timed rounds' count, in ``measure``'s result)."""
    driver = _driver_calls()
    return {"on": bool(driver is not None and driver.single_node_graphs),
            "lane_launches": 0 if driver is None else driver.lane_launches}


def _round_ratios(samples: dict[str, list[float]], num: str, den: str) -> list[float]:
    return [a / b for a, b in zip(samples[num], samples[den])]


def _sequences(ag: Any, stream: Any) -> dict[str, Callable[[int], None]]:
    """The CUDA calls one asyncgpu launch of the 3-array CUDA C kernel makes, in its order,
    with nothing of asyncgpu in between: the packed ``cuLaunchKernel``, the completion event's
    record, the poll's query of an earlier event, and for the cross-stream case first the wait
    on the parent's event (on two alternating streams). ``cuda_sequence_*`` makes them through
    CuPy; ``driver_sequence_*`` through the backend's ``DriverCalls`` (``direct_driver``,
    where it applies), the calls asyncgpu makes. What asyncgpu adds to a launch is its case's
    time minus the sequence its calls go through."""
    import cupy

    from asyncgpu.backends.cuda.calls import CudaCalls
    from asyncgpu.backends.cuda.packed import cuda_c_plan

    k = ag.cuda_kernel(_c_source(3), "k3")
    arrays = [ag.ones(32, np.float32) for _ in range(3)]
    k[1, 32](*arrays)
    ag.synchronize()
    raw = cupy.RawKernel(_c_source(3), "k3")
    values = tuple(a.__cuda_array_interface__["data"][0] for a in arrays)
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
    events = [cupy.cuda.Event(block=False, disable_timing=True) for _ in range(64)]
    grid, block = (1, 1, 1), (32, 1, 1)
    out: dict[str, Callable[[int], None]] = {}
    driver = _driver_calls()
    for label, calls in (("cuda", CudaCalls(cupy)), ("driver", driver)):
        if calls is None:
            continue
        plan = cuda_c_plan(raw.kernel.ptr, k.params, calls)
        record, wait, done = calls.event_record, calls.stream_wait, calls.event_done

        def independent(n: int, plan: Any = plan, record: Any = record, done: Any = done
                        ) -> None:
            sp = stream.ptr
            for i in range(n):
                plan.launch(values, grid, block, 0, sp)
                record(events[i % 64].ptr, sp)
                done(events[(i - 1) % 64])

        def cross_stream(n: int, plan: Any = plan, record: Any = record, wait: Any = wait,
                         done: Any = done) -> None:
            for i in range(n):
                sp = streams[i % 2].ptr
                wait(sp, events[(i - 1) % 64].ptr, 0)
                plan.launch(values, grid, block, 0, sp)
                record(events[i % 64].ptr, sp)
                done(events[(i - 2) % 64])

        out[f"{label}_sequence_independent_3args"] = independent
        out[f"{label}_sequence_cross_stream_3args"] = cross_stream
    return out


def cuda_floor(components: dict[str, dict[str, float]], raw_us: float) -> dict[str, float]:
    """What the CUDA calls of one cross-stream launch cost by themselves (a packed launch, the
    completion event's record, the wait on the parent's event, one poll's query), and what that
    leaves, below twice the raw CuPy launch, for everything asyncgpu does in Python
    (docs/performance.md, "Where the time goes")."""
    calls = sum(components[name]["median_us"] for name in
                ("packed_cuLaunchKernel", "event_record", "stream_wait_event", "event_query"))
    return {"cuda_calls_cross_stream_us": calls,
            "python_budget_at_2x_raw_us": 2 * raw_us - calls}


#: Options that trade safety or concurrency for launch cost, as measured by options_effect.
OPTION_VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "packed_launch=False": {"packed_launch": False},
    "direct_driver=False": {"direct_driver": False},
    "single_node_graphs=False": {"single_node_graphs": False},
    "debug_hb=True": {"debug_hb": True},
    "poll_threshold=1": {"poll_threshold": 1},
    "poll_threshold=4": {"poll_threshold": 4},
    "poll_threshold=8": {"poll_threshold": 8},
    "poll_threshold=100000": {"poll_threshold": 100_000},
    "execution=sync": {"execution": "sync"},
}


def options_effect(ag: Any, launches: int = 1000, repeats: int = 5) -> dict[str, dict[str, float]]:
    """Host us per launch of the independent 3-argument CUDA C loop under each option variant."""
    out = {}
    for label, changes in OPTION_VARIANTS.items():
        with ag.configure(backend="cuda", **changes):
            k = ag.cuda_kernel(_c_source(3), "k3")
            loop = _ag_cases(ag, k, 3)["independent"]
            loop(50)
            ag.synchronize()
            out[label] = _per_launch(loop, launches, ag.synchronize, repeats)
    return out


def _switches() -> int:
    """The process's voluntary context switches so far (0 where the OS does not count them)."""
    try:
        import resource
    except ImportError:         # (not a Unix)
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw


def threads(ag: Any, launches: int = 900, repeats: int = 7) -> dict[str, dict[str, float]]:
    """Per case (see the module docstring): host us per launch with :data:`THREADS` threads
    and with one (medians; the two take turns), their ratio, and voluntary context switches
    per launch with the threads (the median round's)."""
    import cupy

    src = _c_source(3)
    k = ag.cuda_kernel(src, "k3")
    raw = cupy.RawKernel(src, "k3")
    mine = [[ag.ones(32, np.float32) for _ in range(3)] for _ in range(THREADS)]
    raws = [[cupy.ones(32, np.float32) for _ in range(3)] for _ in range(THREADS)]
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(THREADS)]

    def ag_launch(i: int, n: int) -> None:
        a, b, c = mine[i]
        for _ in range(n):
            k[1, 32](a, b, c)

    def cupy_raw_launch(i: int, n: int) -> None:
        args, stream = tuple(raws[i]), streams[i]
        for _ in range(n):
            raw((1,), (32,), args, stream=stream)

    def ag_launch_read(i: int, n: int) -> None:
        a, b, c = mine[i]
        for _ in range(n // 2):
            k[1, 32](a, b, c)
            k[1, 32](a, b, c)
            float(c[0])

    def sync() -> None:
        for stream in streams:
            stream.synchronize()
        ag.synchronize()

    # (each thread's share even: the read case launches twice per read)
    share = launches // (2 * THREADS) * 2
    total = share * THREADS

    def run(fn: Callable[[int, int], None], threaded: bool) -> tuple[float, int]:
        sync()
        before, t0 = _switches(), time.perf_counter()
        if threaded:
            pool = [threading.Thread(target=fn, args=(i, share)) for i in range(THREADS)]
            for t in pool:
                t.start()
            for t in pool:
                t.join()
        else:
            for i in range(THREADS):
                fn(i, share)
        sync()
        return (time.perf_counter() - t0) / total * 1e6, _switches() - before

    out = {}
    for name, fn in (("ag_launch", ag_launch), ("cupy_raw_launch", cupy_raw_launch),
                     ("ag_launch_read", ag_launch_read)):
        fn(0, 50)
        one, many = [], []
        for _ in range(repeats):
            one.append(run(fn, False)[0])
            many.append(run(fn, True))
        many.sort()
        middle = many[len(many) // 2]
        out[name] = {"one_thread_us": statistics.median(one), "threads_us": middle[0],
                     "ratio": middle[0] / statistics.median(one),
                     "switches_per_launch": middle[1] / total}
    return out


def _components(ag: Any, stream: Any, launches: int, repeats: int,
                sync: Callable[[], None]) -> dict[str, dict[str, float]]:
    """The CUDA calls one asyncgpu launch makes, each timed alone (3-argument CUDA C kernel)."""
    import cupy

    from asyncgpu.runtime.current import current_runtime
    from asyncgpu.backends.cuda.packed import cuda_c_plan

    k = ag.cuda_kernel(_c_source(3), "k3")
    arrays = [ag.ones(32, np.float32) for _ in range(3)]
    k[1, 32](*arrays)
    sync()
    raw = cupy.RawKernel(_c_source(3), "k3")
    backend = current_runtime().backend
    plan = cuda_c_plan(raw.kernel.ptr, k.params, backend.calls)
    values = tuple(a.__cuda_array_interface__["data"][0] for a in arrays)
    event = backend.create_event()
    other = backend.create_stream()
    sp = stream.ptr
    loops: dict[str, Callable[[int], None]] = {
        "packed_cuLaunchKernel": lambda n: [plan.launch(values, (1, 1, 1), (32, 1, 1), 0, sp)
                                            for _ in range(n)] and None,
        "event_record": lambda n: [backend.record(event, stream) for _ in range(n)] and None,
        "stream_wait_event": lambda n: [backend.wait(other, event) for _ in range(n)] and None,
        "event_query": lambda n: [backend.event_done(event) for _ in range(n)] and None,
    }
    out = {}
    for name, fn in loops.items():
        fn(50)
        out[name] = _per_launch(fn, launches, sync, repeats)
    return out


def flatness(ag: Any) -> dict[str, float]:
    """Per-launch cost of 1,000 launches after 10, 1,000 and 100,000 launches (3 arguments),
    then :func:`flat_side_by_side`."""
    k3 = ag.cuda_kernel(_c_source(3), "k3")
    a = [ag.ones(32, np.float32) for _ in range(2)]
    outs = [ag.zeros(32, np.float32) for _ in range(64)]
    for i in range(64):
        k3[1, 32](*a, outs[i])
    ag.synchronize()
    out: dict[str, float] = {}
    done = 0
    for mark in (10, 1000, 100_000):
        for i in range(mark - done):
            k3[1, 32](*a, outs[i % 64])
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            for i in range(200):
                k3[1, 32](*a, outs[i % 64])
            samples.append((time.perf_counter() - t0) / 200 * 1e6)
        out[f"after_{mark}_us"] = statistics.median(samples)
        done = mark + 1000
    ag.synchronize()
    out["ratio_100000_over_1000"] = out["after_100000_us"] / out["after_1000_us"]
    out.update(flat_side_by_side())
    return out


def flat_side_by_side(aged: int = 100_000, young: int = 1_000, windows: int = 15,
                      per: int = 200) -> dict[str, float]:
    """The same question as the marks above, with the host's drift taken out: two runtimes of
    their own (``cuda`` backend), one that has made ``young`` launches and one that has made
    ``aged``, timed in alternating windows of ``per`` launches; the medians of the windows and
    their ratio (``side_by_side_ratio``). The marks above are minutes apart on a host whose
    speed wanders by tens of percent within seconds; these are milliseconds apart."""
    from asyncgpu import cuda_kernel
    from asyncgpu.runtime.array import HOST, new_array
    from asyncgpu.core.config import Options
    from asyncgpu.runtime.context import Runtime
    from asyncgpu.backends.cuda.backend import CudaBackend

    launcher = cuda_kernel(_c_source(3), "k3")[1, 32]
    runtimes, loops = [], []
    for _ in range(2):
        opts = Options(backend="cuda")
        rt = Runtime(opts, backend=CudaBackend(opts))
        ins = [new_array(rt, (32,), np.dtype(np.float32), HOST) for _ in range(2)]
        outs = [new_array(rt, (32,), np.dtype(np.float32), HOST) for _ in range(64)]

        def loop(n: int, launch: Any = rt.launch_kernel, ins: Any = ins, outs: Any = outs
                 ) -> None:
            for i in range(n):
                launch(launcher, (ins[0], ins[1], outs[i % 64]))
        runtimes.append(rt)
        loops.append(loop)
    try:
        loops[0](young)
        loops[1](aged)
        samples: list[list[float]] = [[], []]
        for _ in range(windows):
            for which in (0, 1):
                t0 = time.perf_counter()
                loops[which](per)
                samples[which].append((time.perf_counter() - t0) / per * 1e6)
    finally:
        for rt in runtimes:
            rt.synchronize()
            rt.close()
    young_us, aged_us = statistics.median(samples[0]), statistics.median(samples[1])
    return {"side_by_side_young_us": young_us, "side_by_side_aged_us": aged_us,
            "side_by_side_ratio": aged_us / young_us}


class NullBackend(Backend):
    """A backend that does nothing: what remains is the runtime's own Python work."""

    name = "null"
    prefetches = True
    wants_sites = False
    host_coherent_while_busy = True

    class _Buffer:
        __slots__ = ("nbytes", "host", "uid", "ptr")

        def __init__(self, nbytes: int) -> None:
            self.nbytes, self.host, self.uid, self.ptr = nbytes, np.zeros(nbytes, np.uint8), 0, 0

    def create_stream(self, device: int = 0) -> object:
        return object()

    def create_event(self, device: int = 0) -> object:
        return object()

    def record(self, event: Any, stream: Any) -> None: ...
    def wait(self, stream: Any, event: Any) -> None: ...
    def event_done(self, event: Any) -> bool: return True
    def host_wait(self, event: Any) -> None: ...
    def synchronize(self) -> None: ...
    def host_access(self, accesses: Any, label: str) -> None: ...
    def prefetch(self, buffer: Any, stream: Any) -> None: ...
    def free(self, buffer: Any) -> None: ...
    def alloc(self, nbytes: int) -> Any: return self._Buffer(nbytes)
    def kernel_launch(self, *args: Any) -> None: return None
    def copy_launch(self, *args: Any) -> None: return None
    def fetch_to_host(self, *args: Any) -> None: ...
    def launch(self, node: Any, stream: Any) -> None: ...


def runtime_only(launches: int = 20000, repeats: int = 5) -> dict[str, dict[str, float]]:
    """asyncgpu's own host microseconds per launch (3 arguments), with :class:`NullBackend`."""
    from asyncgpu import cuda_kernel
    from asyncgpu.runtime.array import HOST, new_array
    from asyncgpu.core.config import Options
    from asyncgpu.runtime.context import Runtime

    rt = Runtime(Options(), backend=NullBackend())
    k = cuda_kernel(_c_source(3), "k3", sim=lambda *a: None)
    ins = [new_array(rt, (32,), np.dtype(np.float32), HOST) for _ in range(2)]
    outs = [new_array(rt, (32,), np.dtype(np.float32), HOST) for _ in range(64)]
    sink = [new_array(rt, (32,), np.dtype(np.float32), HOST) for _ in range(64)]
    launcher = k[1, 32]
    launch = rt.launch_kernel

    def independent(n: int) -> None:
        for i in range(n):
            launch(launcher, (ins[0], ins[1], outs[i % 64]))

    def cross_stream(n: int) -> None:
        prev = outs[63]
        for i in range(n):
            dst = outs[i % 64]
            launch(launcher, (prev, ins[1], dst))
            launch(launcher, (dst, dst, sink[i % 64]))
            prev = dst

    out = {}
    for name, fn, per in (("independent", independent, 1), ("cross_stream_pair", cross_stream, 2)):
        fn(200)
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn(launches // per)
            samples.append((time.perf_counter() - t0) / launches * 1e6)
        rt.synchronize()
        out[name] = _summary(samples)
    return out
