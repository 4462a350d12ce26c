"""DL small's bimodal iteration times on the GPU (docs/data/h100_dl_bimodal_stop24.txt).

usage: PYTHONPATH=. python3 tools/dl_iterations.py modes [MODE,MODE,...]
           each mode's median over 5 rounds of 30 iterations (the harness's ModeRun), and the
           lanes of the recorder's graphs
       PYTHONPATH=. python3 tools/dl_iterations.py captures
           eight captures of the static graph (cleared between), 40 replays each; six fresh
           stream sets for handopt
       PYTHONPATH=. python3 tools/dl_iterations.py lanes
           120 static replays with the graph's lanes as chosen and folded to one, twice each
       PYTHONPATH=. python3 tools/dl_iterations.py carveout
           120 static replays with default kernel attributes (twice), then every DL kernel's
           preferred shared-memory carveout at 100 (twice) and at 0

Prints one JSON line. Every replay is timed with the host read that follows it, after an
untimed reset of the inputs, as in the benchmark.
"""

from __future__ import annotations

import ctypes
import json
import statistics
import sys
import time

import asyncgpu as ag
from asyncgpu._graph_cache import Variants
from asyncgpu._runtime import current_runtime
from benchmarks import harness
from benchmarks.cudagraph import GraphHand
from benchmarks.handopt import Hand
from benchmarks.workloads import WORKLOADS

BLOCK = (8, 8)
SLOW_US = 180


def _setup() -> tuple:
    wl = WORKLOADS["dl"](ag, "small")
    return wl, 4 * current_runtime().backend.sm_count


def _timed(wl, fn, n: int) -> list[int]:
    ts = []
    for _ in range(n):
        wl.reset()
        ag.synchronize()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return sorted(round(t * 1e6) for t in ts)


def _summary(ts: list[int]) -> dict:
    return {"median": statistics.median(ts), "slow": sum(t > SLOW_US for t in ts),
            "of": len(ts), "deciles": ts[::max(1, len(ts) // 10)]}


def _static_replays(wl, nb, n: int = 120) -> dict:
    g = ag.graph(wl.run_device, static=True)
    for _ in range(2):
        wl.reset()
        ag.synchronize()
        g(BLOCK, nb)
        ag.synchronize()
    out = _summary(_timed(wl, lambda: (g(BLOCK, nb), wl.read()), n))
    g.clear()
    return out


def modes(names: str) -> dict:
    wl, nb = _setup()
    rt = current_runtime()
    runs = {}
    for mode in names.split(","):
        hand = GraphHand(rt) if mode == "cudagraph" else Hand(rt) if mode == "handopt" else None
        runs[mode] = harness.ModeRun(ag, wl, mode, BLOCK, nb, "streaming", hand)
    times: dict[str, list[float]] = {m: [] for m in runs}
    for _ in range(5):
        for m, r in runs.items():
            times[m] += r.iterations(30, 3)
    out = {m: round(statistics.median(t) * 1e6, 1) for m, t in times.items()}
    out["lanes"] = [f.lanes for e in rt.graphs.entries.values() if isinstance(e, Variants)
                    for f in e.values()] if rt.graphs is not None else []
    return out


def captures() -> dict:
    wl, nb = _setup()
    out = {"static_captures": [_static_replays(wl, nb, 40)["median"] for _ in range(8)]}
    hands = []
    for _ in range(6):
        h = Hand(current_runtime())

        def once(h=h):
            h.begin()
            return wl.run_handopt(h, BLOCK, nb)
        once()
        hands.append(statistics.median(_timed(wl, once, 40)))
    out["handopt_stream_sets"] = hands
    return out


def lanes() -> dict:
    out: dict[str, list] = {}
    for limit in (0, 1, 0, 1):
        with ag.configure(graph_max_streams=limit):
            wl, nb = _setup()
            out.setdefault(f"graph_max_streams={limit}", []).append(_static_replays(wl, nb))
    return out


def carveout() -> dict:
    wl, nb = _setup()
    wl.reset()
    wl.run_device(BLOCK, nb)       # compiles every kernel
    ag.synchronize()
    libcuda = ctypes.CDLL("libcuda.so.1")
    handles = [int(entry[0]._codelibrary.get_cufunc().handle)
               for k in (wl.k_conv, wl.k_pool, wl.k_concat, wl.k_dot)
               for entry in k._compiled.values()
               if type(entry) is tuple and hasattr(entry[0], "_codelibrary")]
    carveout_attr = 9       # CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
    out: dict[str, list] = {}
    for setting in ("default", "default", 100, 100, 0):
        if setting != "default":
            for h in handles:
                rc = libcuda.cuFuncSetAttribute(ctypes.c_void_p(h), carveout_attr,
                                                ctypes.c_int(setting))
                if rc == 400:   # CUDA_ERROR_INVALID_HANDLE: numba-cuda's handle is a CUkernel
                    rc = libcuda.cuKernelSetAttribute(carveout_attr, ctypes.c_int(setting),
                                                      ctypes.c_void_p(h), 0)
                if rc != 0:
                    raise RuntimeError(f"setting the carveout failed: CUresult {rc}")
        out.setdefault(str(setting), []).append(_static_replays(wl, nb))
    return out


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "lanes"
    if what == "modes":
        result = modes(sys.argv[2] if len(sys.argv) > 2
                       else "parallel,cudagraph,recorded,recorded_static")
    else:
        result = {"captures": captures, "lanes": lanes, "carveout": carveout}[what]()
    print(json.dumps(result))
