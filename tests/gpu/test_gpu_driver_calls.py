"""``cudriver.DriverCalls`` against the real driver: the CUDA calls of a launch made straight into
the driver, and the one-node graph lanes (``single_node_graphs``).

What a user relies on: each call does what CuPy's call does (a kernel runs with its own
parameters, an event is recorded and queried, a stream waits, a graph runs); a call the driver
refuses raises CuPy's ``CUDADriverError`` carrying the error's name and status; a thread with
no current context works all the same; through lanes every kernel is enqueued exactly once on
its stream with its own parameters, even when the node's parameters change while earlier
launches still wait; whatever the graph path refuses is launched with ``cuLaunchKernel`` (whose
error is the one raised), and a lane the driver refuses to update where ``cuLaunchKernel``
works is not used again; beyond the lane table kernels launch the ordinary way; released lanes
are made again when needed. Skipped where the module is not built.
"""

from __future__ import annotations

import logging
import threading

import types

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

SOURCE = r'''
extern "C" __global__ void put(float* y, float v) {
    y[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
extern "C" __global__ void put2(float* y, float v) {
    y[blockIdx.x * blockDim.x + threadIdx.x] = 2.0f * v;
}
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}
'''
N = 32


@pytest.fixture
def env():
    """(cupy, cudriver, calls, kernels): a DriverCalls over the device's context, lanes off."""
    cupy = pytest.importorskip("cupy")
    from asyncgpu.backends.cuda.driver import compiled_driver

    cudriver = compiled_driver()
    if cudriver is None:
        pytest.skip("asyncgpu.backends.cuda.cudriver is not built")
    cupy.cuda.runtime.setDevice(0)
    cupy.cuda.runtime.free(0)           # (the primary context made current on this thread)
    module = cupy.RawModule(code=SOURCE)
    kernels = {name: module.get_function(name) for name in ("put", "put2", "spin")}
    calls = cudriver.DriverCalls(cupy)
    # (the tests count lanes: a making slowed by a loaded host must not stop new ones here;
    # the rule itself is tested with a threshold of its own)
    calls.slow_make_ns = 10**12
    yield cupy, cudriver, calls, kernels
    cupy.cuda.runtime.deviceSynchronize()
    calls.release_lanes()
    Params.kept.clear()


class Params:
    """A kernel's parameter buffer and cuLaunchKernel's ``extra`` array over it, kept alive."""

    kept: list = []

    def __init__(self, *values) -> None:
        raw = b"".join(np.asarray(v).tobytes() for v in values)
        self.buf = np.frombuffer(raw, np.uint8).copy()
        self.size = np.array([self.buf.nbytes], np.uint64)
        self.extra = np.array([1, self.buf.ctypes.data, 2, self.size.ctypes.data, 0], np.uint64)
        Params.kept.append(self)

    @property
    def ptr(self) -> int:
        return int(self.extra.ctypes.data)


def put(calls, kernel, y, value, stream, block=N, offset=0):
    """put(y + offset, value) on ``stream`` through ``calls.launch_kernel``."""
    params = Params(np.uint64(y.data.ptr + 4 * offset), np.float32(value))
    calls.launch_kernel(kernel.kernel.ptr, 1, 1, 1, block, 1, 1, 0, stream.ptr, params.ptr)


def spin(calls, kernels, stream, cycles=20_000_000):
    """A kernel that keeps ``stream`` busy (about 10 ms): later launches wait behind it."""
    params = Params(np.int64(cycles))
    calls.launch_kernel(kernels["spin"].kernel.ptr, 1, 1, 1, 1, 1, 1, 0, stream.ptr,
                        params.ptr)


def test_each_call_does_what_cupys_call_does(env):
    cupy, _, calls, kernels = env
    s1, s2 = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    y = cupy.zeros(N, np.float32)
    event = cupy.cuda.Event(disable_timing=True)
    spin(calls, kernels, s1)
    put(calls, kernels["put"], y, 1.0, s1)
    calls.event_record(event.ptr, s1.ptr)
    assert calls.event_done(event) is False          # the spin is still running
    calls.stream_wait(s2.ptr, event.ptr, 0)
    put(calls, kernels["put2"], y, 3.0, s2)         # after the first put, through the wait
    s2.synchronize()
    assert calls.event_done(event) is True
    assert cupy.asnumpy(y).tolist() == [6.0] * N


def pinned(cupy, n):
    """A float32 NumPy array of ``n`` in pinned host memory."""
    mem = cupy.cuda.alloc_pinned_memory(4 * n)
    return np.frombuffer(mem, np.float32, n)


def test_a_copy_follows_its_stream_and_the_stream_wait_returns_once_it_landed(env):
    cupy, _, calls, kernels = env
    stream = cupy.cuda.Stream(non_blocking=True)
    y = cupy.zeros(N, np.float32)
    host = pinned(cupy, N)
    spin(calls, kernels, stream)
    put(calls, kernels["put"], y, 5.0, stream)
    calls.memcpy_async(host.ctypes.data, y.data.ptr, y.nbytes, 2, stream.ptr)
    calls.stream_sync(stream.ptr)                   # waits for the spin, the put, the copy
    assert host.tolist() == [5.0] * N
    host[:] = 7.0                                   # and back: host to device
    calls.memcpy_async(y.data.ptr, host.ctypes.data, y.nbytes, 1, stream.ptr)
    calls.stream_sync(stream.ptr)
    calls.stream_sync(stream.ptr)                   # (done already: the query answers)
    assert cupy.asnumpy(y).tolist() == [7.0] * N


def test_a_graph_launch_runs_the_captured_work(env):
    cupy, _, calls, kernels = env
    stream = cupy.cuda.Stream(non_blocking=True)
    y = cupy.zeros(N, np.float32)
    stream.begin_capture()
    kernels["put"]((1,), (N,), (y, np.float32(4.0)), stream=stream)
    graph = stream.end_capture()
    calls.graph_launch(graph, stream)
    stream.synchronize()
    assert cupy.asnumpy(y).tolist() == [4.0] * N


def test_a_refused_call_raises_cupys_driver_error_with_its_name_and_status(env):
    cupy, cudriver, calls, kernels = env
    stream = cupy.cuda.Stream(non_blocking=True)
    y = cupy.zeros(4096, np.float32)
    with pytest.raises(cupy.cuda.driver.CUDADriverError, match="CUDA_ERROR_INVALID_VALUE") as info:
        put(calls, kernels["put"], y, 1.0, stream, block=4096)   # more threads than a block has
    assert info.value.status == 1
    # a CuPy without an error class of its own: the module's
    bare = types.SimpleNamespace(cuda=types.SimpleNamespace(driver=types.SimpleNamespace(
        launchKernel=cupy.cuda.driver.launchKernel), runtime=cupy.cuda.runtime))
    own = cudriver.DriverCalls(bare)
    with pytest.raises(cudriver.CUDADriverError, match="CUDA_ERROR_INVALID_VALUE") as info:
        put(own, kernels["put"], y, 1.0, stream, block=4096)
    assert info.value.status == 1
    stream.synchronize()                            # (nothing ran; the context is fine)


@pytest.mark.parametrize("first", ["launch on a lane's stream", "launch on a new stream",
                                   "record", "wait", "query", "graph"])
def test_a_thread_without_a_current_context_makes_the_calls_all_the_same(env, first):
    cupy, _, calls, kernels = env
    calls.single_node_graphs = True
    s0, s1 = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    event = cupy.cuda.Event(disable_timing=True)
    y, z = cupy.zeros(N, np.float32), cupy.zeros(N, np.float32)
    put(calls, kernels["put"], y, 1.0, s0)          # (the lane of put on s0)
    calls.event_record(event.ptr, s0.ptr)
    s1.begin_capture()
    kernels["put"]((1,), (N,), (z, np.float32(9.0)), stream=s1)
    graph = s1.end_capture()
    s0.synchronize()            # (a launch on s1 is not ordered after put's on s0)
    errors: list[BaseException] = []

    def on_a_new_thread() -> None:
        try:
            if first == "launch on a lane's stream":
                put(calls, kernels["put"], y, 7.0, s0)
            elif first == "launch on a new stream":
                put(calls, kernels["put"], y, 7.0, s1)
            elif first == "record":
                calls.event_record(event.ptr, s0.ptr)
            elif first == "wait":
                calls.stream_wait(s1.ptr, event.ptr, 0)
            elif first == "query":
                calls.event_done(event)
            else:
                calls.graph_launch(graph, s1)
                put(calls, kernels["put2"], y, 4.0, s1)     # and a launch after it
        except BaseException as exc:    # reported below
            errors.append(exc)

    t = threading.Thread(target=on_a_new_thread)
    t.start()
    t.join()
    cupy.cuda.runtime.deviceSynchronize()
    assert not errors, errors
    expected = {"launch on a lane's stream": 7.0, "launch on a new stream": 7.0,
                "graph": 8.0}.get(first, 1.0)
    assert cupy.asnumpy(y).tolist() == [expected] * N
    assert cupy.asnumpy(z).tolist() == [9.0 if first == "graph" else 0.0] * N


def test_lanes_enqueue_each_kernel_once_with_its_own_parameters(env):
    cupy, _, calls, kernels = env
    calls.single_node_graphs = True
    assert calls.single_node_graphs is True and calls.lanes_available is True
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(3)]
    ys = [cupy.zeros(N * 40, np.float32) for _ in streams]
    before = calls.lane_launches
    for s in streams:
        spin(calls, kernels, s)         # (the launches below wait while the nodes change)
    for i in range(40):
        for j, (s, y) in enumerate(zip(streams, ys)):
            kernel = kernels["put2" if i % 3 == 0 else "put"]
            put(calls, kernel, y, 100 * j + i, s, offset=N * i)
    cupy.cuda.runtime.deviceSynchronize()
    for j, y in enumerate(ys):
        got = cupy.asnumpy(y).reshape(40, N)
        for i in range(40):
            expected = (100 * j + i) * (2 if i % 3 == 0 else 1)
            assert got[i].tolist() == [expected] * N, (j, i)
    # every launch through a lane: the spin kernels' and the puts'
    assert calls.lane_launches - before == 3 + 3 * 40


def test_lanes_off_launch_with_cuLaunchKernel(env):
    cupy, _, calls, kernels = env
    calls.single_node_graphs = False
    stream = cupy.cuda.Stream(non_blocking=True)
    y = cupy.zeros(N, np.float32)
    put(calls, kernels["put"], y, 5.0, stream)
    stream.synchronize()
    assert calls.lane_launches == 0 and cupy.asnumpy(y).tolist() == [5.0] * N


def test_a_kernel_the_lane_refuses_raises_the_drivers_error_and_the_lane_goes_on(env):
    cupy, _, calls, kernels = env
    calls.single_node_graphs = True
    stream = cupy.cuda.Stream(non_blocking=True)
    y = cupy.zeros(4096, np.float32)
    put(calls, kernels["put"], y, 1.0, stream)
    assert calls.lane_launches == 1
    with pytest.raises(cupy.cuda.driver.CUDADriverError, match="CUDA_ERROR_INVALID_VALUE"):
        put(calls, kernels["put"], y, 2.0, stream, block=4096)
    put(calls, kernels["put"], y, 3.0, stream)
    stream.synchronize()
    assert calls.lane_launches == 2
    assert cupy.asnumpy(y[:N]).tolist() == [3.0] * N


def test_beyond_the_lane_table_kernels_launch_the_ordinary_way(env):
    cupy, cudriver, calls, kernels = env
    calls.single_node_graphs = True
    pairs = cudriver.LANES_MAX + 16
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(pairs // 2 + 1)]
    ys = cupy.zeros((2, len(streams), N), np.float32)
    for rounds in range(2):
        before = calls.lane_launches
        for k, name in enumerate(("put", "put2")):
            for j, s in enumerate(streams):
                put(calls, kernels[name], ys, j + rounds, s, offset=N * (k * len(streams) + j))
        cupy.cuda.runtime.deviceSynchronize()
        got = cupy.asnumpy(ys)
        for j in range(len(streams)):
            assert got[0, j].tolist() == [j + rounds] * N
            assert got[1, j].tolist() == [2.0 * (j + rounds)] * N
        # as many lanes as the table holds, found again on the second round
        assert calls.lane_launches - before == cudriver.LANES_MAX


def test_released_lanes_are_made_again_when_needed(env):
    cupy, _, calls, kernels = env
    calls.single_node_graphs = True
    stream = cupy.cuda.Stream(non_blocking=True)
    y = cupy.zeros(N, np.float32)
    spin(calls, kernels, stream)
    put(calls, kernels["put"], y, 1.0, stream)
    calls.release_lanes()                   # waits for the device, then destroys them
    assert cupy.asnumpy(y).tolist() == [1.0] * N
    put(calls, kernels["put"], y, 2.0, stream)
    stream.synchronize()
    assert calls.lane_launches == 3 and cupy.asnumpy(y).tolist() == [2.0] * N


def test_after_a_lane_whose_making_waited_no_new_lanes_are_made_until_the_device_is_synchronized(
        env, caplog):
    cupy, cudriver, calls, kernels = env
    calls.single_node_graphs = True
    assert calls.lanes_growing is True
    assert cudriver.DriverCalls(cupy).slow_make_ns == cudriver.SLOW_MAKE_NS == 1_000_000
    calls.slow_make_ns = 0              # every making counts as one that waited
    s1, s2 = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    y = cupy.zeros(3 * N, np.float32)
    with caplog.at_level(logging.INFO, logger="asyncgpu"):
        put(calls, kernels["put"], y, 1.0, s1)      # a lane made: the last one
    assert calls.lane_launches == 1 and calls.slow_lane_makes == 1
    assert calls.lanes_growing is False
    assert "no new lanes" in caplog.text
    put(calls, kernels["put"], y, 2.0, s2, offset=N)    # no lane on s2: cuLaunchKernel
    put(calls, kernels["put2"], y, 3.0, s1, offset=2 * N)   # nor for put2 on s1
    put(calls, kernels["put"], y, 4.0, s1)              # the lane made goes on
    cupy.cuda.runtime.deviceSynchronize()
    assert calls.lane_launches == 2
    assert cupy.asnumpy(y).tolist() == [4.0] * N + [2.0] * N + [6.0] * N
    calls.grow_lanes()                  # (the backend's, after a device-wide synchronize)
    assert calls.lanes_growing is True
    put(calls, kernels["put"], y, 5.0, s2, offset=N)    # a lane made, and growth stops again
    s2.synchronize()
    assert calls.lane_launches == 3 and calls.slow_lane_makes == 2
    assert calls.lanes_growing is False
    calls.slow_make_ns = 10**12
    calls.release_lanes()
    assert calls.lanes_growing is True
    put(calls, kernels["put2"], y, 5.0, s1, offset=2 * N)
    s1.synchronize()
    assert calls.lane_launches == 4 and calls.slow_lane_makes == 2
    assert cupy.asnumpy(y).tolist() == [4.0] * N + [5.0] * N + [10.0] * N
