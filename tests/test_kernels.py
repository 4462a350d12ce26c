"""Kernel kinds and argument handling beyond the example."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numba import cuda

from asyncgpu.core.errors import DeadlockError


def test_plain_python_function_is_compiled_as_a_kernel(sim):
    ag = sim

    @ag.kernel(const=["x"])
    def triple(x, y):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = 3 * x[i]

    x = ag.array(np.arange(8, dtype=np.int32))
    y = ag.zeros(8, np.int32)
    triple[1, 8](x, y)
    assert y.numpy().tolist() == [3 * i for i in range(8)]


def test_same_array_twice_the_writable_use_wins(sim):
    ag = sim

    @ag.kernel(const=["src"])
    @cuda.jit
    def increment(src, dst):
        # each thread reads and writes only its own element: no race inside the kernel (an
        # in-place shift would race between threads, and the simulator runs them as threads)
        i = cuda.grid(1)
        if i < dst.size:
            dst[i] = src[i] + 1

    @ag.kernel(const=["x"])
    @cuda.jit
    def copy(x, y):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = x[i]

    a = ag.array(np.arange(8, dtype=np.float32))
    b = ag.zeros(8, np.float32)
    increment[1, 8](a, a)      # reads and writes a: a later reader must wait for it
    copy[1, 8](a, b)
    assert b.numpy().tolist() == list(range(1, 9))


def test_numba_kernel_with_2d_arrays_and_views(sim):
    ag = sim

    @ag.kernel(const=["m"], out=["col"])
    @cuda.jit
    def first_column(m, col):
        i = cuda.grid(1)
        if i < col.size:
            col[i] = m[i, 0]

    h = np.arange(24, dtype=np.float64).reshape(6, 4)
    m = ag.array(h)
    col = ag.empty(3, np.float64)
    first_column[1, 8](m[1:4, 1:], col)      # a strided view of a 2-D array
    assert col.numpy().tolist() == h[1:4, 1].tolist()


def test_numba_2d_launch_configuration(sim):
    ag = sim

    @ag.kernel(out=["img"])
    @cuda.jit
    def coords(img):
        x, y = cuda.grid(2)
        if x < img.shape[0] and y < img.shape[1]:
            img[x, y] = 10 * x + y

    img = ag.empty((4, 4), np.int32)
    coords[(1, 1), (4, 4)](img)
    assert img.numpy().tolist() == [[10 * x + y for y in range(4)] for x in range(4)]


def test_sim_detects_a_wait_that_can_never_complete():
    from asyncgpu.backends.sim.backend import Capture, SimBackend

    be = SimBackend(seed=0, strategy="random", tick=0.0)
    s0 = be.create_stream()
    never = Capture()                       # a capture nobody will ever complete
    be._enqueue(s0, "wait", never, "wait on a capture that never completes")
    e = be.create_event()
    be.record(e, s0)
    with pytest.raises(DeadlockError, match="never start.*stream 0: wait on a capture"):
        be.host_wait(e)


def test_waiting_on_a_never_recorded_event_is_a_no_op():
    from asyncgpu.backends.sim.backend import SimBackend

    be = SimBackend(seed=0, strategy="random", tick=0.0)
    s0 = be.create_stream()
    be.wait(s0, be.create_event())
    assert be.event_done(be.create_event())
    be.synchronize()


def test_statistics_snapshot_is_frozen(sim):
    ag = sim
    stats = ag.statistics()
    with pytest.raises(AttributeError):
        stats.nodes = 3
    assert stats.backend == "sim" and isinstance(stats.as_dict()["edges"], dict)


def test_two_snapshots_subtract_to_what_a_stretch_of_the_program_did(sim):
    ag = sim
    x = ag.array(np.arange(8, dtype=np.float32))
    float((x + x)[1])
    before = ag.statistics()
    y = x * 2.0
    assert float(y[3]) == 6.0
    took = ag.statistics() - before
    assert (took.calls, took.host_accesses, took.host_syncs["host-read"]) == (1, 1, 1)
    assert took.nodes >= 1 and took.backend == "sim"
    assert all(v > 0 for v in took.host_syncs.values())     # (no reason that did not occur)
    with pytest.raises(TypeError):
        before - 1


def test_the_simulator_runs_one_launch_at_a_time_whatever_the_threads(sim):
    # (Numba's simulator keeps a launch's grid, block and shared memory in a global: two
    # launches at once, from threads of two runtimes, would run one inside the other)
    import threading

    from asyncgpu.backends.sim.kernels import _numba_runner

    ag = sim

    def mark(y, value):
        buf = cuda.shared.array(64, np.float64)
        i = cuda.threadIdx.x
        buf[i] = value + cuda.blockIdx.x
        cuda.syncthreads()
        y[cuda.grid(1)] = buf[cuda.blockDim.x - 1 - i]

    k = ag.kernel(out=["y"])(mark)
    kernel = k[2, 32].kernel
    runners = [_numba_runner(kernel, kernel.source.py_func, (2 + t,), (32,), 0) for t in range(4)]
    outputs = [np.zeros(32 * (2 + t)) for t in range(4)]
    errors = []

    def launches(t):
        try:
            for _ in range(5):
                runners[t]([outputs[t], float(10 * t)])
        except BaseException as exc:    # (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=launches, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    for t in range(4):
        assert outputs[t].tolist() == [10.0 * t + b for b in range(2 + t) for _ in range(32)]


def test_a_blocks_shared_array_is_one_array_whatever_the_thread_switches(monkeypatch):
    # (Numba's simulated cuda.shared.array looks its call site up and stores a new array
    # without a lock: two threads switched between the two got two arrays)
    import threading
    import time

    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    from asyncgpu.backends.sim import numba_sim

    assert numba_sim._install_shared_arrays()
    shared = FakeCUDAShared(0)
    empty = np.empty

    def slow_empty(*args, **kwargs):
        time.sleep(0.005)           # every other thread runs between lookup and store
        return empty(*args, **kwargs)

    monkeypatch.setattr(np, "empty", slow_empty)
    got = []

    def take():
        got.append(shared.array(8, np.float32))      # one call site for every thread

    threads = [threading.Thread(target=take) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(got) == 8 and all(a is got[0] for a in got)



def _small_int_arithmetic(out, x, n):
    out[0] = n + n              # n: an int8 argument holding 100
    out[1] = x[0] + x[0]        # an int8 element holding 100
    out[2] = x[1] * 32          # 4 * 32 = 128: beyond int8
    out[3] = n * n * n * n * n * n * n * n * n * n  # 100**10: wraps at 64 bits, as on a GPU


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")   # (NumPy's, on sim)
def test_a_numba_kernels_integer_arithmetic_is_numbas_64_bit_arithmetic(sim):
    """Numba computes on integers of at least 64 bits; the simulator ran the body on NumPy's
    int8 (100 + 100 was -56) and on unbounded Python ints."""
    ag = sim
    k = ag.kernel(out=["out"])(cuda.jit(_small_int_arithmetic))
    out = ag.zeros(4, np.int64)
    k[1, 1](out, ag.array(np.array([100, 4], np.int8)), np.int8(100))
    with np.errstate(over="ignore"):
        wrapped = int(np.int64(100) ** 10)
    assert out.tolist() == [200, 200, 128, wrapped]


def _small_int_beside_float32(out, h, x, w):
    i = cuda.grid(1)
    if i < x.size:
        out[i, 0] = (h[i] + x[i]) - h[i]        # float32 in Numba: an int8..int16 or bool
        out[i, 1] = (x[i] * h[i]) / x[i]        # beside a float32 (the float32 on the left)
        out[i, 2] = (w[i] + x[i]) - w[i]        # an int32 beside one: float64


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.bool_])
def test_a_short_integer_beside_a_float32_computes_in_float32_as_numba_types_it(sim, dtype):
    """Numba types int8, int16 (signed or not) and bool beside a float32 as float32, an int32
    as float64; the simulator's int64 elements computed all in float64."""
    ag = sim
    k = ag.kernel(const=["h", "x", "w"], out=["out"])(cuda.jit(_small_int_beside_float32))
    h = np.array([3, 1, 1], dtype)
    x = np.array([0.1, 1e-8, 3.0], np.float32)
    w = np.array([3, 1, 1], np.int32)
    out = ag.zeros((3, 3), np.float64)
    k[1, 32](out, ag.array(h), ag.array(x), ag.array(w))
    hf, wide = h.astype(np.float32), h.astype(np.float64)
    with np.errstate(all="ignore"):
        assert out[:, 0].tolist() == ((hf + x) - hf).astype(np.float64).tolist()
        assert out[:, 1].tolist() == ((x * hf) / x).astype(np.float64).tolist()
        assert out[:, 2].tolist() == ((w + x.astype(np.float64)) - w).tolist()
    assert out[0, 0] != (wide[0] + np.float64(x[0])) - wide[0]      # (float64's answer)


def test_an_int8_total_of_a_grid_stride_loop_covers_every_element(sim):
    """The kernels guide's example: ``total * blockDim`` wrapped at 8 bits on the simulator,
    the loop never ran, and ``y`` kept its poison."""
    ag = sim

    @ag.kernel(const=["x"], out=["y"], grid_offset=("first", "total"), grid_stride=True)
    @cuda.jit
    def twice(x, y, first, total):
        start = (cuda.blockIdx.x + first) * cuda.blockDim.x + cuda.threadIdx.x
        for i in range(start, x.shape[0], total * cuda.blockDim.x):
            y[i] = 2 * x[i]

    x = ag.array(np.arange(3000, dtype=np.float32))
    y = ag.zeros(3000, np.float32)
    twice[20, 32](x, y, np.int8(0), np.int8(20))
    np.testing.assert_array_equal(y.numpy(), 2 * np.arange(3000, dtype=np.float32))


def test_more_shared_memory_than_a_block_has_faults_on_the_simulator_as_on_a_gpu(sim):
    """The GPU refuses a kernel of more than 48 KiB of static shared memory (Numba's compile),
    and a launch whose static and dynamic shared memory exceed it; the simulator ran both."""
    ag = sim

    @ag.kernel(out=["a"])
    @cuda.jit
    def static_12k(a):
        s = cuda.shared.array(12288, dtype=np.float32)          # 48 KiB: the most there is
        s[cuda.threadIdx.x] = 1.0
        cuda.syncthreads()
        a[cuda.threadIdx.x] = s[cuda.threadIdx.x]

    @ag.kernel(out=["a"])
    @cuda.jit
    def static_20k(a):
        s = cuda.shared.array(20000, dtype=np.float32)
        s[cuda.threadIdx.x] = 1.0
        a[cuda.threadIdx.x] = s[cuda.threadIdx.x]

    a = ag.zeros(32, np.float32)
    static_12k[1, 32](a)
    assert a.tolist() == [1.0] * 32
    for launch in (lambda: static_20k[1, 32](a), lambda: static_12k[1, 32, 4](a)):
        launch()
        with pytest.raises(ag.KernelFault, match="bytes of shared memory per block"):
            ag.synchronize()
    a[...] = 0
    static_12k[1, 32](a)                                        # (usable after them)
    assert a.tolist() == [1.0] * 32


def test_math_in_a_simulated_kernel_gives_the_devices_ieee_answers(sim):
    """math.log(0) is -inf on the GPU (and sqrt(-1) NaN, floor(inf) inf, gamma(0) inf, as an
    H200 computed them); Python's math, which the simulator ran, raised ValueError there."""
    import math

    from math import log as imported_log

    ag = sim

    @ag.kernel(const=["x"], out=["y"])
    @cuda.jit
    def ieee(x, y):
        i = cuda.grid(1)
        if i < x.size:
            v = x[i]
            y[i, 0] = math.log(v)
            y[i, 1] = math.sqrt(v)
            y[i, 2] = math.asin(v)
            y[i, 3] = math.floor(v)
            y[i, 4] = math.gamma(v)
            y[i, 5] = math.lgamma(v)
            y[i, 6] = math.exp(v)
            y[i, 7] = imported_log(v)

    x = ag.array(np.array([0.0, -1.0, np.inf, 2.0]))
    y = ag.empty((4, 8))
    ieee[1, 4](x, y)
    with np.errstate(all="ignore"):
        h = np.array([0.0, -1.0, np.inf, 2.0])
        want = np.stack([np.log(h), np.sqrt(h), np.arcsin(h), np.floor(h),
                         [np.inf, np.nan, np.inf, 1.0], [np.inf, np.inf, np.inf, 0.0],
                         np.exp(h), np.log(h)], axis=1)
    np.testing.assert_array_equal(y.get(), want)
    assert math.log(1.0) == 0.0 and math.log is imported_log    # (the process's math untouched)
    with pytest.raises(ValueError):
        math.log(0.0)


def test_stores_into_integer_arrays_convert_as_the_device_converts(sim):
    """A float stored into an integer element is truncated and saturates at its type's range (an
    8-bit type's 16-bit one; NaN: the signed least value, 0 unsigned), then wraps to the width;
    an integer wraps (an H200's answers). NumPy refused them, and the launch faulted on sim."""
    ag = sim

    @ag.kernel(const=["x"], out=["i32", "i64", "u8", "u64"])
    @cuda.jit
    def store(x, i32, i64, u8, u64):
        i = cuda.grid(1)
        if i < x.size:
            i32[i] = x[i]
            i64[i] = x[i]
            u8[i] = x[i]
            u64[i] = x[i]

    values = [-3.7, 1e20, -1e20, np.nan, np.inf, -1.0, 2.0**31, 300.0]
    x = ag.array(np.array(values))
    outs = [ag.empty(len(values), t) for t in (np.int32, np.int64, np.uint8, np.uint64)]
    store[1, len(values)](x, *outs)
    i32, i64, u8, u64 = (o.get().tolist() for o in outs)
    assert i32 == [-3, 2**31 - 1, -2**31, -2**31, 2**31 - 1, -1, 2**31 - 1, 300]
    assert i64 == [-3, 2**63 - 1, -2**63, -2**63, 2**63 - 1, -1, 2**31, 300]
    assert u8 == [0, 255, 0, 0, 255, 0, 255, 44]
    assert u64 == [0, 2**64 - 1, 0, 2**63, 2**64 - 1, 0, 2**31, 300]

    @ag.kernel(out=["y"])
    @cuda.jit
    def wraps(y):
        y[0] = 2**31 - 1
        y[0] += 1                           # (int32 overflow wraps on the device)

    y = ag.empty(1, np.int32)
    wraps[1, 1](y)
    assert y.get().tolist() == [-2**31]


def test_intrinsics_in_a_simulated_kernel_give_the_devices_answers(sim):
    """cuda.cbrt of a negative number, cuda.fma rounded once, and the bit counts on the
    argument's width (an H200's answers; Numba's simulator computed cbrt(-8) as NaN, counted
    bits on 32 and raised for a negative number)."""
    ag = sim

    @ag.kernel(const=["i32", "i64", "u64", "f"], out=["out", "rev"])
    @cuda.jit
    def bits(i32, i64, u64, f, out, rev):
        for j in range(i32.size):
            out[0, j] = cuda.popc(i32[j])
            out[1, j] = cuda.clz(i32[j])
            out[2, j] = cuda.ffs(i64[j])
            out[3, j] = cuda.clz(i64[j])
            rev[0, j] = cuda.brev(i32[j])
            rev[1, j] = cuda.brev(u64[j])
        out[4, 0] = cuda.cbrt(f[0]) == -2.0
        out[4, 1] = (cuda.fma(f[1], f[1], f[2]) - 0.0) * 2.0**60

    i32 = ag.array(np.array([-1, 1, 12, -2**31], np.int32))
    i64 = ag.array(np.array([-1, 1, 2**40, -2**63], np.int64))
    u64 = ag.array(np.array([1, 12, 2**40, 0], np.uint64))
    e = 2.0**-30
    f = ag.array(np.array([-8.0, 1 + e, -(1 + 2 * e)]))
    out, rev = ag.zeros((5, 4), np.int64), ag.zeros((2, 4), np.uint64)
    bits[1, 1](i32, i64, u64, f, out, rev)
    got = out.get()
    assert got[0].tolist() == [32, 1, 2, 1] and got[1].tolist() == [0, 31, 28, 0]
    assert got[2].tolist() == [1, 1, 41, 64] and got[3].tolist() == [0, 63, 23, 0]
    assert got[4, :2].tolist() == [1, 1]
    assert rev.get()[0].tolist() == [4294967295, 2147483648, 805306368, 1]
    assert rev.get()[1].tolist() == [2**63, 3458764513820540928, 8388608, 0]


@pytest.mark.parametrize("call", ["module", "imported"])
def test_a_math_function_numbas_cuda_target_does_not_compile_faults_naming_it(sim, call):
    """math.cbrt, math.factorial: the GPU refuses the kernel (Numba's CUDA target has no typing
    for them); Python's math answered on sim. The host's math is untouched."""
    import math
    from math import cbrt

    ag = sim

    @ag.kernel(out=["y"])
    @cuda.jit
    def roots(y):
        y[0] = math.sqrt(4.0)
        y[1] = math.cbrt(8.0) if call == "module" else cbrt(8.0)

    y = ag.zeros(2)
    roots[1, 1](y)
    with pytest.raises(ag.KernelFault, match=r"kernel 'roots'.*math.cbrt is not compiled by "
                                             r"Numba's CUDA target"):
        ag.synchronize()
    assert cbrt(8.0) == 2.0 and math.factorial(5) == 120

    @ag.kernel(out=["y"])
    @cuda.jit
    def root(y):
        y[0] = math.sqrt(9.0)

    root[1, 1](y)                           # (the runtime goes on)
    assert float(y[0]) == 3.0


def test_a_host_thread_keeps_pythons_math_while_a_kernel_of_its_module_runs(sim):
    """The kernel's module's ``math`` answers as the device's in the simulator's threads only:
    a host thread running code of the same module meanwhile still gets ValueError and ints."""
    import math
    import threading

    ag = sim

    @ag.kernel(const=["x"], out=["y"])
    @cuda.jit
    def logs(x, y):
        i = cuda.grid(1)
        if i < x.size:
            y[i] = math.log(x[i]) + math.ceil(x[i])

    seen, stop = [], threading.Event()

    def host() -> None:
        while not stop.is_set():
            if type(math.ceil(2.5)) is not int:
                seen.append("ceil")
            try:
                math.sqrt(-1.0)
                seen.append("sqrt")
            except ValueError:
                pass

    thread = threading.Thread(target=host)
    thread.start()
    try:
        x = ag.array(np.linspace(0.5, 4.0, 64))
        y = ag.empty_like(x)
        for _ in range(5):
            logs[2, 32](x, y)
            ag.synchronize()
    finally:
        stop.set()
        thread.join()
    assert seen == []
    h = np.linspace(0.5, 4.0, 64)
    np.testing.assert_allclose(y.get(), np.log(h) + np.ceil(h))


def test_booleans_compute_as_numbas_integers_in_a_simulated_kernel(sim):
    """True + True is 2 and -True -1 on the device (Numba computes with booleans as integers);
    ~b is not b. NumPy's bool gave 1 and refused the negation."""
    ag = sim

    @ag.kernel(const=["b"], out=["y"])
    @cuda.jit
    def arith(b, y):
        i = cuda.grid(1)
        if i < b.size:
            y[i, 0] = b[i] + b[i]
            y[i, 1] = -b[i]
            y[i, 2] = ~b[i]

    b = ag.array(np.array([True, False]))
    y = ag.empty((2, 3), np.int64)
    arith[1, 2](b, y)
    assert y.get().tolist() == [[2, -1, 0], [0, 0, 1]]


@pytest.mark.parametrize("b", [True, np.True_, False, np.False_], ids=repr)
def test_a_bool_scalar_argument_computes_as_numbas_integers_as_an_element_does(sim, b):
    """A bool passed as a scalar computes as a bool element does: True + True is 2, -True -1,
    ~True 0. Python's bool gave ~True == -2; NumPy's gave 1 for True + True and refused the
    negation."""
    ag = sim

    @ag.kernel(out=["y"])
    @cuda.jit
    def arith(y, b):
        y[0] = b + b
        y[1] = -b
        y[2] = ~b

    y = ag.empty(3, np.int64)
    arith[1, 1](y, b)
    assert y.get().tolist() == ([2, -1, 0] if b else [0, 0, 1])


@pytest.mark.parametrize("atomic, dtype", [("inc", np.int32), ("add", np.int8),
                                           ("add", np.float16), ("xor", np.float32)])
def test_an_atomic_numba_does_not_compile_for_the_arrays_dtype_faults_as_the_gpu_refuses(
        sim, atomic, dtype):
    """Numba's atomics compile for some dtypes only (inc and dec for unsigned 32 and 64 bits,
    the bitwise ones for integers, add for 32- and 64-bit numbers): an H200 refused these
    launches, which Numba's simulator ran."""
    ag = sim

    @ag.kernel
    @cuda.jit
    def apply(a):
        if atomic == "inc":
            cuda.atomic.inc(a, 0, 10)
        elif atomic == "add":
            cuda.atomic.add(a, 0, 1)
        else:
            cuda.atomic.xor(a, 0, 1)

    apply[1, 1](ag.zeros(2, dtype))
    with pytest.raises(ag.KernelFault, match=f"cuda.atomic.{atomic} of an array of "):
        ag.synchronize()
    apply[1, 1](ag.zeros(2, np.int32 if atomic == "xor" else np.uint32))     # (compiles)
    ag.synchronize()


def test_a_numba_kernel_takes_tuples_and_records_as_numba_does(sim):
    """Numba passes a tuple (nested or named) and a NumPy record by value; they are plain
    values, without dependencies. They were refused ("expected an asyncgpu array or a
    number, got tuple")."""
    import collections

    ag = sim

    @ag.kernel(out=["y"])
    @cuda.jit
    def poly(y, c):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = c[0][0] + c[0][1] * i + c[1]

    @ag.kernel(out=["y"])
    @cuda.jit
    def fields(y, r):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = r.a + r.b * i

    Coeffs = collections.namedtuple("Coeffs", "a b")
    y = ag.empty(4)
    poly[1, 4](y, ((1.0, 2), 10))
    assert y.numpy().tolist() == [11, 13, 15, 17]
    fields[1, 4](y, Coeffs(1.0, 3))
    assert y.numpy().tolist() == [1, 4, 7, 10]
    records = np.array([(1.0, 2)], dtype=[("a", "f8"), ("b", "i4")])
    fields[1, 4](y, records[0])
    records[0]["a"] = 100      # (the launch passes the value it was given: a copy)
    assert y.numpy().tolist() == [1, 3, 5, 7]


def test_a_tuple_holding_an_array_is_refused_with_the_fix(sim):
    """The runtime orders a launch by its array arguments; it cannot see an array inside a
    tuple, so such a tuple is refused before enqueue, naming the kernel, argument and fix."""
    ag = sim

    @ag.kernel
    @cuda.jit
    def pair(y, c):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = c[0][i] + c[1]

    x, y = ag.ones(4), ag.zeros(4)
    for arg, what in [((x, 1.0), r"float64\[4\]"), (((1.0, x), 2.0), r"float64\[4\]"),
                      ((np.ones(4), 1.0), r"numpy.ndarray float64\[4\]")]:
        with pytest.raises(ag.ArgumentError, match=(
                rf"kernel 'pair' .*argument 1 'c': got a tuple holding an array \({what}\).*"
                "pass the arrays as separate arguments")):
            pair[1, 4](y, arg)
    with pytest.raises(ag.ArgumentError, match=r"argument 1 'c': got a tuple holding str"):
        pair[1, 4](y, ("a", 1.0))
    with pytest.raises(ag.ArgumentError, match=r"argument 1 'c': Numba cannot type .*ints of "
                                               "at most 64 bits"):
        pair[1, 4](y, (2**70, 1.0))
    assert y.numpy().tolist() == [0] * 4


def test_libdevice_functions_compute_in_their_precision_or_fault_naming_the_function(sim):
    """numba.cuda.libdevice's functions are docstring stubs: a simulated kernel calling one got
    None and stored NaN, with no error. The common ones compute as the device does, in their
    declared precision; the others fault, naming the function."""
    from numba.cuda import libdevice
    from numba.cuda.libdevice import expf

    ag = sim

    @ag.kernel(const=["x"], out=["y", "z"])
    @cuda.jit
    def common(x, y, z):
        y[0] = libdevice.sinf(x[0])
        y[1] = expf(x[0])
        y[2] = cuda.libdevice.fmaxf(x[1], x[0])
        y[3] = libdevice.roundf(x[2])
        z[0] = libdevice.sin(x[0])
        z[1] = libdevice.exp10(x[0])

    x = ag.array(np.array([1.0, np.nan, -2.5], np.float32))
    y, z = ag.empty(4, np.float32), ag.empty(2, np.float64)
    common[1, 1](x, y, z)
    one = np.float32(1.0)
    assert y.get().tolist() == [np.sin(one), np.exp(one), 1.0, -3.0]
    assert z.get().tolist() == [np.sin(1.0), 10.0]
    assert libdevice.sinf(1.0) is None          # (the process's stubs untouched)

    @ag.kernel(out=["y"])
    @cuda.jit
    def fast(y):
        y[0] = libdevice.fast_sinf(np.float32(1.0))

    fast[1, 1](ag.empty(1, np.float32))
    with pytest.raises(ag.KernelFault, match="libdevice.fast_sinf is not simulated"):
        ag.synchronize()


def test_half_float_intrinsics_give_cudas_answers(sim):
    """cuda.fp16 in Numba's simulator: hfloor was a ceiling, hmax and hmin gave NaN where one
    operand was NaN (CUDA's __hmax and __hmin give the other), hfma rounded twice."""
    ag = sim

    @ag.kernel(const=["x"], out=["y"])
    @cuda.jit
    def half(x, y):
        y[0] = cuda.fp16.hfloor(x[0])
        y[1] = cuda.fp16.hmax(x[1], x[0])
        y[2] = cuda.fp16.hmin(x[0], x[1])
        y[3] = cuda.fp16.hfma(x[2], x[2], x[3])

    a = 1 + 3 * 2.0 ** -10          # (a * a + c is 9 * 2**-20, which twice rounded loses)
    x = ag.array(np.array([1.5, np.nan, a, -(1 + 6 * 2.0 ** -10)], np.float16))
    y = ag.empty(4, np.float16)
    half[1, 1](x, y)
    assert y.get().tolist() == [1.0, 1.5, 1.5, float(np.float16(9 * 2.0 ** -20))]


def test_float_scalar_arguments_compute_as_ieee_floats_as_on_the_gpu(sim):
    """A Python float argument stayed a Python float on sim: 1.0 / s of a zero faulted
    (ZeroDivisionError), s ** 0.5 of a negative number gave a complex, s ** 2000 overflowed
    (OverflowError). On the GPU it is a float64 and Numba's numpy error model gives inf, NaN,
    inf."""
    ag = sim

    @ag.kernel(out=["y"])
    @cuda.jit
    def ieee(y, zero, negative, c):
        y[0] = 1.0 / zero
        y[1] = negative ** 0.5
        y[2] = (negative * -1.0) ** 2000
        y[3] = (c * c).imag

    y = ag.empty(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # (no RuntimeWarning either: the GPU gives none)
        ieee[1, 1](y, 0.0, -4.0, 1 + 1j)
        got = y.get()
    assert got[0] == np.inf and np.isnan(got[1]) and got[2] == np.inf and got[3] == 2.0


def test_math_functions_give_the_devices_precision_and_ieee_answers(sim):
    """math.nextafter of float32s stepped in double precision on sim and erf of a float32 gave
    a double; remainder(x, 0) faulted (ValueError), ldexp and exp2 overflowing faulted
    (OverflowError); floor of an integer gave the integer, where Numba's is a float64 (so
    2**53 + 1 rounds to 2**53 before the floor)."""
    import math

    ag = sim

    @ag.kernel(const=["x"], out=["y", "z"])
    @cuda.jit
    def precise(x, n, y, z):
        y[0] = math.nextafter(x[0], x[1]) - 1.0
        y[1] = math.erf(x[2])
        y[2] = math.remainder(1.0, 0.0)
        y[3] = math.ldexp(1.0, 2000)
        y[4] = math.exp2(2000.0)
        y[5] = math.remainder(x[1], x[2])
        z[0] = math.floor(n + 1)

    x = ag.array(np.array([1.0, 2.0, 0.3], np.float32))
    y, z = ag.empty(6), ag.empty(1, np.int64)
    precise[1, 1](x, 2**53, y, z)
    got = y.get()
    assert got[0] == 2.0 ** -23 and got[1] == np.float32(math.erf(np.float32(0.3)))
    assert np.isnan(got[2]) and got[3] == got[4] == np.inf
    assert got[5] == np.float32(math.remainder(2.0, np.float32(0.3)))
    assert z.get().tolist() == [2**53]


def test_an_atomics_value_converts_to_the_arrays_dtype_first_as_on_the_gpu(sim):
    """Numba's atomics take the value as the array's dtype: a float64 added to a float32
    array rounds to float32 first, -0.5 added to an int32 one is 0, -1 added to a uint64 one
    wraps. Sim added in the wider type (1 + 2**-24 + 2**-50 rounded up in float32, 1 - 0.5
    truncated to 0) or faulted (OverflowError for -1 into uint64)."""
    ag = sim

    @ag.kernel
    @cuda.jit
    def accumulate(f, i, u, v, w):
        cuda.atomic.add(f, 0, v)
        cuda.atomic.add(i, 0, w)
        cuda.atomic.add(u, 0, -1)
        cuda.atomic.max(i, 1, 2.9)

    f, i = ag.array(np.ones(1, np.float32)), ag.array(np.array([1, 0], np.int32))
    u = ag.array(np.array([5], np.uint64))
    accumulate[1, 1](f, i, u, 2.0 ** -24 + 2.0 ** -50, -0.5)
    assert f.get().tolist() == [1.0] and i.get().tolist() == [1, 2] and u.get().tolist() == [4]
