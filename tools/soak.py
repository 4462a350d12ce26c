"""Soak test: a long random program checked against a serial NumPy oracle.

Runs ``--launches`` kernel launches and library calls (CUDA C kernels with NumPy twins, and
``asyncgpu.cupy`` calls) over a few small int32 arrays and views of them, with host writes and
reads mixed in, and every ``--check-every`` launches reads every array back and compares it with
an oracle that applies the same operations with NumPy on the CPU. Values stay in [0, 1024) (each
operation ends with ``& 1023``), so the comparison is exact however long the run.

It reports mismatches, happens-before checker reports (``RaceError``; the checker is always on
for ``sim`` and attached to ``cuda`` unless ``--no-hb``), and the peaks of what must stay bounded:
unfinished nodes, and what the run added to the events and streams created and to the memory
pool (a runtime kept across ``configure`` calls keeps what earlier work made). Usage::

    PYTHONPATH=. python3 tools/soak.py --launches 1000000 --check-every 1000 --json soak.json
    PYTHONPATH=. python3 tools/soak.py --backend sim --launches 2000 --check-every 100

The exit status is 1 when anything mismatched or the checker reported, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from typing import Any

import numpy as np

SRC = r'''
extern "C" __global__ void mix(const int* x, int* y, int a, int c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = (y[i] * a + x[i] + c) & 1023;
}
extern "C" __global__ void copy(const int* x, int* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
extern "C" __global__ void twist(int* x, int* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { int t = x[i]; x[i] = (t + y[i]) & 1023; y[i] = (t * 3 + 1) & 1023; }
}
'''
MASK = 1023


def mix_twin(x, y, a, c, n):
    y[:n] = (y[:n].astype(np.int64) * int(a) + x[:n] + int(c)) & MASK


def copy_twin(x, y, n):
    y[:n] = x[:n]


def twist_twin(x, y, n):
    t = x[:n].copy()
    x[:n] = (t + y[:n]) & MASK
    y[:n] = (t * 3 + 1) & MASK


class Soak:
    """One soak run: the arrays, their oracle copies and the counters of the report."""

    def __init__(self, ag: Any, arrays: int, size: int, seed: int) -> None:
        from asyncgpu.runtime.current import current_runtime

        self.ag = ag
        # (a runtime kept across configure calls keeps its counts and its pool, with what
        # earlier work left cached in it: the soak reports what it adds to them)
        self.base = grown(current_runtime())
        self.rng = random.Random(seed)
        self.size = size
        self.half = size // 2
        self.mix = ag.cuda_kernel(SRC, "mix", sim=mix_twin)
        self.copy = ag.cuda_kernel(SRC, "copy", out=["y"], sim=copy_twin)
        self.twist = ag.cuda_kernel(SRC, "twist", sim=twist_twin)
        init = np.random.default_rng(seed).integers(0, MASK + 1, (arrays, size), dtype=np.int32)
        self.oracle = [row.copy() for row in init]
        self.arrays = [ag.array(row) for row in init]
        self.counts = {"launches": 0, "kernels": 0, "library_calls": 0, "host_writes": 0,
                       "host_reads": 0, "checks": 0, "mismatches": 0, "checker_reports": 0,
                       "temporaries": 0}
        self.peaks = {"inflight_nodes": 0, "events_created": 0, "streams_created": 0,
                      "pool_bytes": 0}
        self.first_errors: list[str] = []

    # -- operands: a whole array or one of its halves --------------------------------------------
    def operand(self) -> tuple[int, slice]:
        i = self.rng.randrange(len(self.arrays))
        part = self.rng.random()
        if part < 0.5:
            return i, slice(0, self.size)
        return i, (slice(0, self.half) if part < 0.75 else slice(self.half, self.size))

    def pair(self) -> tuple[tuple[int, slice], tuple[int, slice]]:
        """Two operands of equal length that do not overlap."""
        while True:
            a, b = self.operand(), self.operand()
            la, lb = a[1].stop - a[1].start, b[1].stop - b[1].start
            if la != lb:
                continue
            if a[0] != b[0] or a[1].stop <= b[1].start or b[1].stop <= a[1].start:
                return a, b

    def view(self, op: tuple[int, slice]) -> Any:
        i, s = op
        return self.arrays[i] if s.stop - s.start == self.size else self.arrays[i][s]

    # -- one step ------------------------------------------------------------------------------
    def step(self) -> None:
        r = self.rng.random()
        (ia, sa), (ib, sb) = self.pair()
        n = sa.stop - sa.start
        x, y = self.view((ia, sa)), self.view((ib, sb))
        ox, oy = self.oracle[ia][sa], self.oracle[ib][sb]
        blocks = (n + 127) // 128
        if r < 0.55:
            a, c = self.rng.randrange(1, 5), self.rng.randrange(0, 7)
            self.mix[blocks, 128](x, y, a, c, n)
            mix_twin(ox, oy, a, c, n)
        elif r < 0.7:
            self.copy[blocks, 128](x, y, n)
            copy_twin(ox, oy, n)
        elif r < 0.85:
            self.twist[blocks, 128](x, y, n)
            twist_twin(ox, oy, n)
        else:
            self.library_call(x, y, ox, oy, n)
            return
        self.counts["kernels"] += 1

    def library_call(self, x: Any, y: Any, ox: np.ndarray, oy: np.ndarray, n: int) -> None:
        from asyncgpu import cupy as acp

        if self.rng.random() < 0.5:
            acp.add(x, y, out=y)                     # in place: a write of y
            acp.bitwise_and(y, MASK, out=y)
            oy[:] = (ox + oy) & MASK
            self.counts["library_calls"] += 2
        else:
            t = acp.bitwise_xor(x, y)                # a temporary, dropped at once
            self.copy[(n + 127) // 128, 128](t, y, n)
            oy[:] = ox ^ oy
            self.counts["library_calls"] += 1
            self.counts["kernels"] += 1
            self.counts["temporaries"] += 1

    def host_write(self) -> None:
        (i, s), _ = self.pair()
        lo = self.rng.randrange(s.start, s.stop - 4)
        values = np.array([self.rng.randrange(MASK + 1) for _ in range(4)], np.int32)
        self.arrays[i][lo:lo + 4] = values
        self.oracle[i][lo:lo + 4] = values
        self.counts["host_writes"] += 1

    def host_read(self) -> None:
        i = self.rng.randrange(len(self.arrays))
        lo = self.rng.randrange(self.size - 4)
        got = self.arrays[i][lo:lo + 4].numpy()
        self.counts["host_reads"] += 1
        if not np.array_equal(got, self.oracle[i][lo:lo + 4]):
            self.mismatch(f"host read of array {i}[{lo}:{lo + 4}]: {got} != "
                          f"{self.oracle[i][lo:lo + 4]}")

    def check(self) -> None:
        self.counts["checks"] += 1
        for i, (a, o) in enumerate(zip(self.arrays, self.oracle)):
            try:
                got = a.numpy()
            except self.ag.RaceError as exc:
                self.report(exc)
                continue
            if not np.array_equal(got, o):
                bad = int(np.count_nonzero(got != o))
                self.mismatch(f"array {i}: {bad} of {o.size} elements differ from the oracle "
                              f"after {self.counts['launches']} launches")

    def report(self, exc: BaseException) -> None:
        self.counts["checker_reports"] += 1
        if len(self.first_errors) < 10:
            self.first_errors.append(str(exc))

    def mismatch(self, text: str) -> None:
        self.counts["mismatches"] += 1
        if len(self.first_errors) < 10:
            self.first_errors.append(text)

    def sample(self, runtime: Any) -> None:
        peaks = self.peaks
        peaks["inflight_nodes"] = max(peaks["inflight_nodes"], runtime.streams.inflight)
        for key, value in grown(runtime).items():
            peaks[key] = max(peaks[key], value - self.base[key])

    def run(self, launches: int, check_every: int, host_ops: float) -> dict[str, Any]:
        ag = self.ag
        from asyncgpu.runtime.current import current_runtime

        runtime = current_runtime()
        start = time.perf_counter()
        next_check = check_every
        while self.counts["kernels"] + self.counts["library_calls"] < launches:
            try:
                self.step()
                if self.rng.random() < host_ops:
                    if self.rng.random() < 0.5:
                        self.host_write()
                    else:
                        self.host_read()
            except ag.RaceError as exc:
                self.report(exc)
            done = self.counts["kernels"] + self.counts["library_calls"]
            self.counts["launches"] = done
            if done >= next_check:
                next_check += check_every
                self.sample(runtime)
                self.check()
        ag.synchronize()
        self.check()
        self.sample(runtime)
        elapsed = time.perf_counter() - start
        return {
            "backend": runtime.backend.name, "seconds": round(elapsed, 2),
            "us_per_launch": round(elapsed / max(1, self.counts["launches"]) * 1e6, 2),
            "counts": self.counts, "peaks": self.peaks, "first_errors": self.first_errors,
            "statistics": {k: v for k, v in vars(ag.statistics()).items()
                           if isinstance(v, (int, float, str))},
        }


def grown(runtime: Any) -> dict[str, int]:
    """What a runtime has made so far that must stay bounded: events and streams created, and
    the bytes its memory pool holds."""
    stats = runtime.stats
    return {"events_created": stats.events_created, "streams_created": stats.streams_created,
            "pool_bytes": pool_bytes(runtime.backend)}


def pool_bytes(backend: Any) -> int:
    """Bytes held by the backend's memory pool (in use plus cached for reuse)."""
    inner = getattr(backend, "inner", backend)
    inner = getattr(inner, "inner", inner)
    pool = getattr(inner, "pool", None)
    if pool is not None:                         # cuda: CuPy's MemoryPool
        return int(pool.total_bytes())
    cached = getattr(inner, "_pool", {})         # sim: the LIFO free lists
    return sum(size * len(bufs) for size, bufs in cached.items())


def soak(backend: str = "auto", launches: int = 2000, check_every: int = 100, seed: int = 0,
         arrays: int = 6, size: int = 256, host_ops: float = 0.01, hb: bool = True,
         **options: Any) -> dict[str, Any]:
    """Run one soak and return its report (see the module docstring)."""
    import asyncgpu as ag

    settings: dict[str, Any] = {"backend": backend, "execution": "async", **options}
    if ag.backends.resolve(ag.options().replace(backend=backend)) == "sim":
        settings.setdefault("sim_seed", seed)
    else:
        settings["debug_hb"] = hb
    with ag.configure(**settings):
        report = Soak(ag, arrays, size, seed).run(launches, check_every, host_ops)
    report["seed"] = seed
    report["options"] = {k: v for k, v in settings.items()}
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=1_000_000)
    parser.add_argument("--check-every", type=int, default=1000)
    parser.add_argument("--backend", default="auto", choices=["auto", "cuda", "sim"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--arrays", type=int, default=6)
    parser.add_argument("--size", type=int, default=256, help="elements per array (int32)")
    parser.add_argument("--host-ops", type=float, default=0.01,
                        help="probability of a host write or read after each step")
    parser.add_argument("--no-hb", action="store_true",
                        help="do not attach the happens-before checker on cuda")
    parser.add_argument("--stress", action="store_true", help="stress mode (ASYNCGPU_STRESS)")
    parser.add_argument("--json", help="write the report there")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    extra = {"stress": True, "stress_seed": args.seed} if args.stress else {}
    report = soak(args.backend, args.launches, args.check_every, args.seed, args.arrays,
                  args.size, args.host_ops, not args.no_hb, **extra)
    text = json.dumps(report, indent=2, default=str)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    sys.stdout.write(text + "\n")
    bad = report["counts"]["mismatches"] or report["counts"]["checker_reports"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
