"""Three more multi-GPU workloads for ``asyncgpu bench multigpu``, with their hand-written CuPy
baselines (``benchmarks.handgpus``), in the style of GrCUDA's multi-GPU benchmarks.

* ``ml`` (b6m): the ensemble of ``workloads/ml.py`` on rows split in ``CHUNKS`` parts. The
  ridge branch standardizes columns with statistics of *all* rows: each part adds its column
  sums (``col_stats``), the sums are added up on one GPU, and every part standardizes with the
  total; the rest of both branches is row by row, on the part's GPU. The host reads every
  part's labels.
* ``mv`` (b11m): a row-blocked matrix-vector product ``y_c = A_c x``, ``REPS`` times; ``x`` is
  read by every part.
* ``cg`` (b9m): conjugate gradient on a symmetric positive-definite matrix split in
  ``CG_PARTS`` blocks of rows, each made on its GPU (``fill_spd``). The product ``A_c p`` is one
  ``matvec`` per part ``p_j`` of the direction, so each GPU reads the parts of ``p`` the others
  wrote; the dot products are partial sums per part, added up on one GPU. A step is a whole
  solve of ``ITERS`` iterations from ``x = 0``.

Part ``c``'s arrays are on GPU ``c % n`` (made inside ``asyncgpu.device`` for asyncgpu, where a
user wants them); asyncgpu places the kernels with its device policy and moves data between
GPUs itself, where the hand-written version places, copies and orders by hand (the sums go to
GPU 0 and back). Inputs are resident (the interesting traffic is between GPUs).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from . import kernel_module
from .workloads import ml as ml_work

LA = kernel_module("linalg")
ML = kernel_module("ml")

CHUNKS = 8
CG_PARTS = 4
REPS = 10


def _launcher(ag: Any, *groups: tuple[Any, tuple[str, ...]]) -> Any:
    """``launch(name, part, *args)`` of the kernels ``names`` of each ``(module, names)``, every
    launch of the shape :data:`SHAPE` (``part`` is unused: the device policy places it)."""
    kernels = {name: ag.kernel(getattr(module, name), **module.ANNOTATIONS[name])
               for module, names in groups for name in names}
    blocks, threads = _shape()

    def launch(name: str, c: int, *args: Any) -> None:
        kernels[name][blocks, threads](*args)
    return launch


def _gpus(parts: int, devices: int) -> dict[int, int]:
    """The hand-written versions' GPU of each part (``c % devices``), and of part -1, where
    the sums are made (GPU 0)."""
    gpu = {c: c % devices for c in range(parts)}
    gpu[-1] = 0
    return gpu


def _pinned(ag: Any, devices: int, c: int) -> Any:
    return ag.device(c % devices) if devices > 1 else contextlib.nullcontext()


def _makers(ag: Any, devices: int) -> tuple[Any, Any]:
    """(make(host, part), empty(shape, dtype, part)): asyncgpu arrays of part ``part``, made
    on its GPU."""
    def make(host: np.ndarray, c: int) -> Any:
        with _pinned(ag, devices, c):
            return ag.array(host)

    def empty(shape: Any, dtype: Any, c: int) -> Any:
        with _pinned(ag, devices, c):
            return ag.empty(shape, dtype)
    return make, empty


# -- ml ------------------------------------------------------------------------------------------
class MLWork:
    """The row-partitioned ensemble (see the module docstring)."""

    name = "ml"
    SIZES = {"tiny": 16, "small": 16_000, "medium": 2_000_000}
    BRANCHES = ("init_scores", "nb_1", "rr_2", "nb_2", "nb_3", "rr_3", "nb_4", "softmax",
                "argmax", "col_stats", "standardize")

    def __init__(self, scale: str) -> None:
        self.rows = self.SIZES[scale]
        self.x, self.nb_w, self.prior, self.coef, self.intercept = ml_work.model(self.rows)
        self.parts = np.array_split(self.x, CHUNKS)
        self.scores = ml_work.ensemble_scores(self.x, self.nb_w, self.prior, self.coef,
                                              self.intercept)

    def check(self, got: Any) -> None:
        ok, why = ml_work.check_labels(self.scores, got, ml_work.Ensemble.margin)
        assert ok, why

    def _program(self, launch: Any, parts: list[dict[str, Any]], total: Any,
                 gather: Any) -> None:
        """The step's launches: ``launch(name, part, *args)`` (part -1: the total's GPU);
        ``gather(part)`` returns the part's column sums where the total is, and ``total(part)``
        the total where the part is."""
        for c, p in enumerate(parts):
            launch("zero", c, p["s"])
            launch("col_stats", c, p["x"], p["s"])
        launch("zero", -1, total(-1))
        for c in range(len(parts)):
            launch("add_to", -1, total(-1), gather(c))
        rows = float(self.rows)
        for c, p in enumerate(parts):
            x, r1, r2, amax, lse = p["x"], p["r1"], p["r2"], p["amax"], p["lse"]
            launch("standardize", c, x, total(c), rows, p["z"])
            launch("init_scores", c, r1, p["prior"], r2)
            launch("nb_1", c, x, p["nb_w"], r1)
            launch("rr_2", c, p["z"], p["coef"], r2)
            launch("nb_2", c, r1, amax)
            launch("nb_3", c, r1, amax, lse)
            launch("rr_3", c, r2, p["intercept"])
            launch("nb_4", c, r1, lse)
            launch("softmax", c, r1)
            launch("softmax", c, r2)
            launch("argmax", c, r1, r2, p["labels"])

    def _arrays(self, make: Any, empty: Any, model: Any) -> list[dict[str, Any]]:
        parts = []
        for c, x in enumerate(self.parts):
            n = x.shape[0]
            p = {"x": make(x, c), "s": empty((2 * ml_work.FEATURES,), np.float64, c),
                 "z": empty((n, ml_work.FEATURES), np.float32, c),
                 "amax": empty((n,), np.float32, c), "lse": empty((n,), np.float32, c),
                 "labels": empty((n,), np.int32, c)}
            for name in ("r1", "r2"):
                p[name] = empty((n, ml_work.CLASSES), np.float32, c)
            p.update(model(c))
            parts.append(p)
        return parts

    def asyncgpu(self, ag: Any, devices: int) -> Any:
        launch = _launcher(ag, (ML, self.BRANCHES), (LA, ("zero", "add_to")))
        shared = {"prior": ag.array(self.prior), "nb_w": ag.array(self.nb_w),
                  "coef": ag.array(self.coef), "intercept": ag.array(self.intercept)}
        make, empty = _makers(ag, devices)

        parts = self._arrays(make, empty, lambda c: shared)
        total = ag.empty(2 * ml_work.FEATURES, np.float64)

        def step() -> np.ndarray:
            self._program(launch, parts, lambda c: total, lambda c: parts[c]["s"])
            return np.concatenate([p["labels"].numpy() for p in parts])
        return step

    def cupy(self, devices: int) -> Any:
        from .handgpus import HandGPUs

        hand = HandGPUs(devices)
        gpu = _gpus(CHUNKS, devices)
        model = [{k: hand.array(v, d) for k, v in (("prior", self.prior), ("nb_w", self.nb_w),
                                                    ("coef", self.coef),
                                                    ("intercept", self.intercept))}
                 for d in range(devices)]
        parts = self._arrays(lambda host, c: hand.array(host, gpu[c]),
                             lambda shape, dtype, c: hand.empty(shape, dtype, gpu[c]),
                             lambda c: model[gpu[c]])
        size = 2 * ml_work.FEATURES
        totals = [hand.empty(size, np.float64, d) for d in range(devices)]
        sums_on_0 = [hand.empty(size, np.float64, 0) for _ in range(CHUNKS)]
        blocks, threads = _shape()
        module = {**{n: ML for n in self.BRANCHES}, "zero": LA, "add_to": LA}

        def launch(name: str, c: int, *args: Any) -> None:
            hand.launch(getattr(module[name], name), gpu[c], blocks, threads, *args)

        def total(c: int) -> Any:
            d = gpu[c]
            if c >= 0 and d != 0 and c == min(k for k in range(CHUNKS) if gpu[k] == d):
                hand.peer(totals[d], d, totals[0], 0)   # once per GPU, before its first use
            return totals[d]

        def gather(c: int) -> Any:
            return hand.peer(sums_on_0[c], 0, parts[c]["s"], gpu[c])

        def step() -> np.ndarray:
            self._program(launch, parts, total, gather)
            hand.sync()
            return np.concatenate([p["labels"].get() for p in parts])
        hand.sync()
        return step


# -- mv ------------------------------------------------------------------------------------------
class MVWork:
    """The row-blocked matrix-vector product (see the module docstring)."""

    name = "mv"
    SIZES = {"tiny": (128, 16), "small": (16_384, 1024), "medium": (1 << 17, 2048)}

    def __init__(self, scale: str) -> None:
        rows, cols = self.SIZES[scale]
        self.reps = 2 if scale == "tiny" else REPS     # (the simulator runs thread by thread)
        rng = np.random.default_rng(11)
        self.a = rng.random((rows, cols), dtype=np.float32) - 0.5
        self.x = rng.random(cols, dtype=np.float32)
        self.parts = np.array_split(self.a, CHUNKS)
        ends = [p[[0, -1]].astype(np.float64) @ self.x.astype(np.float64) for p in self.parts]
        self.expected = np.concatenate(ends)

    def check(self, got: Any) -> None:
        np.testing.assert_allclose(got, self.expected, rtol=1e-4, atol=1e-4)

    def _program(self, launch: Any, a: list[Any], x: Any, y: list[Any]) -> None:
        for _ in range(self.reps):
            for c in range(CHUNKS):
                launch("zero", c, y[c])
                launch("matvec", c, a[c], x(c), 0, y[c])

    def asyncgpu(self, ag: Any, devices: int) -> Any:
        launch = _launcher(ag, (LA, ("zero", "matvec")))
        make, empty = _makers(ag, devices)
        a = [make(part, c) for c, part in enumerate(self.parts)]
        y = [empty(part.shape[0], np.float32, c) for c, part in enumerate(self.parts)]
        x = ag.array(self.x)

        def step() -> np.ndarray:
            self._program(launch, a, lambda c: x, y)
            return np.concatenate([[float(v[0]), float(v[v.shape[0] - 1])] for v in y])
        return step

    def cupy(self, devices: int) -> Any:
        from .handgpus import HandGPUs

        hand = HandGPUs(devices)
        a = [hand.array(part, c % devices) for c, part in enumerate(self.parts)]
        y = [hand.empty(part.shape[0], np.float32, c % devices)
             for c, part in enumerate(self.parts)]
        xs = [hand.array(self.x, d) for d in range(devices)]
        blocks, threads = _shape()

        def step() -> np.ndarray:
            self._program(lambda name, c, *args: hand.launch(getattr(LA, name), c % devices,
                                                            blocks, threads, *args),
                          a, lambda c: xs[c % devices], y)
            hand.sync()
            return np.concatenate([[float(v[0]), float(v[-1])] for v in y])
        hand.sync()
        return step


# -- cg ------------------------------------------------------------------------------------------
class CGWork:
    """Conjugate gradient on row blocks (see the module docstring)."""

    name = "cg"
    SIZES = {"tiny": 32, "small": 4096, "medium": 32_768}
    ITERS = {"tiny": 2, "small": 10, "medium": 10}     # (the simulator runs thread by thread)
    KERNELS = ("fill_spd", "matvec", "zero", "add_to", "copy_to", "dot", "cg_xr", "cg_p")

    def __init__(self, scale: str) -> None:
        self.n = n = self.SIZES[scale]
        self.iters = self.ITERS[scale]
        self.m = n // CG_PARTS
        self.b = np.random.default_rng(5).random(n, dtype=np.float32) + 0.5
        self.rows = np.unique(np.linspace(0, n - 1, 16).astype(np.int64))
        self.a_rows = LA.spd_rows(self.rows, n)

    def check(self, got: Any) -> None:
        """Residuals of sampled rows within CG's bound: the matrix's condition number is at
        most 3, so each iteration shrinks the error by at least (sqrt 3 - 1) / (sqrt 3 + 1)."""
        residual = self.a_rows @ np.asarray(got, np.float64) - self.b[self.rows]
        bound = 10 * 0.268 ** self.iters * float(np.abs(self.b).max()) + 1e-4
        assert np.abs(residual).max() <= bound, (np.abs(residual).max(), bound)

    def _program(self, launch: Any, parts: list[dict[str, Any]], s: Any, p_on: Any,
                 gather: Any) -> None:
        """One solve. ``launch(name, part, *args)`` (part -1: the sums' GPU); ``s(name, part)``
        a sum (``rr``, ``pap``, ``rrn``) where ``part`` runs (part -1: to be written);
        ``p_on(j, c)`` part ``j`` of the direction where part ``c`` runs; ``gather(name, c)``
        part ``c``'s partial sum ``name`` where the sums are. Each sum has its own partials."""
        m = self.m
        for c, q in enumerate(parts):
            launch("zero", c, q["x"])
            launch("copy_to", c, q["r"], q["b"])
            launch("copy_to", c, q["p"], q["b"])
        launch("zero", -1, s("rr", -1))
        for c, q in enumerate(parts):
            launch("zero", c, q["rr_part"])
            launch("dot", c, q["r"], q["r"], q["rr_part"])
        for c in range(len(parts)):
            launch("add_to", -1, s("rr", -1), gather("rr_part", c))
        for _ in range(self.iters):
            for c, q in enumerate(parts):
                launch("zero", c, q["ap"])
                for j in range(len(parts)):
                    launch("matvec", c, q["a"], p_on(j, c), j * m, q["ap"])
            for c, q in enumerate(parts):
                launch("zero", c, q["pap_part"])
                launch("dot", c, q["p"], q["ap"], q["pap_part"])
            launch("zero", -1, s("pap", -1))
            for c in range(len(parts)):
                launch("add_to", -1, s("pap", -1), gather("pap_part", c))
            for c, q in enumerate(parts):
                launch("zero", c, q["rrn_part"])
                launch("cg_xr", c, q["x"], q["r"], q["p"], q["ap"], s("rr", c), s("pap", c),
                       q["rrn_part"])
            launch("zero", -1, s("rrn", -1))
            for c in range(len(parts)):
                launch("add_to", -1, s("rrn", -1), gather("rrn_part", c))
            for c, q in enumerate(parts):
                launch("cg_p", c, q["p"], q["r"], s("rrn", c), s("rr", c))
            launch("copy_to", -1, s("rr", -1), s("rrn", -1))

    def _arrays(self, make: Any, empty: Any) -> list[dict[str, Any]]:
        m = self.m
        return [{"a": empty((m, self.n), np.float32, c), "b": make(self.b[c * m:(c + 1) * m], c),
                 **{k: empty((m,), np.float32, c) for k in ("x", "r", "p", "ap")},
                 **{k: empty((1,), np.float64, c) for k in ("rr_part", "pap_part", "rrn_part")}}
                for c in range(CG_PARTS)]

    def asyncgpu(self, ag: Any, devices: int) -> Any:
        launch = _launcher(ag, (LA, self.KERNELS))
        make, empty = _makers(ag, devices)

        parts = self._arrays(make, empty)
        sums = {name: ag.empty(1, np.float64) for name in ("rr", "pap", "rrn")}
        for c, q in enumerate(parts):
            launch("fill_spd", c, q["a"], c * self.m, self.n)

        def step() -> np.ndarray:
            self._program(launch, parts, lambda name, c: sums[name],
                          lambda j, c: parts[j]["p"], lambda name, c: parts[c][name])
            return np.concatenate([q["x"].numpy() for q in parts])
        return step

    def cupy(self, devices: int) -> Any:
        from .handgpus import HandGPUs

        hand = HandGPUs(devices)
        gpu = _gpus(CG_PARTS, devices)
        parts = self._arrays(lambda host, c: hand.array(host, gpu[c]),
                             lambda shape, dtype, c: hand.empty(shape, dtype, gpu[c]))
        blocks, threads = _shape()
        for c, q in enumerate(parts):
            hand.launch(LA.fill_spd, gpu[c], blocks, threads, q["a"], c * self.m, self.n)
        sums = {name: [hand.empty(1, np.float64, d) for d in range(devices)]
                for name in ("rr", "pap", "rrn")}
        partials = {(name, c): hand.empty(1, np.float64, 0)
                    for name in ("rr_part", "pap_part", "rrn_part") for c in range(CG_PARTS)}
        # the direction's parts on every GPU: replicas[j][d] (part j's own where d is its GPU)
        replicas = [[q["p"] if d == gpu[j] else hand.empty(self.m, np.float32, d)
                     for d in range(devices)] for j, q in enumerate(parts)]
        # (sum, GPU) whose replica is current; (part of p, GPU) copied since p last changed.
        # The orders that make reusing them safe (the readers of what GPU 0 writes next have
        # been waited for by a later gather, each partial is written again only after its
        # GPU waited for the sum it was gathered into) hold by the program's structure.
        fresh: set[tuple[str, int]] = set()
        copied: set[tuple[int, int]] = set()

        def launch(name: str, c: int, *args: Any) -> None:
            if name in ("cg_p", "copy_to"):
                copied.difference_update({(c, d) for d in range(devices)})
            hand.launch(getattr(LA, name), gpu[c], blocks, threads, *args)

        def s(name: str, c: int) -> Any:
            d = gpu[c]
            if c < 0:       # about to be written on GPU 0: the replicas go stale
                fresh.difference_update({(name, e) for e in range(devices)})
            elif d != 0 and (name, d) not in fresh:
                hand.peer(sums[name][d], d, sums[name][0], 0)
                fresh.add((name, d))
            return sums[name][d]

        def p_on(j: int, c: int) -> Any:
            d = gpu[c]
            if d != gpu[j] and (j, d) not in copied:
                hand.peer(replicas[j][d], d, parts[j]["p"], gpu[j])
                copied.add((j, d))
            return replicas[j][d]

        def gather(name: str, c: int) -> Any:
            return hand.peer(partials[(name, c)], 0, parts[c][name], gpu[c])

        def step() -> np.ndarray:
            copied.clear()
            fresh.clear()
            self._program(launch, parts, s, p_on, gather)
            hand.sync()
            return np.concatenate([q["x"].get() for q in parts])
        hand.sync()
        return step


#: The workloads of this module by name.
WORKLOADS = {"ml": MLWork, "mv": MVWork, "cg": CGWork}

#: (blocks, threads) of every launch, set by ``multigpu.measure`` for the scale.
SHAPE = [1024, 256]


def _shape() -> tuple[int, int]:
    return SHAPE[0], SHAPE[1]
