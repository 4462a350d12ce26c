"""The ``cuda`` backend's library-call path, run on the CPU against a minimal stand-in for CuPy.

``backends/cuda/library.py`` is only executed for real on a GPU. Here it runs against a small
fake of the CuPy API it uses (``ndarray`` over raw pointers, ``cuda.UnownedMemory``,
``cuda.MemoryPointer``, ``cuda.using_allocator``, streams as context managers, the FFT plan
cache), with NumPy doing the arithmetic in host memory. The call is executed at enqueue, as on
the GPU, so these tests check the Python logic: views of arguments, allocation through the
runtime's allocator and adoption of result blocks, ``out=``, tuples, scalars, errors and the FFT
plan cache; ordering is covered by the sim backend's tests.
"""

from __future__ import annotations

import contextlib
import itertools
import types

import numpy as np
import pytest

from asyncgpu.backends.cuda.backend import cache_keys, cupy_view
from asyncgpu.backends.sim.backend import SimBackend

_uids = itertools.count(1)


class _Mem:
    def __init__(self, ptr, size, owner=None):
        self.ptr, self.size, self.owner = ptr, size, owner    # owner keeps the bytes alive


class _Ptr:
    def __init__(self, mem, offset=0):
        self.mem, self.ptr = mem, mem.ptr + offset


class FakeNdarray:
    def __init__(self, shape, dtype, memptr=None, strides=None):
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        if memptr is None:
            memptr = fake.cuda._allocator(nbytes)
        self.data = memptr
        self._keep = memptr
        if nbytes == 0:
            self.np = np.empty(shape, dtype)
        else:
            span = max(nbytes, 1) if strides is None else (
                sum((n - 1) * abs(s) for n, s in zip(shape, strides)) + dtype.itemsize)
            raw = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * span)
                                        .from_address(memptr.ptr))
            self.np = np.ndarray(shape, dtype, buffer=raw, strides=strides)

    shape = property(lambda self: self.np.shape)
    dtype = property(lambda self: self.np.dtype)
    strides = property(lambda self: self.np.strides)
    size = property(lambda self: self.np.size)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.data.ptr, False),
                "strides": self.strides, "version": 3, "stream": None}

    def copy(self):
        out = FakeNdarray(self.shape, self.dtype)
        out.np[...] = self.np
        return out


def _from_numpy(result, inputs):
    if isinstance(result, tuple):
        return tuple(_from_numpy(r, inputs) for r in result)
    if isinstance(result, np.generic):
        return result
    if not isinstance(result, np.ndarray):
        return result
    for a in inputs:
        if np.shares_memory(result, a.np):
            addr = result.__array_interface__["data"][0]
            view = FakeNdarray.__new__(FakeNdarray)
            view.data, view._keep, view.np = _Ptr(_Mem(addr, 0)), a, result
            return view
    out = FakeNdarray(result.shape, result.dtype)
    out.np[...] = result
    return out


def _function(np_fn):
    def call(*args, **kwargs):
        inputs = [a for a in list(args) + list(kwargs.values()) if isinstance(a, FakeNdarray)]
        conv = [a.np if isinstance(a, FakeNdarray) else a for a in args]
        kw = {k: (v.np if isinstance(v, FakeNdarray) else v) for k, v in kwargs.items()}
        if fake.current_stream is None:
            raise AssertionError("a CuPy call ran outside the node's stream")
        return _from_numpy(np_fn(*conv, **kw), inputs)
    return call


class _PlanCache:
    def __init__(self):
        self.size, self.sizes_during_fft = 16, []

    def get_size(self):
        return self.size

    def set_size(self, n):
        self.size = n


class FakeEvent:
    def __init__(self, block=False, disable_timing=True):
        self.recorded_on = None

    def record(self, stream=None):
        self.recorded_on = stream


class FakeStream:
    def __init__(self, inner):
        self.inner = inner
        self.waits = []

    def wait_event(self, event):
        self.waits.append(event)

    def __enter__(self):
        fake.current_stream = self

    def __exit__(self, *exc):
        fake.current_stream = None


def _build():
    mod = types.SimpleNamespace()
    mod.ndarray = FakeNdarray
    mod.current_stream = None
    cuda = types.SimpleNamespace()
    cuda.UnownedMemory = lambda ptr, size, owner, device: _Mem(ptr, size)
    cuda.MemoryPointer = _Ptr
    cuda._allocator = lambda n: FakeBuffer(n).mem       # CuPy's default pool, for the caller

    @contextlib.contextmanager
    def using_allocator(fn):
        old, cuda._allocator = cuda._allocator, fn
        try:
            yield
        finally:
            cuda._allocator = old

    cuda.using_allocator = using_allocator
    cuda.Event = FakeEvent
    user = FakeStream("user")
    cuda.user_stream = user
    cuda.get_current_stream = lambda: mod.current_stream or user
    mod.cuda = cuda

    def array(src, dtype=None, copy=True, order="C"):
        if mod.current_stream is None:
            raise AssertionError("the import copy ran off the node's stream")
        return _from_numpy(np.array(src.np, dtype=dtype, copy=True, order=order), [])

    mod.array = array
    for name in ("sqrt", "add", "matmul", "sum", "transpose", "nonzero", "argmax"):
        setattr(mod, name, _function(getattr(np, name)))
    cache = _PlanCache()

    def fft(a, *args, **kwargs):
        cache.sizes_during_fft.append(cache.size)
        return _function(np.fft.fft)(a, *args, **kwargs)

    mod.fft = types.SimpleNamespace(fft=fft, config=types.SimpleNamespace(
        get_plan_cache=lambda: cache))
    mod.linalg = types.SimpleNamespace(qr=_function(np.linalg.qr))

    class FakeGenerator:
        def __init__(self, seed):
            if mod.current_stream is None:
                raise AssertionError("the generator's state was initialized off the stream")
            self.inner = np.random.default_rng(seed)

        def __getattr__(self, name):
            return _function(getattr(self.inner, name))

    mod.random = types.SimpleNamespace(default_rng=FakeGenerator)
    mod.asarray = lambda v: v if isinstance(v, FakeNdarray) else _from_numpy(np.asarray(v), [])
    return mod


fake = _build()


class FakeBuffer:
    def __init__(self, nbytes):
        self.uid = self.host_uid = next(_uids)
        self.nbytes = nbytes
        self.host = self.dev = np.zeros(max(nbytes, 1), np.uint8)[:nbytes]
        self.ptr = self.host.ctypes.data
        self.mem = _Ptr(_Mem(self.ptr, nbytes, self.host))

    def poison(self):            # (the sim backend's buffer interface, when it frees one)
        self.host.fill(0xFF)

    def on(self, device):        # (and its one device's bytes)
        return self.dev

    def uid_on(self, device):
        return self.uid

    def device_pointer(self):
        return self.ptr


class FakeCudaBackend(SimBackend):
    """The sim backend's streams and events, CuPy-style library calls run at enqueue."""

    name = "cuda"
    slot = 0
    cache_keys = cache_keys(0)

    def __init__(self):
        super().__init__(0, "eager", 0.0)
        self.cupy = fake
        self.device = 0
        self.pool = types.SimpleNamespace(malloc=lambda n: FakeBuffer(n).mem)

    def alloc(self, nbytes):
        return FakeBuffer(nbytes)

    def free(self, buffer):
        buffer.host = None

    def library_call(self, runtime, call, accesses):
        from asyncgpu.backends.cuda.library import make_call
        return make_call(self, runtime, call, accesses)

    def buffer_of(self, buffer):
        return buffer

    def adopt(self, buffer):
        return buffer

    def cupy_view(self, array):
        return cupy_view(self, array)    # (CudaBackend.cupy_view's own)

    def launch(self, node, stream):
        if callable(node.launch):
            node.launch(FakeStream(stream))
        else:
            super().launch(node, stream)


@pytest.fixture
def fake_cuda(monkeypatch):
    import asyncgpu as ag
    import asyncgpu.runtime.array_modules as array_modules
    from asyncgpu.runtime import current as _runtime
    from asyncgpu.backends import CheckedBackend

    monkeypatch.setattr(array_modules, "backend_module",
                        lambda backend: fake if backend == "cuda" else np)
    with ag.configure(backend="sim", execution="async"):
        rt = _runtime.current_runtime()
        inner = FakeCudaBackend()
        monkeypatch.setattr(rt, "backend", CheckedBackend(inner, lambda: ""))
        rt._configure(rt.options)
        yield ag
        rt.synchronize()


def test_results_are_adopted_views_are_views(fake_cuda):
    import asyncgpu.cupy as acp

    ag = fake_cuda
    h = np.arange(12.0).reshape(3, 4)
    a = ag.array(h)
    r = acp.sqrt(a)
    assert isinstance(r, ag.Array) and r._alloc is not a._alloc
    np.testing.assert_array_equal(r.numpy(), np.sqrt(h))
    t = acp.transpose(a)
    assert t._alloc is a._alloc and t.shape == (4, 3)
    np.testing.assert_array_equal(t.numpy(), h.T)
    s = acp.sum(a)
    assert s.shape == () and float(s) == h.sum()
    assert int(acp.argmax(a)) == 11       # a NumPy scalar result becomes a 0-d array
    q, rr = acp.linalg.qr(a)
    np.testing.assert_allclose((q @ rr).numpy(), h, atol=1e-12)
    ag.synchronize()


def test_out_writes_the_argument(fake_cuda):
    import asyncgpu.cupy as acp

    ag = fake_cuda
    a, b = ag.array(np.ones(5)), ag.array(np.arange(5.0))
    r = acp.add(a, b, out=a)
    assert r._alloc is a._alloc
    np.testing.assert_array_equal(a.numpy(), 1 + np.arange(5.0))


def test_fft_runs_without_the_plan_cache_and_restores_it(fake_cuda):
    import asyncgpu.cupy as acp

    ag = fake_cuda
    cache = fake.fft.config.get_plan_cache()
    f = acp.fft.fft(ag.array(np.arange(8.0)))
    np.testing.assert_allclose(f.numpy(), np.fft.fft(np.arange(8.0)))
    assert cache.sizes_during_fft[-1] == 0 and cache.get_size() == 16


def test_errors_name_the_call_and_leave_the_runtime_usable(fake_cuda):
    import asyncgpu.cupy as acp

    ag = fake_cuda
    with pytest.raises(ag.ArgumentError, match="call 'add' failed: ValueError"):
        acp.add(ag.array(np.ones(3)), ag.array(np.ones(4)))
    np.testing.assert_array_equal(acp.sqrt(ag.array(np.full(2, 4.0))).numpy(), [2.0, 2.0])


def test_data_dependent_call_runs_on_the_stream(fake_cuda):
    import asyncgpu.cupy as acp

    ag = fake_cuda
    (idx,) = acp.nonzero(ag.array(np.array([0, 3, 0, 1])))
    assert idx.numpy().tolist() == [1, 3]


def test_generator_is_created_and_drawn_on_streams(fake_cuda):
    import asyncgpu.cupy as acp

    ag = fake_cuda
    g = acp.random.default_rng(4)
    x = g.standard_normal((100, 50))
    y = g.random(10)
    assert isinstance(x, ag.Array) and x.shape == (100, 50) and y.shape == (10,)
    expected = np.random.default_rng(4)
    np.testing.assert_array_equal(x.numpy(), expected.standard_normal((100, 50)))
    np.testing.assert_array_equal(y.numpy(), expected.random(10))

