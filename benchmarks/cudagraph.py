"""The ``cudagraph`` mode: a workload's hand-optimized schedule captured once into CUDA graphs and
replayed (the GrCUDA paper's CUDA Graphs baseline).

How a workload's ``run_handopt(h, block, num_blocks)`` becomes graphs, with no change to it:
:class:`GraphHand` is a :class:`~benchmarks.handopt.Hand` that runs the same method in two modes.

*capture* (once, untimed): every kernel launch, event record and event wait is captured; the
first device operation opens a capture on a dedicated origin stream, and each stream joins it
through a fork event when first used. Each host synchronization (``sync_stream``/``sync``) closes
the capture: the used streams join back into the origin and the graph is instantiated; nothing
is waited for, since nothing ran. So a schedule with host steps in the middle (HITS resets its
norms between iterations) becomes one graph per segment between host synchronizations.
Prefetches are not captured: CUDA graphs have no prefetch node and ``cudaMemPrefetchAsync``
invalidates a capture. Instead, a stream that prefetched gets an *external wait* in the graph
before its next operation (``wait_external``: every launch waits there for that stream's
prefetch event as of the launch), so each branch waits only for its own inputs, as in
``handopt``.

*replay* (every timed iteration): the same method runs again; host code runs for real (resets,
the final read and check), prefetches are issued for real on their streams, device operations
are skipped after checking they match the captured ones (a schedule that changed between
capture and replay raises instead of replaying the wrong graph), and at each host
synchronization each prefetching stream records its prefetch event, the segment's graph is
launched on the origin stream (which carries no prefetch, so no branch waits for another
branch's transfers), and the host waits for the graph and synchronizes as ``handopt`` does.

With ``external_waits=False`` the graph is launched on the synchronized stream after that stream
waits for every prefetch instead: simpler, but the whole graph then waits for all transfers.

A workload may define ``run_cudagraph(h, block, num_blocks)`` to be used instead of
``run_handopt`` (none needs to).
"""

from __future__ import annotations

from typing import Any

from asyncgpu.core.errors import CaptureError

from .handopt import Hand


class _Segment:
    __slots__ = ("graph", "ops", "launch", "xwaits")

    def __init__(self, graph: Any, ops: list[tuple[Any, ...]], launch: int,
                 xwaits: set[int]) -> None:
        self.graph = graph
        self.ops = ops          # signatures of the captured operations, checked at replay
        self.launch = launch    # index of the synchronized stream
        self.xwaits = xwaits    # streams whose prefetch event the graph waits for


class GraphHand(Hand):
    """A :class:`Hand` that captures a schedule into graphs, then replays them."""

    def __init__(self, runtime: Any, external_waits: bool = True) -> None:
        super().__init__(runtime)
        self.external_waits = external_waits
        self.mode = "eager"
        self.segments: list[_Segment] = []
        self._origin: Any = None
        self._index: dict[int, int] = {}
        self._joined: set[int] = set()
        self._ops: list[tuple[Any, ...]] = []
        self._fork: Any = None
        self._segment = 0
        self._prefetched: set[int] = set()
        self._pending: set[int] = set()          # capture: prefetched, external wait not yet in
        self._xwaits: set[int] = set()           # capture: streams with an external wait
        self._pf_events: dict[int, Any] = {}     # per stream, fixed: the graphs refer to them

    # -- driving ----------------------------------------------------------------------------
    def capture(self, fn: Any, *args: Any) -> None:
        """Run ``fn(self, *args)`` once in capture mode (its result is discarded)."""
        self.release()
        self.mode = "capture"
        self._ops, self._prefetched, self._pending, self._xwaits = [], set(), set(), set()
        try:
            self.begin()
            fn(self, *args)
            if self._ops:
                raise CaptureError("the schedule ended with device work after its last host "
                                   "synchronization: nothing would wait for it")
        except BaseException:
            if self._origin is not None and self._be.captures.capturing(self._origin):
                try:
                    self._be.end_capture(self._origin)
                except CaptureError:
                    pass
            self.release()
            raise
        finally:
            self.mode = "eager"

    def replay(self, fn: Any, *args: Any) -> Any:
        """One timed iteration: ``fn(self, *args)`` with the device work replayed from graphs."""
        if not self.segments:
            raise CaptureError("replay before capture")
        self.mode = "replay"
        self._ops, self._prefetched = [], set()
        try:
            self.begin()
            self._segment = 0
            result = fn(self, *args)
            if self._segment != len(self.segments) or self._ops:
                raise CaptureError("the schedule replayed differs from the one captured")
            return result
        finally:
            self.mode = "eager"

    def release(self) -> None:
        """Destroy the graphs (waits for their last launches)."""
        for seg in self.segments:
            self._be.graph_destroy(seg.graph)
        self.segments = []

    @property
    def graphs(self) -> list[Any]:
        return [seg.graph for seg in self.segments]

    # -- Hand overrides ---------------------------------------------------------------------
    def stream(self, i: int) -> Any:
        s = super().stream(i)
        self._index.setdefault(id(s), i)
        return s

    def _touch(self, stream: Any) -> None:
        """Capture mode: open the capture if needed, and make ``stream`` join it."""
        if self._origin is None:
            self._origin = self._be.create_stream()
        if not self._be.captures.capturing(self._origin):
            self._be.begin_capture(self._origin)
            self._fork = self.event()
            self._be.record(self._fork, self._origin)
            self._joined = set()
        if id(stream) not in self._joined:
            self._be.wait(stream, self._fork)
            self._joined.add(id(stream))
        i = self._index[id(stream)]
        if i in self._pending:
            self._pending.discard(i)
            self._xwaits.add(i)
            self._be.wait_external(stream, self._pf_event(i))

    def _pf_event(self, i: int) -> Any:
        e = self._pf_events.get(i)
        if e is None:
            e = self._pf_events[i] = self._be.create_event()
        return e

    def _op(self, *sig: Any) -> bool:
        """Note one device operation; whether it must be issued now (capture) or skipped."""
        if self.mode == "eager":
            return True
        self._ops.append(sig)
        if self.mode == "replay":
            return False
        return True

    def record(self, event: Any, stream: Any) -> None:
        if self.mode == "capture":
            self._touch(stream)
        if self._op("record", self._index[id(stream)]):
            super().record(event, stream)

    def wait(self, stream: Any, event: Any) -> None:
        if self.mode == "capture":
            self._touch(stream)
        if self._op("wait", self._index[id(stream)]):
            super().wait(stream, event)

    def launch(self, kernel: Any, num_blocks: Any, block: Any, stream: Any, *args: Any) -> None:
        self.inputs_on_device(args)        # (outside the capture: the runtime's stream)
        if self.mode == "capture":
            self._touch(stream)
        sig = ("launch", self._index[id(stream)], kernel.name, num_blocks, block,
               tuple(id(a) if hasattr(a, "_alloc") else a for a in args))
        if self._op(*sig):
            super().launch(kernel, num_blocks, block, stream, *args)
        else:
            self.mark_written(kernel, args)      # replayed by the graph

    def prefetch(self, array: Any, stream: Any) -> None:
        if self.mode == "capture":
            if self.external_waits:     # not capturable: the graph waits for it instead
                self._pending.add(self._index[id(stream)])
            return
        if self.mode == "replay":
            self._prefetched.add(self._index[id(stream)])
        super().prefetch(array, stream)

    def sync_stream(self, stream: Any) -> None:
        launched = self._end_segment(self._index[id(stream)])
        if self.mode != "capture":
            if launched is not None and launched is not stream:
                super().sync_stream(launched)
            super().sync_stream(stream)

    def sync(self) -> None:
        self._end_segment(0)
        if self.mode != "capture":
            super().sync()

    def _end_segment(self, launch: int) -> Any:
        """End a segment: capture its graph, or launch it; returns the stream launched on."""
        if self.mode == "eager" or not self._ops:
            return None
        ops, self._ops = self._ops, []
        if self.mode == "capture":
            origin = self._origin
            for i in sorted(self._index[j] for j in self._joined if j != id(origin)):
                e = self.event()
                self._be.record(e, self._streams[i])
                self._be.wait(origin, e)
            xwaits, self._xwaits, self._pending = self._xwaits, set(), set()
            self.segments.append(_Segment(self._be.end_capture(origin), ops, launch, xwaits))
            return None
        if self._segment >= len(self.segments) or self.segments[self._segment].ops != ops:
            raise CaptureError(f"segment {self._segment} of the schedule replayed differs from "
                               "the one captured")
        seg = self.segments[self._segment]
        self._segment += 1
        target = self._origin if self.external_waits else self.stream(seg.launch)
        for i in sorted(self._prefetched):
            if i in seg.xwaits:
                self._be.record(self._pf_event(i), self._streams[i])
            elif self._streams[i] is not target:
                e = self.event()
                self._be.record(e, self._streams[i])
                self._be.wait(target, e)
        self._prefetched = set()
        self._be.graph_launch(seg.graph, target)
        return target
