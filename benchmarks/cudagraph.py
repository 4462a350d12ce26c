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
invalidates a capture.

*replay* (every timed iteration): the same method runs again; host code runs for real (resets,
the final read and check), prefetches are issued for real on their streams, device operations
are skipped after checking they match the captured ones (a schedule that changed between
capture and replay raises instead of replaying the wrong graph), and at each host
synchronization the segment's graph is launched (on the synchronized stream, after that stream
waits for the prefetches) and then the host synchronizes as ``handopt`` does. A graph therefore
starts once its inputs have arrived: unlike ``handopt``, a branch cannot start while another
branch's inputs are still moving (an external event-wait node per branch could allow that; not
done here).

A workload may define ``run_cudagraph(h, block, num_blocks)`` to be used instead of
``run_handopt`` (none needs to).
"""

from __future__ import annotations

from typing import Any

from asyncgpu._errors import CaptureError

from .handopt import Hand


class _Segment:
    __slots__ = ("graph", "ops", "launch")

    def __init__(self, graph: Any, ops: list[tuple[Any, ...]], launch: int) -> None:
        self.graph = graph
        self.ops = ops          # signatures of the captured operations, checked at replay
        self.launch = launch    # index of the stream the graph is launched on


class GraphHand(Hand):
    """A :class:`Hand` that captures a schedule into graphs, then replays them."""

    def __init__(self, runtime: Any) -> None:
        super().__init__(runtime)
        self.mode = "eager"
        self.segments: list[_Segment] = []
        self._origin: Any = None
        self._index: dict[int, int] = {}
        self._joined: set[int] = set()
        self._ops: list[tuple[Any, ...]] = []
        self._fork: Any = None
        self._segment = 0
        self._prefetched: set[int] = set()

    # -- driving ----------------------------------------------------------------------------
    def capture(self, fn: Any, *args: Any) -> None:
        """Run ``fn(self, *args)`` once in capture mode (its result is discarded)."""
        self.release()
        self.mode = "capture"
        self._ops, self._prefetched = [], set()
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
        if self.mode == "capture":
            self._touch(stream)
        sig = ("launch", self._index[id(stream)], kernel.name, num_blocks, block,
               tuple(id(a) if hasattr(a, "_alloc") else a for a in args))
        if self._op(*sig):
            super().launch(kernel, num_blocks, block, stream, *args)

    def prefetch(self, array: Any, stream: Any) -> None:
        if self.mode == "capture":
            return      # not capturable: issued before each launch at replay
        if self.mode == "replay":
            self._prefetched.add(self._index[id(stream)])
        super().prefetch(array, stream)

    def sync_stream(self, stream: Any) -> None:
        self._end_segment(self._index[id(stream)])
        if self.mode != "capture":
            super().sync_stream(stream)

    def sync(self) -> None:
        self._end_segment(0)
        if self.mode != "capture":
            super().sync()

    def _end_segment(self, launch: int) -> None:
        if self.mode == "eager" or not self._ops:
            return
        ops, self._ops = self._ops, []
        if self.mode == "capture":
            origin = self._origin
            for i in sorted(self._index[j] for j in self._joined if j != id(origin)):
                e = self.event()
                self._be.record(e, self._streams[i])
                self._be.wait(origin, e)
            self.segments.append(_Segment(self._be.end_capture(origin), ops, launch))
            return
        if self._segment >= len(self.segments) or self.segments[self._segment].ops != ops:
            raise CaptureError(f"segment {self._segment} of the schedule replayed differs from "
                               "the one captured")
        seg = self.segments[self._segment]
        self._segment += 1
        target = self.stream(seg.launch)
        for i in sorted(self._prefetched - {seg.launch}):
            e = self.event()
            self._be.record(e, self._streams[i])
            self._be.wait(target, e)
        self._prefetched = set()
        self._be.graph_launch(seg.graph, target)
