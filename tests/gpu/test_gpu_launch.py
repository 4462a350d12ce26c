"""Packed launches (one cuLaunchKernel with a prebuilt parameter buffer) against Numba's and
CuPy's own launch paths, for every argument kind the packed path supports and for the kinds it
hands back to them."""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


class LaunchKinds:
    """An instrument that records which launch object each kernel node used."""

    def __init__(self) -> None:
        self.kinds: list[str] = []

    def node_issued(self, node) -> None:
        if node.kind == "kernel":
            self.kinds.append(type(node.launch).__name__)


def _run_both(ag, program):
    """``program(ag)`` with packed launches and with the libraries' own launches."""
    from asyncgpu.runtime.current import current_runtime

    results = {}
    for packed in (True, False):
        with ag.configure(backend="cuda", packed_launch=packed):
            with current_runtime().instrument(LaunchKinds()) as kinds:
                results[packed] = program(ag)
            ag.synchronize()
            results[(packed, "kinds")] = kinds.kinds
    return results


def _numba_mixed_kernel():
    from numba import cuda

    @cuda.jit
    def mixed(x, m, v, out, a, b, c, d, e, f, z):
        i = cuda.grid(1)
        if i < out.shape[0]:
            r = i % m.shape[0]
            col = i % m.shape[1]
            out[i] = (x[i] * a + b + m[r, col] + v[i % v.shape[0]] + c + d + e + f
                      + z.real * 2 + z.imag)

    return mixed


def test_numba_packed_launch_equals_numba_launch_for_every_argument_kind():
    import asyncgpu as ag

    mixed = _numba_mixed_kernel()
    n = 1000
    x0 = np.arange(n, dtype=np.float32)
    m0 = np.arange(6 * 7, dtype=np.float64).reshape(6, 7)
    v0 = np.arange(40, dtype=np.float64)
    scalars = (2, 0.5, np.float32(1.25), np.int16(-3), np.uint8(7), np.uint64(11),
               complex(1.5, -2.0))

    def program(ag):
        k = ag.kernel(mixed, const=["x", "m", "v"])
        x = ag.array(x0)
        m = ag.array(m0.T.copy()).T          # an F-ordered 2-D view
        v = ag.array(v0)[::4]                # a strided 1-D view
        out = ag.zeros(n, np.float64)
        k[4, 256](x, m, v, out, *scalars)
        k[4, 256](x, m[::2, 1:], v, out, *scalars)   # a non-contiguous 2-D view
        return out.numpy()

    got = _run_both(ag, program)
    np.testing.assert_array_equal(got[True], got[False])
    i = np.arange(n)
    mv = m0[::2, 1:]
    a, b, c, d, e, f, z = scalars
    expected = (x0.astype(np.float64) * a + b + mv[i % mv.shape[0], i % mv.shape[1]]
                + v0[::4][i % 10] + float(c) + int(d) + int(e) + int(f) + z.real * 2 + z.imag)
    np.testing.assert_allclose(got[True], expected, rtol=1e-12)
    assert got[(True, "kinds")] == ["PackedLaunch"] * 2
    assert got[(False, "kinds")] == ["NumbaLaunch"] * 2


def test_numba_bool_argument_falls_back_to_numba_launch():
    import asyncgpu as ag
    from numba import cuda

    @cuda.jit
    def pick(out, flag):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = 1.0 if flag else -1.0

    def program(ag):
        k = ag.kernel(pick)
        out = ag.zeros(64, np.float32)
        k[1, 64](out, True)
        first = out.numpy()
        k[1, 64](out, False)
        return np.concatenate([first, out.numpy()])

    got = _run_both(ag, program)
    np.testing.assert_array_equal(got[True], np.r_[np.ones(64), -np.ones(64)])
    assert got[(True, "kinds")] == ["NumbaLaunch"] * 2


def test_a_python_int_beyond_uint64_is_refused_after_a_uint64_launch():
    """Numba types 2**63 as a uint64 and cannot type 2**64: a launch with 2**64 after one with
    2**63 raised struct.error from the uint64 launch's packed plan; it is an ArgumentError
    naming the kernel, before anything is enqueued, and the kernel runs on."""
    import asyncgpu as ag
    from numba import cuda

    @cuda.jit
    def high(out, v):
        out[0] = v >> 60

    with ag.configure(backend="cuda"):
        k = ag.kernel(high)
        out = ag.zeros(1, np.uint64)
        k[1, 1](out, 2**63)
        assert out.numpy().tolist() == [8]
        before = ag.statistics().kernels
        with pytest.raises(ag.ArgumentError, match="kernel 'high'.*cannot compile"):
            k[1, 1](out, 2**64)
        assert ag.statistics().kernels == before
        k[1, 1](out, 2**62)
        assert out.numpy().tolist() == [4]



def test_a_kernel_given_a_signature_refuses_arguments_of_other_types_by_name():
    """Numba compiles such a kernel for its declared types only and hands that overload to
    any arguments: a float64 array read as float32 (silent garbage) or an int beyond int32
    truncated. Refused naming the argument, before anything is enqueued; the declared types
    run, and a number that converts as C converts goes."""
    import asyncgpu as ag
    from numba import cuda

    @cuda.jit("void(float32[::1], int32)")
    def fill(x, n):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = n

    with ag.configure(backend="cuda"):
        k = ag.kernel(out=["x"])(fill)
        x = ag.zeros(8, np.float32)
        k[1, 8](x, 3)
        assert x.numpy().tolist() == [3.0] * 8
        for bad, arg, match in ((ag.zeros(8), 5, "argument 'x' is array\\(float64"),
                                (x[::2], 5, "argument 'x' is array\\(float32, 1d, A"),
                                (x, 2.5, "argument 'n' is float64"),
                                (x, 2**40, "does not fit the type of its parameter")):
            with pytest.raises(ag.ArgumentError, match=f"kernel 'fill'.*{match}"):
                k[1, 8](bad, arg)
        k[1, 8](x, np.int16(7))
        assert x.numpy().tolist() == [7.0] * 8


def test_numba_tuple_and_record_arguments_reach_numbas_launch_as_values():
    """Tuples (nested) and records keep Numba's own launch, each tuple type and record dtype
    compiled for itself: a tuple of another length after the first ran Numba's launch of the
    first one's types. The same on sim (tests/test_kernels.py)."""
    import asyncgpu as ag
    from numba import cuda

    @cuda.jit
    def total(out, c):
        if cuda.grid(1) == 0:
            s = 0.0
            for v in c:
                s += v
            out[0] = s

    @cuda.jit
    def nested(out, c):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = c[0][0] + c[0][1] * i + c[1]

    @cuda.jit
    def fields(out, r):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = r.a + r.b * i

    def program(ag):
        out = ag.zeros(4)
        got = []
        k = ag.kernel(total)
        # (a loop over a tuple: its items of one type, as Numba's compile asks; sim runs Python)
        for c in [(1.0, 2.0), (1.0, 2.0, 3.0), (1, 2), (np.float32(0.5), np.float32(4))]:
            k[1, 1](out, c)
            got.append(out.numpy()[0])
        ag.kernel(nested)[1, 4](out, ((1.0, 2), 10))
        got.extend(out.numpy())
        records = np.array([(1.0, 2)], dtype=[("a", "f8"), ("b", "i4")])
        ag.kernel(fields)[1, 4](out, records[0])
        records[0]["a"] = 100      # (the launch passes the value it was given)
        got.extend(out.numpy())
        ag.kernel(fields)[1, 4](out, records.view([("a", "i8"), ("b", "i4")])[0])
        got.extend(out.numpy())
        return np.array(got)

    got = _run_both(ag, program)
    as_int = int(np.array([100.0]).view(np.int64)[0])     # (the bytes of a = 100.0)
    expected = [3, 6, 3, 4.5, 11, 13, 15, 17, 1, 3, 5, 7] + [as_int + 2 * i for i in range(4)]
    np.testing.assert_array_equal(got[True], np.array(expected, np.float64))
    np.testing.assert_array_equal(got[False], got[True])
    assert set(got[(True, "kinds")]) == {"NumbaLaunch"}


C_SOURCE = r'''
extern "C" __global__ void scal(const float* x, double* out, float a, double b, int c,
                                unsigned char d, short e, long long f, unsigned int g, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * a + b + c + d + e + f + g;
}'''


def test_cuda_c_packed_launch_equals_cupy_launch_for_every_scalar_type():
    import asyncgpu as ag

    n = 777
    x0 = np.linspace(-1, 1, n, dtype=np.float32)
    scalars = (1.5, -2.25, -7, 200, -300, 2**40, 2**31 + 5)

    def program(ag):
        k = ag.cuda_kernel(C_SOURCE, "scal")
        x = ag.array(x0)
        out = ag.zeros(n, np.float64)
        k[(n + 127) // 128, 128](x, out, *scalars, n)
        return out.numpy()

    got = _run_both(ag, program)
    np.testing.assert_array_equal(got[True], got[False])
    expected = x0.astype(np.float64) * np.float32(1.5) + sum(scalars[1:])
    np.testing.assert_allclose(got[True], expected, rtol=1e-6)
    assert got[(True, "kinds")] == ["PackedLaunch"]
    assert got[(False, "kinds")] == ["RawLaunch"]


def test_packed_launch_from_a_fresh_host_thread():
    import asyncgpu as ag
    from numba import cuda

    @ag.kernel(const=["x"])
    @cuda.jit
    def double(x, y):
        i = cuda.grid(1)
        if i < y.shape[0]:
            y[i] = 2 * x[i]

    with ag.configure(backend="cuda"):
        x = ag.array(np.arange(256, dtype=np.float32))
        y = ag.empty_like(x)
        double[1, 256](x, y)            # compiles in this thread
        ag.synchronize()
        errors: list[BaseException] = []

        def worker() -> None:
            try:
                double[1, 256](x, y)
                assert np.array_equal(y.numpy(), 2 * np.arange(256, dtype=np.float32))
            except BaseException as exc:  # reported below
                errors.append(exc)

        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert not errors, errors


def test_direct_driver_calls_compute_what_cupys_calls_compute():
    """The same program with the CUDA calls made straight into the driver and through CuPy:
    eager launches across streams, a recorded graph replayed, host reads; the same values.
    ``configure(direct_driver=...)`` takes effect at once (the backend is made again)."""
    import asyncgpu as ag
    from asyncgpu.backends.cuda.driver import compiled_driver
    from asyncgpu.runtime.current import current_runtime

    src = r'''extern "C" __global__ void axpy(const float* x, float* y, float a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] += a * x[i]; }'''
    results = {}
    for direct in (True, False):
        with ag.configure(backend="cuda", direct_driver=direct):
            rt = current_runtime()
            assert (rt.backend.driver is not None) == (direct and compiled_driver() is not None)
            axpy = ag.cuda_kernel(src, "axpy")
            xs = [ag.array(np.arange(1000, dtype=np.float32) * (i + 1)) for i in range(4)]

            @ag.graph
            def step(a):
                axpy[4, 256](xs[0], xs[1], a, 1000)
                axpy[4, 256](xs[2], xs[3], a, 1000)

            reads = []
            for i in range(40):
                axpy[4, 256](xs[i % 4], xs[(i + 1) % 4], 0.5, 1000)   # chains across streams
                step(0.25)
                if i % 7 == 6:
                    reads.append(float(xs[1][999]))
            results[direct] = (reads, [x.numpy() for x in xs], step.outcome)
    assert results[True][0] == results[False][0]
    for a, b in zip(results[True][1], results[False][1]):
        np.testing.assert_array_equal(a, b)
    assert results[True][2] == results[False][2] == "replayed"


def test_single_node_graphs_compute_what_kernel_launches_compute():
    """Kernels enqueued through their stream's one-node graph (``single_node_graphs``) and
    through ``cuLaunchKernel``: every launch writes its own output with its own scalar, across
    streams, CUDA C and Numba, beside a recorded graph and host reads; the same values, which
    are also the ones NumPy computes. The graph path is really taken (``lane_launches``), and
    not while the recorder captures."""
    import asyncgpu as ag
    from asyncgpu.backends.cuda.driver import compiled_driver
    from asyncgpu.runtime.current import current_runtime
    from numba import cuda

    if compiled_driver() is None:
        pytest.skip("single_node_graphs needs the compiled module cudriver")
    src = r'''extern "C" __global__ void scale(const float* x, float* y, float a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i]; }'''

    @cuda.jit
    def shift(x, y, b):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = x[i] + b

    n = 1000
    base = np.arange(n, dtype=np.float32)
    results = {}
    for lanes in (True, False):
        with ag.configure(backend="cuda", single_node_graphs=lanes):
            rt = current_runtime()
            driver = rt.backend.driver
            if driver is not None:
                driver.slow_make_ns = 10**12    # (lanes counted: see test_gpu_driver_calls)
            scale = ag.cuda_kernel(src, "scale")
            nshift = ag.kernel(shift, const=["x"])
            x = ag.array(base)
            outs = [ag.zeros(n, np.float32) for _ in range(48)]
            chain = [ag.zeros(n, np.float32) for _ in range(2)]

            @ag.graph
            def step(a):
                scale[4, 256](x, chain[0], a, n)
                nshift[4, 256](chain[0], chain[1], 1.0)

            before = driver.lane_launches if driver is not None else 0
            reads = []
            for i in range(48):
                if i % 2:
                    scale[4, 256](x, outs[i], float(i), n)           # independent: many streams
                else:
                    nshift[4, 256](outs[i - 1] if i else x, outs[i], float(i))  # cross-stream
                if i % 8 == 7:
                    step(2.0)                   # (the same key: recorded once, then replayed)
                    reads.append(float(chain[1][n - 1]))
            lane_launches = (driver.lane_launches - before) if driver is not None else 0
            results[lanes] = ([o.numpy() for o in outs], reads, step.outcome, lane_launches)
    for i, (on, off) in enumerate(zip(results[True][0], results[False][0])):
        expected = base * i if i % 2 else (base * (i - 1) if i else base) + i
        np.testing.assert_array_equal(on, expected)
        np.testing.assert_array_equal(off, expected)
    assert results[True][1] == results[False][1] == [2.0 * (n - 1) + 1.0] * 6
    assert results[True][2] == results[False][2] == "replayed"
    # the 48 eager launches went through lanes, the captured ones did not; a replay is a graph
    assert results[True][3] >= 48 and results[False][3] == 0


def test_a_launch_the_lane_refuses_raises_the_drivers_error_and_the_lane_goes_on():
    """A kernel the driver refuses (a block larger than any kernel may have) on a stream whose
    lane exists: the graph path refuses it, the ordinary launch raises CuPy's error, and the
    next good launch on that stream still goes through the lane and computes its result."""
    import cupy

    import asyncgpu as ag
    from asyncgpu.backends.cuda.driver import compiled_driver
    from asyncgpu.runtime.current import current_runtime

    if compiled_driver() is None:
        pytest.skip("single_node_graphs needs the compiled module cudriver")
    with ag.configure(backend="cuda", single_node_graphs=True):
        driver = current_runtime().backend.driver
        if driver is None or not driver.single_node_graphs:
            pytest.skip("this driver lacks the graph entry points")
        driver.slow_make_ns = 10**12        # (lanes counted: see test_gpu_driver_calls)
        src = r'''extern "C" __global__ void fill(float* y, float v) { y[threadIdx.x] = v; }'''
        raw = cupy.RawKernel(src, "fill")
        y = cupy.zeros(32, np.float32)
        raw((1,), (32,), (y, np.float32(0)))                 # loads the module
        stream = cupy.cuda.Stream(non_blocking=True)
        fn = raw.kernel.ptr

        def launch(block, value):
            params = np.array([y.data.ptr], np.uint64).tobytes() + np.float32(value).tobytes()
            buf = np.frombuffer(params, np.uint8).copy()
            size = np.array([buf.nbytes], np.uint64)
            extra = np.array([1, buf.ctypes.data, 2, size.ctypes.data, 0], np.uint64)
            driver.launch_kernel(fn, 1, 1, 1, block, 1, 1, 0, stream.ptr, extra.ctypes.data)
            stream.synchronize()                            # (buf and extra live until here)

        before = driver.lane_launches
        launch(32, 1.0)
        assert driver.lane_launches == before + 1
        with pytest.raises(cupy.cuda.driver.CUDADriverError):
            launch(4096, 2.0)
        launch(32, 3.0)
        assert driver.lane_launches == before + 2
        assert cupy.asnumpy(y).tolist() == [3.0] * 32


def test_more_kernel_and_stream_pairs_than_lanes_all_compute():
    """Twenty kernels launched across every stream make more (kernel, stream) pairs than the
    lane table holds (384): the pairs beyond it launch with cuLaunchKernel, and every launch's
    output is still its own."""
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    with ag.configure(backend="cuda", single_node_graphs=True, max_streams=32):
        driver = current_runtime().backend.driver
        kernels = [ag.cuda_kernel(
            f'extern "C" __global__ void k{i}(const float* x, float* y) '
            f'{{ y[threadIdx.x] = x[threadIdx.x] + {i}.0f; }}', f"k{i}") for i in range(20)]
        x = ag.array(np.arange(32, dtype=np.float32))
        outs = [[ag.zeros(32, np.float32) for _ in range(40)] for _ in kernels]
        before = driver.lane_launches if driver is not None else 0
        pairs = set()

        class Pairs:        # the (kernel, stream) pairs the launches used
            def node_issued(self, node):
                if node.kind == "kernel":
                    pairs.add((node.name, node.stream.index))

        with ag.instrument(Pairs()):
            for j in range(40):
                for i, k in enumerate(kernels):
                    k[1, 32](x, outs[i][j])          # independent: the streams rotate
        for i in range(20):
            for j in range(40):
                np.testing.assert_array_equal(outs[i][j].numpy(), np.arange(32) + i)
        if driver is not None and driver.single_node_graphs:
            lanes = driver.lane_launches - before
            assert 0 < lanes <= 800
            if len(pairs) > 384:            # (more pairs than the table holds)
                assert lanes < 800
