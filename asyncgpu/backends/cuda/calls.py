"""The CUDA calls of a launch, as one object the compiled launch path calls in C.

The model
---------
Every launch on the ``cuda`` backend makes a few CUDA calls: the kernel launch (with a packed
parameter buffer), the record of its completion event, perhaps a stream's wait for another
stream's event, later a query of that event; a graph replay makes a graph launch.
:class:`CudaCalls` makes them through CuPy's callables (``driver.launchKernel``,
``runtime.eventRecord``, ``runtime.streamWaitEvent``, ``Event.done``, ``runtime.memcpyAsync``,
``runtime.streamSynchronize``, ``Graph.launch``).
``cudriver.DriverCalls`` (compiled only: ``asyncgpu/backends/cuda/cudriver.pyx``) is a subclass
that makes the same calls straight into the driver, and enqueues kernels through one-node
graphs. The backend holds one of the two (:func:`asyncgpu.backends.cuda.driver.driver_calls`
chooses), and so does every packed plan it makes.

Compiled, the handles are C integers and the methods are reached through the class's C method
table: a launch goes from the backend's compiled code to the driver without a Python call on
the way. Uncompiled, they are ordinary methods.

Invariants
----------
* Handles are the integers CuPy's callables take (``ptr`` of a stream or event, a kernel's
  function handle, the address of ``cuLaunchKernel``'s ``extra`` array).
* A refused call raises what CuPy raises for it (``CUDADriverError``, ``CUDARuntimeError``);
  the backend turns that into asyncgpu's errors.
* The calls belong to the device current where they were made. :meth:`enter` makes it current
  and returns what :meth:`leave` puts back (the thread's device before): a runtime over several
  devices switches with them around each part's launches, at the cost of two C calls where
  compiled with the driver's (``cuCtxGetCurrent``, ``cuCtxSetCurrent``).

Example::

    calls = CudaCalls(cupy)
    calls.event_record(event.ptr, stream.ptr)
    calls.launch_kernel(fn, 1, 1, 1, 256, 1, 1, 0, stream.ptr, extra_ptr)
"""

from __future__ import annotations

from typing import Any


#: cudaErrorNotReady: the work before an event's record has not completed.
_NOT_READY = 600


class CudaCalls:
    """The CUDA calls of a launch through ``cupy``'s callables (see the module docstring)."""

    def __init__(self, cupy: Any) -> None:
        self._launch = getattr(cupy.cuda.driver, "launchKernel", None)
        self._record = cupy.cuda.runtime.eventRecord
        self._wait = cupy.cuda.runtime.streamWaitEvent
        runtime = cupy.cuda.runtime
        self._copy = runtime.memcpyAsync
        self._query = runtime.streamQuery
        self._sync = runtime.streamSynchronize
        self._elapsed = runtime.eventElapsedTime
        self._get_device = runtime.getDevice
        self._set_device = runtime.setDevice
        self._device = runtime.getDevice()

    def launches_kernels(self) -> bool:
        """Whether :meth:`launch_kernel` can be made (a CuPy without ``launchKernel`` cannot:
        kernels then keep CuPy's and Numba's own launches)."""
        return self._launch is not None

    def launch_kernel(self, f: int, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,
                      shared: int, stream: int, extra: int) -> None:
        """``cuLaunchKernel`` of function ``f`` on ``stream``, its parameters in the buffer
        that ``extra`` describes."""
        self._launch(f, gx, gy, gz, bx, by, bz, shared, stream, 0, extra)

    def event_record(self, event: int, stream: int) -> None:
        """Record ``event`` on ``stream``."""
        self._record(event, stream)

    def stream_wait(self, stream: int, event: int, flags: int) -> None:
        """Make ``stream``'s later work wait for ``event``'s latest record."""
        self._wait(stream, event, flags)

    def event_done(self, event: Any) -> bool:
        """Whether a CuPy event's latest record has completed (without waiting)."""
        return bool(event.done)

    def event_elapsed_ms(self, start: int, end: int) -> float:
        """Milliseconds between two timing events' latest records, or -1.0 while either has
        not completed (one call, where a query of each and then the time are three)."""
        try:
            return self._elapsed(start, end)
        except Exception as exc:        # (CuPy's CUDARuntimeError; its status says which)
            if getattr(exc, "status", None) == _NOT_READY:
                return -1.0
            raise

    def event_sync(self, event: Any) -> None:
        """Block until a CuPy event's latest record has completed: a query first, which keeps
        the GIL where the wait releases it (while other threads run, a release costs this
        thread a context switch to get the GIL back, for an event often done already)."""
        if not self.event_done(event):
            event.synchronize()

    def memcpy_async(self, dst: int, src: int, nbytes: int, kind: int, stream: int) -> None:
        """Enqueue a copy of ``nbytes`` from ``src`` to ``dst`` (``kind``: CUDA's
        ``cudaMemcpyKind``) on ``stream``; a pinned host side makes it asynchronous."""
        self._copy(dst, src, nbytes, kind, stream)

    def stream_sync(self, stream: int) -> None:
        """Block until ``stream``'s work completed; a query first (see :meth:`event_sync`)."""
        if self._query(stream) != 0:     # (cudaSuccess: done; an error, the wait raises)
            self._sync(stream)

    def graph_launch(self, graph: Any, stream: Any) -> None:
        """Launch a CuPy graph on a CuPy stream."""
        graph.launch(stream)

    def enter(self) -> int:
        """Make these calls' device current; returns the thread's device before (what
        :meth:`leave` takes)."""
        previous = self._get_device()
        if previous != self._device:
            self._set_device(self._device)
        return previous

    def leave(self, previous: int) -> None:
        """Make ``previous`` (what :meth:`enter` returned) the thread's device again."""
        if previous != self._device:
            self._set_device(previous)
