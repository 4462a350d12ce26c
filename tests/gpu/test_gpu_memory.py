"""The explicit memory model on a real GPU: bit for bit the managed model's results.

Device memory with pinned host mirrors and ``cudaMemcpyAsync`` copy nodes
(``memory="explicit"``) against unified memory with prefetch (``memory="managed"``): kernels,
host slices, library calls, the recorder and interop must give identical bytes.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import programs
import recorder_kernels

pytestmark = pytest.mark.gpu
MODELS = ("managed", "explicit")


def _both(fn, **options):
    """``fn(ag)`` under each memory model; returns {model: result}."""
    import asyncgpu as ag

    out = {}
    for memory in MODELS:
        with ag.configure(backend="cuda", memory=memory, **options):
            out[memory] = fn(ag)
            ag.synchronize()
    return out


def _same(results):
    a, b = results["managed"], results["explicit"]
    assert len(a) == len(b)
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes()


@pytest.mark.parametrize("options", [{"execution": "async"}, {"execution": "sync"},
                                     {"stress": True, "stress_seed": 3},
                                     {"debug_hb": True}])
def test_random_programs_both_models_bit_for_bit(options):
    init = programs.initial()
    for seed in range(25):
        steps = programs.random_program(random.Random(seed), 16)

        def run(ag):
            reads, final = programs.run(ag, steps, init)
            return reads + final

        _same(_both(run, **options))


def test_explicit_model_counts_its_copies():
    import asyncgpu as ag

    scale, add, inc = recorder_kernels.kernels(ag)
    n = recorder_kernels.N
    with ag.configure(backend="cuda", memory="explicit"):
        before = ag.statistics()
        x, y = ag.array(np.arange(n, dtype=np.float32)), ag.empty(n, np.float32)
        scale[1, n](x, y, 2.0, n)
        assert y[3] == 6.0
        after = ag.statistics()
        assert after.copies_to_device - before.copies_to_device == 1
        assert after.copies_to_host - before.copies_to_host == 1
        assert after.bytes_to_host - before.bytes_to_host == 4 * n     # small: fetched whole
        assert [float(y[i]) for i in range(n)] == [2.0 * i for i in range(n)]
        assert ag.statistics().copies_to_host == after.copies_to_host
        assert after.prefetches == before.prefetches
        big = ag.empty(1 << 20, np.float32)
        scale[1, n](x, big, 3.0, n)
        assert big[5] == 15.0                   # large: the element only
        assert ag.statistics().bytes_to_host - after.bytes_to_host == 4


def test_large_arrays_and_host_slices():
    n = 1 << 22
    rng = np.random.default_rng(0)
    a = rng.random(n, dtype=np.float32)

    def run(ag):
        scale, add, inc = recorder_kernels.kernels(ag)
        x, y, z = ag.array(a), ag.empty(n, np.float32), ag.empty(n, np.float32)
        grid = (n + 255) // 256
        scale[grid, 256](x, y, 1.5, n)
        out = [y[12345], y[1000:1010].numpy()]
        y[5:100] = 3.0                          # dense partial write of a device array
        y[200:4000:3] = -1.0                    # strided: fetch, write, copy back
        x[...] = a[::-1].copy()                 # whole rewrite: host-current again
        add[grid, 256](x, y, z, n)
        inc[grid, 256](z, n)
        out += [z.numpy(), y.numpy(), x[7]]
        return out

    _same(_both(run))


def test_library_calls_both_models():
    rng = np.random.default_rng(1)
    a = rng.random((64, 64))
    v = rng.random(64)

    def run(ag):
        import asyncgpu.cupy as acp

        x, y = ag.array(a), ag.array(v)
        m = acp.matmul(x, x)
        s = acp.sqrt(m) + y
        f = acp.fft.fft(y)
        x[3, :] = 7.0                            # after the calls were issued
        out = ag.empty((64, 64))
        acp.multiply(x, 2.0, out=out)
        total = float(s.sum())
        return [m.numpy(), s.numpy(), f.numpy(), out.numpy(), np.float64(total), x.numpy()]

    _same(_both(run))


def test_recorder_both_models():
    n = recorder_kernels.N

    def run(ag):
        scale, add, inc = recorder_kernels.kernels(ag)
        x, y = ag.array(np.zeros(n, np.float32)), ag.empty(n, np.float32)

        @ag.graph
        def step(x, y):
            inc[1, n](x, n)
            scale[1, n](x, y, 2.0, n)

        out = []
        for i in range(5):
            x[...] = np.full(n, i, np.float32)
            step(x, y)
            out += [y.numpy(), x.numpy()]
        return out

    _same(_both(run))


def test_interop_in_explicit_model():
    import cupy

    import asyncgpu as ag

    with ag.configure(backend="cuda", memory="explicit"):
        x = ag.array(np.arange(16, dtype=np.float32))      # host-current
        view = cupy.asarray(x)                             # export: copied in first
        np.testing.assert_array_equal(cupy.asnumpy(view), np.arange(16))
        view *= 2                                          # another library writes it
        cupy.cuda.get_current_stream().synchronize()
        ag.synchronize()
        np.testing.assert_array_equal(x.numpy(), 2 * np.arange(16))   # copied back
        imported = ag.asarray(cupy.arange(8, dtype=cupy.float32))
        np.testing.assert_array_equal(imported.numpy(), np.arange(8))
        cap = np.from_dlpack(x.numpy())                    # a host copy round-trips
        assert cap.sum() == 2 * np.arange(16).sum()


def test_chunked_pipelining_bit_for_bit():
    """VEC's square and B&S (elementwise='n') at 8 chunks equal whole launches and managed."""
    from benchmarks.workloads import WORKLOADS

    import asyncgpu as ag

    out = {}
    for memory, chunks in (("managed", 8), ("explicit", 1), ("explicit", 8)):
        with ag.configure(backend="cuda", memory=memory, copy_chunks=chunks):
            before = ag.statistics()
            vals = []
            for name in ("vec", "bs"):
                wl = WORKLOADS[name](ag, "medium")
                for _ in range(2):
                    wl.reset()
                    vals.append(wl.run(256, 528))
            ag.synchronize()
            kernels = ag.statistics().kernels - before.kernels
            out[(memory, chunks)] = (vals, kernels)
    assert out[("explicit", 8)][1] > out[("explicit", 1)][1] == out[("managed", 8)][1]
    ref = out[("explicit", 1)][0]
    for key, (vals, _) in out.items():
        for a, b in zip(vals, ref):
            if isinstance(a, np.ndarray):          # B&S: the same kernel on the same bytes
                assert a.tobytes() == b.tobytes(), key
            else:
                # VEC's float atomics add block partials in any order
                assert a == pytest.approx(b, rel=1e-4), key
