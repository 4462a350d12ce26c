"""Multi-GPU benchmark: the same sequential program on 1, 2, 4 GPUs, against hand-written CuPy.

Five workloads in the style of GrCUDA's multi-GPU benchmarks: ``ml``, ``mv`` and ``cg`` (row-
partitioned, resident inputs) are in ``benchmarks.multigpu_work``; here, each split in
``CHUNKS`` parts:

* ``bs``: Black and Scholes on independent vectors (GrCUDA's b5m): ``bs(x_c -> y_c)`` per
  chunk, ``REPS`` times per iteration with resident inputs (compute-bound; ``TINY_REPS`` on
  ``tiny``), once with streaming ones (transfer-bound);
* ``vec``: the sum of the difference of squares in chunks (b1m): per chunk
  ``square(x_c)``, ``square(y_c)``, ``reduce(x1_c, y1_c -> res_c)``, and the host adds the
  chunks' sums. The arrays of chunk ``c`` are made inside ``asyncgpu.device(c % n)`` (where a
  user wants them); the kernels are placed by the device policy.

``asyncgpu`` runs the sequential program on a runtime with ``devices=n`` (the default device
policy unless ``policy`` is given); ``cupy`` is the hand-written multi-GPU version: chunk
``c``'s arrays on GPU ``c % n``, per GPU one non-blocking stream for kernels and one for
copies from the host (a chunk's kernels wait for its copy by an event, so with streaming inputs
a chunk's copy runs while the chunk before it computes), the same Numba kernels launched
through their compiled ``_Kernel.launch``, a synchronize per GPU.

Inputs: ``resident`` (the inputs stay on the devices; an iteration is the kernels) or
``streaming`` (the host rewrites every input before each iteration, untimed, so an iteration
copies them in: the copies and kernels are timed). For streaming inputs the *transfer bound*
is measured in the same run: the same bytes copied from pinned host memory to the same GPUs
at once, on the copy streams, nothing else.

Times are medians over ``iterations`` timed iterations after ``warmup``, in milliseconds.
Every iteration's result is checked against NumPy.

usage: ``asyncgpu bench multigpu --devices 1,2,4 [--scale medium] [--json PATH] [--plot PATH]``
"""

from __future__ import annotations

import contextlib
import functools
import gc
import statistics
import time
from typing import Any

import numpy as np

from . import kernel_module, multigpu_work
from .handgpus import HandGPUs
from .workloads.bs import STRIKE, R, T, V, black_scholes

BS = kernel_module("bs")
VEC = kernel_module("vec")

CHUNKS = 8
REPS = 10
#: On ``tiny``, which the simulator runs thread by thread: two repeats still order each
#: chunk's output written again.
TINY_REPS = 2

#: Elements per workload, and the launch shape of the grid-stride kernels (blocks, threads):
#: enough blocks to fill an H100 or H200; few on ``tiny``, which the simulator runs thread by
#: thread.
SIZES = {"tiny": {"bs": 1 << 10, "vec": 1 << 10},
         "small": {"bs": 1 << 20, "vec": 1 << 22},
         "medium": {"bs": 1 << 27, "vec": 1 << 30}}
GRID = {"tiny": (2, 32), "small": (1024, 256), "medium": (1024, 256)}
BLOCKS, THREADS = GRID["medium"]


def _reps(scale: str) -> int:
    """B&S's repeats per iteration with resident inputs at ``scale``."""
    return TINY_REPS if scale == "tiny" else REPS


def _inputs(workload: str, n: int) -> dict[str, list[np.ndarray]]:
    rng = np.random.default_rng(7)
    size = n // CHUNKS
    if workload == "bs":
        return {"x": [60.0 + rng.uniform(-0.5, 0.5, size) for _ in range(CHUNKS)]}
    return {"x": [rng.random(size, dtype=np.float32) for _ in range(CHUNKS)],
            "y": [2 * rng.random(size, dtype=np.float32) for _ in range(CHUNKS)]}


def _expected(workload: str, data: dict[str, list[np.ndarray]]) -> Any:
    if workload == "bs":
        return [black_scholes(x[[0, -1]]) for x in data["x"]]
    return sum(float((x.astype(np.float64) ** 2).sum() - (y.astype(np.float64) ** 2).sum())
               for x, y in zip(data["x"], data["y"]))


def _check(workload: str, got: Any, expected: Any) -> None:
    if workload == "bs":
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-10)
    else:
        assert abs(got - expected) <= 1e-4 * abs(expected) + 1e-3, (got, expected)


def _timed(step: Any, prepare: Any, iterations: int, warmup: int) -> tuple[float, Any]:
    """Median milliseconds of ``step()`` (``prepare()`` untimed before each), its last result."""
    times = []
    result = None
    for i in range(warmup + iterations):
        prepare()
        t0 = time.perf_counter()
        result = step()
        elapsed = time.perf_counter() - t0
        if i >= warmup:
            times.append(elapsed * 1e3)
    return statistics.median(times), result


# -- asyncgpu ----------------------------------------------------------------------------------
class AsyncgpuRun:
    """The sequential program on the current runtime."""

    def __init__(self, ag: Any, workload: str, data: dict[str, list[np.ndarray]],
                 devices: int, reps: int = REPS) -> None:
        self.ag, self.workload, self.data, self.reps = ag, workload, data, reps
        if workload == "bs":
            self.k = ag.kernel(BS.bs, **BS.ANNOTATIONS["bs"])
            self.x = [ag.array(x) for x in data["x"]]
            self.y = [ag.empty_like(x) for x in self.x]
        else:
            self.k_square = ag.kernel(VEC.square, **VEC.ANNOTATIONS["square"])
            self.k_reduce = ag.kernel(VEC.reduce, **VEC.ANNOTATIONS["reduce"])
            self.x, self.y, self.x1, self.y1, self.res = [], [], [], [], []
            for c in range(CHUNKS):
                with ag.device(c % devices) if devices > 1 else contextlib.nullcontext():
                    self.x.append(ag.array(data["x"][c]))
                    self.y.append(ag.array(data["y"][c]))
                    self.x1.append(ag.empty_like(self.x[c]))
                    self.y1.append(ag.empty_like(self.y[c]))
                    self.res.append(ag.zeros(1, np.float32))

    def rewrite(self) -> None:
        for arrays, name in ((self.x, "x"), (getattr(self, "y", None), "y")):
            if self.workload == "bs" and name == "y":
                continue
            for a, host in zip(arrays, self.data[name]):
                a[...] = host

    def step(self) -> Any:
        if self.workload == "bs":
            for _ in range(self.reps):
                for x, y in zip(self.x, self.y):
                    self.k[BLOCKS, THREADS](x, y, x.shape[0], R, V, T, STRIKE)
            # (no synchronize: each read waits for its chunk's kernel alone, so the host
            # reads the first chunks while the copies of the last still run)
            return [np.array([float(y[0]), float(y[y.shape[0] - 1])]) for y in self.y]
        for c in range(CHUNKS):
            self.res[c][...] = 0.0
        for c in range(CHUNKS):
            n = self.x[c].shape[0]
            self.k_square[BLOCKS, THREADS](self.x[c], self.x1[c], n)
            self.k_square[BLOCKS, THREADS](self.y[c], self.y1[c], n)
            self.k_reduce[BLOCKS, THREADS](self.x1[c], self.y1[c], self.res[c], n)
        return sum(float(r[0]) for r in self.res)


# -- hand-written CuPy -------------------------------------------------------------------------
class CupyRun:
    """The hand-written multi-GPU version (see the module docstring)."""

    def __init__(self, workload: str, data: dict[str, list[np.ndarray]], devices: int,
                 reps: int = REPS) -> None:
        import cupy

        self.hand = hand = HandGPUs(devices)
        self.cupy, self.workload, self.data, self.n = cupy, workload, data, devices
        self.reps = reps
        self.streams = hand.streams
        self.pinned = {name: [cupy.cuda.alloc_pinned_memory(a.nbytes) for a in arrays]
                       for name, arrays in data.items()}
        self.host = {name: [np.frombuffer(p, a.dtype, a.size) for p, a in zip(ps, data[name])]
                     for name, ps in self.pinned.items()}
        for name, arrays in data.items():
            for h, a in zip(self.host[name], arrays):
                h[...] = a
        self.arrays: dict[str, list[Any]] = {name: [] for name in (
            ("x", "y") if workload == "bs" else ("x", "y", "x1", "y1", "res"))}
        for c in range(CHUNKS):
            d = c % devices
            x = hand.array(data["x"][c], d)
            self.arrays["x"].append(x)
            if workload == "bs":
                self.arrays["y"].append(hand.empty(x.shape, x.dtype, d))
                continue
            y = hand.array(data["y"][c], d)
            self.arrays["y"].append(y)
            self.arrays["x1"].append(hand.empty(x.shape, x.dtype, d))
            self.arrays["y1"].append(hand.empty(y.shape, y.dtype, d))
            self.arrays["res"].append(hand.zeros(1, np.float32, d))
        self.sync()

    def _launch(self, kernel: Any, c: int, *args: Any) -> None:
        self.hand.launch(kernel, c % self.n, BLOCKS, THREADS, *args)

    def copy_in(self, c: int | None = None) -> None:
        """Chunk ``c``'s inputs (every chunk's: None) from pinned host memory, on its GPU's copy
        stream; its kernels enqueued after this wait for them."""
        for c in range(CHUNKS) if c is None else (c,):
            self.hand.upload([(self.arrays[name][c], self.host[name][c]) for name in self.data],
                             c % self.n)

    def sync(self) -> None:
        self.hand.sync()

    def step(self, streaming: bool) -> Any:
        """One iteration: with ``streaming`` inputs each chunk's copy is enqueued just before
        its kernels, so it runs while the chunk before it computes."""
        a = self.arrays
        if self.workload == "bs":
            for rep in range(self.reps):
                for c in range(CHUNKS):
                    if streaming and rep == 0:
                        self.copy_in(c)
                    x, y = a["x"][c], a["y"][c]
                    self._launch(BS.bs, c, x, y, x.size, R, V, T, STRIKE)
            self.sync()
            return [np.array([float(y[0]), float(y[-1])]) for y in a["y"]]
        for c in range(CHUNKS):
            with self.cupy.cuda.Device(c % self.n):
                a["res"][c].data.memset_async(0, 4, self.streams[c % self.n])
        for c in range(CHUNKS):
            if streaming:
                self.copy_in(c)
            n = a["x"][c].size
            self._launch(VEC.square, c, a["x"][c], a["x1"][c], n)
            self._launch(VEC.square, c, a["y"][c], a["y1"][c], n)
            self._launch(VEC.reduce, c, a["x1"][c], a["y1"][c], a["res"][c], n)
        self.sync()
        return sum(float(r.get()[0]) for r in a["res"])


def transfer_bound_ms(run: CupyRun, repeats: int = 5) -> float:
    """Median milliseconds of ``run``'s copies alone: its inputs from pinned memory to their
    GPUs at once (chunk ``c`` to GPU ``c % devices``), one copy stream per GPU."""
    def copies() -> None:
        run.copy_in()
        run.sync()

    return _timed(copies, lambda: None, repeats, 1)[0]


# -- the measurement ---------------------------------------------------------------------------
class _Chunks:
    """``bs`` or ``vec`` as :func:`measure` runs a workload: resident and streaming inputs."""

    inputs = ("resident", "streaming")

    def __init__(self, name: str, scale: str) -> None:
        self.name = name
        self.reps = _reps(scale)
        self.data = _inputs(name, SIZES[scale][name])
        self.expected = _expected(name, self.data)

    def check(self, got: Any) -> None:
        _check(self.name, got, self.expected)

    def asyncgpu(self, ag: Any, devices: int, streaming: bool, reps: int | None = None
                 ) -> tuple[Any, Any]:
        reps = reps if reps is not None else 1 if streaming else self.reps
        run = AsyncgpuRun(ag, self.name, self.data, devices, reps)
        return run.step, run.rewrite if streaming else None

    def cupy(self, devices: int, streaming: bool) -> tuple[Any, Any]:
        base = CupyRun(self.name, self.data, devices, 1 if streaming else self.reps)
        bound = functools.partial(transfer_bound_ms, base) if streaming else None
        return functools.partial(base.step, streaming), bound


class _Resident:
    """A workload of ``multigpu_work`` as :func:`measure` runs one: resident inputs."""

    inputs = ("resident",)

    def __init__(self, work: Any) -> None:
        self.work = work
        self.check = work.check

    def asyncgpu(self, ag: Any, devices: int, streaming: bool) -> tuple[Any, Any]:
        return self.work.asyncgpu(ag, devices), None

    def cupy(self, devices: int, streaming: bool) -> tuple[Any, Any]:
        return self.work.cupy(devices), None


#: Every workload of the benchmark, in the order of its tables.
WORKLOADS = ("bs", "vec", *multigpu_work.WORKLOADS)
#: The device policies of the policy table.
POLICIES = ("round-robin", "stream-aware", "min-transfer-size", "min-min", "min-max")


def _workload(name: str, scale: str) -> Any:
    if name in multigpu_work.WORKLOADS:
        return _Resident(multigpu_work.WORKLOADS[name](scale))
    return _Chunks(name, scale)


def measure(ag: Any, counts: list[int], scale: str = "medium", iterations: int = 5,
            warmup: int = 2, policies: bool = True, on_gpu: bool = True,
            workloads: tuple[str, ...] = WORKLOADS) -> dict[str, Any]:
    """Rows of (workload, inputs, devices, mode, ms), checked; and the policy table."""
    global BLOCKS, THREADS
    BLOCKS, THREADS = GRID[scale]
    multigpu_work.SHAPE[:] = GRID[scale]
    rows: list[dict[str, Any]] = []
    policy_rows: list[dict[str, Any]] = []
    most = max(counts)

    def configured(devices: int, policy: str | None = None) -> Any:
        options: dict[str, Any] = {"devices": devices}
        if policy is not None:
            options["device_policy"] = policy
        if not on_gpu:
            options["sim_devices"] = most
        return ag.configure(**options)

    def timed(step: Any, prepare: Any) -> float:
        # (the previous configuration's arrays are freed now, not by a collection that
        # would free device memory, which waits for the device, inside a timed iteration)
        gc.collect()
        ms, got = _timed(step, prepare or (lambda: None), iterations, warmup)
        work.check(got)
        return ms

    for name in workloads:
        work = _workload(name, scale)
        for devices in counts:
            for inputs in work.inputs:
                streaming = inputs == "streaming"
                row = {"workload": name, "inputs": inputs, "devices": devices}
                with configured(devices):
                    step, prepare = work.asyncgpu(ag, devices, streaming)
                    ms = timed(step, prepare)
                    stats = ag.statistics()
                    rows.append({**row, "mode": "asyncgpu", "ms": ms,
                                 "placed": dict(stats.placed),
                                 "copies_peer": stats.copies_peer})
                    del step, prepare
                if on_gpu:
                    step, bound = work.cupy(devices, streaming)
                    rows.append({**row, "mode": "cupy", "ms": timed(step, None)})
                    if bound is not None:
                        rows.append({**row, "mode": "transfer bound", "ms": bound()})
                    del step, bound
        if policies and most > 1:
            for policy in POLICIES:
                with configured(most, policy):
                    step, _ = work.asyncgpu(ag, most, False)
                    ms = timed(step, None)
                    policy_rows.append({"workload": name, "devices": most, "policy": policy,
                                        "ms": ms, "copies_peer": ag.statistics().copies_peer})
                    del step
    return {"rows": rows, "policies": policy_rows, "scale": scale, "chunks": CHUNKS,
            "reps": _reps(scale)}


def speedups(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per workload, inputs and device count: asyncgpu over one GPU, over the hand-written
    version, and against the transfer bound."""
    rows = result["rows"]
    out = []
    by = {(r["workload"], r["inputs"], r["devices"], r["mode"]): r["ms"] for r in rows}
    for r in rows:
        if r["mode"] != "asyncgpu":
            continue
        w, i, d = r["workload"], r["inputs"], r["devices"]
        one = by.get((w, i, 1, "asyncgpu"))
        cupy = by.get((w, i, d, "cupy"))
        bound = by.get((w, i, d, "transfer bound"))
        out.append({"workload": w, "inputs": i, "devices": d, "ms": r["ms"],
                    "over_one_gpu": one / r["ms"] if one else None,
                    "of_cupy": cupy / r["ms"] if cupy else None,
                    "over_bound": r["ms"] / bound if bound else None})
    return out


def plot(path: str, result: dict[str, Any]) -> None:
    """Strong scaling: asyncgpu and hand-written CuPy speedups over one GPU, per workload."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8), sharey=True)
    names = list(dict.fromkeys(r["workload"] for r in rows))
    colors = {name: f"C{i}" for i, name in enumerate(names)}
    for ax, inputs in zip(axes, ("resident", "streaming")):
        counts = sorted({r["devices"] for r in rows})
        ax.plot(counts, counts, "k:", label="linear")
        for workload in dict.fromkeys(r["workload"] for r in rows if r["inputs"] == inputs):
            for mode, style in (("asyncgpu", "-o"), ("cupy", "--s")):
                pts = {r["devices"]: r["ms"] for r in rows if r["workload"] == workload
                       and r["inputs"] == inputs and r["mode"] == mode}
                if 1 in pts:
                    ax.plot(sorted(pts), [pts[1] / pts[d] for d in sorted(pts)], style,
                            color=colors[workload], label=f"{workload} {mode}")
        ax.set_title(f"{inputs} inputs")
        ax.set_xlabel("GPUs")
        ax.set_xticks(counts)
    axes[0].set_ylabel("speedup over one GPU")
    axes[0].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
