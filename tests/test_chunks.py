"""Chunked pipelining (``elementwise=`` kernels in the explicit memory model) on the sim backend.

A chunked launch must give exactly the unchunked result under adversarial orders (the checker
on), a kernel not declared element-wise is never split, and an annotation whose contract cannot
hold is refused with a clear error before anything is enqueued.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda

from asyncgpu.runtime import chunks as _chunks

AFFINE_SRC = r'''
extern "C" __global__ void affine(const float* x, float* y, float a, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i] + 1.0f;
}
'''


def _affine_twin(x, y, a, n):
    y[:n] = np.float32(a) * x[:n] + np.float32(1)


def _kernels(ag, elementwise):
    affine = ag.cuda_kernel(AFFINE_SRC, "affine", out=["y"], sim=_affine_twin,
                            elementwise="n" if elementwise else False)

    @ag.kernel(const=["x"], elementwise=elementwise)
    @cuda.jit
    def bump(x, y):                  # rows of a 2-D array, y += x, grid-stride
        for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
            for j in range(x.shape[1]):
                y[i, j] += x[i, j]

    return affine, bump


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(_chunks, "MIN_CHUNK_BYTES", 8)


def _program(ag, elementwise, n=40, rows=12):
    affine, bump = _kernels(ag, elementwise)
    rng = np.random.default_rng(5)
    xh = rng.integers(-9, 9, n).astype(np.float32)
    x, y = ag.array(xh), ag.empty(n, np.float32)
    affine[4, 8](x, y, 3.0, n)
    m = ag.array(rng.integers(-9, 9, (rows, 3)).astype(np.float32))
    acc = ag.array(np.ones((rows, 3), np.float32))
    bump[2, 4](m, acc)
    m[...] = 2 * m.numpy()          # host-current again: the next launch copies (chunked) again
    bump[2, 4](m, acc)
    x[...] = -xh
    affine[4, 8](x, y, 0.5, n)
    return [y.numpy(), acc.numpy(), m.numpy()]


@pytest.mark.parametrize("strategy", ["random", "reverse", "starve", "pct"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chunked_equals_unchunked(chunk_always, strategy, seed):
    import asyncgpu as ag

    with ag.configure(backend="sim", execution="sync", sim_strategy="eager", sim_seed=0,
                      memory="explicit", copy_chunks=1):
        expected = _program(ag, True)
    with ag.configure(backend="sim", sim_strategy=strategy, sim_seed=seed, memory="explicit",
                      copy_chunks=4):
        before = ag.statistics()
        got = _program(ag, True)
        after = ag.statistics()
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)
    # 4 launches, each split in 4: 16 kernel chunks; chunk copies: x (4), m and acc (8: both
    # host-current at the first bump), m only at the second (acc is on the device), x (4)
    assert after.kernels - before.kernels == 16
    assert after.copies_to_device - before.copies_to_device == 20


@pytest.mark.parametrize("strategy", ["random", "reverse", "starve", "pct"])
def test_a_launch_behind_a_running_copy_in_runs_whole(small_chunks, strategy):
    # streaming launches one after another: the first is cut in chunks; the next one would
    # share the link with its copies anyway, so it runs whole; once those copies are done the
    # link is free and a launch is cut in chunks again
    import asyncgpu as ag

    affine, _ = _kernels(ag, True)
    with ag.configure(backend="sim", sim_seed=3, sim_strategy=strategy, memory="explicit",
                      copy_chunks=4):
        hosts = [np.arange(64, dtype=np.float32) + c for c in range(3)]
        xs = [ag.array(h) for h in hosts]
        ys = [ag.empty(64, np.float32) for _ in hosts]
        counts = []
        for i, (x, y) in enumerate(zip(xs, ys)):
            if i == 2:
                ag.synchronize()
            before = ag.statistics().kernels
            affine[4, 8](x, y, 2.0, 64)
            counts.append(ag.statistics().kernels - before)
        for h, y in zip(hosts, ys):
            np.testing.assert_array_equal(y.numpy(), 2.0 * h + 1.0)   # as serial
    assert counts == [4, 1, 4]


@pytest.mark.parametrize("strategy,devices", [("random", 2), ("reverse", 2), ("random", 4)])
def test_on_several_devices_a_launch_behind_a_running_copy_to_its_device_runs_in_chunks(
        small_chunks, strategy, devices):
    # the program spreads its launches over the devices: the first on each device runs whole
    # (its chunks would hold back the next device's first copy); the second waits for that
    # device's link anyway, and in chunks its kernel overlaps its own copy
    import asyncgpu as ag

    affine, _ = _kernels(ag, True)
    # (sim_tick 0: the simulated device runs nothing until a host wait, so every copy issued
    # before is still running, as on a GPU whose links take milliseconds)
    with ag.configure(backend="sim", sim_seed=3, sim_strategy=strategy, sim_tick=0.0,
                      memory="explicit", copy_chunks=4, sim_devices=devices, devices=devices):
        hosts = [np.arange(64, dtype=np.float32) + c for c in range(2 * devices)]
        xs = [ag.array(h) for h in hosts]
        ys = [ag.empty(64, np.float32) for _ in hosts]
        before = ag.statistics()
        counts = []
        for x, y in zip(xs, ys):
            k = ag.statistics().kernels
            affine[4, 8](x, y, 2.0, 64)
            counts.append(ag.statistics().kernels - k)
        after = ag.statistics()
        for h, y in zip(hosts, ys):
            np.testing.assert_array_equal(y.numpy(), 2.0 * h + 1.0)
    assert sorted(counts) == [1] * devices + [4] * devices
    # per device, kernels and copies: one launch whole, one in 4 chunks
    assert sorted(after.placed.values()) == [5] * devices
    assert after.copies_to_device - before.copies_to_device == 5 * devices


def test_a_small_copy_in_still_running_does_not_stop_the_chunks(small_chunks):
    # a few bytes copied in just before (a parameter the previous launch read) hold the link
    # for microseconds: the large launch behind them is still cut in chunks
    import asyncgpu as ag

    affine, bump = _kernels(ag, True)
    with ag.configure(backend="sim", sim_seed=3, sim_strategy="starve", memory="explicit",
                      copy_chunks=4):
        tiny = ag.array(np.ones((1, 1), np.float32))           # 4 bytes, under 8 a chunk
        out = ag.zeros((1, 1), np.float32)
        x, y = ag.array(np.arange(64, dtype=np.float32)), ag.empty(64, np.float32)
        bump[1, 1](tiny, out)                                   # copies tiny in
        before = ag.statistics().kernels
        affine[4, 8](x, y, 2.0, 64)
        assert ag.statistics().kernels - before == 4
        np.testing.assert_array_equal(y.numpy(), 2.0 * np.arange(64) + 1.0)


def test_not_elementwise_is_never_chunked(small_chunks):
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=0, memory="explicit", copy_chunks=4):
        before = ag.statistics()
        got = _program(ag, False)
        after = ag.statistics()
    assert after.kernels - before.kernels == 4
    assert after.copies_to_device - before.copies_to_device == 5   # x, m, acc, m, x: whole
    with ag.configure(backend="sim", execution="sync", sim_seed=0, memory="explicit"):
        expected = _program(ag, True)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)


def test_small_copies_and_managed_memory_are_not_chunked():
    import asyncgpu as ag

    for memory in ("managed", "explicit"):        # (explicit: below MIN_CHUNK_BYTES)
        with ag.configure(backend="sim", sim_seed=0, memory=memory, copy_chunks=4):
            before = ag.statistics()
            _program(ag, True)
            assert ag.statistics().kernels - before.kernels == 4


def test_sync_execution_does_not_chunk(small_chunks):
    # one node at a time: the chunks would only add nodes, with nothing to overlap
    import asyncgpu as ag

    with ag.configure(backend="sim", execution="sync", sim_seed=0, memory="explicit",
                      copy_chunks=4):
        before = ag.statistics()
        _program(ag, True)
        after = ag.statistics()
    assert after.kernels - before.kernels == 4
    assert after.copies_to_device - before.copies_to_device == 5


def test_chunk_copies_run_in_order_on_one_stream_beside_the_kernels(small_chunks):
    import asyncgpu as ag

    affine, _ = _kernels(ag, True)
    with ag.configure(backend="sim", sim_seed=0, memory="explicit", copy_chunks=4):
        x, y = ag.array(np.ones(64, np.float32)), ag.empty(64, np.float32)
        with ag.trace() as t:
            affine[4, 8](x, y, 2.0, 64)
        nodes = t.device_nodes
        assert [n.kind for n in nodes] == ["copy", "kernel"] * 4
        previous = previous_copy = None
        for copy, kernel in zip(nodes[::2], nodes[1::2]):
            # by data its own chunk's copy only; in order after the chunk before
            assert {pid for pid, r, _ in kernel.parents if r == "RAW"} == {copy.id}
            assert {pid for pid, r, _ in kernel.parents if r == "split"} == (
                set() if previous is None else {previous.id})
            # each copy after the one before only (never after a kernel): the copies go on
            # beside the kernels, in order
            assert [(pid, r) for pid, r, _ in copy.parents] == (
                [] if previous_copy is None else [(previous_copy.id, "split")])
            previous, previous_copy = kernel, copy
        copies, kernels = nodes[::2], nodes[1::2]
        assert len({n.stream for n in copies[1:]}) == 1
        assert len({n.stream for n in kernels}) == 1
        assert copies[1].stream != kernels[0].stream
        # on the logical clock: chunk k's copy ends before chunk k + 1's copy starts
        for a, b in zip(copies, copies[1:]):
            assert a.end_s <= b.start_s
        np.testing.assert_array_equal(y.numpy(), np.full(64, 3, np.float32))


@settings(max_examples=60, deadline=None)
@given(length=st.integers(1, 500), chunks=st.integers(1, 20))
def test_ranges_partition_in_order(length, chunks):
    rs = _chunks.ranges(length, chunks)
    assert rs[0][0] == 0 and rs[-1][1] == length
    assert all(a < b for a, b in rs)
    assert all(rs[k][1] == rs[k + 1][0] for k in range(len(rs) - 1))
    sizes = [b - a for a, b in rs]
    assert max(sizes) - min(sizes) <= 1 and len(rs) == min(chunks, length)


def test_annotations_that_cannot_hold_are_refused():
    import asyncgpu as ag

    with pytest.raises(ag.SignatureError, match="elementwise='n'"):
        ag.cuda_kernel(AFFINE_SRC, "affine", elementwise=True)
    with pytest.raises(ag.SignatureError, match="elementwise names 'm' .*which is no parameter"):
        ag.cuda_kernel(AFFINE_SRC, "affine", elementwise="m")
    with pytest.raises(ag.SignatureError, match="integer scalar"):
        ag.cuda_kernel(AFFINE_SRC, "affine", elementwise="a")
    with pytest.raises(ag.SignatureError, match="integer scalar"):
        ag.cuda_kernel(AFFINE_SRC, "affine", elementwise="x")


def test_launches_breaking_the_contract_are_refused_before_enqueue(small_chunks):
    import asyncgpu as ag

    affine, bump = _kernels(ag, True)
    with ag.configure(backend="sim", sim_seed=0, memory="explicit", copy_chunks=4):
        x, y = ag.array(np.ones(40, np.float32)), ag.empty(48, np.float32)
        before = ag.statistics()
        with pytest.raises(ag.ArgumentError, match="argument 1 'y'.*48 rows"):
            affine[4, 8](x, y[:48], 2.0, 40)
        with pytest.raises(ag.ArgumentError, match="argument 3 'n'.*element count"):
            affine[4, 8](x, y[:40], 2.0, 32)
        m = ag.array(np.ones((8, 4), np.float32))
        with pytest.raises(ag.ArgumentError, match="cannot be split"):
            bump[2, 4](m.T, ag.empty((4, 8), np.float32))
        assert ag.statistics().nodes == before.nodes
        affine[4, 8](x, y[:40], 2.0, 40)                 # the runtime is still usable
        np.testing.assert_array_equal(y[:40].numpy(), np.full(40, 3, np.float32))


def _scores(ag):
    @ag.kernel(const=["x", "w"], elementwise=True, broadcast=["w"])
    @cuda.jit
    def scores(x, w, r):            # r[i, k] = sum_q x[i, q] w[k, q]: w read whole by each row
        n, c = x.shape[0], w.shape[0]
        for t in range(cuda.grid(1), n * c, cuda.gridsize(1)):
            i, k = t // c, t % c
            s = 0.0
            for q in range(x.shape[1]):
                s += x[i, q] * w[k, q]
            r[i, k] = s

    return scores


def _scores_program(ag, rows=24, features=5, classes=3):
    rng = np.random.default_rng(7)
    xh = rng.integers(-4, 4, (rows, features)).astype(np.float32)
    wh = rng.integers(-4, 4, (classes, features)).astype(np.float32)
    x, w, r = ag.array(xh), ag.array(wh), ag.zeros((rows, classes), np.float32)
    scores = _scores(ag)
    scores[2, 8](x, w, r)
    x[...] = -xh                    # host-current again, w on the device by now
    scores[2, 8](x, w, r)
    return r.numpy(), -xh @ wh.T


@pytest.mark.parametrize("strategy", ["random", "reverse", "starve"])
def test_a_broadcast_array_is_read_whole_by_every_chunk(small_chunks, strategy):
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_strategy=strategy, sim_seed=3, memory="explicit",
                      copy_chunks=4):
        before = ag.statistics()
        got, expected = _scores_program(ag)
        after = ag.statistics()
    np.testing.assert_array_equal(got, expected)
    assert after.kernels - before.kernels == 8              # both launches in 4 chunks
    # w once, whole (it is current on the device at the second launch); x in 4 chunks twice,
    # r (read and written: not out) in 4 chunks at the first launch
    assert after.copies_to_device - before.copies_to_device == 1 + 4 + 4 + 4


def test_a_tenants_split_passes_a_broadcast_array_whole_to_every_piece():
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_strategy="random", sim_seed=1):
        with ag.tenant("ranker", split={"scores": 3}):
            before = ag.statistics()
            got, expected = _scores_program(ag)
            assert ag.statistics().kernels - before.kernels == 6
    np.testing.assert_array_equal(got, expected)


def test_broadcast_annotations_that_cannot_hold_are_refused():
    import asyncgpu as ag

    def scores(x, w, r):
        pass

    with pytest.raises(ag.SignatureError, match="not element-wise"):
        ag.kernel(scores, const=["x", "w"], broadcast=["w"])
    with pytest.raises(ag.SignatureError, match="'v', which is no parameter"):
        ag.kernel(scores, const=["x", "w"], elementwise=True, broadcast=["v"])
    with pytest.raises(ag.SignatureError, match="'w', which the kernel may write.*const"):
        ag.kernel(scores, const=["x"], elementwise=True, broadcast=["w"])
    with pytest.raises(ag.SignatureError, match="'n', the element-count parameter"):
        ag.cuda_kernel(AFFINE_SRC, "affine", elementwise="n", broadcast=["n"])
    with pytest.raises(ag.SignatureError, match="'a', a scalar parameter"):
        ag.cuda_kernel(AFFINE_SRC, "affine", elementwise="n", broadcast=["a"])


def test_a_broadcast_array_need_not_share_the_rows_but_the_others_must(small_chunks):
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=0, memory="explicit", copy_chunks=4):
        scores = _scores(ag)
        x, w = ag.array(np.ones((16, 2), np.float32)), ag.array(np.ones((3, 2), np.float32))
        before = ag.statistics()
        with pytest.raises(ag.ArgumentError, match="argument 2 'r'.*12 rows.*broadcast="):
            scores[2, 8](x, w, ag.zeros((12, 3), np.float32))
        assert ag.statistics().nodes == before.nodes
        r = ag.zeros((16, 3), np.float32)
        scores[2, 8](x, w, r)
        np.testing.assert_array_equal(r.numpy(), np.full((16, 3), 2, np.float32))
