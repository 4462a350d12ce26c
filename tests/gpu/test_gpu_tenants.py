"""Tenants on the GPU: each tenant's streams carry its CUDA priority, results stay right when
tenants share data, split kernels (element-wise or by their grid) equal the whole launch, and
steps are timed on the device's clock."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, float64
from recorder_kernels import captured_graphs

import asyncgpu as ag
from asyncgpu.runtime.current import current_runtime

pytestmark = pytest.mark.gpu


def twice(x, y, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = 2.0 * x[i] + 1.0


def test_tenants_streams_carry_their_priority_and_shared_data_stays_ordered():
    with ag.configure(backend="cuda"):
        k = ag.kernel(const=["x"], out=["y"])(twice)
        n = 1 << 20
        x = ag.array(np.ones(n))
        y, z = ag.empty_like(x), ag.empty_like(x)
        for _ in range(5):
            with ag.tenant("gpu-detector", priority="high"):
                k[n // 256, 256](x, y, n)
            with ag.tenant("gpu-ranker"):
                k[n // 256, 256](y, z, n)          # reads the detector's output
        assert float(z.sum()) == 7.0 * n
        rt = current_runtime()
        least, greatest = rt.backend.stream_priorities()
        assert greatest < least                    # the device has priorities to give
        high = rt.tenant_index("gpu-detector", "high")
        normal = rt.tenant_index("gpu-ranker", "normal")
        priorities = {s.pool: s.handle.priority for s in rt.streams.streams}
        assert (priorities[high], priorities[normal]) == (greatest, least)
        ag.synchronize()
        stats = ag.tenants()
        assert (stats["gpu-detector"].steps, stats["gpu-detector"].pending) == (5, 0)
        assert all(0 < t < 1.0 for t in stats["gpu-ranker"].latencies_s)


def square(x, y, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] = x[i] * x[i]


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_a_split_kernel_equals_the_whole_launch_on_the_gpu(memory):
    with ag.configure(backend="cuda", memory=memory):
        k = ag.kernel(const=["x"], out=["y"], elementwise="n")(square)
        other = ag.kernel(const=["x"], out=["y"])(twice)
        n = (1 << 22) + 3                       # pieces of unequal length
        host = np.random.default_rng(0).random(n)
        x = ag.array(host)
        y = ag.empty_like(x)
        small_in, small_out = ag.array(np.ones(256)), ag.empty(256, np.float64)
        for _ in range(3):
            with ag.tenant(f"gpu-splitter-{memory}", split={"square": 4}):
                k[1024, 256](x, y, n)
            with ag.tenant(f"gpu-small-{memory}", priority="high"):
                other[1, 256](small_in, small_out, 256)
        np.testing.assert_array_equal(y.numpy(), host * host)
        assert small_out.numpy().tolist() == [3.0] * 256
        assert ag.tenants()[f"gpu-splitter-{memory}"].kernels == 12


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_a_recorded_split_kernel_equals_the_whole_launch_on_the_gpu(memory):
    with ag.configure(backend="cuda", memory=memory):
        k = ag.kernel(const=["x"], out=["y"], elementwise="n")(square)
        other = ag.kernel(const=["x"], out=["y"])(twice)
        n = (1 << 22) + 3                       # pieces of unequal length
        host = np.random.default_rng(1).random(n)
        x = ag.array(host)
        y = ag.empty_like(x)
        small_in, small_out = ag.array(np.ones(256)), ag.empty(256, np.float64)

        @ag.graph
        def step():
            k[1024, 256](x, y, n)

        outcomes = []
        for _ in range(3):
            with ag.tenant(f"gpu-recorded-splitter-{memory}", split={"square": 4}):
                step()
            outcomes.append(step.outcome)
            with ag.tenant(f"gpu-recorded-small-{memory}", priority="high"):
                other[1, 256](small_in, small_out, 256)
        np.testing.assert_array_equal(y.numpy(), host * host)
        assert small_out.numpy().tolist() == [3.0] * 256
        assert outcomes == ["recorded", "replayed", "replayed"]
        graphs = captured_graphs(step)
        assert graphs and all(f.graph.kernels == 4 for f in graphs)    # the pieces, captured


def test_a_tenant_held_to_one_stream_runs_in_issue_order_on_the_gpu():
    with ag.configure(backend="cuda"):
        k = ag.kernel(const=["x"], out=["y"])(twice)
        n = 1 << 20
        xs = [ag.array(np.full(n, float(i))) for i in range(4)]
        ys = [ag.empty_like(x) for x in xs]
        with ag.tenant("gpu-one-stream", streams=1):
            for x, y in zip(xs, ys):            # independent: one stream all the same
                k[n // 256, 256](x, y, n)
        rt = current_runtime()
        pool = rt.tenant_index("gpu-one-stream", "normal", 1)
        assert len({s.index for s in rt.streams.streams if s.pool == pool}) == 1
        assert [float(y[n - 1]) for y in ys] == [2.0 * i + 1.0 for i in range(4)]


SMOOTH_ROWS = r"""
extern "C" __global__ void smooth_rows(const double* x, double* y, int nrows, int ncols,
                                       int first, int total) {
    for (int r = blockIdx.x + first; r < nrows; r += total)
        for (int c = threadIdx.x; c < ncols; c += blockDim.x)
            y[r * ncols + c] = x[r * ncols + c] + (r > 0 ? x[(r - 1) * ncols + c] : 0.0);
}
"""

THREADS = 256


def block_sums(x, out, n, first, total):
    partial = cuda.shared.array(THREADS, float64)
    b = cuda.blockIdx.x + first
    t = cuda.threadIdx.x
    acc = 0.0
    for i in range(b * cuda.blockDim.x + t, n, total * cuda.blockDim.x):
        acc += x[i]
    partial[t] = acc
    cuda.syncthreads()
    if t == 0:
        s = 0.0
        for j in range(cuda.blockDim.x):
            s += partial[j]
        out[b] = s


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_grid_offset_kernels_split_in_pieces_equal_the_whole_launch_on_the_gpu(memory):
    with ag.configure(backend="cuda", memory=memory):
        smooth = ag.cuda_kernel(SMOOTH_ROWS, "smooth_rows", grid_offset=("first", "total"))
        sums = ag.kernel(const=["x"], out=["out"], grid_offset=("first", "total"))(block_sums)
        rows, cols, blocks = 4099, 512, 1000            # pieces of unequal size
        n = rows * cols
        host = np.random.default_rng(0).integers(-8, 8, (rows, cols)).astype(np.float64)
        x = ag.array(host.reshape(-1))
        whole_rows, split_rows = ag.empty_like(x), ag.empty_like(x)
        whole_sums, split_sums = ag.empty(blocks), ag.empty(blocks)
        smooth[blocks, 128](x, whole_rows, rows, cols, 0, blocks)
        sums[blocks, THREADS](x, whole_sums, n, 0, blocks)
        with ag.tenant(f"gpu-grid-splitter-{memory}",
                       split={"smooth_rows": 3, "block_sums": 4}):
            smooth[blocks, 128](x, split_rows, rows, cols, 0, blocks)
            sums[blocks, THREADS](x, split_sums, n, 0, blocks)
        expected = host.copy()
        expected[1:] += host[:-1]
        assert np.array_equal(whole_rows.numpy().reshape(rows, cols), expected)
        assert np.array_equal(split_rows.numpy(), whole_rows.numpy())
        assert np.array_equal(split_sums.numpy(), whole_sums.numpy())
        assert whole_sums.numpy().sum() == host.sum()           # (integers: exact)
        assert ag.tenants()[f"gpu-grid-splitter-{memory}"].kernels == 7


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_grid_stride_kernels_split_on_their_whole_grid_equal_the_whole_launch_on_the_gpu(memory):
    """A grid-stride kernel's pieces each run its whole grid as a part of a grid as many times
    larger: a CUDA C kernel over rows, and IMG's and DL's 2D kernels (Numba) as the workloads
    launch them."""
    from benchmarks.workloads import WORKLOADS

    with ag.configure(backend="cuda", memory=memory):
        smooth = ag.cuda_kernel(SMOOTH_ROWS, "smooth_rows", grid_offset=("first", "total"),
                                grid_stride=True)
        rows, cols, blocks = 4099, 512, 64              # a grid the device holds at once
        host = np.random.default_rng(1).integers(-8, 8, (rows, cols)).astype(np.float64)
        x = ag.array(host.reshape(-1))
        whole, split = ag.empty_like(x), ag.empty_like(x)
        smooth[blocks, 128](x, whole, rows, cols, 0, blocks)
        name = f"gpu-stride-splitter-{memory}"
        with ag.tenant(name, split={"smooth_rows": 5}):
            smooth[blocks, 128](x, split, rows, cols, 0, blocks)
        expected = host.copy()
        expected[1:] += host[:-1]
        assert np.array_equal(whole.numpy().reshape(rows, cols), expected)
        assert np.array_equal(split.numpy(), whole.numpy())
        assert ag.tenants()[name].kernels == 5
        for workload, split, kernels in (("img", {"gaussian_blur": 4, "sobel": 3}, 12 + 6 + 6),
                                         ("dl", {"conv2d": 4, "mean_pool": 3}, 16 + 6 + 2)):
            wl = WORKLOADS[workload](ag, "small")
            wl.reset()
            whole_step = wl.run(256, 132)
            with ag.tenant(f"gpu-{workload}-splitter-{memory}", split=split):
                wl.reset()
                split_step = wl.run(256, 132)
            if isinstance(whole_step, dict):            # (IMG: the images, pixel for pixel)
                assert whole_step.keys() == split_step.keys()
                for key in whole_step:
                    np.testing.assert_array_equal(split_step[key], whole_step[key])
            else:                   # (DL: a dot product summed by atomics, in any order)
                np.testing.assert_allclose(split_step, whole_step, rtol=1e-5)
            assert ag.tenants()[f"gpu-{workload}-splitter-{memory}"].kernels == kernels


def test_tenants_on_threads_held_to_one_host_core_give_their_results_and_get_their_cores_back():
    import os
    import threading

    from asyncgpu.core.plan import Plan

    with ag.configure(backend="cuda"):
        k = ag.kernel(const=["x"], out=["y"])(twice)
        n = 1 << 16
        xs = [ag.array(np.full(n, float(i))) for i in range(3)]
        ys = [ag.empty_like(x) for x in xs]
        scopes = [ag.tenant(f"gpu-core-{i}") for i in range(3)]
        sums: dict[int, list[float]] = {i: [] for i in range(3)}
        inside: list[set[int]] = []

        def step(i):
            with scopes[i]:
                k[n // 256, 256](xs[i], ys[i], n)
                sums[i].append(float(ys[i].sum()))
                inside.append(os.sched_getaffinity(0))

        for i in range(3):
            step(i)
        mine = os.sched_getaffinity(0)
        ag.regulate(plan=Plan(one_core=tuple(s.name for s in scopes)))
        threads = [threading.Thread(target=lambda i=i: [step(i) for _ in range(20)])
                   for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        cpu = current_runtime().one_core.cpu
        assert all(s == [(2.0 * i + 1.0) * n] * 21 for i, s in sums.items())
        assert inside[3:] == [{cpu}] * 60
        ag.regulate(plan="off")
        assert os.sched_getaffinity(0) == mine
