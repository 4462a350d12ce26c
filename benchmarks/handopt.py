"""Hand-written scheduling for the ``handopt`` baseline: explicit streams, events and prefetches.

This is what an expert writes without asyncgpu: the same kernels launched on streams chosen by
hand, joined by events, with the rewritten inputs prefetched first on each stream. It drives the
runtime's backend directly, bypassing dependency tracking, so it runs on the GPU and on the
simulator alike; on the simulator the happens-before checker verifies the hand-written ordering
too (a missing event in a workload's ``run_handopt`` raises ``RaceError``).
"""

from __future__ import annotations

from typing import Any

from asyncgpu.runtime.array import DEVICE, HOST
from asyncgpu.core.dag import Node
from asyncgpu.core.deps import Access


class Hand:
    """The helper object passed to ``Workload.run_handopt`` (see ``benchmarks/workloads``)."""

    def __init__(self, runtime: Any) -> None:
        self._rt = runtime
        self._streams: list[Any] = []
        self._events: list[Any] = []
        self._next_event = 0

    @property
    def _be(self) -> Any:
        # looked up each time: a trace swaps the runtime's backend for a timing wrapper, and
        # the hand-written prefetches and launches must show up in the trace too
        return self._rt.backend

    def begin(self) -> None:
        """Start one run: events are reused from run to run, in the order they are asked for."""
        self._next_event = 0

    def stream(self, i: int) -> Any:
        while len(self._streams) <= i:
            self._streams.append(self._be.create_stream())
        return self._streams[i]

    def event(self) -> Any:
        if self._next_event == len(self._events):
            self._events.append(self._be.create_event())
        e = self._events[self._next_event]
        self._next_event += 1
        return e

    def record(self, event: Any, stream: Any) -> None:
        self._be.record(event, stream)

    def wait(self, stream: Any, event: Any) -> None:
        self._be.wait(stream, event)

    def prefetch(self, array: Any, stream: Any) -> None:
        """Managed memory: prefetch. Explicit memory: what an expert writes instead, an
        asynchronous copy from the pinned mirror when the host holds the current copy."""
        alloc = array._alloc
        if self._rt.memory is None:
            self._be.prefetch(alloc.buffer, stream)
        elif alloc.location == HOST and alloc.nbytes:
            node = Node("copy", f"{array.describe()} to device", "handopt",
                        [Access(alloc.id, alloc, 0, alloc.nbytes, True, array.describe())])
            node.launch = self._be.copy_launch(alloc.buffer, 0, alloc.nbytes, True)
            self._be.launch(node, stream)
            alloc.location = HOST | DEVICE

    def inputs_on_device(self, args: tuple[Any, ...]) -> None:
        """Explicit memory: an array the hand-written schedule does not copy (one the host
        wrote once, such as a filter) is copied by the runtime before its first use, and the
        host waits for the copy; with managed memory page faults bring such arrays over."""
        rt = self._rt
        if rt.memory is None:
            return
        for a in args:
            alloc = getattr(a, "_alloc", None)
            if alloc is not None and alloc.location == HOST and alloc.nbytes:
                with rt._lock:
                    node = rt.memory.copy(alloc, 0, alloc.nbytes, True, a.describe())
                    alloc.location = HOST | DEVICE
                    rt.streams.host_wait([node])

    def mark_written(self, kernel: Any, args: tuple[Any, ...]) -> None:
        """Explicit memory: the arrays a hand launch may write are current on the device only
        (the runtime's later host reads then copy them back)."""
        if self._rt.memory is None:
            return
        for p, a in zip(kernel.params, args):
            if hasattr(a, "_alloc") and kernel.modes.get(p.name, "rw") != "r" and a.nbytes:
                a._alloc.location = DEVICE

    def launch(self, kernel: Any, num_blocks: Any, block: Any, stream: Any, *args: Any) -> None:
        self.inputs_on_device(args)
        launcher = kernel[num_blocks, block]
        arrays, values = kernel.bind(self._rt, args, None)
        # (a bound array argument is its own dependency access, as in the runtime's launches)
        node = Node("kernel", kernel.name, "handopt", arrays)
        node.launch = self._be.kernel_launch(kernel, launcher, arrays, values, None)
        node.keepalive = arrays
        self._be.launch(node, stream)
        if self._rt.memory is not None:
            for a in arrays:        # (as mark_written, from the bound arguments)
                if a.write and a.hi > a.lo:
                    a.alloc.location = DEVICE

    def sync_stream(self, stream: Any) -> None:
        e = self.event()
        self._be.record(e, stream)
        self._be.host_wait(e)

    def sync(self) -> None:
        self._be.synchronize()
