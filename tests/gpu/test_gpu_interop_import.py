"""Other libraries' device arrays enter asyncgpu without a copy (``cuda`` backend).

CuPy arrays, Numba device arrays and PyTorch CUDA tensors: the imported Array has the
producer's device pointer, writes on either side are visible to the other after a
synchronization, the first use waits for the producer's stream, and Numba's Monte Carlo
example with xoroshiro states runs unchanged but for ``@ag.kernel``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda

pytestmark = pytest.mark.gpu


@pytest.fixture(params=["explicit", "managed"])
def ag(request):
    import asyncgpu

    with asyncgpu.configure(backend="cuda", memory=request.param):
        yield asyncgpu
        asyncgpu.synchronize()


def _add_one(ag):
    @ag.kernel
    def add_one(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] += 1
    return add_one


def _read(ag, a):
    """The host's view of an imported array: read directly with the explicit model; with the
    managed one, plain device memory has no host view (refused, explained), so through a copy
    on the device into asyncgpu's memory."""
    from asyncgpu.runtime.current import current_runtime

    if current_runtime().memory is None:
        with pytest.raises(ag.ArgumentError, match=r"memory='managed'.*asyncgpu.array\(x\)"):
            a.numpy()
        return a.copy().numpy()
    return a.numpy()


def _pointer(a):
    return a.__cuda_array_interface__["data"][0]


def test_cupy_array_is_viewed_and_writes_go_both_ways(ag):
    cupy = pytest.importorskip("cupy")
    src = cupy.arange(1024, dtype=cupy.float32)
    a = ag.asarray(src)
    assert _pointer(a) == src.data.ptr
    _add_one(ag)[4, 256](a)
    ag.synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(src), np.arange(1024, dtype=np.float32) + 1)
    src *= 2                                     # the producer writes; then synchronizes
    cupy.cuda.get_current_stream().synchronize()
    np.testing.assert_array_equal(_read(ag, a), (np.arange(1024, dtype=np.float32) + 1) * 2)


def test_numba_device_array_goes_straight_to_a_kernel(ag):
    src = cuda.to_device(np.zeros(512, np.int32))
    _add_one(ag)[2, 256](src)
    _add_one(ag)[2, 256](src)                    # the same allocation: ordered after the first
    ag.synchronize()
    np.testing.assert_array_equal(src.copy_to_host(), np.full(512, 2, np.int32))
    assert _pointer(ag.asarray(src)) == src.device_ctypes_pointer.value


def test_torch_cuda_tensor_is_viewed(ag):
    torch = pytest.importorskip("torch")
    t = torch.zeros(256, dtype=torch.float32, device="cuda")
    a = ag.asarray(t)
    assert _pointer(a) == t.data_ptr()
    _add_one(ag)[1, 256](a)
    ag.synchronize()
    assert float(t.sum().item()) == 256.0
    t.add_(1)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(_read(ag, a), np.full(256, 2.0, np.float32))


def test_first_use_waits_for_the_producers_stream(ag):
    """A producer kernel on a non-default stream writes (slowly); asyncgpu reads right after
    the import without any synchronization and sees the producer's values."""

    @cuda.jit
    def slow_fill(x, value):
        i = cuda.grid(1)
        if i < x.size:
            acc = 0.0
            for k in range(20000):               # keep the producer busy for a while
                acc += k * 1e-12
            x[i] = value + acc * 0.0

    stream = cuda.stream()
    n = 1 << 16
    src = cuda.device_array(n, np.float32, stream=stream)
    slow_fill[n // 256, 256, stream](src, 7.0)
    a = ag.asarray(src)                          # its interface names `stream`
    out = ag.zeros(n, np.float32)
    copy = ag.kernel(_copy_py)
    copy[n // 256, 256](a, out)
    np.testing.assert_array_equal(out.numpy(), np.full(n, 7.0, np.float32))


@pytest.mark.parametrize("on", ["null stream", "a stream of its own"])
def test_a_cupy_array_still_being_written_on_cupys_stream_is_read_after_its_writer(ag, on):
    """DLPack: CuPy's kernel writing the array still runs on CuPy's current stream when
    asyncgpu imports it; the read sees what it writes, not what the pool's block held."""
    cupy = pytest.importorskip("cupy")
    slow_fill = cupy.ElementwiseKernel(     # (about 50 ms: far longer than the import takes)
        "float32 v", "float32 y",
        "long long t0 = clock64(); while (clock64() - t0 < 100000000LL) {} y = v;",
        "asyncgpu_test_slow_fill")
    n = 1 << 12
    stream = cupy.cuda.Stream.null if on == "null stream" else cupy.cuda.Stream(non_blocking=True)
    with stream:
        stale = cupy.full(n, -1.0, cupy.float32)
        slow_fill(cupy.float32(7.0), stale)         # (compiled and run once, untimed)
        stream.synchronize()
        stale.fill(-1.0)
        stream.synchronize()
        del stale                                   # its block is what the pool hands out next
        src = cupy.empty(n, cupy.float32)
        slow_fill(cupy.float32(7.0), src)
        a = ag.asarray(src)
        np.testing.assert_array_equal(_read(ag, a), np.full(n, 7.0, np.float32))


def _copy_py(x, y):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = x[i]


def test_numba_monte_carlo_example_with_xoroshiro_states(ag):
    from numba.cuda.random import create_xoroshiro128p_states, xoroshiro128p_uniform_float32

    @ag.kernel
    def compute_pi(rng_states, iterations, out):
        thread_id = cuda.grid(1)
        inside = 0
        for i in range(iterations):
            x = xoroshiro128p_uniform_float32(rng_states, thread_id)
            y = xoroshiro128p_uniform_float32(rng_states, thread_id)
            if x ** 2 + y ** 2 <= 1.0:
                inside += 1
        out[thread_id] = 4.0 * inside / iterations

    threads_per_block, blocks = 64, 64
    rng_states = create_xoroshiro128p_states(threads_per_block * blocks, seed=1)
    out = np.zeros(threads_per_block * blocks, dtype=np.float32)
    d_out = ag.asarray(out)
    compute_pi[blocks, threads_per_block](rng_states, 10000, d_out)
    assert abs(d_out.numpy().mean() - math.pi) < 0.01


def test_host_memory_producer_is_refused_as_a_kernel_argument(ag):
    torch = pytest.importorskip("torch")
    with pytest.raises(ag.ArgumentError, match=r"lives in host memory .*asyncgpu.asarray\(x\)"):
        _add_one(ag)[1, 4](torch.zeros(4))
    a = ag.asarray(torch.arange(4, dtype=torch.float32))       # asarray copies host data
    assert a.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]


#: CUDA C kernels that spin about 50 ms on the device before they touch memory: whatever is
#: not ordered after them reads or writes before they do
SLOW_FILL = r'''extern "C" __global__ void slow_fill(float* y, float v, int n) {
    long long t0 = clock64(); while (clock64() - t0 < 100000000LL) {}
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = v; }'''
SLOW_COPY = r'''extern "C" __global__ void slow_copy(const float* x, float* y, int n) {
    long long t0 = clock64(); while (clock64() - t0 < 100000000LL) {}
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = ((volatile const float*)x)[i]; }'''
COPY = r'''extern "C" __global__ void copy(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }'''


def test_a_cupy_view_of_an_array_passed_back_is_that_array(ag):
    """``cupy.asarray(x)`` handed to a kernel (or ``asarray``) is ``x`` again: ordered after
    ``x``'s writer, and a write through it is seen by ``x``'s readers."""
    cupy = pytest.importorskip("cupy")
    slow, copy = ag.cuda_kernel(SLOW_FILL, "slow_fill"), ag.cuda_kernel(COPY, "copy")
    n = 1 << 12
    x, out = ag.zeros(n, np.float32), ag.zeros(n, np.float32)
    slow[n // 256, 256](x, np.float32(0), n)        # (both compiled and loaded, untimed)
    copy[n // 256, 256](x, out, n)
    ag.synchronize()
    c = cupy.asarray(x)
    slow[n // 256, 256](x, np.float32(7), n)
    copy[n // 256, 256](c, out, n)                   # reads x after the slow writer
    np.testing.assert_array_equal(out.numpy(), np.full(n, 7, np.float32))
    y = ag.asarray(c)
    assert y._alloc is x._alloc
    slow[n // 256, 256](y, np.float32(5), n)         # written through the view
    np.testing.assert_array_equal(x.numpy(), np.full(n, 5, np.float32))


def test_memory_another_library_still_reads_is_not_handed_out_again(ag):
    """An array dropped while CuPy's kernel, enqueued through an export, still reads it: its
    memory is not given to a new array until the device has been synchronized."""
    cupy = pytest.importorskip("cupy")
    reader = cupy.RawKernel(SLOW_COPY, "slow_copy")
    reader.compile()
    fill = ag.cuda_kernel(SLOW_FILL.replace("100000000LL", "0LL"), "slow_fill")
    n = 1 << 12
    src = ag.empty(n, np.float32)
    fill[n // 256, 256](src, np.float32(7), n)
    ag.synchronize()
    out = cupy.zeros(n, cupy.float32)
    reader((n // 256,), (256,), (cupy.asarray(src), out, np.int32(n)))
    del src
    dst = ag.empty(n, np.float32)
    fill[n // 256, 256](dst, np.float32(-1), n)
    cupy.cuda.Stream.null.synchronize()
    np.testing.assert_array_equal(out.get(), np.full(n, 7, np.float32))
    ag.synchronize()                                 # (and then it is given back)
    np.testing.assert_array_equal(dst.numpy(), np.full(n, -1, np.float32))


def test_dropped_exported_memory_past_a_bound_is_given_back_without_a_synchronize(
        ag, monkeypatch):
    """A loop that hands each step's temporary to CuPy and never synchronizes: the runtime
    synchronizes the device itself once enough such memory waits, and gives it back."""
    cupy = pytest.importorskip("cupy")
    from asyncgpu.runtime import issue

    monkeypatch.setattr(issue, "LENT_BYTES", 1 << 20)
    before = ag.statistics().host_syncs.get("exported", 0)
    for i in range(8):
        a = ag.full(1 << 18, i, np.float32)      # 1 MiB each
        assert float(cupy.asarray(a).sum()) == i * (1 << 18)
        assert float(a[0]) == i                  # (its writer retired: nothing else holds it)
        del a
    ag.zeros(1)                                  # (an entry point: the drop is seen)
    assert ag.statistics().host_syncs.get("exported", 0) > before


@cuda.jit(debug=True, opt=False)
def _raise_if_one(x, y, n):
    i = cuda.grid(1)
    if i == 0 and x[0] == 1:
        raise ValueError("boom")
    if i < n:
        y[i] = x[i]


def test_a_debug_kernel_behind_a_slow_writer_still_raises(ag):
    """Numba reads a ``debug=True`` kernel's error flag right after the launch: it must have
    run by then, also when it waited for a parent on another stream."""
    slow, k = ag.cuda_kernel(SLOW_FILL, "slow_fill"), ag.kernel(_raise_if_one)
    x, y = ag.zeros(16, np.float32), ag.zeros(16, np.float32)
    k[1, 32](x, y, 16)                               # (both compiled and loaded)
    slow[1, 16](y, np.float32(0), 16)
    ag.synchronize()
    slow[1, 16](x, np.float32(1), 16)
    with pytest.raises(Exception, match="boom"):
        k[1, 32](x, y, 16)
        ag.synchronize()
    x[0] = 2.0                                       # the runtime goes on
    k[1, 32](x, y, 16)
    assert y.numpy()[0] == 2.0
