"""The ``cuda`` backend's stage timer: launches of a recording timed with CUDA events, on
scratch copies of the arrays they write.

What it does, once per capture that asks for timings (``asyncgpu.recorder.profile``):

1. waits for the device (so the recording's inputs are complete and nothing of ours runs);
2. for every allocation a launch of the recording writes, allocates a scratch block of the
   same size (asyncgpu's managed pool) and copies the allocation into it (device to device);
3. rebuilds each launch with every array on such an allocation replaced by the same view of
   its scratch copy (``Kernel.bind`` and the backend's ``kernel_launch``: the same compiled
   kernel and launch path as the real launch). Arrays only read are the program's own: the
   timed launches read them, never write them, so the program sees no effect;
4. ``time(stage)`` runs the stage ``WARMUP`` times untimed, then ``REPEAT`` times between
   timing events: group ``j`` on stream ``j``, all groups forked from and joined back into
   stream 0, and returns the median in seconds; ``time_groups(stage)`` the median of each
   group's end, from the same start. Before each run the scratch copies are copied
   again from the program's arrays (on stream 0, outside the timed interval), so every run
   does the same work: a kernel that consumes state it writes (a work counter that hands out
   rows, an accumulator) would otherwise find nothing left to do after the first run.

Each run is held behind a *gate*: a one-thread kernel that spins on a flag in pinned host
memory, enqueued on stream 0 before the start event; the host opens it (writes the flag) once
the whole run is enqueued. Without it the interval would include the host's time to enqueue
the launches (5-10 us each on the H100 machine): one-block kernels looked about 6 us long,
which made short launches look long to the lane budget
(``asyncgpu.recorder.schedule.lane_budget``). The gate gives up by itself after about a second
(the interval is then simply longer), so a host that never opens it cannot hang the device.

The scratch copies start with the data the launches would see (so data-dependent kernels, such
as a gather through an index array the recording computes, stay in bounds as in the real run)
and are released after the capture. ``peak_bandwidth`` is measured once per backend: a
device-to-device copy of 128 MiB of asyncgpu's managed memory (prefetched to the device first),
bytes read plus bytes written over its time, the best of 3.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Sequence
from typing import Any

from ...runtime.allocation import Allocation
from ...runtime.array import Array

log = logging.getLogger("asyncgpu")

WARMUP = 1
REPEAT = 3
_MEMCPY_DEFAULT = 4            # cudaMemcpyDefault: unified addressing tells the direction
_BANDWIDTH_BYTES = 128 << 20


_GATE = r"""extern "C" __global__ void asyncgpu_timing_gate(unsigned long long flag_ptr) {
    volatile int* flag = (volatile int*)flag_ptr;
    long long start = clock64();
    while (*flag == 0 && clock64() - start < 2000000000LL) {
        __nanosleep(200);
    }
}"""


class _Gate:
    """A flag in pinned host memory and the kernel that waits for it (one per backend)."""

    def __init__(self, backend: Any) -> None:
        import numpy as np

        cupy = backend.cupy
        self._mem = cupy.cuda.alloc_pinned_memory(8)
        self.flag = np.frombuffer(self._mem, np.int32, 1)
        self._arg = np.uint64(self._mem.ptr)     # mapped: unified addressing
        self._kernel = cupy.RawKernel(_GATE, "asyncgpu_timing_gate")
        self._kernel.compile()

    def close_on(self, stream: Any) -> None:
        self.flag[0] = 0
        self._kernel((1,), (1,), (self._arg,), stream=stream)

    def open(self) -> None:
        self.flag[0] = 1


def _gate(backend: Any) -> _Gate | None:
    """The backend's gate, made on first use; None if it cannot be made (logged once)."""
    gate = getattr(backend, "_timing_gate", False)
    if gate is False:
        try:
            gate = _Gate(backend)
        except Exception as exc:    # timing still works, only less precisely
            log.warning("asyncgpu: no timing gate (%s): short launches are timed with the "
                        "host's enqueue time included", exc)
            gate = None
        backend._timing_gate = gate
    return gate


class CudaStageTimer:
    """Times stages of ``launches`` (see the module docstring)."""

    def __init__(self, backend: Any, runtime: Any, launches: Sequence[Any]) -> None:
        self.backend = backend
        cupy = backend.cupy
        backend.synchronize()
        scratch: dict[int, Allocation] = {}
        #: (scratch pointer, the program's pointer, bytes): copied again before each run
        self._refresh: list[tuple[int, int, int]] = []
        for launch in launches:
            for a in launch.arrays:
                if a.write and a.key not in scratch and a.alloc.nbytes:
                    alloc = a.alloc
                    buf = runtime.allocate(alloc.nbytes)
                    cupy.cuda.runtime.memcpy(buf.ptr, alloc.buffer.ptr, alloc.nbytes,
                                             _MEMCPY_DEFAULT)
                    scratch[a.key] = Allocation(runtime, buf, alloc.nbytes, alloc.location)
                    self._refresh.append((buf.ptr, alloc.buffer.ptr, alloc.nbytes))
        self._scratch = scratch
        self._launches = [self._rebind(runtime, launch) for launch in launches]
        self._streams: list[Any] = []
        self._start = backend.timing_event()
        self._stop = backend.timing_event()
        self._fork = backend.create_event()
        self._gate = _gate(backend)
        self.peak_bandwidth = peak_bandwidth(backend)

    def _rebind(self, runtime: Any, launch: Any) -> Any:
        if launch.launcher is None:     # a library call: not timed (see _graph_profile)
            return None
        args = []
        for v in launch.args:
            if isinstance(v, Array) and v._alloc.id in self._scratch:
                v = Array._view(self._scratch[v._alloc.id], v.shape, v.dtype, v.strides,
                                v._offset)
            args.append(v)
        kernel = launch.launcher.kernel
        arrays, values = kernel.bind(runtime, tuple(args), launch.site)
        return self.backend.kernel_launch(kernel, launch.launcher, arrays, values, launch.site)

    def _stream(self, j: int) -> Any:
        while len(self._streams) <= j:
            self._streams.append(self.backend.create_stream())
        return self._streams[j]

    def time(self, stage: Sequence[Sequence[int]]) -> float:
        """Median seconds of one run of ``stage`` (groups concurrently, each in order)."""
        return self._runs(stage)[0]

    def time_groups(self, stage: Sequence[Sequence[int]]) -> list[float]:
        """Per group of ``stage``, the median seconds from a run's start to that group's
        end (groups concurrently, each in order)."""
        return self._runs(stage)[1]

    def _runs(self, stage: Sequence[Sequence[int]]) -> tuple[float, list[float]]:
        """The median seconds of a run of ``stage``, and of each group's part of it."""
        streams = [self._stream(j) for j in range(len(stage))]
        # (timing events: each group's end is timed too)
        joins = [self.backend.timing_event() for _ in streams]
        origin = streams[0]
        times = []
        ends: list[list[float]] = [[] for _ in stage]
        gate = self._gate
        elapsed = self.backend.cupy.cuda.get_elapsed_time
        copy = self.backend.cupy.cuda.runtime.memcpyAsync
        for rep in range(WARMUP + REPEAT):
            for dst, src, nbytes in self._refresh:
                copy(dst, src, nbytes, _MEMCPY_DEFAULT, origin.ptr)
            if gate is not None:
                gate.close_on(origin)
            try:
                self._start.record(origin)
                self._fork.record(origin)
                for s in streams[1:]:
                    s.wait_event(self._fork)
                for group, s in zip(stage, streams):
                    for v in group:
                        self._launches[v](s)
                for join, s in zip(joins, streams):
                    join.record(s)
                for join in joins[1:]:
                    origin.wait_event(join)
                self._stop.record(origin)
            finally:
                if gate is not None:
                    gate.open()
            self._stop.synchronize()
            if rep >= WARMUP:
                times.append(elapsed(self._start, self._stop))
                for part, join in zip(ends, joins):
                    part.append(elapsed(self._start, join))
        return (statistics.median(times) * 1e-3,
                [statistics.median(part) * 1e-3 for part in ends])

    def close(self) -> None:
        """Let go of the scratch copies (every timed launch has finished: ``time`` waits)."""
        self._launches = []
        self._scratch = {}
        self._refresh = []


#: Branches of the wide graph :func:`lane_cost_s` compares with a one-branch graph, and the
#: launches of each it times.
_LANES, _LANE_LAUNCHES = 8, 25
#: The lane cost used when it cannot be measured (seconds; the H100 machine's 0.8-1 us).
DEFAULT_LANE_COST_S = 1e-6


def lane_cost_s(backend: Any) -> float:
    """Host seconds that one more parallel branch adds to ``cudaGraphLaunch``, measured once per
    backend: two graphs of the same 8 empty kernels, one chain and 8 branches, each launched 25
    times; the difference of the median launch times over 7. Falls back to
    :data:`DEFAULT_LANE_COST_S` (logged) if measuring fails."""
    cost = getattr(backend, "_lane_cost_s", None)
    if cost is None:
        try:
            cost = _measure_lane_cost(backend)
        except Exception as exc:
            log.warning("asyncgpu: could not measure a graph branch's launch cost (%s); "
                        "using %.1f us", exc, DEFAULT_LANE_COST_S * 1e6)
            cost = DEFAULT_LANE_COST_S
        backend._lane_cost_s = cost
        log.debug("asyncgpu: a graph branch costs %.2f us to launch", cost * 1e6)
    return cost


def _measure_lane_cost(backend: Any) -> float:
    cupy = backend.cupy
    nop = cupy.RawKernel('extern "C" __global__ void asyncgpu_nop() {}', "asyncgpu_nop")
    mode = getattr(backend.runtime, "streamCaptureModeRelaxed", None)
    launch_on = cupy.cuda.Stream(non_blocking=True)
    medians = {}
    for lanes in (1, _LANES):
        streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(lanes)]
        origin = streams[0]
        origin.begin_capture(mode)
        try:
            fork = cupy.cuda.Event(disable_timing=True)
            fork.record(origin)
            for s in streams[1:]:
                s.wait_event(fork)
            for i in range(_LANES):
                nop((1,), (1,), (), stream=streams[i % lanes])
            for s in streams[1:]:
                join = cupy.cuda.Event(disable_timing=True)
                join.record(s)
                origin.wait_event(join)
        finally:
            graph = origin.end_capture()
        graph.launch(launch_on)         # (the first launch uploads the graph)
        launch_on.synchronize()
        medians[lanes] = graph_launch_s(graph, launch_on, _LANE_LAUNCHES)
    return max(0.0, (medians[_LANES] - medians[1]) / (_LANES - 1))


def graph_launch_s(graph: Any, stream: Any, launches: int) -> float:
    """Median host seconds of one ``cudaGraphLaunch`` of a CuPy executable graph on ``stream``,
    over ``launches`` launches, each waited for before the next."""
    samples = []
    for _ in range(launches):
        t0 = time.perf_counter()
        graph.launch(stream)
        samples.append(time.perf_counter() - t0)
        stream.synchronize()
    return statistics.median(samples)


def peak_bandwidth(backend: Any) -> float:
    """Bytes per second of a large device-to-device copy (read + written), measured once."""
    bw = getattr(backend, "_peak_bandwidth", None)
    if bw is None:
        cupy = backend.cupy
        # from asyncgpu's own pool, so the blocks are reused afterwards (not kept by CuPy's)
        src = backend.pool.malloc(_BANDWIDTH_BYTES)
        dst = backend.pool.malloc(_BANDWIDTH_BYTES)
        stream = backend.create_stream()
        for mem in (src, dst):      # resident on the device before timing (managed memory)
            if not getattr(backend, "explicit", False):   # (device memory: resident already)
                cupy.cuda.runtime.memPrefetchAsync(mem.ptr, _BANDWIDTH_BYTES, backend.device,
                                                   stream.ptr)
        start, stop = backend.timing_event(), backend.timing_event()
        best = float("inf")
        for _ in range(3):
            start.record(stream)
            cupy.cuda.runtime.memcpyAsync(dst.ptr, src.ptr, _BANDWIDTH_BYTES,
                                          _MEMCPY_DEFAULT, stream.ptr)
            stop.record(stream)
            stop.synchronize()
            best = min(best, cupy.cuda.get_elapsed_time(start, stop) * 1e-3)
        del src, dst
        bw = backend._peak_bandwidth = 2 * _BANDWIDTH_BYTES / best
    return bw
