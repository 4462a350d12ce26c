"""Small CUDA C kernels (with NumPy stand-ins for sim) shared by the capture and recorder tests."""

from __future__ import annotations

import numpy as np

N = 64

SCALE = """extern "C" __global__ void scale(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}"""
ADD = """extern "C" __global__ void add(const float* x, const float* y, float* z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = x[i] + y[i];
}"""
#: grid-stride (any grid): the GPU graph and recorder tests launch it at real sizes
ADD_SCALED = r"""extern "C" __global__ void add_scaled(const float* x, const float* y, float* z,
                                                float a, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        z[i] = x[i] + a * y[i];
}"""
INC = """extern "C" __global__ void inc(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}"""


def _scale(x, y, a, n):
    y[:n] = np.float32(a) * x[:n]


def _add(x, y, z, n):
    z[:n] = x[:n] + y[:n]


def _inc(x, n):
    x[:n] += np.float32(1)


def kernels(ag):
    return (ag.cuda_kernel(SCALE, "scale", out=["y"], sim=_scale),
            ag.cuda_kernel(ADD, "add", out=["z"], sim=_add),
            ag.cuda_kernel(INC, "inc", sim=_inc))


def captured_graphs(step=None) -> list:
    """Every graph (``FrozenGraph``, all variants) in the current runtime's recorder cache, or
    only those of the recorded function ``step``."""
    from asyncgpu.recorder.cache import Variants, graphs_of
    from asyncgpu.runtime.current import current_runtime

    rt = current_runtime()
    if step is not None:
        return graphs_of(rt, step.token)
    cache = rt.graphs
    if cache is None:
        return []
    return [f for e in cache.entries.values() if isinstance(e, Variants) for f in e.values()]


def deferred_launches(body, name="t"):
    """``(runtime, launches)``: ``body()`` run under a bare recording, its launches validated
    and deferred (never issued); for tests of the schedule and the stage timer."""
    from asyncgpu.recorder import recording as _recorder
    from asyncgpu.runtime.current import current_runtime

    rt = current_runtime()
    rec = _recorder.Recording(rt, 0, name, False)
    rt.recording = rec
    try:
        body()
    finally:
        rt.recording = None
    return rt, rec.launches


def doubling(ag, x=None):
    """``(x, y, step)``: arrays and a recorded function writing ``y = 2 x`` in one launch, the
    smallest recording with an input and an output (``x``: a fresh empty array if not given)."""
    scale, _, _ = kernels(ag)
    x = ag.empty(N, np.float32) if x is None else x
    y = ag.empty(N, np.float32)

    @ag.graph
    def step():
        scale[1, N](x, y, np.float32(2), N)     # y: written whole, never read

    return x, y, step
