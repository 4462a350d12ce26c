"""CUDA graphs on a real GPU: capture/replay of a multi-stream fork/join with Numba and CuPy
RawKernel kernels equals eager execution; capture-breaking calls raise and leave the streams
usable; the cudagraph benchmark mode passes its checks."""

from __future__ import annotations

import numpy as np
import pytest

from asyncgpu.core.errors import CaptureError
from benchmarks import harness
from benchmarks.handopt import Hand
from benchmarks.workloads import WORKLOADS
from kernels import vec as K
from recorder_kernels import ADD_SCALED

pytestmark = pytest.mark.gpu

N = 1 << 20


def _schedule(be, h, k, arrays, fork, join):
    """s0: square(x); s1: square(y), then RawKernel t = y1 + 2 x1 after s0; s0: z = x1 + 3 t."""
    x, y, x1, y1, t, z = arrays
    s0, s1 = h.stream(0), h.stream(1)
    be.record(fork, s0)
    be.wait(s1, fork)
    h.launch(k["square"], 64, 256, s0, x, x1, N)
    h.launch(k["square"], 64, 256, s1, y, y1, N)
    e = h.event()
    be.record(e, s0)
    be.wait(s1, e)
    h.launch(k["add"], 64, 256, s1, y1, x1, t, np.float32(2), N)
    be.record(join, s1)
    be.wait(s0, join)
    h.launch(k["add"], 64, 256, s0, x1, t, z, np.float32(3), N)


@pytest.mark.parametrize("debug_hb", [False, True])
def test_fork_join_capture_replays_like_eager_numba_and_rawkernel(debug_hb):
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    with ag.configure(backend="cuda", memory="managed", debug_hb=debug_hb):
        rt = current_runtime()
        be, h = rt.backend, Hand(rt)
        k = {"square": ag.kernel(K.square, **K.ANNOTATIONS["square"]),
             "add": ag.cuda_kernel(ADD_SCALED, "add_scaled", out=["z"])}
        rng = np.random.default_rng(0)
        inputs = [(rng.random(N, dtype=np.float32), rng.random(N, dtype=np.float32))
                  for _ in range(3)]
        arrays = [ag.empty(N, np.float32) for _ in range(6)]
        x, y, z = arrays[0], arrays[1], arrays[5]
        fork, join = h.event(), h.event()
        eager = []
        for x0, y0 in inputs:              # eager first: compiles and loads every module
            x[...], y[...] = x0, y0
            _schedule(be, h, k, arrays, fork, join)
            h.sync()
            eager.append(z.numpy())
        s0, s2 = h.stream(0), h.stream(2)
        be.begin_capture(s0)
        _schedule(be, h, k, arrays, fork, join)
        g = be.end_capture(s0)
        assert g.kernels == 4 and g.lanes == 2
        for _ in range(2):                  # replay twice per input, on a third stream
            for (x0, y0), want in zip(inputs, eager):
                z[...] = np.full(N, np.nan, np.float32)   # (a host write: done on return)
                x[...], y[...] = x0, y0
                be.prefetch(x._alloc.buffer, s2)
                be.prefetch(y._alloc.buffer, s2)
                be.graph_launch(g, s2)
                h.sync_stream(s2)
                np.testing.assert_array_equal(z.numpy(), want)
        be.graph_destroy(g)


def test_capture_breaking_calls_raise_and_streams_stay_usable():
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    with ag.configure(backend="cuda"):
        rt = current_runtime()
        be, h = rt.backend, Hand(rt)
        square = ag.kernel(K.square, **K.ANNOTATIONS["square"])
        x = ag.array(np.arange(N, dtype=np.float32))
        y = ag.empty(N, np.float32)
        s0, s1 = h.stream(0), h.stream(1)
        h.launch(square, 64, 256, s0, x, y, N)     # warm: module loaded before any capture
        h.sync()
        for forbidden in ("prefetch", "host_wait", "synchronize"):
            be.begin_capture(s0)
            h.launch(square, 64, 256, s0, x, y, N)
            with pytest.raises(CaptureError, match="invalidates a capture"):
                if forbidden == "prefetch":
                    be.prefetch(x._alloc.buffer, s0)
                elif forbidden == "host_wait":
                    e = h.event()
                    be.record(e, s0)
                    be.host_wait(e)
                else:
                    be.synchronize()
            with pytest.raises(CaptureError, match="discarded"):
                be.end_capture(s0)
            assert not s0.is_capturing()
        y[...] = 0
        # (a fill node on the device, 4 MiB: the backend-level graph launch below is not the
        # runtime's and does not wait for it)
        ag.synchronize()
        be.begin_capture(s0)
        h.launch(square, 64, 256, s0, x, y, N)
        g = be.end_capture(s0)
        be.graph_launch(g, s1)
        h.sync_stream(s1)
        np.testing.assert_array_equal(y.numpy(), np.arange(N, dtype=np.float32) ** 2)


@pytest.mark.parametrize("inputs", ["streaming", "resident"])
def test_vec_small_in_cudagraph_mode(inputs):
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    with ag.configure(backend="cuda"):
        num_blocks = 4 * current_runtime().backend.sm_count
        results = harness.bench_workload(ag, WORKLOADS["vec"], "small",
                                         ("serial", "handopt", "cudagraph"), [256], num_blocks,
                                         warmup=1, iterations=3, inputs=inputs)
    bad = [(r.mode, r.message) for r in results if not r.ok]
    assert not bad
    assert all(len(r.times_s) == 3 for r in results)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_workload_small_in_cudagraph_mode(name):
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    with ag.configure(backend="cuda"):
        num_blocks = 4 * current_runtime().backend.sm_count
        results = harness.bench_workload(ag, WORKLOADS[name], "small",
                                         ("serial", "cudagraph"), [128], num_blocks,
                                         warmup=1, iterations=2, inputs="streaming")
    bad = [(r.mode, r.message) for r in results if not r.ok]
    assert not bad


@pytest.mark.parametrize("external_waits", [True, False])
def test_vec_small_graph_hand_replays(external_waits):
    """GraphHand directly, both ways of ordering the prefetches before the graph's kernels."""
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    from benchmarks.cudagraph import GraphHand

    with ag.configure(backend="cuda"):
        rt = current_runtime()
        wl = WORKLOADS["vec"](ag, "small")
        hand = GraphHand(rt, external_waits=external_waits)
        num_blocks = 4 * rt.backend.sm_count
        wl.reset()
        ag.synchronize()
        hand.begin()
        wl.run_handopt(hand, 256, num_blocks)       # eager: compile and load modules
        ag.synchronize()
        hand.capture(wl.run_handopt, 256, num_blocks)
        xwaits = sum(kind == "xwait" for g in hand.graphs for kind, _, _ in g.ops)
        assert (xwaits > 0) == external_waits
        for _ in range(3):
            wl.reset()
            ag.synchronize()
            ok, message = wl.check(hand.replay(wl.run_handopt, 256, num_blocks))
            assert ok, message
        hand.release()
