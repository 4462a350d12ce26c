"""GPU probe: launch Numba and CuPy kernels through cuLaunchKernel with a packed parameter buffer.

Checks the results against the kernels' own launch paths and times each path (host us/launch).
usage: PYTHONPATH=. python3 tools/probe_packed_launch.py
"""
from __future__ import annotations

import ctypes
import struct
import time

import numpy as np

import asyncgpu  # noqa: F401  (numpy 2.5 shim before numba.cuda)
import cupy
from numba import cuda

N = 32


def per_launch(fn, n=5000):
    fn(100)
    cupy.cuda.runtime.deviceSynchronize()
    best = []
    for _ in range(5):
        t0 = time.perf_counter()
        fn(n)
        best.append((time.perf_counter() - t0) / n * 1e6)
        cupy.cuda.runtime.deviceSynchronize()
    return sorted(best)[2]


class Packed:
    def __init__(self, handle, fmt):
        self.handle = int(handle)
        self.st = struct.Struct("@" + fmt)
        self.buf = ctypes.create_string_buffer(max(self.st.size, 8))
        self.size = ctypes.c_size_t(self.st.size)
        self.extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(self.buf), 2,
                                           ctypes.addressof(self.size), 0)
        self.extra_ptr = ctypes.addressof(self.extra)

    def __call__(self, grid, block, stream_ptr, values):
        self.st.pack_into(self.buf, 0, *values)
        cupy.cuda.driver.launchKernel(self.handle, grid, 1, 1, block, 1, 1, 0, stream_ptr, 0,
                                      self.extra_ptr)


stream = cupy.cuda.Stream(non_blocking=True)
sp = stream.ptr
out = {}

# --- CuPy RawKernel -----------------------------------------------------------------------
src = ('extern "C" __global__ void k3(const float* a, const float* b, float* c, float s, int n)'
       '{ int t = threadIdx.x; if (t < n) c[t] = a[t] + b[t] * s; }')
raw = cupy.RawKernel(src, "k3")
a = cupy.arange(N, dtype=np.float32); b = cupy.ones(N, np.float32); c = cupy.zeros(N, np.float32)
p = Packed(raw.kernel.ptr, "PPPfi")
p(1, N, sp, (a.data.ptr, b.data.ptr, c.data.ptr, 2.0, N))
stream.synchronize()
assert np.allclose(c.get(), np.arange(N) + 2.0), c.get()
out["raw_cupy_call_us"] = per_launch(lambda n: [raw((1,), (N,), (a, b, c, np.float32(2), np.int32(N)), stream=stream) for _ in range(n)])
vals = (a.data.ptr, b.data.ptr, c.data.ptr, 2.0, N)
out["raw_packed_us"] = per_launch(lambda n: [p(1, N, sp, vals) for _ in range(n)])

# --- Numba -----------------------------------------------------------------------------------
@cuda.jit
def nk(x, y, z, s, n):
    t = cuda.threadIdx.x
    if t < n:
        z[t] = x[t] + y[t] * s

from numba.cuda.cudadrv.devicearray import DeviceNDArray  # noqa: E402
x = cuda.to_device(np.arange(N, dtype=np.float32)); y = cuda.to_device(np.ones(N, np.float32))
z = cuda.device_array(N, np.float32)
sig = tuple(nk.typeof_pyval(v) for v in (x, y, z, 2.0, N))
compiled = nk.compile(sig)
print("numba sig", sig)
cufunc = compiled._codelibrary.get_cufunc()
h = cufunc.handle
print("cufunc handle type", type(h), int(h))
def arr_vals(d):
    return (0, 0, d.size, d.dtype.itemsize, d.device_ctypes_pointer.value, *d.shape, *d.strides)
fmt = "qqqqq" + "qq"
pn = Packed(h, fmt * 3 + "dq")
nvals = (*arr_vals(x), *arr_vals(y), *arr_vals(z), 3.0, N)
pn(1, N, sp, nvals)
stream.synchronize()
res = z.copy_to_host()
assert np.allclose(res, np.arange(N) + 3.0), res
ns = cuda.external_stream(sp)
out["numba_dispatch_us"] = per_launch(lambda n: [nk[1, N, ns](x, y, z, 2.0, N) for _ in range(n)])
out["numba_compiled_launch_us"] = per_launch(lambda n: [compiled.launch([x, y, z, 2.0, N], (1,), (N,), ns, 0) for _ in range(n)])
out["numba_packed_us"] = per_launch(lambda n: [pn(1, N, sp, nvals) for _ in range(n)])
# cupy arrays into numba kernel through packed path
ca = cupy.arange(N, dtype=np.float32); cb = cupy.ones(N, np.float32); cc = cupy.zeros(N, np.float32)
cv = lambda d: (0, 0, d.size, d.itemsize, d.data.ptr, *d.shape, *d.strides)
pn(1, N, sp, (*cv(ca), *cv(cb), *cv(cc), 4.0, N)); stream.synchronize()
assert np.allclose(cc.get(), np.arange(N) + 4.0)
# --- events ----------------------------------------------------------------------------------
ev = cupy.cuda.Event(block=False, disable_timing=True)
s2 = cupy.cuda.Stream(non_blocking=True)
rt = cupy.cuda.runtime
out["event_record_wait_cupy_us"] = per_launch(lambda n: [(ev.record(stream), s2.wait_event(ev)) for _ in range(n)])
evp, s2p = ev.ptr, s2.ptr
out["event_record_wait_runtime_us"] = per_launch(lambda n: [(rt.eventRecord(evp, sp), rt.streamWaitEvent(s2p, evp, 0)) for _ in range(n)])
out["event_query_us"] = per_launch(lambda n: [rt.eventQuery(evp) for _ in range(n)])
for k, v in out.items():
    print(f"{k:36s} {v:7.2f}")
