"""Bad input is refused before anything is enqueued, with a message naming kernel, argument, fix.

Each case also checks that nothing was scheduled and that the next valid launch runs.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

SRC = r'''
extern "C" __global__ void axpy(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
'''


def axpy_twin(x, y, a, n):
    y[:n] += a * x[:n]


@pytest.fixture
def env(sim):
    ag = sim
    k = ag.cuda_kernel(SRC, "axpy", sim=axpy_twin)
    x = ag.array(np.arange(8, dtype=np.float32))
    y = ag.zeros(8, np.float32)
    return ag, k, x, y


def assert_nothing_enqueued_and_usable(ag, k, x, y, before):
    after = ag.statistics()
    assert after.nodes == before.nodes and after.kernels == before.kernels
    k[1, 8](x, y, 2.0, 8)
    assert y.numpy().tolist() == (2.0 * np.arange(8)).tolist()


CASES = [
    ("too few arguments", lambda ag, x, y: ((x, y, 2.0), ag.ArgumentError,
                                            r"kernel 'axpy' \(launched at .*\) takes 4 arguments \(x, y, a, n\); 3 given")),
    ("scalar for pointer", lambda ag, x, y: ((1.0, y, 2.0, 8), ag.ArgumentError,
                                             r"argument 0 'x': expected an asyncgpu array")),
    ("array for scalar", lambda ag, x, y: ((x, y, x, 8), ag.ArgumentError,
                                           r"argument 2 'a': expected a scalar float")),
    ("wrong dtype", lambda ag, x, y: ((ag.zeros(8, np.float64), y, 2.0, 8), ag.ArgumentError,
                                      r"argument 0 'x': expected a float32 array .* got float64\[8\]")),
    ("int overflow", lambda ag, x, y: ((x, y, 2.0, 2**40), ag.ArgumentValueError,
                                       r"argument 3 'n': 1099511627776 does not fit in int")),
    ("float for int", lambda ag, x, y: ((x, y, 2.0, 2.5), ag.ArgumentValueError,
                                        r"argument 3 'n': expected an integer")),
    ("nan for int", lambda ag, x, y: ((x, y, 2.0, float("nan")), ag.ArgumentValueError,
                                      r"argument 3 'n': expected an integer")),
    ("None", lambda ag, x, y: ((x, y, None, 8), ag.ArgumentError, r"argument 2 'a'")),
    ("bool for int", lambda ag, x, y: ((x, y, 2.0, True), ag.ArgumentError, r"argument 3 'n'")),
    ("complex for float", lambda ag, x, y: ((x, y, 1j, 8), ag.ArgumentError, r"argument 2 'a'")),
    ("numpy array", lambda ag, x, y: ((np.zeros(8, np.float32), y, 2.0, 8), ag.ArgumentError,
                                      r"argument 0 'x': got a numpy.ndarray; .*asyncgpu.asarray")),
    ("non-contiguous", lambda ag, x, y: ((ag.zeros(16, np.float32)[::2], y, 2.0, 8),
                                         ag.ArgumentValueError, r"argument 0 'x': .*not C-contiguous")),
]


@pytest.mark.parametrize("name,case", CASES, ids=[c[0] for c in CASES])
def test_bad_argument_is_refused_before_enqueue(env, name, case):
    ag, k, x, y = env
    args, exc, pattern = case(ag, x, y)
    before = ag.statistics()
    with pytest.raises(exc, match=pattern):
        k[1, 8](*args)
    assert_nothing_enqueued_and_usable(ag, k, x, y, before)


@pytest.mark.parametrize("config,pattern", [
    ((0, 8), r"blocks along axis x must be in \[1, "),
    ((1, 2048), r"threads per block along axis x must be in \[1, 1024\]; got 2048"),
    ((1, (32, 32, 2)), r"2048 threads; the limit is 1024"),
    ((1, (1, 1, 65)), r"threads per block along axis z must be in \[1, 64\]"),
    ((1.5, 8), r"blocks must be a positive integer"),
    ((1, 8, -1), r"dynamic shared memory must be an integer"),
    ((1, 8, 1 << 20), r"dynamic shared memory must be an integer in \[0, 49152\]"),
    ((1, 8, 0, 0), r"asyncgpu chooses the stream itself"),
    ((1,), r"got 1 values"),
])
def test_bad_launch_configuration(env, config, pattern):
    ag, k, x, y = env
    before = ag.statistics()
    with pytest.raises(ag.ArgumentValueError, match=pattern):
        k[config](x, y, 2.0, 8)
    assert_nothing_enqueued_and_usable(ag, k, x, y, before)


def test_freed_array(env):
    ag, k, x, y = env
    z = ag.array(np.ones(8, np.float32))
    z.free()
    before = ag.statistics()
    with pytest.raises(ag.FreedArrayError, match=r"argument 0 'x': array float32\[8\] has been freed"):
        k[1, 8](z, y, 2.0, 8)
    with pytest.raises(ag.FreedArrayError):
        z.numpy()
    with pytest.raises(ag.FreedArrayError):
        z[1:3]
    assert_nothing_enqueued_and_usable(ag, k, x, y, before)


def test_free_waits_for_pending_work(env):
    ag, k, x, y = env
    k[1, 8](x, y, 1.0, 8)
    x.free()                      # the kernel reading x must run first
    assert y.numpy().tolist() == np.arange(8).tolist()


def test_kernel_called_without_configuration(env):
    ag, k, x, y = env
    with pytest.raises(ag.ArgumentValueError, match=r"needs a launch configuration: .*axpy\[blocks"):
        k(x, y, 2.0, 8)


def test_annotation_errors_at_definition(sim):
    ag = sim
    with pytest.raises(ag.SignatureError, match=r"const=\['z'\] names no parameter"):
        ag.cuda_kernel(SRC, "axpy", const=["z"])
    with pytest.raises(ag.SignatureError, match=r"applies to arrays, but \['n'\] are scalars"):
        ag.cuda_kernel(SRC, "axpy", const=["n"])
    with pytest.raises(ag.SignatureError, match=r"declared const in the source and cannot be out"):
        ag.cuda_kernel(SRC, "axpy", out=["x"])
    with pytest.raises(ag.SignatureError, match=r"cannot be both const and out"):
        ag.cuda_kernel(SRC, "axpy", const=["y"], out=["y"])
    with pytest.raises(ag.SignatureError, match=r"has 4 parameters, signature declares 3"):
        ag.cuda_kernel(SRC, "axpy", "const pointer, pointer, float")

    @cuda.jit
    def k(x, y):
        pass

    with pytest.raises(ag.SignatureError, match=r"out=\['q'\] names no parameter"):
        ag.kernel(k, out=["q"])


def test_grcuda_signature_string_is_accepted(sim):
    ag = sim
    k = ag.cuda_kernel(SRC, "axpy", "const pointer x, pointer y, float a, sint32 n", sim=axpy_twin)
    x, y = ag.ones(4, np.float32), ag.zeros(4, np.float32)
    k[1, 4](x, y, 3.0, 4)
    assert y.numpy().tolist() == [3.0] * 4


def test_numba_typing_error_is_not_a_crash(sim):
    ag = sim

    @ag.kernel
    @cuda.jit
    def fill(y, v):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = v

    y = ag.zeros(4, np.float32)
    with pytest.raises(ag.ArgumentError, match=r"argument 1 'v': expected an asyncgpu array or a number"):
        fill[1, 4](y, "seven")
    fill[1, 4](y, 7)
    assert y.numpy().tolist() == [7.0] * 4


def test_bad_allocation_requests(sim):
    ag = sim
    with pytest.raises(ValueError, match="negative dimensions"):
        ag.zeros(-1)
    with pytest.raises(TypeError, match="dimensions must be integers"):
        ag.zeros(2.5)
    with pytest.raises(ValueError, match="too large"):
        ag.empty((2**40, 2**40), np.float32)
    with pytest.raises(TypeError, match="dtype object is not supported"):
        ag.array(np.array([None, 1], dtype=object))
    with pytest.raises(TypeError, match="no public constructor"):
        ag.Array()
