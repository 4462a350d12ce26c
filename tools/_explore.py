"""Temporary: GPU exploration for the session (profiles + lane sweep). Deleted after use."""
import cProfile, io, json, os, pstats, statistics, sys, time
import numpy as np
import asyncgpu as ag
from benchmarks.replay import INC, _inc
out = os.environ.get("OUT", "/tmp")
res = {}

def prof(fn, n, label, top=35):
    pr = cProfile.Profile(); pr.enable()
    for _ in range(n): fn()
    pr.disable()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
    open(f"{out}/prof_{label}.txt", "w").write(s.getvalue())

def timeit(fn, n=2000, reps=7):
    ts = []
    for _ in range(reps):
        ag.synchronize()
        t0 = time.perf_counter()
        for _ in range(n): fn()
        ts.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(ts)

# eager: 3-array CUDA C independent and cross-stream
from benchmarks.overhead import _c_source
k3 = ag.cuda_kernel(_c_source(3), "k3", sim=lambda *a: None)
ins = [ag.zeros(32, np.float32) for _ in range(2)]
outs = [ag.zeros(32, np.float32) for _ in range(64)]
sink = [ag.zeros(32, np.float32) for _ in range(64)]
L = k3[1, 32]
st = {"i": 0}
def indep():
    i = st["i"] = (st["i"] + 1) % 64
    L(ins[0], ins[1], outs[i])
def cross():
    i = st["i"] = (st["i"] + 1) % 64
    prev = outs[i - 1]
    L(prev, ins[1], outs[i]); L(outs[i], outs[i], sink[i])
indep(); cross(); ag.synchronize()
res["eager_indep_us"] = timeit(indep)
res["eager_cross_pair_us"] = timeit(cross, 1000)
prof(indep, 20000, "eager_indep"); ag.synchronize()
prof(cross, 10000, "eager_cross"); ag.synchronize()
# raw pieces
if os.environ.get('SIMTEST'):
    sys.exit(0)
import cupy as cp
from asyncgpu._runtime import current_runtime
rt = current_runtime(); be = rt.backend
s = cp.cuda.Stream(non_blocking=True)
ev = cp.cuda.Event(disable_timing=True)
res["raw_event_record_us"] = timeit(lambda: ev.record(s), 5000)
from cupy.cuda import runtime as cr
sp, ep = s.ptr, ev.ptr
res["raw_cudart_eventRecord_us"] = timeit(lambda: cr.eventRecord(ep, sp), 5000)
res["raw_streamWaitEvent_us"] = timeit(lambda: cr.streamWaitEvent(sp, ep, 0), 5000)
res["raw_eventQuery_us"] = timeit(lambda: cr.eventQuery(ep), 5000)
raw = cp.RawKernel(_c_source(3), "k3")
a0, a1, a2 = (cp.zeros(32, cp.float32) for _ in range(3))
res["raw_cupy_launch_us"] = timeit(lambda: raw((1,), (32,), (a0, a1, a2), stream=s), 5000)
s.synchronize()

# static replay profile + lane sweep
def body_of(arrays, k):
    def body():
        for i in range(k):
            inc[1, 32](arrays[i % len(arrays)], 32)
    return body
inc = ag.cuda_kernel(INC, "inc", sim=_inc)
sweep = {}
for k, limits in ((10, (0, 1, 2, 3, 4, 5)), (100, (0, 4, 8, 16, 32))):
    for lim in limits:
        with ag.configure(graph_max_streams=lim):
            arrays = [ag.zeros(32, np.float32) for _ in range(k)]
            static = ag.graph(body_of(arrays, k), static=True)
            static(); static(); ag.synchronize()
            frozen = next(iter(next(iter(static._static.values())).values()))[0]
            h = frozen.graph.handle
            host, total, floor = [], [], []
            for _ in range(200):
                t0 = time.perf_counter(); static(); t1 = time.perf_counter(); ag.synchronize()
                host.append(t1 - t0); total.append(time.perf_counter() - t0)
            for _ in range(200):
                t0 = time.perf_counter(); h.launch(s); t1 = time.perf_counter(); s.synchronize()
                floor.append(t1 - t0)
            # back-to-back throughput: 200 replays then one sync
            ag.synchronize(); t0 = time.perf_counter()
            for _ in range(200): static()
            ag.synchronize(); thr = (time.perf_counter() - t0) / 200
            sweep[f"{k}/{lim}"] = {m: 1e6 * statistics.median(v) / k for m, v in
                                   (("host", host), ("total", total), ("floor", floor))}
            sweep[f"{k}/{lim}"]["throughput"] = 1e6 * thr / k
            if k == 10 and lim == 0:
                prof(static, 20000, "static_indep10"); ag.synchronize()
            static.clear()
res["sweep"] = sweep
json.dump(res, open(f"{out}/explore.json", "w"), indent=1)
print(json.dumps(res, indent=1))
