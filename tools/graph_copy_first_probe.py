"""Should a replay issue its uploads before launching its graph rather than as copy nodes in it?

A VEC-shaped iteration in raw CuPy (two 1 MiB uploads from pinned memory, two squares on two
streams, a reduction, a 4-byte copy back), after an untimed host rewrite of the inputs as in
the benchmark: the graph with its copies inside; the copies issued first on one stream or on
two, then the graph without them; and the same work launched eagerly. Then the host cost of
the launch calls alone, right after the rewrite (cold) and again at once (warm).
Results: docs/data/h100_copy_first_probe_stop25.txt.

usage: PYTHONPATH=. python3 tools/graph_copy_first_probe.py   (a CUDA GPU)
"""
import statistics, time, json, sys
import numpy as np
import cupy as cp

N = 1 << 18
SRC = r'''
extern "C" __global__ void sq(const float* a, float* b, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) b[i] = a[i] * a[i]; }
extern "C" __global__ void red(const float* a, const float* b, float* r, int n) {
  float s = 0; for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += a[i] - b[i];
  for (int o = 16; o; o >>= 1) s += __shfl_down_sync(0xffffffff, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(r, s); }
'''
mod = cp.RawModule(code=SRC)
sq, red = mod.get_function("sq"), mod.get_function("red")
RT = cp.cuda.runtime
def h2d(d, h, s): RT.memcpyAsync(d.data.ptr, h.ctypes.data, h.nbytes, RT.memcpyHostToDevice, s.ptr)
def pinned(n, dt=np.float32):
    m = cp.cuda.alloc_pinned_memory(n * np.dtype(dt).itemsize)
    return np.frombuffer(m, dt, n)
hx, hy, hr = pinned(N), pinned(N), pinned(1)
src_x = np.random.default_rng(0).random(N, dtype=np.float32); src_y = src_x[::-1].copy()
dx, dy, x1, y1 = (cp.empty(N, cp.float32) for _ in range(4)); dr = cp.zeros(1, cp.float32)
s0, s1 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
G, B = 528, 256
nb = N * 4

def body(copies):
    e0 = cp.cuda.Event(disable_timing=True); e0.record(s0); s1.wait_event(e0)
    if copies:
        h2d(dx, hx, s0)
        h2d(dy, hy, s1)
    sq((G,), (B,), (dx, x1, np.int32(N)), stream=s0)
    sq((G,), (B,), (dy, y1, np.int32(N)), stream=s1)
    e1 = cp.cuda.Event(disable_timing=True); e1.record(s1); s0.wait_event(e1)
    red((G,), (B,), (x1, y1, dr, np.int32(N)), stream=s0)
    RT.memcpyAsync(hr.ctypes.data, dr.data.ptr, 4, RT.memcpyDeviceToHost, s0.ptr)

def capture(copies):
    s0.begin_capture(); body(copies); g = s0.end_capture(); g.upload(s0) if hasattr(g, "upload") else None
    return g
ga, gb = capture(True), capture(False)

def reset():
    np.copyto(hx, src_x); np.copyto(hy, src_y); dr.fill(0); s0.synchronize(); cp.cuda.Device().synchronize()

def in_graph():
    ga.launch(s0); s0.synchronize(); return float(hr[0])
def first_same_stream():
    h2d(dx, hx, s0)
    h2d(dy, hy, s0)
    gb.launch(s0); s0.synchronize(); return float(hr[0])
def first_two_streams():
    e = cp.cuda.Event(disable_timing=True)
    h2d(dy, hy, s1)   # y on the side stream
    e.record(s1)
    h2d(dx, hx, s0)
    s0.wait_event(e)
    gb.launch(s0); s0.synchronize(); return float(hr[0])
def eager():
    body(True); s0.synchronize(); return float(hr[0])

modes = {"in_graph": in_graph, "copies_first_one_stream": first_same_stream,
         "copies_first_two_streams": first_two_streams, "eager": eager}
res = {k: [] for k in modes}
ref = None
for rnd in range(12):
    for k, f in modes.items():
        for _ in range(25):
            reset(); t0 = time.perf_counter(); v = f(); res[k].append((time.perf_counter() - t0) * 1e6)
        ref = v if ref is None else ref
        assert abs(v - ref) < 1e-2 * max(1, abs(ref)), (k, v, ref)
print(json.dumps({k: round(statistics.median(v[25:]), 1) for k, v in res.items()}))
# graph launch call cost alone, cold (after reset) vs warm
for g, name in ((ga, "launch_call_with_copies"), (gb, "launch_call_no_copies")):
    cold, warm = [], []
    for _ in range(100):
        reset(); t0 = time.perf_counter(); g.launch(s0); cold.append((time.perf_counter() - t0) * 1e6); s0.synchronize()
        t0 = time.perf_counter(); g.launch(s0); warm.append((time.perf_counter() - t0) * 1e6); s0.synchronize()
    print(name, "cold", round(statistics.median(cold), 1), "warm", round(statistics.median(warm), 1))
cold = []
for _ in range(100):
    reset(); t0 = time.perf_counter(); h2d(dx, hx, s0); cold.append((time.perf_counter() - t0) * 1e6); s0.synchronize()
print("memcpy call cold", round(statistics.median(cold), 1))
