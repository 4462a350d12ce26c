"""The ``cuda`` backend over several GPUs of one host: one part per device, routed by slot.

The model
---------
A runtime over several devices (``devices``) gets a :class:`MultiCudaBackend`: one
:class:`~asyncgpu.backends.cuda.backend.CudaBackend` per device (its *part*: its memory pool,
CUDA calls, one-node graph lanes, compiled kernels), and the operations of the backend
contract routed to the part of the device they concern: streams and events by the device the
stream manager asks for, launches by the node's device, waits and records by the stream's
device. With explicit memory an allocation's buffer is a
:class:`~asyncgpu.backends.cuda.buffers.DeviceCopies`: device memory per device, made on the
first use there, and one pinned host mirror; with managed memory it is one managed block every
device addresses, prefetched to the device of each kernel that uses it. Copies
between devices are ``cudaMemcpyPeerAsync`` on the destination's stream; peer access is
enabled between every pair of devices that supports it (without it the driver stages the
copy through the host, which is slower, not wrong).

Invariants: a kernel or library call is enqueued with its device current (a launch on a
stream of another device than the current one fails), and the thread's current device is
back to what it was when the call returns (the program's CuPy calls keep their device);
events are created on, and recorded on streams of, their own device; a cross-device
dependency is a ``cudaStreamWaitEvent`` on an event of the other device, which CUDA allows.

Example::

    backend = MultiCudaBackend(options, (0, 1))
    backend.create_stream(1)          # a stream of GPU 1 (slot 1)
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from ...core.backend import Backend
from ...core.config import Options
from .backend import CudaBackend
from .buffers import CudaCopy, DeviceCopies, PeerCopy

log = logging.getLogger("asyncgpu")

#: Bytes of each copy that measures a link's bandwidth (``bandwidth``).
_PROBE_BYTES = 64 << 20


class MultiCudaBackend(Backend):
    """The backend of a runtime over the GPUs ``numbers`` (see the module docstring)."""

    name = "cuda"
    plain_host_reads = True
    wants_sites = False

    def __init__(self, options: Options, numbers: tuple[int, ...]) -> None:
        self.devices = numbers
        self.explicit = options.memory == "explicit"
        copies = self._copies if self.explicit else None
        self.parts = [CudaBackend(options.replace(device=n, devices=1), slot, copies)
                      for slot, n in enumerate(numbers)]
        first = self.parts[0]
        self.cupy = first.cupy
        self.runtime = first.runtime
        self.device_count = self.runtime.getDeviceCount()
        self.prefetches = not self.explicit
        self.host_coherent_while_busy = all(p.host_coherent_while_busy for p in self.parts)
        self.captures = _Captures(self)
        self._slots = {part.device: slot for slot, part in enumerate(self.parts)}
        self._bandwidth: list[list[float]] | None = None
        self._enable_peers()
        self.runtime.setDevice(first.device)
        log.info("asyncgpu cuda backend on %d GPUs: %s", len(numbers),
                 ", ".join(f"{p.device} ({p.device_name})" for p in self.parts))

    # -- devices -----------------------------------------------------------------------------
    def _enable_peers(self) -> None:
        """Peer access between every pair that supports it (NVLink or PCIe peer-to-peer)."""
        rt = self.runtime
        for a in self.parts:
            for b in self.parts:
                if a is b or not rt.deviceCanAccessPeer(a.device, b.device):
                    continue
                rt.setDevice(a.device)
                try:
                    rt.deviceEnablePeerAccess(b.device)
                except rt.CUDARuntimeError as exc:
                    # already enabled (by an earlier runtime): that is what was asked; else
                    # peer copies are staged through the host by the driver
                    if "PeerAccessAlreadyEnabled" not in str(exc):
                        log.info("peer access %d -> %d: %s", a.device, b.device, exc)

    def _at(self, slot: int, method: str, *args: Any) -> Any:
        """``method`` of slot ``slot``'s part, called with its device current (then the
        thread's previous device again). The launch path's methods below write it out."""
        with self.on_device(slot):
            return getattr(self.parts[slot], method)(*args)

    def slot_of(self, number: int) -> int:
        """The slot of device ``number``, or -1 if the runtime does not run on it."""
        return self._slots.get(number, -1)

    def device_numbers(self) -> tuple[int, ...]:
        return self.devices

    def part(self, slot: int) -> CudaBackend:
        """The backend of slot ``slot``'s device."""
        return self.parts[slot]

    @contextlib.contextmanager
    def on_device(self, slot: int) -> Iterator[None]:
        """A context with slot ``slot``'s device current (then the thread's again)."""
        calls = self.parts[slot].calls
        previous = calls.enter()
        try:
            yield
        finally:
            calls.leave(previous)

    def _of(self, stream: Any) -> CudaBackend:
        return self.parts[self._slots[stream.device_id]]

    def _slot_of(self, stream: Any) -> int:
        return self._slots[stream.device_id]

    def _copies(self, buffer: Any, slot: int) -> DeviceCopies:
        """A part's adopted buffer, as an allocation's copies (``CudaBackend.adopt``)."""
        return DeviceCopies.adopting(slot, buffer, self._alloc_on)

    def _alloc_on(self, slot: int, nbytes: int) -> Any:
        return self._at(slot, "alloc", nbytes)

    # -- streams and events ------------------------------------------------------------------
    def create_stream(self, device: int = 0, priority: int = 0,
                      partition: str | None = None) -> Any:
        return self._at(device, "create_stream", device, priority, partition)

    def partitionable_sms(self) -> int:
        """The SMs that partitions may hold on every device (the least of the parts')."""
        return min(self._at(slot, "partitionable_sms") for slot in range(len(self.parts)))

    def reserve_sms(self, owner: str, sms: int) -> int:
        """``owner``'s partition of at least ``sms`` SMs on every device (each part's
        ``reserve_sms``); the SMs it holds on each. A part that cannot make it raises, and
        the partitions made on the parts before it are given back: all or nothing."""
        granted = []
        try:
            for slot in range(len(self.parts)):
                granted.append(self._at(slot, "reserve_sms", owner, sms))
        except BaseException:
            for slot in range(len(granted)):
                self._at(slot, "release_sms", owner)
            raise
        return min(granted)

    def release_sms(self, owner: str) -> None:
        """``owner``'s partition given back on every device (each part's ``release_sms``)."""
        for slot in range(len(self.parts)):
            self._at(slot, "release_sms", owner)

    def stream_priorities(self) -> tuple[int, int]:
        return self.parts[0].stream_priorities()

    def create_event(self, device: int = 0) -> Any:
        return self._at(device, "create_event")

    def record(self, event: Any, stream: Any) -> None:
        part = self._of(stream)
        if part._capturing:     # (inside a capture CUDA wants the stream's device current)
            self._at(part.slot, "record", event, stream)
        else:
            part.record(event, stream)

    def wait(self, stream: Any, event: Any) -> None:
        part = self._of(stream)
        if part._capturing:
            self._at(part.slot, "wait", stream, event)
        else:
            part.wait(stream, event)

    def event_done(self, event: Any) -> bool:
        return self.parts[0].event_done(event)

    def host_wait(self, event: Any) -> None:
        self.parts[0].host_wait(event)

    def wait_quietly(self, event: Any) -> None:
        """``CudaBackend.wait_quietly``; nothing while any part captures."""
        if not self.captures.engaged:
            self.parts[0].wait_quietly(event)

    def synchronize(self) -> None:
        for slot in range(len(self.parts)):
            self._at(slot, "synchronize")

    def timing_event(self, device: int = 0) -> Any:
        return self._at(device, "timing_event")

    def clock_base(self, device: int = 0, wait: bool = True, event: Any = None) -> Any:
        return self._at(device, "clock_base", 0, wait, event)

    def elapsed_s(self, start: Any, end: Any) -> float:
        return self.parts[0].elapsed_s(start, end)

    def elapsed_if_done(self, start: Any, end: Any) -> float | None:
        return self.parts[0].elapsed_if_done(start, end)

    @property
    def fault(self) -> Any:
        for part in self.parts:
            if part.fault is not None:
                return part.fault
        return None

    def keep_faults(self, fault: BaseException) -> None:
        """Nothing to keep: a device fault is sticky on its part."""

    # -- launches ----------------------------------------------------------------------------
    def kernel_launch(self, kernel: Any, launcher: Any, arrays: list[Any], values: list[Any],
                      site: str | None, device: int = 0) -> Any:
        part = self.parts[device]
        calls = part.calls
        previous = calls.enter()
        try:
            return part.kernel_launch(kernel, launcher, arrays, values, site)
        finally:
            calls.leave(previous)

    def library_call(self, runtime: Any, call: Any, accesses: list[Any], device: int = 0
                     ) -> Any:
        return self._at(device, "library_call", runtime, call, accesses)

    def launch(self, node: Any, stream: Any) -> None:
        part = self.parts[node.device]
        calls = part.calls
        previous = calls.enter()
        try:
            part.launch(node, stream)
        finally:
            calls.leave(previous)

    # -- graphs ------------------------------------------------------------------------------
    # (each graph holds one device's work, captured on and launched from its streams:
    # asyncgpu.recorder.devices splits a recording that spans devices)
    def begin_capture(self, stream: Any) -> None:
        self._at(self._slot_of(stream), "begin_capture", stream)

    def end_capture(self, stream: Any) -> Any:
        slot = self._slot_of(stream)
        graph = self._at(slot, "end_capture", stream)
        graph.device = slot
        return graph

    def graph_launch(self, graph: Any, stream: Any) -> Any:
        return self._at(self._slot_of(stream), "graph_launch", graph, stream)

    def graph_destroy(self, graph: Any) -> None:
        self._at(graph.device, "graph_destroy", graph)

    def host_access(self, accesses: Any, label: str) -> None:
        fault = self.fault
        if fault is not None:
            self.parts[0].fault = fault
            self.parts[0].host_access(accesses, label)

    # -- memory ------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> Any:
        """Explicit memory: an allocation's copies, each device's memory made on its first use
        there. Managed memory: one block of the first device's pool, which every device
        addresses."""
        if self.explicit:
            return DeviceCopies(nbytes, self._alloc_on)
        return self._alloc_on(0, nbytes)

    def free(self, buffer: Any) -> None:
        if isinstance(buffer, DeviceCopies):
            buffer.release()
        else:
            self.parts[0].free(buffer)

    def prefetch(self, buffer: Any, stream: Any) -> None:
        """Managed memory: migrate to the stream's device ahead of its kernel."""
        self._at(self._slot_of(stream), "prefetch", buffer, stream)

    def copy_launch(self, buffer: DeviceCopies, lo: int, hi: int, to_device: bool,
                    device: int = 0, peer: int | None = None) -> Any:
        """A copy of ``[lo, hi)``: the host mirror to or from device slot ``device``, or, with
        ``peer``, device slot ``peer`` to ``device`` (made on the destination's stream)."""
        part = self.parts[device]
        if part.fault is not None:
            raise part._device_error(None)
        if peer is None:
            return CudaCopy(part.calls, buffer.on(device), lo, hi, to_device)
        source = buffer.on(peer)
        return PeerCopy(self.runtime, buffer.on(device), part.device, source,
                        self.parts[peer].device, lo, hi)

    def foreign_buffer(self, owner: Any, ptr: int, nbytes: int, what: str,
                       host_addressable: bool, slot: int = 0) -> Any:
        """Another library's memory on slot ``slot``'s device (``CudaBackend.foreign_buffer``):
        with explicit memory, that slot's copy of the allocation's copies."""
        part = self.parts[slot]
        return part.adopt(part.foreign_buffer(owner, ptr, nbytes, what, host_addressable))

    def fetch_to_host(self, buffer: DeviceCopies, lo: int, hi: int, label: str,
                      after: list[Any], device: int = 0) -> None:
        self._at(device, "fetch_to_host", buffer.on(device), lo, hi, label, after)

    def close(self) -> None:
        for slot in range(len(self.parts)):
            self._at(slot, "close")

    # -- the host's links --------------------------------------------------------------------
    @property
    def bandwidth(self) -> list[list[float]]:
        """Bytes per second of each link, measured once (index 0: the host, ``slot + 1``: a
        device): pinned host-to-device copies and peer copies of 64 MiB, the second of two."""
        if self._bandwidth is None:
            self._bandwidth = self._measure()
        return self._bandwidth

    def _measure(self) -> list[list[float]]:
        cupy = self.cupy
        n = len(self.parts)
        size = n + 1
        matrix = [[0.0] * size for _ in range(size)]
        host = cupy.cuda.alloc_pinned_memory(_PROBE_BYTES)
        bufs = []
        for part in self.parts:
            with cupy.cuda.Device(part.device):
                bufs.append(cupy.empty(_PROBE_BYTES, cupy.uint8))

        def timed(slot: int, copy: Any) -> float:
            with cupy.cuda.Device(self.parts[slot].device):
                return _timed_copy(cupy, copy)

        rt = self.runtime
        for d in range(n):
            dst, dst_device = bufs[d].data.ptr, self.parts[d].device

            def from_host(stream: Any, dst: int = dst) -> None:
                rt.memcpyAsync(dst, host.ptr, _PROBE_BYTES, 1, stream.ptr)

            matrix[0][d + 1] = matrix[d + 1][0] = timed(d, from_host)
            for e in range(n):
                if e == d:
                    continue

                def from_peer(stream: Any, dst: int = dst, dst_device: int = dst_device,
                              src: int = bufs[e].data.ptr,
                              src_device: int = self.parts[e].device) -> None:
                    rt.memcpyPeerAsync(dst, dst_device, src, src_device, _PROBE_BYTES,
                                       stream.ptr)

                matrix[e + 1][d + 1] = timed(d, from_peer)
        del bufs
        log.info("asyncgpu: link bandwidths (GB/s, host first): %s",
                 [[round(v / 1e9, 1) for v in row] for row in matrix])
        return matrix


class _Captures:
    """The parts' capture trackers seen as one: what the recorder and the happens-before
    checker ask of a backend's ``captures`` (whether any capture is engaged, whether a stream
    is capturing)."""

    __slots__ = ("backend",)

    def __init__(self, backend: MultiCudaBackend) -> None:
        self.backend = backend

    @property
    def engaged(self) -> bool:
        return any(part.captures.engaged for part in self.backend.parts)

    def capturing(self, stream: Any) -> bool:
        return self.backend._of(stream).captures.capturing(stream)


def _timed_copy(cupy: Any, copy: Any) -> float:
    """Bytes per second of ``copy(stream)`` (``_PROBE_BYTES``), the faster of two, timed with
    events on a stream of the current device."""
    stream = cupy.cuda.Stream(non_blocking=True)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    best = float("inf")
    for _ in range(2):
        start.record(stream)
        copy(stream)
        end.record(stream)
        end.synchronize()
        best = min(best, cupy.cuda.get_elapsed_time(start, end) * 1e-3)
    return _PROBE_BYTES / best
