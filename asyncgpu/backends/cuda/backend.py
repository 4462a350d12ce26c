"""The ``cuda`` backend: CuPy for memory, streams, events and prefetch; Numba and CuPy kernels.

Every stream is a non-blocking CuPy stream and is passed explicitly; CuPy's "current stream" is
never changed or relied on. Memory is managed (unified) memory from a private CuPy pool over
``cudaMallocManaged`` (so freeing never calls the device-synchronizing ``cudaFree``); the host
reads and writes it through a NumPy view of the same addresses. With ``memory="explicit"``
arrays live in device memory from a private CuPy pool over ``cudaMalloc``, each with a pinned
host mirror allocated on first host use (``buffers.DeviceBuffer``); the runtime's copy nodes
run an asynchronous copy on their stream (``buffers.CudaCopy``, through ``calls.memcpy_async``),
and host reads fetch on a stream of the backend's own (``fetch_to_host``).

Graphs: ``begin_capture``/``end_capture`` use CuPy's stream capture in *relaxed* mode, and
``graph_launch`` CuPy's ``Graph.launch`` (see :mod:`asyncgpu.backends.capture` for the model).
Relaxed, not global or thread-local: a library cannot know what other threads do (in global
mode an unrelated ``cudaMalloc`` elsewhere would break our capture, or ours theirs), and during a
capture our own thread may legitimately make calls that CUDA calls "potentially unsafe" (the
memory pool growing, lazy module loading). What really breaks a capture (waiting for or querying
captured work, prefetching on a capturing stream) is illegal in every mode; the shared tracker
rejects it first, with the same messages as on ``sim``. CUDA has no prefetch graph
node and ``cudaMemPrefetchAsync`` invalidates a capture, so prefetches stay outside graphs.
Kernel launches are capturable: a packed launch is one ``cuLaunchKernel`` on the stream (the
driver copies the parameter buffer during the call, so the graph node keeps its own copy), and
Numba's own launch (``_Kernel.launch`` in numba-cuda 0.30, for the argument kinds packing leaves
to it) prepares device-array arguments without copies and calls ``cuda.core.launch`` on the
stream. Only a kernel's first launch loads its module (so warm kernels up before capturing), and
``debug=True`` Numba kernels read an error flag back synchronously (not capturable; they run
on a blocking stream, which that read waits for: ``kernels.NumbaLaunch``).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import struct
from collections import deque
from typing import Any

import numpy as np

from ...core.backend import Backend
from ...core.config import Options
from ...core.errors import CaptureError, KernelFault, OutOfMemoryError
from ...core.placement import select_devices
from ..capture import CaptureTracker, Graph, check_launch, destroy
from .buffers import DEVICE_TO_HOST, CudaBuffer, CudaCopy, DeviceBuffer, ForeignBuffer
from .queues import warn_if_late
from .calls import CudaCalls
from .driver import driver_calls
from .faults import RECENT_LAUNCHES, fault_from, is_sticky, refused_launch
from .kernels import PackedLaunch, make_launch, unfit_argument

log = logging.getLogger("asyncgpu")
_CUDA_EVENT_WAIT_EXTERNAL = 1     # cudaEventWaitExternal: an event-wait node in the graph
_CUDA_ERROR_INVALID_CONTEXT = 201
#: Launched graphs kept alive before the finished ones are looked for and dropped.
GRAPHS_KEPT = 16


class CudaBackend(Backend):
    """GPU backend (see the module docstring)."""

    # No instance dict (the launch path reads these on every launch; compiled, they are the
    # C fields of backend.pxd). The last three are asyncgpu/backends/cuda/timing.py's, made on
    # first use.
    __slots__ = ("__weakref__", "_capturing", "_debug_stream", "_driver_error", "_fetch_stream",
                 "_graphs_in_flight", "_numba_streams", "_recent", "calls", "captures", "cupy",
                 "device", "device_name", "driver", "explicit", "fault",
                 "host_coherent_while_busy", "packed_launches", "pool", "runtime",
                 "single_node_graphs", "sm_count", "_lane_cost_s", "_peak_bandwidth",
                 "_timing_gate", "slot", "cache_keys", "targets", "copies", "_green")
    name = "cuda"
    #: ``host_access`` only reports a device fault, which ``HostAccess.read_element``'s path
    #: for a current mirror checks itself (``fault``)
    plain_host_reads = True
    #: no marks of what faulted work was to write (a device fault is sticky: every later call
    #: raises it), so nothing to clear after a host write (the simulator's ``host_written``)
    host_written = None
    prefetches = True
    wants_sites = False

    def __init__(self, options: Options, slot: int = 0, copies: Any = None) -> None:
        """The backend of GPU ``options.device``. On a runtime over several devices
        (``asyncgpu.backends.cuda.multi``) it is the part for device slot ``slot``, and
        ``copies(nbytes)`` makes the allocations' per-device copies (``DeviceCopies``)."""
        warn_if_late()
        import cupy

        self.cupy = cupy
        self.runtime = cupy.cuda.runtime
        count = self.runtime.getDeviceCount()
        if not 0 <= options.device < count:
            # (DeviceError naming the option, as on the simulator and with several devices)
            select_devices(1, options.device, count, "GPUs")
        self.device = options.device
        self.runtime.setDevice(self.device)
        #: Several devices: this part's slot, and what its arrays' cached pointers, Numba
        #: fields and views are kept under (the first slot's are the plain names); its
        #: launchers' packed targets where the slot is not the first (``kernels._target``).
        self.slot = slot
        self.cache_keys = cache_keys(slot)
        self.targets: dict[Any, Any] = {}
        self.copies = copies
        #: Explicit memory model: device memory (cudaMalloc) and pinned host mirrors.
        self.explicit = options.memory == "explicit"
        if self.explicit:
            self.pool = cupy.cuda.MemoryPool()
            self.host_coherent_while_busy = True    # the host only touches its mirror
        else:
            self.pool = cupy.cuda.MemoryPool(cupy.cuda.malloc_managed)
            attr = self.runtime.cudaDevAttrConcurrentManagedAccess
            self.host_coherent_while_busy = bool(self.runtime.deviceGetAttribute(attr,
                                                                                 self.device))
        self._numba_streams: dict[int, Any] = {}
        self.captures = CaptureTracker()
        self._capturing = False
        self.single_node_graphs = options.single_node_graphs
        # A launch's CUDA calls: straight into the driver where that applies (driver.py),
        # else CuPy's. Kernels launch through cuLaunchKernel with a packed parameter buffer
        # (kernels.py) unless the user turned it off or this CuPy lacks the entry point.
        self.use_calls(driver_calls(cupy) if options.direct_driver else None)
        self.packed_launches = options.packed_launch and self.calls.launches_kernels()
        self._driver_error = cupy.cuda.driver.CUDADriverError
        self._fetch_stream: Any = None      # host reads' copies out (fetch_to_host)
        self._debug_stream: Any = None      # debug=True Numba kernels (debug_stream)
        self._graphs_in_flight: set[Graph] = set()
        # The latest launched nodes (a finished node holds no arrays: bounded, nothing pinned)
        # and the first device fault seen, which every later call reports again.
        self.forget_launches()
        self.fault: KernelFault | None = None
        self._timing_gate: Any = False      # (timing.py's: False until made, None if it can't)
        self._lane_cost_s: float | None = None
        self._peak_bandwidth: float | None = None
        self._green: Any = None     # the SM partitions' green contexts (partitions.py)
        props = self.runtime.getDeviceProperties(self.device)
        name = props["name"]
        self.device_name = name.decode() if isinstance(name, bytes) else str(name)
        self.sm_count = int(props["multiProcessorCount"])
        log.info("asyncgpu cuda backend on %s (%d SMs)", self.device_name, self.sm_count)

    # -- devices, as the runtime's imports ask (one here; backends/cuda/multi.py: several) --
    def slot_of(self, number: int) -> int:
        """The slot of device ``number`` (0, this device), or -1 if the runtime does not run
        on it."""
        return 0 if number == self.device else -1

    def device_numbers(self) -> tuple[int, ...]:
        return (self.device,)

    def part(self, slot: int) -> CudaBackend:
        """The backend of slot ``slot``'s device: this one."""
        return self

    def on_device(self, slot: int) -> Any:
        """A context with slot ``slot``'s device current: it is already."""
        return contextlib.nullcontext()

    def buffer_of(self, buffer: Any) -> Any:
        """This device's copy of an allocation's buffer (several devices: ``DeviceCopies.on``;
        one device: the buffer itself)."""
        return buffer if self.copies is None else buffer.on(self.slot)

    def adopt(self, buffer: Any) -> Any:
        """An allocation's buffer made of memory a library call took on this device."""
        return buffer if self.copies is None else self.copies(buffer, self.slot)

    def use_calls(self, driver: Any) -> None:
        """Make the CUDA calls of later launches with ``driver`` (a ``cudriver.DriverCalls``),
        or with CuPy's own callables (None): ``calls`` is the one the launch path calls.
        Kernels already prepared keep the calls they were prepared with."""
        self.driver = driver
        self.calls = driver if driver is not None else CudaCalls(self.cupy)
        self._follow_captures()

    def _follow_captures(self) -> None:
        """Called wherever a capture may have begun or ended. The launch path reads whether
        one is engaged from ``_capturing``; kernels go through their stream's one-node graph
        (``single_node_graphs``) except while a capture is engaged: a capture must record the
        kernel itself."""
        self._capturing = bool(self.captures.engaged)
        if self.driver is not None:
            self.driver.single_node_graphs = self.single_node_graphs and not self._capturing

    def close(self) -> None:
        """The runtime is done with this backend: its pool's free blocks go back to the device
        (arrays of the old runtime still alive keep theirs), and its one-node graphs are
        destroyed."""
        if self.driver is not None:
            self.driver.release_lanes()
        if self._green is not None:
            self.synchronize()
            self._green.close()
            self._green = None
        self.pool.free_all_blocks()

    # -- a launch's CUDA calls ---------------------------------------------------------------
    def record(self, event: Any, stream: Any) -> None:
        if self._capturing:
            self.captures.record(event, stream)
        try:
            self.calls.event_record(event.ptr, stream.ptr)
        except Exception as exc:     # (free when nothing is raised)
            raise self._device_error(exc)

    def wait(self, stream: Any, event: Any) -> None:
        if self._capturing:
            self.captures.wait(stream, event)
        try:
            self.calls.stream_wait(stream.ptr, event.ptr, 0)
        except Exception as exc:
            raise self._device_error(exc)

    def event_done(self, event: Any) -> bool:
        if self._capturing:
            self.captures.check_host_wait(event, "event query")
        try:
            return self.calls.event_done(event)
        except Exception as exc:
            raise self._device_error(exc)

    def kernel_launch(self, kernel: Any, launcher: Any, arrays: list[Any], values: list[Any],
                      site: str | None, device: int = 0) -> Any:
        """Prepare a launch (``kernels.make_launch``)."""
        return make_launch(self, kernel, launcher, arrays, values, site)

    def graph_launch(self, graph: Graph, stream: Any) -> Any:
        """Launch ``graph`` on ``stream``; returns ``graph.done``, recorded right after it (the
        runtime's completion event for the launch: see the backend contract)."""
        check_launch(graph, stream, self.captures)
        calls = self.calls
        calls.graph_launch(graph.handle, stream)
        done = graph.done
        calls.event_record(done.ptr, stream.ptr)
        graph.launched = True
        # the graph (and so its arrays) must outlive its running launches even if dropped
        inflight = self._graphs_in_flight
        inflight.add(graph)         # (by identity: a Graph has no __eq__)
        if len(inflight) > GRAPHS_KEPT:
            forget_finished(inflight)
        return done

    def launch(self, node: Any, stream: Any) -> None:
        if self._capturing:
            self.captures.launch(node, stream)    # CUDA records it; we keep its arrays
        self._recent.append(node)
        launch = node.launch
        try:
            if type(launch) is PackedLaunch:
                packed = launch             # (compiled: a C call, no argument tuple)
                packed.enqueue(stream)
            else:
                launch(stream)
        except Exception as exc:
            self._launch_failed(node, stream, exc)

    def recent_launches(self) -> list[Any]:
        """The latest launched nodes (``RECENT_LAUNCHES`` at most), newest first."""
        return list(reversed(self._recent))

    def forget_launches(self) -> None:
        """Forget the latest launched nodes (``recent_launches``)."""
        self._recent = deque(maxlen=RECENT_LAUNCHES)

    # -- streams and events ------------------------------------------------------------------
    def _partitions(self) -> Any:
        """The device's SM groups and their green contexts (``partitions.py``), made once."""
        if self._green is None:
            from .partitions import GreenContexts
            self._green = GreenContexts(self.cupy, self.device)
        return self._green

    def partitionable_sms(self) -> int:
        """The SMs of the device that partitions may hold (those of its whole groups)."""
        return sum(self._partitions().ledger.groups)

    def reserve_sms(self, owner: str, sms: int) -> int:
        """Partition ``owner`` of at least ``sms`` SMs of the device (made once: a tenant's,
        or one that several tenants share; ValueError if the free SMs do not hold it): its
        SMs. From then on kernels launch without the one-node graph lanes, whose graphs would
        run on every SM."""
        green = self._partitions()
        if not green.holds():
            green.lanes = self.single_node_graphs   # (what they go back to once none is left)
        granted = green.reserve(owner, sms)
        self.single_node_graphs = False
        self._follow_captures()
        return granted

    def release_sms(self, owner: str) -> None:
        """Partition ``owner`` is given back (:meth:`reserve_sms`; its streams must be out of
        it and done): its streams and green context destroyed, its SMs free. With no
        partition left, kernels launch through the one-node graph lanes again where the
        options ask for them."""
        green = self._green
        if green is None:
            return
        green.release(owner)
        if not green.holds():
            self.single_node_graphs = green.lanes
            self._follow_captures()

    def create_stream(self, device: int = 0, priority: int = 0,
                      partition: str | None = None) -> Any:
        """A non-blocking stream of this part's device (current), of CUDA priority
        ``priority`` (lower is more urgent; :meth:`stream_priorities`), in SM partition
        ``partition`` (:meth:`reserve_sms`) when given."""
        if partition is not None:
            return self._green.stream(partition, priority)
        if priority == 0:
            return self.cupy.cuda.Stream(non_blocking=True)
        return self.cupy.cuda.Stream(non_blocking=True, priority=priority)

    def stream_priorities(self) -> tuple[int, int]:
        """(least, greatest) stream priority of the device: the driver's
        ``cuCtxGetStreamPriorityRange`` in the device's context, through cuda-python (CuPy
        does not wrap it); (0, -1), which every device since Kepler supports, where cuda-python
        is missing or cannot load the driver."""
        try:
            from cuda.bindings import driver
        except ImportError:
            return 0, -1
        previous = self.calls.enter()
        try:
            err, least, greatest = driver.cuCtxGetStreamPriorityRange()
        except Exception as exc:    # noqa: BLE001 - (cuda-python without a loadable driver)
            log.debug("asyncgpu: no stream priority range from cuda-python (%s)", exc)
            return 0, -1
        finally:
            self.calls.leave(previous)
        if int(err) != 0:
            return 0, -1
        return int(least), int(greatest)

    def create_event(self, device: int = 0) -> Any:
        return self.cupy.cuda.Event(block=False, disable_timing=True)

    def debug_stream(self) -> Any:
        """A blocking stream (one the legacy default stream's work waits for) of this part's
        device: ``debug=True`` Numba kernels run there (``kernels.NumbaLaunch``)."""
        stream = self._debug_stream
        if stream is None:
            stream = self._debug_stream = self.cupy.cuda.Stream(non_blocking=False)
        return stream

    def timing_event(self, device: int = 0) -> Any:
        """A timing-enabled event (traces and tenants' steps: timing makes recording slightly
        dearer)."""
        return self.cupy.cuda.Event(block=False, disable_timing=False)

    def clock_base(self, device: int = 0, wait: bool = True, event: Any = None) -> Any:
        """A timing event recorded on the legacy default stream: "now"; waited for unless
        ``wait`` is False. ``event``: a timing event to record again (one whose earlier
        record nothing needs any more), else a new one.

        Our streams are non-blocking, so recording on the null stream does not wait for them:
        the event completes as soon as the device reaches it, a few microseconds after the call
        (later only behind other work on the null stream, which the wait would block the host
        for). A tenant's step start does not wait: the round trip costs more host time than a
        small step's launches.
        """
        if event is None:
            event = self.timing_event()
        self.calls.event_record(event.ptr, 0)      # (0: the legacy default stream)
        if wait:
            self.calls.event_sync(event)
        return event

    def elapsed_s(self, start: Any, end: Any) -> float:
        """Seconds between two completed timing events (cudaEventElapsedTime, 0.5 us steps)."""
        return self.cupy.cuda.get_elapsed_time(start, end) * 1e-3

    def elapsed_if_done(self, start: Any, end: Any) -> float | None:
        """Seconds between two timing events, or None while either has not completed: one
        driver call (a tenant's steps are measured so, oldest first)."""
        if self._capturing:
            self.captures.check_host_wait(end, "event query")
        try:
            ms = self.calls.event_elapsed_ms(start.ptr, end.ptr)
        except Exception as exc:
            raise self._device_error(exc)
        return None if ms < 0.0 else ms * 1e-3

    def wait_external(self, stream: Any, event: Any) -> None:
        self.captures.wait_external(stream, event)
        self.calls.stream_wait(stream.ptr, event.ptr, _CUDA_EVENT_WAIT_EXTERNAL)

    def wait_quietly(self, event: Any) -> None:
        """Block until ``event`` completes, changing nothing and raising nothing: the runtime
        calls it without its lock, before the access that waits for the same event under the
        lock (which reports a fault). Nothing while a capture is engaged (a host wait there
        is the locked access's to refuse)."""
        if not self._capturing:
            try:
                self.calls.event_sync(event)
            except Exception:       # noqa: BLE001 - reported by the wait under the lock
                pass

    def host_wait(self, event: Any) -> None:
        """Block until ``event`` completes (``calls.event_sync``: a query first)."""
        if self._capturing:
            self.captures.check_host_wait(event, "host wait")
        try:
            self.calls.event_sync(event)
        except Exception as exc:
            raise self._device_error(exc)

    def synchronize(self) -> None:
        self.captures.check_synchronize()
        if self.fault is not None:
            raise self._device_error(None)
        try:
            self.runtime.deviceSynchronize()
        except Exception as exc:
            raise self._device_error(exc)
        self._graphs_in_flight.clear()
        if self.driver is not None:
            self.driver.grow_lanes()    # (idle now: a lane's making would not wait for it)

    # -- device faults -----------------------------------------------------------------------
    def keep_faults(self, fault: BaseException) -> None:
        """Nothing to keep: a device fault is sticky (``self.fault``), so every later host wait
        raises it again; the runtime's recovery hands faults back on every backend."""

    def _device_error(self, exc: BaseException | None) -> BaseException:
        """The error to raise for ``exc``, a CUDA error seen at a sync, query or launch.

        A sticky fault (the context is dead) becomes :class:`KernelFault` naming the launches
        that may have caused it (the latest ones: faults surface at a later call); after the
        first, every call that reaches here raises the same message. Other errors pass on.
        """
        if self.fault is None:
            if exc is None or not is_sticky(exc):
                return exc   # type: ignore[return-value]
            self.fault = fault_from(exc, self.recent_launches())
        err = KernelFault(str(self.fault))
        err.__cause__ = exc
        return err

    # -- graphs ------------------------------------------------------------------------------
    def begin_capture(self, stream: Any) -> None:
        self.captures.begin(stream)
        self._follow_captures()
        try:
            mode = getattr(self.runtime, "streamCaptureModeRelaxed", None)
            stream.begin_capture(mode)
        except Exception as exc:
            try:
                self.captures.end(stream)
            except CaptureError:
                pass
            finally:
                self._follow_captures()
            raise CaptureError(f"begin_capture on {stream!r} failed: {exc}") from exc

    def end_capture(self, stream: Any) -> Graph:
        try:
            return self._end_capture(stream)
        finally:
            self._follow_captures()

    def _end_capture(self, stream: Any) -> Graph:
        closes = self.captures.is_origin(stream)
        try:
            graph = self.captures.end(stream)
        except CaptureError:
            if closes:
                try:    # leave capture mode on the CUDA side too; the graph is discarded
                    stream.end_capture()
                except Exception:
                    pass
            raise
        try:
            graph.handle = stream.end_capture()      # captures and instantiates
        except Exception as exc:
            raise CaptureError(f"end_capture on {stream!r}: CUDA refused the capture: {exc}"
                               ) from exc
        graph.done = self.create_event()
        return graph

    def graph_destroy(self, graph: Graph) -> None:
        destroy(graph, lambda: self.host_wait(graph.done), self._graphs_in_flight)

    def host_access(self, accesses: Any, label: str) -> None:
        """Managed memory is coherent: the waits already happened (unless the device faulted:
        then the data may be garbage, and the host must not read it as if it were fine)."""
        if self.fault is not None:
            raise self._device_error(None)

    def numba_stream(self, stream: Any) -> Any:
        """The Numba view of a CuPy stream (cached: creating one costs about 10 us)."""
        ns = self._numba_streams.get(stream.ptr)
        if ns is None:
            try:  # numba-cuda >= 0.25 launches through cuda.core and prefers its Stream
                import cuda.core as cuda_core

                ns = cuda_core.Stream.from_handle(stream.ptr)
            except (ImportError, AttributeError):
                from numba import cuda

                ns = cuda.external_stream(stream.ptr)
            self._numba_streams[stream.ptr] = ns
        return ns

    # -- memory ------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> Any:
        if nbytes == 0:
            if self.explicit:
                return DeviceBuffer(0, None, 0)
            return CudaBuffer(0, None, 0, np.empty(0, np.uint8))
        if self.fault is not None:
            raise self._device_error(None)
        free, total = self.runtime.memGetInfo()
        reusable = self.pool.free_bytes()
        if nbytes > free + reusable:
            kind = "device" if self.explicit else "managed"
            raise OutOfMemoryError(
                f"cannot allocate {nbytes / 2**20:.1f} MiB of {kind} memory: GPU {self.device} has "
                f"{free / 2**20:.1f} MiB free of {total / 2**20:.1f} MiB (plus "
                f"{reusable / 2**20:.1f} MiB reusable in asyncgpu's pool)"
                + ("" if self.explicit else "; asking for more managed memory than the device "
                   "has free can hang the GPU") + ". Free arrays (Array.free()) or use smaller ones"
            )
        mem = self.pool.malloc(nbytes)
        if self.explicit:
            return DeviceBuffer(nbytes, mem, mem.ptr)
        host = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(mem.ptr))
        return CudaBuffer(nbytes, mem, mem.ptr, host)

    def foreign_buffer(self, owner: Any, ptr: int, nbytes: int, what: str,
                       host_addressable: bool, slot: int = 0) -> Any:
        """A buffer over another library's device memory (``asyncgpu.runtime.interop``), kept alive
        by ``owner`` and never freed here. Explicit model: device memory like ours, whose
        pinned mirror is allocated on the first host access. Managed model: used in place,
        never prefetched; the host reaches it only if it is managed or host memory. (``slot``:
        the device's, this backend's own.)"""
        if self.explicit:
            return DeviceBuffer(nbytes, owner, ptr)
        host = (np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(ptr))
                if host_addressable and nbytes else None)
        return ForeignBuffer(nbytes, owner, ptr, host, what)

    def free(self, buffer: Any) -> None:
        if isinstance(buffer, DeviceBuffer):
            buffer.release()
            return
        buffer.mem = None     # back to the pool: every node using it has finished
        buffer.host = None

    def copy_launch(self, buffer: DeviceBuffer, lo: int, hi: int, to_device: bool,
                    device: int = 0, peer: int | None = None) -> CudaCopy:
        """Prepare a copy of ``[lo, hi)`` between the pinned mirror and the device memory.
        (``device``/``peer``: the backend contract's slots; this backend is slot 0 alone, and
        ``asyncgpu.backends.cuda.multi`` routes the others.)"""
        if self.fault is not None:
            raise self._device_error(None)
        return CudaCopy(self.calls, buffer, lo, hi, to_device)

    def fetch_to_host(self, buffer: DeviceBuffer, lo: int, hi: int, label: str,
                      after: list[Any], device: int = 0) -> None:
        """Copy ``[lo, hi)`` of the device memory to the pinned mirror once the events ``after``
        have completed, and wait for the copy: the copy waits for them on the device, so the
        host waits once. On a stream of its own, not the legacy default stream, which would
        also wait for unrelated work queued there. (``label``: the array, for messages.)"""
        if self.fault is not None:
            raise self._device_error(None)
        if self._capturing:
            for event in after:     # (the host waits for them, through the copy)
                self.captures.check_host_wait(event, "host read")
        stream = self._fetch_stream
        if stream is None:
            stream = self._fetch_stream = self.create_stream()
        host = buffer.host_ptr + lo
        try:
            calls = self.calls
            for event in after:
                calls.stream_wait(stream.ptr, event.ptr, 0)
            try:
                calls.memcpy_async(host, buffer.ptr + lo, hi - lo, DEVICE_TO_HOST, stream.ptr)
            finally:
                # (also after an interrupt: a copy left landing in the mirror later could
                # tear a host write that follows)
                calls.stream_sync(stream.ptr)
        except Exception as exc:
            raise self._device_error(exc)

    def prefetch(self, buffer: CudaBuffer, stream: Any) -> None:
        if isinstance(buffer, ForeignBuffer):
            return    # another library's memory: where its pages live is the producer's choice
        if self._capturing:
            self.captures.check_prefetch(stream)
        try:
            self.runtime.memPrefetchAsync(buffer.ptr, buffer.nbytes, self.device, stream.ptr)
        except Exception as exc:
            raise self._device_error(exc)

    # -- kernels -----------------------------------------------------------------------------
    def kernel_attributes(self, kernel: Any) -> dict[str, int] | None:
        """``{"regs", "shared"}`` of a compiled kernel (the recorder's launch order)."""
        from .kernels import kernel_attributes
        return kernel_attributes(kernel)

    def lane_cost_s(self) -> float:
        """Host seconds one more parallel branch adds to a graph launch, measured once
        (``_cuda_timing.lane_cost_s``; the recorder's lane budget)."""
        from .timing import lane_cost_s

        return lane_cost_s(self)

    def stage_timer(self, runtime: Any, launches: list[Any]) -> Any:
        """The recorder's stage timer: CUDA events, scratch copies of written arrays
        (``_cuda_timing``)."""
        from .timing import CudaStageTimer
        return CudaStageTimer(self, runtime, launches)

    def library_call(self, runtime: Any, call: Any, accesses: list[Any], device: int = 0
                     ) -> Any:
        from .library import make_call
        return make_call(self, runtime, call, accesses)

    def cupy_view(self, array: Any) -> Any:
        """A CuPy array over ``array``'s memory, cached on it: what a library call computes on,
        what a CUDA C kernel without a packed plan takes, what an export hands out (DLPack)."""
        return cupy_view(self, array)

    def _launch_failed(self, node: Any, stream: Any, exc: Exception) -> None:
        """A launch raised ``exc``: raise what it means, or launch again where the thread only
        lacked a current context."""
        if isinstance(exc, struct.error):
            raise unfit_argument(node.name, exc) from None
        if self.fault is not None or is_sticky(exc):
            raise self._device_error(exc)
        # A host thread that has made no CUDA runtime call yet has no current context,
        # which the driver-level launch needs: bind the device's primary context, retry.
        if not isinstance(exc, self._driver_error):
            raise exc
        if self._capturing:
            # (the capture is lost, the device is fine: the recorder runs the work eagerly)
            raise CaptureError(f"{node.label()}: CUDA refused the launch during a stream "
                               f"capture ({exc})") from exc
        if getattr(exc, "status", None) != _CUDA_ERROR_INVALID_CONTEXT:
            raise refused_launch(node, exc) from exc
        self.runtime.setDevice(self.device)
        node.launch(stream)


def cache_keys(slot: int) -> tuple[str, str, str, str]:
    """What an array caches its pointer, Numba fields, Numba view and CuPy view under for
    device slot ``slot`` (``Array._cache``)."""
    suffix = "" if slot == 0 else f"@{slot}"
    return "ptr" + suffix, "nbf" + suffix, "numba" + suffix, "cupy" + suffix


def cupy_view(backend: Any, array: Any) -> Any:
    """``CudaBackend.cupy_view``: a CuPy array over ``array``'s copy on ``backend``'s device."""
    key = backend.cache_keys[3]
    view = array._cache.get(key)
    if view is None:
        cupy = backend.cupy
        buf = array._alloc.buffer
        if buf.nbytes == 0 or array.size == 0:
            view = cupy.ndarray(array.shape, array.dtype)
        else:
            buf = backend.buffer_of(buf)
            mem = cupy.cuda.UnownedMemory(buf.ptr, buf.nbytes, array._alloc, backend.device)
            view = cupy.ndarray(array.shape, array.dtype,
                                cupy.cuda.MemoryPointer(mem, array._offset), array.strides)
        array._cache[key] = view
    return view


def forget_finished(inflight: set[Graph]) -> None:
    """Drop the graphs whose last launch has finished from those kept alive while running."""
    inflight.difference_update([g for g in inflight if g.done.done])

