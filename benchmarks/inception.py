"""INCEPTION: a chain of inception blocks under the recorder, per stream allocation and order.

Each block fans out into four branches (1x1 conv; 1x1 then 3x3; 1x1 then 5x5; 3x3 max pooling
then 1x1), each ending in a contiguous channel range of the block's output, which is the next
block's input (``../shared/BENCHMARKS.md``). Batch 1 and small images, so one kernel leaves the
GPU mostly idle and launches dominate: the case Opara and Nimble were built for.

:func:`measure` records ``run()`` with :func:`asyncgpu.graph` under each configuration of
``CONFIGS`` (``graph_streams``/``graph_order``; ``single`` puts every launch on one stream: the
sequential graph baseline; ``ios/ios`` is the ``ios`` order, which sets the streams itself), checks
every replay against a NumPy float64 reference, and times replays (host call to the end of a host
synchronization): median and 10th/90th percentiles in milliseconds, plus the eager ``parallel`` run
of the same launches for comparison.
"""

from __future__ import annotations

import functools
import statistics
import time
from typing import Any

import numpy as np

from . import kernel_module

K = kernel_module("inception")

#: scale -> (blocks, height = width, channels in/out of a block)
SIZES = {"tiny": (2, 4, 8), "small": (6, 17, 64), "medium": (10, 35, 128),
         "large": (12, 35, 256)}
CONFIGS = (("single", "topological"), ("opara", "topological"), ("opara", "opara"),
           ("nimble", "topological"), ("nimble", "opara"), ("ios", "ios"))


def _split(c: int) -> dict[str, int]:
    """Branch widths of a block with ``c`` channels (Inception-v1-like proportions)."""
    c1, c3, c5 = c // 4, c // 2 - c // 8, c // 8
    return {"c1": c1, "r3": c // 4 + c // 8, "c3": c3, "r5": max(c // 16, 1), "c5": c5,
            "cp": c - c1 - c3 - c5}


class Inception:
    """The arrays, weights and launches of one chain (``run()`` launches only, no host access)."""

    def __init__(self, ag: Any, scale: str, seed: int = 0) -> None:
        self.blocks, self.hw, self.c = blocks, hw, c = SIZES[scale]
        self.plane = hw * hw
        rng = np.random.default_rng(seed)
        self.conv = ag.kernel(K.conv_relu, **K.ANNOTATIONS["conv_relu"])
        self.pool = ag.kernel(K.maxpool3, **K.ANNOTATIONS["maxpool3"])
        self.x0 = rng.random(c * self.plane, dtype=np.float32)
        self.acts = [ag.array(self.x0)] + [ag.empty(c * self.plane, np.float32)
                                           for _ in range(blocks)]
        s = _split(c)
        self.layers: list[dict[str, Any]] = []
        for _ in range(blocks):
            def w(cout: int, cin: int, k: int) -> tuple[np.ndarray, np.ndarray]:
                scale_ = 1.0 / np.sqrt(cin * k * k)
                return (rng.uniform(-scale_, 2 * scale_, cout * cin * k * k).astype(np.float32),
                        rng.uniform(0, 0.1, cout).astype(np.float32))
            host = {"b1": w(s["c1"], c, 1), "b2a": w(s["r3"], c, 1), "b2b": w(s["c3"], s["r3"], 3),
                    "b3a": w(s["r5"], c, 1), "b3b": w(s["c5"], s["r5"], 5), "b4": w(s["cp"], c, 1)}
            dev = {k: (ag.array(wt), ag.array(bs)) for k, (wt, bs) in host.items()}
            tmp = {"t2": ag.empty(s["r3"] * self.plane, np.float32),
                   "t3": ag.empty(s["r5"] * self.plane, np.float32),
                   "t4": ag.empty(c * self.plane, np.float32)}
            self.layers.append({"host": host, "dev": dev, "tmp": tmp})
        self.split = s

    def run(self, block: int = 128, num_blocks: int = 0) -> None:
        """Every block's 7 launches (``num_blocks`` 0: enough blocks to cover the output)."""
        s, hw, c, plane = self.split, self.hw, self.c, self.plane
        conv, pool = self.conv, self.pool

        def grid(cout: int) -> int:
            return num_blocks or -(-cout * plane // block)

        for i, layer in enumerate(self.layers):
            x, out, d, t = self.acts[i], self.acts[i + 1], layer["dev"], layer["tmp"]
            o1, o2, o3 = s["c1"] * plane, (s["c1"] + s["c3"]) * plane, \
                (s["c1"] + s["c3"] + s["c5"]) * plane
            conv[grid(s["c1"]), block](x, *d["b1"], out[:o1], c, hw, hw, 1, s["c1"])
            conv[grid(s["r3"]), block](x, *d["b2a"], t["t2"], c, hw, hw, 1, s["r3"])
            conv[grid(s["c3"]), block](t["t2"], *d["b2b"], out[o1:o2], s["r3"], hw, hw, 3,
                                       s["c3"])
            conv[grid(s["r5"]), block](x, *d["b3a"], t["t3"], c, hw, hw, 1, s["r5"])
            conv[grid(s["c5"]), block](t["t3"], *d["b3b"], out[o2:o3], s["r5"], hw, hw, 5,
                                       s["c5"])
            pool[grid(c), block](x, t["t4"], c, hw, hw)
            conv[grid(s["cp"]), block](t["t4"], *d["b4"], out[o3:], c, hw, hw, 1, s["cp"])

    @property
    def kernels(self) -> int:
        return 7 * self.blocks

    def reference(self) -> np.ndarray:
        """The chain in NumPy float64."""
        hw, c = self.hw, self.c
        x = self.x0.astype(np.float64).reshape(c, hw, hw)
        for layer in self.layers:
            h = layer["host"]
            s = self.split
            b1 = _conv(x, *h["b1"], s["c1"], 1)
            b2 = _conv(_conv(x, *h["b2a"], s["r3"], 1), *h["b2b"], s["c3"], 3)
            b3 = _conv(_conv(x, *h["b3a"], s["r5"], 1), *h["b3b"], s["c5"], 5)
            b4 = _conv(_pool(x), *h["b4"], s["cp"], 1)
            x = np.concatenate([b1, b2, b3, b4])
        return x.ravel()

    def check(self, got: np.ndarray) -> tuple[bool, str]:
        return _close(got, self.reference())


class InceptionStep:
    """INCEPTION as a workload of the tenants benchmark (``benchmarks.tenants``): a step runs the
    chain (``run_device``) and reads its output back (``read``); its input never changes."""

    def __init__(self, ag: Any, scale: str, seed: int = 0) -> None:
        self.net = Inception(ag, scale, seed)

    def reset(self) -> None:
        """Nothing to rewrite: the chain's input is made once."""

    def run_device(self, block: Any, num_blocks: int) -> None:
        self.net.run(block, num_blocks)

    def read(self) -> np.ndarray:
        return self.net.acts[-1].numpy()

    def run(self, block: Any, num_blocks: int) -> np.ndarray:
        self.run_device(block, num_blocks)
        return self.read()

    @functools.cached_property
    def _reference(self) -> np.ndarray:
        return self.net.reference()

    def check(self, got: np.ndarray) -> tuple[bool, str]:
        return _close(got, self._reference)


def _close(got: np.ndarray, want: np.ndarray) -> tuple[bool, str]:
    """Whether the chain's output ``got`` is within float32 rounding of ``want``."""
    err = float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))
    return err < 1e-4, f"max relative error {err:.2e}"


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, cout: int, k: int) -> np.ndarray:
    cin, hw, _ = x.shape
    w = w.astype(np.float64).reshape(cout, cin, k, k)
    p = k // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p)))
    out = np.zeros((cout, hw, hw)) + b.astype(np.float64)[:, None, None]
    for ky in range(k):
        for kx in range(k):
            out += np.einsum("oc,chw->ohw", w[:, :, ky, kx], xp[:, ky:ky + hw, kx:kx + hw])
    return np.maximum(out, 0)


def _pool(x: np.ndarray) -> np.ndarray:
    c, hw, _ = x.shape
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    return np.max([xp[:, ky:ky + hw, kx:kx + hw] for ky in range(3) for kx in range(3)], axis=0)


def _times(fn: Any, ag: Any, iterations: int) -> list[float]:
    out = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        fn()
        ag.synchronize()
        out.append(time.perf_counter() - t0)
    return out


def _summary(times: list[float]) -> dict[str, float]:
    q = np.percentile(times, [10, 90])
    return {"median_ms": 1e3 * statistics.median(times), "p10_ms": 1e3 * float(q[0]),
            "p90_ms": 1e3 * float(q[1])}


def graph_lanes(step: Any) -> list[int]:
    """The stream counts of the graphs ``step`` (an ``asyncgpu.graph`` function) has captured,
    after the lane budget (one per variant, distinct, sorted)."""
    from asyncgpu.recorder.cache import graphs_of
    from asyncgpu.runtime.current import current_runtime

    return sorted({f.lanes for f in graphs_of(current_runtime(), step.token)})


def measure(ag: Any, scale: str = "small", iterations: int = 50, block: int = 128,
            configs: tuple[tuple[str, str], ...] = CONFIGS, rounds: int = 5) -> dict[str, Any]:
    """Replay time per configuration (and eager ``parallel``) with the stream counts of its
    graphs (``lanes``); every result checked. Every configuration is captured first; the timed
    calls are then taken in ``rounds`` blocks, configurations in turn (the order rotated each
    round), so a slow spell of the host lands on all of them, not on one."""
    wl = Inception(ag, scale)
    out: dict[str, Any] = {"kernels": wl.kernels, "scale": scale}
    with ag.configure(execution="async"):
        wl.run(block)                                   # compiles, loads the modules
        ag.synchronize()
        ok, msg = wl.check(wl.acts[-1].numpy())
        if not ok:
            raise AssertionError(f"inception parallel: {msg}")
        out["parallel"] = _summary(_times(lambda: wl.run(block), ag, iterations))
    steps: dict[str, tuple[Any, dict[str, str]]] = {}
    for streams, order in configs:
        opts = {"graph_order": order}
        if streams != "ios":
            opts["graph_streams"] = streams
        with ag.configure(**opts):
            step = ag.graph(wl.run)
            # record, capture (the output poisoned by the host: the graph must write all of
            # it), then capture the variant the timed calls use: the output left on the device
            for i in range(3):
                if i < 2:
                    wl.acts[-1][...] = np.nan
                step(block)
                ok, msg = wl.check(wl.acts[-1].numpy())
                if i and (not ok or step.outcome != "replayed"):
                    raise AssertionError(f"inception {streams}/{order}: {msg}, {step.outcome}")
        steps[f"{streams}/{order}"] = (step, opts)
    times: dict[str, list[float]] = {name: [] for name in steps}
    names = list(steps)
    rounds = max(1, min(rounds, iterations))
    for r in range(rounds):
        count = iterations // rounds + (1 if r < iterations % rounds else 0)
        for name in names[r % len(names):] + names[:r % len(names)]:
            step, opts = steps[name]
            with ag.configure(**opts):      # (the options a recorded call is keyed with)
                step(block)                 # untimed: the first call after the switch
                ag.synchronize()
                times[name] += _times(lambda: step(block), ag, count)
    for name, (step, _) in steps.items():
        if step.outcome != "replayed":
            raise AssertionError(f"inception {name}: the timed calls were {step.outcome}")
        out[name] = dict(_summary(times[name]), lanes=graph_lanes(step))
        step.clear()
    base = out["single/topological"]["median_ms"]
    for key, v in out.items():
        if isinstance(v, dict):
            v["speedup_vs_single_graph"] = base / v["median_ms"]
    return out
