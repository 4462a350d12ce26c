"""Hand-written multi-GPU CuPy: what the multi-GPU benchmarks compare asyncgpu with.

One non-blocking stream per GPU for its kernels, and one more for copies from the host, so that
a chunk's copy runs while the chunk before it computes (``upload``: the kernel stream waits
for an event recorded after the copy); Numba kernels launched on the kernel stream through
their compiled ``_Kernel.launch`` (the dispatcher only for the first launch of a signature,
which compiles); an array's GPU made current around each call; copies between GPUs are
``cudaMemcpyPeerAsync`` on the destination's stream after an event of the source's stream;
one synchronize per GPU at the end of a step. Everything a programmer spreading work over
GPUs by hand writes, and nothing asyncgpu does for them.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class HandGPUs:
    """The streams, compiled kernels and copies of a hand-written run on ``devices`` GPUs."""

    def __init__(self, devices: int) -> None:
        import cupy
        from numba import cuda

        self.cupy, self.n = cupy, devices
        self.streams, self.nstreams, self.copies = [], [], []
        for d in range(devices):
            with cupy.cuda.Device(d):
                s = cupy.cuda.Stream(non_blocking=True)
                self.streams.append(s)
                self.nstreams.append(cuda.external_stream(s.ptr))
                self.copies.append(cupy.cuda.Stream(non_blocking=True))
        self.kernels: dict[tuple[Any, ...], Any] = {}
        self.views: dict[int, tuple[Any, Any]] = {}

    def on(self, d: int) -> Any:
        """GPU ``d`` current in the block."""
        return self.cupy.cuda.Device(d)

    def array(self, host: np.ndarray, d: int) -> Any:
        with self.on(d):
            return self.cupy.asarray(host)

    def empty(self, shape: Any, dtype: Any, d: int) -> Any:
        with self.on(d):
            return self.cupy.empty(shape, dtype)

    def zeros(self, shape: Any, dtype: Any, d: int) -> Any:
        with self.on(d):
            return self.cupy.zeros(shape, dtype)

    def launch(self, kernel: Any, d: int, blocks: int, threads: int, *args: Any) -> None:
        """``kernel`` compiled for these argument types on GPU ``d``, launched on its stream."""
        with self.on(d):
            views = [self._view(a) for a in args]
            key = (id(kernel), d, blocks, threads,
                   tuple((type(v), getattr(v, "dtype", None), getattr(v, "ndim", None))
                         for v in views))
            compiled = self.kernels.get(key)
            if compiled is None:        # (the first launch compiles through the dispatcher)
                kernel[blocks, threads, self.nstreams[d]](*views)
                sig = tuple(kernel.typeof_pyval(v) for v in views)
                self.kernels[key] = kernel.overloads[sig]
                return
            compiled.launch(views, (blocks,), (threads,), self.nstreams[d], 0)

    def _view(self, a: Any) -> Any:
        """Numba's view of a CuPy array (made once per array), or a number as it is."""
        if not hasattr(a, "__cuda_array_interface__"):
            return a
        entry = self.views.get(id(a))
        if entry is None or entry[0] is not a:
            from numba import cuda

            entry = self.views[id(a)] = (a, cuda.as_cuda_array(a))
        return entry[1]

    def after(self, d: int, source: int) -> None:
        """GPU ``d``'s stream waits for the work enqueued so far on GPU ``source``'s."""
        if d == source:
            return
        cupy = self.cupy
        with self.on(source):
            event = cupy.cuda.Event(block=False, disable_timing=True)
            event.record(self.streams[source])
        with self.on(d):
            self.streams[d].wait_event(event)

    def upload(self, pairs: list[tuple[Any, np.ndarray]], d: int) -> None:
        """Copy each ``(device array, pinned host array)`` of ``pairs`` on GPU ``d``'s copy
        stream; the kernels enqueued on GPU ``d`` afterwards wait for these copies only."""
        cupy = self.cupy
        with self.on(d):
            for dev, host in pairs:
                dev.set(host, stream=self.copies[d])
            event = cupy.cuda.Event(block=False, disable_timing=True)
            event.record(self.copies[d])
            self.streams[d].wait_event(event)

    def peer(self, dst: Any, d: int, src: Any, source: int) -> Any:
        """Copy ``src`` (on GPU ``source``) into ``dst`` (on GPU ``d``) after the work enqueued
        so far on ``source``; returns ``dst`` (``src`` itself when both are one GPU's)."""
        if d == source:
            return src
        self.after(d, source)
        with self.on(d):
            self.cupy.cuda.runtime.memcpyPeerAsync(dst.data.ptr, d, src.data.ptr, source,
                                                   src.nbytes, self.streams[d].ptr)
        return dst

    def sync(self) -> None:
        for s in (*self.copies, *self.streams):
            s.synchronize()
