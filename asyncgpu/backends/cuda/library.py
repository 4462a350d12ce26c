"""How the ``cuda`` backend runs a library call: the CuPy function, inside the node's stream.

The call runs when the runtime enqueues the node (after the event waits for its parents), with
the node's non-blocking stream as CuPy's current stream (``with stream:``), so every kernel and
every cuBLAS / cuFFT / cuSOLVER / cuRAND call CuPy makes goes to that stream (CuPy binds its
library handles to the current stream at each call); the legacy default stream is never used.

Memory CuPy allocates during the call comes from the runtime's managed pool
(``cupy.cuda.using_allocator``). A block that backs a result becomes an ``Allocation`` owned by the
runtime; the others are CuPy's temporaries (a call captured into a graph,
``asyncgpu.recorder.calls``, pins them for the graph's lifetime). CuPy's pool is stream-ordered: a
block freed while the stream still uses it returns to that stream's arena and is reused only by
later work on the same stream, which runs after it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Callable

import numpy as np

from ...core.deps import Access
from ...core.errors import AsyncGPUError, call_failed
from ...runtime.allocation import DEVICE, Allocation, c_strides
from ...runtime.array import Array, own_layout
from ...runtime.call_args import fill
from ...runtime.library import LibraryCall, argument_view


@contextlib.contextmanager
def _no_fft_plan_cache(cupy: Any, name: str) -> Iterator[None]:
    """Run an FFT without CuPy's plan cache.

    A cached cuFFT plan owns one work area and is shared by every call of the same shape,
    whatever the stream: two independent FFTs on two streams would race on it. An uncached
    plan's work area comes from this call's stream arena and is freed in stream order.
    """
    if not name.startswith("fft."):
        yield
        return
    cache = cupy.fft.config.get_plan_cache()
    size = cache.get_size()
    if size:
        cache.set_size(0)        # disables the cache (and drops the plans it held)
    try:
        yield
    finally:
        if size:
            cache.set_size(size)


class CudaCallLaunch:
    """Runs the CuPy call on the node's stream and adopts its result arrays."""

    __slots__ = ("backend", "runtime", "call", "fn", "accesses", "pinned")

    def __init__(self, backend: Any, runtime: Any, call: LibraryCall, fn: Callable[..., Any],
                 accesses: list[Access]) -> None:
        self.backend, self.runtime, self.call, self.fn = backend, runtime, call, fn
        self.accesses = accesses      # the node's list: adopted results are appended
        #: Set by the recorder when the call is captured into a graph: the blocks CuPy takes
        #: during the call (its temporaries) are kept here, so the pool never hands them out
        #: again while the graph, which writes them at every replay, exists.
        self.pinned: list[Any] | None = None

    def __call__(self, stream: Any) -> None:
        backend, call = self.backend, self.call
        cupy = backend.cupy
        chunks: list[Any] = []

        def malloc(size: int) -> Any:
            if size == 0:
                return backend.pool.malloc(0)
            # (inside `with stream`: this stream's arena; what dropped arrays hold is given
            # back first where the device refuses, see Runtime.allocating)
            buf = self.runtime.allocating(backend.alloc, size)
            chunks.append(buf)
            return buf.mem

        views = [backend.cupy_view(a) for a in call.arrays]
        # A failing call may have enqueued part of its work already: it is not raised from
        # here but after the node is issued (``Runtime.launch_call``), so that whatever was
        # enqueued stays ordered and its arguments stay alive like any node's.
        try:
            with cupy.cuda.using_allocator(malloc), stream, _no_fft_plan_cache(cupy, call.name):
                result = self.fn(*fill(call.args, views), **fill(call.kwargs, views))
                call.results = self._adopt(result, chunks, {}, malloc)
            if self.pinned is not None:
                self.pinned.extend(chunks)
        except AsyncGPUError as exc:  # ours (e.g. OutOfMemoryError from the allocator)
            call.error = exc
        except Exception as exc:
            call.error = call_failed(f"{call.describe()} failed: {type(exc).__name__}: {exc}", exc)
            call.error.__cause__ = exc

    def _adopt(self, value: Any, chunks: list[Any], adopted: dict[int, Allocation],
               malloc: Callable[[int], Any]) -> Any:
        cupy = self.backend.cupy
        if isinstance(value, tuple):
            items = [self._adopt(v, chunks, adopted, malloc) for v in value]
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        if isinstance(value, list):
            return [self._adopt(v, chunks, adopted, malloc) for v in value]
        if isinstance(value, np.generic):
            value = cupy.asarray(value)       # a 0-d device array, like CuPy's reductions
        if not isinstance(value, cupy.ndarray):
            return value
        if value.size == 0:        # no memory to adopt (and no allocation mid-issue)
            empty = Allocation(self.runtime, self.backend.adopt(self.backend.alloc(0)), 0,
                               DEVICE)
            return Array._view(empty, value.shape, value.dtype,
                               c_strides(value.shape, value.dtype.itemsize), 0)
        # (CuPy's strides are kept as they are: a Fortran-ordered result, from
        # ``asfortranarray`` or an ``order='F'`` copy, stays Fortran-ordered)
        ptr = value.data.ptr
        for i, a in enumerate(self.call.arrays):
            buf = self.backend.buffer_of(a._alloc.buffer)      # (this device's copy)
            if buf.ptr <= ptr < buf.ptr + buf.nbytes:
                return argument_view(self.call, i, value.shape, value.dtype,
                                     tuple(value.strides), ptr - buf.ptr)
        for buf in chunks:
            if buf.ptr <= ptr < buf.ptr + buf.nbytes:
                alloc = adopted.get(buf.uid)
                if alloc is None:
                    alloc = adopted[buf.uid] = Allocation(self.runtime, self.backend.adopt(buf),
                                                          buf.nbytes, DEVICE)
                    self.accesses.append(Access(alloc.id, alloc, 0, buf.nbytes, True,
                                                f"result of {self.call.name}"))
                    if ptr == buf.ptr and tuple(value.strides) != c_strides(
                            value.shape, value.dtype.itemsize):
                        own_layout(alloc, value.strides)    # (its ``base`` is None)
                return Array._view(alloc, value.shape, value.dtype, value.strides, ptr - buf.ptr)
        # Memory CuPy did not take from us (a cached constant, another library's buffer):
        # copy it into the runtime's memory, on this stream, in the same layout ('K': a
        # Fortran-ordered array stays one).
        return self._adopt(value.copy(order="K"), chunks, adopted, malloc)


def make_call(backend: Any, runtime: Any, call: LibraryCall, accesses: list[Access]
              ) -> CudaCallLaunch:
    return CudaCallLaunch(backend, runtime, call, call.resolve("cuda"), accesses)
