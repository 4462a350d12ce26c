"""Where does a bare ``cuLaunchKernel`` spend its host time? One kernel, one stream, the same
three pointers, launched in several ways in alternating rounds (medians of the rounds):

* ``cupy_raw``: ``RawKernel.__call__`` on CuPy device arrays (issue 6's reference);
* ``cupy_raw_managed``: the same on arrays in managed memory (asyncgpu's default model);
* ``{cupy,direct}_{params,extra}``: ``cuLaunchKernel`` alone through CuPy's Cython wrapper or
  asyncgpu's ``DriverCalls``, the parameters given as ``kernelParams`` (pointers to each value,
  as CuPy passes them) or as ``extra`` (one packed buffer, as asyncgpu's packed plan does);
  ``*_managed``: the same with the managed arrays' pointers.

usage: PYTHONPATH=. python3 tools/launch_modes.py [rounds] [--json FILE]
"""

from __future__ import annotations

import ctypes
import json
import statistics
import sys
import time

import numpy as np

SRC = ('extern "C" __global__ void k3(const float* a0, const float* a1, float* out) '
       "{ out[threadIdx.x] = a0[threadIdx.x] + a1[threadIdx.x]; }")


def main() -> None:
    import cupy

    from asyncgpu.backends._driver import driver_calls

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 15
    stream = cupy.cuda.Stream(non_blocking=True)
    raw = cupy.RawKernel(SRC, "k3")
    dev = [cupy.ones(32, np.float32) for _ in range(3)]
    mem = cupy.cuda.malloc_managed(3 * 32 * 4)
    managed = [cupy.ndarray((32,), np.float32, mem + 128 * i)
               for i in range(3)]
    for a in managed:
        a.fill(1)
    raw((1,), (32,), tuple(dev), stream=stream)
    stream.synchronize()
    fn = raw.kernel.ptr
    calls = driver_calls(cupy)
    launchers = {"cupy": cupy.cuda.driver.launchKernel}
    if calls is not None:
        launchers["direct"] = calls.launchKernel

    def params_of(arrays):
        vals = [ctypes.c_uint64(a.data.ptr) for a in arrays]
        ptrs = (ctypes.c_void_p * 3)(*[ctypes.addressof(v) for v in vals])
        return (vals, ptrs), ctypes.addressof(ptrs)

    def extra_of(arrays):
        buf = (ctypes.c_uint64 * 3)(*[a.data.ptr for a in arrays])
        size = ctypes.c_size_t(24)
        extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(size), 0)
        return (buf, size, extra), ctypes.addressof(extra)

    keep = []
    loops = {}
    sp = stream.ptr
    for mname, arrays in (("", dev), ("_managed", managed)):
        a = tuple(arrays)
        loops[f"cupy_raw{mname}"] = lambda n, a=a: [raw((1,), (32,), a, stream=stream)
                                                    for _ in range(n)]
        for lname, launch in launchers.items():
            for kind, make in (("params", params_of), ("extra", extra_of)):
                owner, addr = make(arrays)
                keep.append(owner)
                p, e = (addr, 0) if kind == "params" else (0, addr)
                loops[f"{lname}_{kind}{mname}"] = (
                    lambda n, launch=launch, p=p, e=e: [
                        launch(fn, 1, 1, 1, 32, 1, 1, 0, sp, p, e) for _ in range(n)])
    samples: dict[str, list[float]] = {k: [] for k in loops}
    for f in loops.values():
        f(200)
    stream.synchronize()
    n = 2000
    for _ in range(rounds):
        for name, f in loops.items():
            t0 = time.perf_counter()
            f(n)
            samples[name].append((time.perf_counter() - t0) / n * 1e6)
            stream.synchronize()
    out = {k: {"median_us": statistics.median(v), "min_us": min(v)} for k, v in samples.items()}
    ref = samples["cupy_raw"]
    for k, v in samples.items():
        out[k]["over_cupy_raw"] = statistics.median(a / b for a, b in zip(v, ref))
    text = json.dumps(out, indent=1)
    print(text)
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
