"""The recorder on a real GPU: recorded functions (Numba and CUDA C kernels on several streams)
replay equal to eager execution; host access waits for a replayed graph; dynamic work composes
with it; the recorded benchmark mode passes its checks."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numba import cuda

from benchmarks import harness
from benchmarks.workloads import WORKLOADS
from kernels import vec as K
from recorder_kernels import ADD_SCALED, captured_graphs, deferred_launches

pytestmark = pytest.mark.gpu

N = 1 << 20
SPIN = r"""extern "C" __global__ void spin(float* x, long long cycles, int n) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] += 1.0f;
}"""


def _kernels(ag):
    return (ag.kernel(K.square, **K.ANNOTATIONS["square"]),
            ag.cuda_kernel(ADD_SCALED, "add_scaled", out=["z"]))


@pytest.mark.parametrize("streams,order", [("opara", "topological"), ("nimble", "opara"),
                                           ("opara", "ios")])
@pytest.mark.parametrize("debug_hb", [False, True])
def test_recorded_fork_join_replays_like_eager(streams, order, debug_hb):
    import asyncgpu as ag

    with ag.configure(backend="cuda", debug_hb=debug_hb, graph_streams=streams,
                      graph_order=order):
        square, add = _kernels(ag)
        x, y, x1, y1, t, z = (ag.empty(N, np.float32) for _ in range(6))

        @ag.graph
        def step(a):
            square[64, 256](x, x1, N)                       # } independent
            square[64, 256](y, y1, N)                       # }
            add[64, 256](y1, x1, t, np.float32(a), N)       # t = y1 + a x1
            add[64, 256](x1, t, z, np.float32(3), N)        # z = x1 + 3 t

        rng = np.random.default_rng(0)
        before = ag.statistics()
        for i in range(5):
            x0, y0 = rng.random(N, dtype=np.float32), rng.random(N, dtype=np.float32)
            x[...], y[...] = x0, y0
            z[...] = np.nan
            step(2)
            x1w, y1w = x0 * x0, y0 * y0
            want = x1w + np.float32(3) * (y1w + np.float32(2) * x1w)
            np.testing.assert_allclose(z.numpy(), want, rtol=1e-6)
            assert step.outcome == ("recorded" if i == 0 else "replayed")
        after = ag.statistics()
        assert after.graphs_recorded - before.graphs_recorded == 1
        assert after.graphs_replayed - before.graphs_replayed == 4
        step.clear()


def test_static_replay_skips_the_body_on_gpu():
    import asyncgpu as ag

    with ag.configure(backend="cuda"):
        square, add = _kernels(ag)
        x, x1, z = (ag.empty(N, np.float32) for _ in range(3))
        runs = []

        @ag.graph(static=True)
        def step(a):
            runs.append(a)
            square[64, 256](x, x1, N)
            add[64, 256](x1, x, z, np.float32(a), N)        # z = x^2 + a x

        rng = np.random.default_rng(1)
        for i in range(5):
            x0 = rng.random(N, dtype=np.float32)
            x[...] = x0
            step(2.0)
            np.testing.assert_allclose(z.numpy(), x0 * x0 + np.float32(2) * x0, rtol=1e-6)
        assert len(runs) == 2 and step.outcome == "replayed"
        step.clear()


@pytest.mark.parametrize("debug_hb", [False, True])
def test_host_written_inputs_are_copied_inside_the_graph_on_gpu(debug_hb):
    """Explicit memory: a replay copies the rewritten inputs itself (one node, no copy nodes),
    the graph for "x stays on the device" is another variant, results equal eager ones."""
    import asyncgpu as ag

    with ag.configure(backend="cuda", memory="explicit", debug_hb=debug_hb):
        square, add = _kernels(ag)
        x, y, x1, y1, z = (ag.empty(N, np.float32) for _ in range(5))

        @ag.graph
        def step():
            square[64, 256](x, x1, N)
            square[64, 256](y, y1, N)
            add[64, 256](x1, y1, z, np.float32(2), N)        # z = x^2 + 2 y^2

        rng = np.random.default_rng(2)
        start = ag.statistics().graphs_recorded
        for i in range(8):
            x0 = rng.random(N, dtype=np.float32)
            x[...] = x0
            if i in (0, 6):                                  # y host-current too
                y0 = rng.random(N, dtype=np.float32)
                y[...] = y0
            before = ag.statistics()
            step()
            after = ag.statistics()
            np.testing.assert_allclose(z.numpy(), x0 * x0 + np.float32(2) * (y0 * y0),
                                       rtol=1e-6)
            if 1 <= i <= 5:
                assert step.outcome == "replayed"
            if 2 <= i <= 5:     # (the capture may copy x in once more, to time the launches)
                copied_back = after.copies_to_host - before.copies_to_host  # z: read back
                assert copied_back <= 1
                assert after.nodes - before.nodes == 1 + copied_back
                assert after.bytes_to_device - before.bytes_to_device == x.nbytes
        assert step.outcome == "replayed"
        assert ag.statistics().graphs_recorded - start == 2  # {x} and {x, y} host-current
        step.clear()


@pytest.mark.parametrize("debug_hb", [False, True])
def test_replays_copy_back_what_the_host_reads_on_gpu(debug_hb):
    """Explicit memory: once the host has fetched a replay's outputs, the next replays copy
    them back behind the graph and the reads wait for those copies (no fetch), behind kernels
    that spin 1-3 ms; an eager kernel writing an output afterwards and a partial host write
    still win."""
    import asyncgpu as ag

    with ag.configure(backend="cuda", memory="explicit", debug_hb=debug_hb):
        square, add = _kernels(ag)
        spin = ag.cuda_kernel(SPIN, "spin")
        x, x1 = ag.empty(N, np.float32), ag.empty(N, np.float32)
        state = [ag.zeros(4096, np.float32) for _ in range(3)]
        out = [ag.empty(4096, np.float32) for _ in range(3)]

        @ag.graph
        def step():
            square[64, 256](x, x1, N)
            for i, (s, t) in enumerate(zip(state, out)):
                spin[4, 256](s, 2_000_000 * (i + 1), 4096)   # s += 1 after 1, 2, 3 ms
                add[4, 256](s, x1, t, np.float32(i + 1), 4096)  # t = s + (i + 1) x^2

        rng = np.random.default_rng(3)
        for it in range(1, 7):
            x0 = rng.random(N, dtype=np.float32)
            x[...] = x0
            sq = x0[:4096] * x0[:4096]
            before = ag.statistics().copies_to_host
            step()
            issued = ag.statistics().copies_to_host - before
            for i, t in enumerate(out):
                np.testing.assert_allclose(t.numpy(), it + np.float32(i + 1) * sq, rtol=1e-6)
            if it >= 4:
                assert step.outcome == "replayed"
                assert issued == 3                       # all three copied back by the replay
                assert ag.statistics().copies_to_host - before == 3     # no fetch after it
        step()
        add[4, 256](x1, x1, out[0], np.float32(1), 4096)  # an eager writer after the copy back
        np.testing.assert_allclose(out[0].numpy(), 2 * sq, rtol=1e-6)
        step()
        out[1][7] = -1.0                                 # a partial host write after it
        got = out[1].numpy()
        assert got[7] == -1.0
        np.testing.assert_allclose(np.delete(got, 7), np.delete(8 + 2 * sq, 7), rtol=1e-6)
        step.clear()


def test_host_read_waits_for_a_replayed_graph():
    import asyncgpu as ag

    with ag.configure(backend="cuda"):
        spin = ag.cuda_kernel(SPIN, "spin")
        x = ag.zeros(1024, np.float32)

        @ag.graph
        def slow():
            spin[1, 32](x, 20_000_000, 1024)                 # ~10 ms on an H100
            spin[1, 32](x, 20_000_000, 1024)

        slow()
        slow()
        ag.synchronize()
        before = ag.statistics().host_syncs
        slow()                                               # replay: returns at once
        assert slow.outcome == "replayed"
        assert ag.statistics().host_syncs == before          # the replay waited for nothing
        value = float(x[5])                                  # must wait for both kernels
        assert value == 6.0
        assert ag.statistics().host_syncs["host-read"] == before.get("host-read", 0) + 1


def test_steady_segments_launch_at_their_last_launch_on_gpu():
    """From a segment's third run its graph is launched by its last launch, while the body goes
    on; an input the host wrote after the previous launch is still copied in."""
    import asyncgpu as ag

    with ag.configure(backend="cuda"):
        spin = ag.cuda_kernel(SPIN, "spin")
        x = ag.zeros(1024, np.float32)
        inside = []

        @ag.graph(split=True)
        def step(write):
            spin[4, 256](x, 0, 1024)                         # x += 1
            inside.append(ag.statistics().graphs_replayed)
            if write:
                x[...] = 5                                   # after the segment's launch
            else:
                ag.synchronize()

        base = ag.statistics().graphs_replayed
        values = []
        for write in (False, True, False, False):
            step(write)
            values.append(float(x[0]))
        assert values == [1.0, 5.0, 6.0, 7.0]
        assert [n - base for n in inside] == [0, 0, 2, 3]


def test_dynamic_work_composes_with_replays():
    import asyncgpu as ag

    with ag.configure(backend="cuda"):
        square, add = _kernels(ag)
        w = ag.array(np.full(N, 2, np.float32))
        x, y, z = (ag.empty(N, np.float32) for _ in range(3))

        @ag.graph
        def step():
            square[64, 256](x, y, N)                         # y = x^2

        for i in range(4):
            add[64, 256](w, w, x, np.float32(0), N)         # dynamic write of x (x = 2)
            step()
            add[64, 256](y, y, z, np.float32(1), N)         # dynamic read of y after it
            np.testing.assert_array_equal(z.numpy(), np.full(N, 8, np.float32))


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_workload_small_in_recorded_mode(name):
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    with ag.configure(backend="cuda"):
        num_blocks = 4 * current_runtime().backend.sm_count
        results = harness.bench_workload(ag, WORKLOADS[name], "small",
                                         ("serial", "recorded", "recorded_static"), [256],
                                         num_blocks,
                                         warmup=1, iterations=3, inputs="streaming")
        assert ag.statistics().graphs_replayed > 0
    bad = [(r.mode, r.message) for r in results if not r.ok]
    assert not bad


def test_inception_small_replays_correctly_under_every_configuration():
    import asyncgpu as ag
    from benchmarks import inception

    with ag.configure(backend="cuda"):
        m = inception.measure(ag, "small", iterations=5)
    assert m["kernels"] == 42
    for key, v in m.items():
        if isinstance(v, dict):
            assert v["median_ms"] > 0, key


def test_replay_micro_benchmark_on_gpu():
    import asyncgpu as ag
    from benchmarks import replay

    with ag.configure(backend="cuda"):
        m = replay.measure(ag, (10, 100), iterations=10)
    # a replay issues one graph launch per call: far less host time than 100 launches
    assert m["independent/100"]["recorded_host_us"] < m["independent/100"]["eager_host_us"] * 2


def test_stage_timer_measures_classes_without_side_effects():
    """Timing at capture runs the kernels on scratch copies: the program's arrays keep their
    values; a streaming kernel is memory-bound, a spinning one compute-bound."""
    import asyncgpu as ag
    from asyncgpu.recorder import profile as _graph_profile

    with ag.configure(backend="cuda"):
        square, add = _kernels(ag)
        spin = ag.cuda_kernel(SPIN, "spin")
        big = 1 << 24
        x = ag.array(np.ones(big, np.float32))
        y = ag.array(np.full(big, 2, np.float32))
        z = ag.array(np.full(big, np.nan, np.float32))
        w = ag.zeros(32, np.float32)
        def body():
            add[1024, 256](x, y, z, np.float32(1), big)      # 192 MiB streamed
            spin[1, 32](w, 4_000_000, 32)                    # ~2 ms of clock64, 256 bytes

        rt, launches = deferred_launches(body, "timing")
        be = rt.backend
        with _graph_profile.stage_timer(rt, be, launches) as timer:
            assert timer is not None and timer.peak_bandwidth > 1e11
            classes = _graph_profile.launch_classes(rt, be, launches, timer)
            both = timer.time(((0,), (1,)))
            assert both > 0
        assert classes == ["memory", "compute"]
        assert np.isnan(z.numpy()).all() and not w.numpy().any()


def test_timing_gate_holds_each_run_and_reopens_after_a_failure():
    """The stage timer's runs wait behind a gate the host opens once they are enqueued (so
    one-block launches are timed as short as they run, and a graph of ten of them is folded by
    the lane budget); a launch that fails mid-run still opens it (the device is not held).
    The budget is set, not measured: beside other test processes on the GPU, a branch's
    measured host cost and the launches' times vary too much to decide a fold."""
    import asyncgpu as ag
    from asyncgpu.recorder import profile as _graph_profile
    from recorder_kernels import N, kernels

    with ag.configure(backend="cuda", graph_lane_cost_us=1000.0):
        scale, _, _ = kernels(ag)
        xs = [ag.array(np.full(N, i, np.float32)) for i in range(10)]
        ys = [ag.empty(N, np.float32) for _ in range(10)]

        def body():
            for x, y in zip(xs, ys):
                scale[1, N](x, y, np.float32(2), N)

        rt, launches = deferred_launches(body, "gate")
        with _graph_profile.stage_timer(rt, rt.backend, launches) as timer:
            gate = timer._gate
            assert gate is not None
            assert timer.time(((0,),)) > 0
            good = timer._launches[3]

            def broken(stream):
                raise RuntimeError("launch refused")

            timer._launches[3] = broken
            with pytest.raises(RuntimeError, match="launch refused"):
                timer.time(((2, 3),))
            timer._launches[3] = good
            assert gate.flag[0] == 1                    # reopened: the device is not held
            ag.synchronize()
            assert gate.flag[0] == 1

        step = ag.graph(body)
        for _ in range(3):
            step()
        assert step.outcome == "replayed"
        for i, y in enumerate(ys):
            np.testing.assert_array_equal(y.numpy(), np.full(N, 2 * i, np.float32))
        lanes = {f.lanes for f in captured_graphs(step)}
        assert lanes and max(lanes) < 10
        step.clear()
        # the branch cost the budget used: measured once (host time of a graph launch)
        cost = rt.backend.lane_cost_s()
        assert cost >= 0 and rt.backend.lane_cost_s() == cost     # measured once, then kept


def test_ios_order_replays_inception_tiny_and_small():
    """The ios order on INCEPTION: tiny is one search part, small is cut into parts."""
    import asyncgpu as ag
    from benchmarks import inception

    with ag.configure(backend="cuda"):
        for scale in ("tiny", "small"):
            m = inception.measure(ag, scale, iterations=3,
                                  configs=(("single", "topological"), ("ios", "ios")))
            assert m["ios/ios"]["median_ms"] > 0


def test_captured_library_calls_replay_on_gpu():
    """ufuncs and reductions captured with the kernels: no eager fallback (warnings are
    errors), replays equal NumPy, and memory CuPy takes for temporaries during the capture is
    never handed out again while the graph exists. A cuBLAS matmul (which CuPy refuses to call
    during a capture) ends the segment with a warning naming it, and its result is right."""
    import warnings

    import asyncgpu as ag
    import asyncgpu.cupy as acp

    with ag.configure(backend="cuda"):
        square, add = _kernels(ag)
        rng = np.random.default_rng(7)
        x = ag.empty(N, np.float32)
        y = ag.empty(N, np.float32)
        m0 = rng.random((256, 256), dtype=np.float32)
        m = ag.array(m0)

        @ag.graph
        def step():
            r = acp.sqrt(x)
            square[64, 256](r, y, N)                         # y = x again
            total = y.sum()
            p = acp.multiply(m, m)
            col = acp.max(p, axis=0)
            return total, p, col

        @ag.graph
        def with_matmul():
            q = acp.sqrt(m)
            return acp.matmul(q, q)

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for i in range(5):
                x0 = rng.random(N, dtype=np.float32)
                x[...] = x0
                total, p, col = step()
                # eager allocations between replays must not land in the graph's memory
                others = [ag.array(np.full(n, 5, np.float32)) for n in (1, 1000, 1 << 16)]
                np.testing.assert_allclose(y.numpy(), x0, rtol=1e-5)
                np.testing.assert_allclose(float(total), float(x0.sum(dtype=np.float64)),
                                           rtol=1e-4)
                np.testing.assert_allclose(p.numpy(), m0 * m0, rtol=1e-6)
                np.testing.assert_allclose(col.numpy(), (m0 * m0).max(axis=0), rtol=1e-6)
                assert step.outcome == ("recorded" if i == 0 else "replayed")
                assert all((o.numpy() == 5).all() for o in others)
        step.clear()
        q0 = np.sqrt(m0)
        for _ in range(3):
            with pytest.warns(UserWarning, match="matmul.*cuBLAS"):
                got = with_matmul()
            np.testing.assert_allclose(got.numpy(), q0 @ q0, rtol=1e-4)
        with_matmul.clear()


@pytest.mark.parametrize("source", ["numba", "cuda_c"])
def test_a_kernel_prepared_by_an_earlier_runtime_is_captured_by_a_later_one(source):
    """A kernel outlives runtimes: the later runtime's capture must launch it through its own
    backend's calls (the earlier one's launch through one-node graphs, which a capture
    refuses)."""
    import asyncgpu as ag

    if source == "numba":
        kernel = ag.kernel(const=["x"], out=["y"])(_twice)
    else:
        kernel = ag.cuda_kernel(TWICE_C, "twice_c", out=["y"])
    for _ in range(2):          # two runtimes, one kernel
        with ag.configure(backend="cuda"):
            x = ag.array(np.arange(256, dtype=np.float64))
            y = ag.empty_like(x)

            @ag.graph
            def step():
                kernel[1, 256](x, y, 256)

            with warnings.catch_warnings():
                warnings.simplefilter("error")          # no fall back to eager
                for _ in range(3):
                    step()
            assert step.outcome == "replayed"
            assert y.numpy().tolist() == (2 * np.arange(256) + 1).tolist()


def _twice(x, y, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = 2.0 * x[i] + 1.0


TWICE_C = r"""extern "C" __global__ void twice_c(const double* x, double* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0 * x[i] + 1.0;
}"""
