"""Stream capture and graphs, the part both backends share: what a capture records, what it
forbids, and how one graph launch expands into ordered operations.

The model (CUDA's stream capture)
---------------------------------
``begin_capture(origin)`` puts a stream in capture mode: work enqueued on it from then on is
*recorded* into a graph, not run. An event recorded on a capturing stream stands for the captured
work before it, and a stream that waits on such an event *joins* the capture, so fork/join code
written with events is captured unchanged (CUDA's cross-stream capture). Every stream that joined
must be joined back before ``end_capture(origin)``: the origin waits on an event recorded after
the stream's last captured kernel (CUDA would fail with ``cudaErrorStreamCaptureUnjoined``).

While a capture is open these raise :class:`CaptureError` (CUDA would invalidate the capture, so
the capture is marked invalid and ``end_capture`` discards it, leaving both streams usable):

* a host wait for, or a query of, an event recorded in the capture (the work it marks has not
  run and will not run until the graph is launched), and a device-wide ``synchronize``;
* a prefetch on a capturing stream: CUDA graphs have no prefetch node and
  ``cudaMemPrefetchAsync`` invalidates a capture, so prefetches stay outside graphs;
* a capturing stream waiting on an event recorded outside the capture.

A record captured into a graph marks no work once the capture has ended: record the event again
before waiting on it outside (CUDA leaves such an event's state unspecified; the simulator keeps
its earlier record, and the checker checks the ordering that gives). The tracker forgets a
capture's events when it ends, so with no capture open it costs one test per operation.

``wait_external(stream, event)`` on a capturing stream captures an *external* wait (CUDA's
``cudaEventWaitExternal``): every launch of the graph waits there for the event's record as of
that launch, so work outside the graph (a prefetch, say) can gate one branch of it.

A :class:`Graph` keeps the captured work as a program over *lanes*, one per captured stream,
origin first: ``("kernel", lane, node)``, ``("record", lane, k)``, ``("wait", lane, k)``, where
``k`` numbers the captured records, so each wait names the record it was bound to, and
``("xwait", lane, event)`` for an external wait. An
:class:`Expansion` issues one launch of it through three callbacks (record, wait, kernel) onto
lane streams of its own: the ``sim`` backend enqueues these operations, and the checked backend
feeds the same ones to the happens-before checker::

    record fork on the launch stream; every lane waits for fork (and for the previous launch)
    the program, in capture order, each operation on its lane
    every lane records a join event; the launch stream waits for all; record done on it

so a graph starts after earlier work of its launch stream, its inner order is exactly the
captured event order, later work of the launch stream waits for all of it, and two launches of
one graph never overlap (``cudaGraphLaunch`` orders launches of one executable graph likewise).

Lifetime: a graph holds the nodes it captured and, through them, their arrays, so memory a graph
uses is never given back while the graph exists. ``graph_destroy`` waits for the graph's last
launch, then lets go of the executable and the arrays.

Example (backend ``be``, streams ``s0``, ``s1``, events ``fork``, ``join``)::

    be.begin_capture(s0)
    be.record(fork, s0); be.wait(s1, fork)          # s1 joins the capture
    be.launch(a, s0); be.launch(b, s1)              # recorded, not run
    be.record(join, s1); be.wait(s0, join)          # s1 joins back
    g = be.end_capture(s0)
    be.graph_launch(g, s2)                          # a and b run, after s2's earlier work

The tracker is plain Python (no CUDA): the ``cuda`` backend uses it for the same checks and
error messages before CUDA sees the call, and to keep the captured arrays alive.
"""

from __future__ import annotations

from typing import Any, Callable

from ..core.errors import CaptureError
from ..runtime.allocation import explicit_frees


class _Open:
    """One capture in progress."""

    __slots__ = ("origin", "lanes", "ops", "records", "clocks", "invalid", "closed")

    def __init__(self, origin: Any) -> None:
        self.origin = origin
        self.lanes: dict[Any, int] = {origin: 0}       # captured stream -> lane
        self.ops: list[tuple[str, int, Any]] = []
        self.records = 0
        # per lane: lane -> number of that lane's kernels ordered before the lane's next op
        self.clocks: list[dict[int, int]] = [{}]
        self.invalid: str | None = None
        self.closed = False


class Graph:
    """A captured graph: returned by a backend's ``end_capture``, opaque to its callers.

    ``ops``/``lanes``/``records``: the program (see the module docstring); ``nodes``: the
    captured kernel nodes (they keep the arrays alive); ``handle``: the backend's executable
    (a CuPy ``Graph`` on ``cuda``, an :class:`Expansion` on ``sim``).
    """

    __slots__ = ("ops", "lanes", "records", "nodes", "allocs", "handle", "done", "hb",
                 "launched", "destroyed", "frees", "device", "__weakref__")

    def __init__(self, ops: list[tuple[str, int, Any]], lanes: int, records: int) -> None:
        self.ops = ops
        self.lanes = lanes
        self.records = records
        self.nodes = [arg for kind, _, arg in ops if kind == "kernel"]
        allocs: dict[int, Any] = {}
        for node in self.nodes:
            for acc in node.accesses:
                allocs.setdefault(id(acc.alloc), acc.alloc)
        self.allocs = list(allocs.values())
        self.handle: Any = None
        self.done: Any = None          # event recorded after the last launch (cuda)
        self.device = 0                # the slot of the device it was captured on
        self.hb: Expansion | None = None
        self.launched = False
        self.destroyed = False
        self.frees = -1     # explicit_frees() when its arrays were last seen live

    @property
    def kernels(self) -> int:
        """Number of kernel nodes in the graph."""
        return len(self.nodes)

    def __repr__(self) -> str:
        return f"<graph: {self.kernels} kernels on {self.lanes} lanes>"


class Expansion:
    """One target's lane streams and events for launching a graph (reused by every launch)."""

    __slots__ = ("lanes", "events", "fork", "joins", "done", "launched")

    def __init__(self, graph: Graph, new_stream: Callable[[], Any],
                 new_event: Callable[[], Any]) -> None:
        self.lanes = [new_stream() for _ in range(graph.lanes)]
        self.events = [new_event() for _ in range(graph.records)]
        self.fork = new_event()
        self.joins = [new_event() for _ in self.lanes]
        self.done = new_event()
        self.launched = False

    def issue(self, graph: Graph, stream: Any, record: Callable[[Any, Any], None],
              wait: Callable[[Any, Any], None], kernel: Callable[[Any, Any], None]) -> None:
        """Issue one launch of ``graph`` on ``stream``: ``record(event, stream)``,
        ``wait(stream, event)``, ``kernel(node, stream)``."""
        record(self.fork, stream)
        for lane in self.lanes:
            wait(lane, self.fork)
            if self.launched:   # implied by the lanes' FIFO order and the captured joins; explicit
                wait(lane, self.done)
        lanes, events = self.lanes, self.events
        for kind, i, arg in graph.ops:
            if kind == "kernel":
                kernel(arg, lanes[i])
            elif kind == "record":
                record(events[arg], lanes[i])
            elif kind == "wait":
                wait(lanes[i], events[arg])
            else:       # external: the event's record as of this launch
                wait(lanes[i], arg)
        for lane, join in zip(lanes, self.joins):
            record(join, lane)
            wait(stream, join)
        record(self.done, stream)
        self.launched = True


def _merge(into: dict[int, int], other: dict[int, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


class CaptureTracker:
    """Which streams are capturing, which events were recorded in a capture, and the checks.

    Each ``record``/``wait``/``launch`` returns whether the operation was captured (so must not
    run now); the ``check_*`` methods raise :class:`CaptureError` for what a capture forbids.
    """

    __slots__ = ("_events", "_streams", "engaged")

    def __init__(self) -> None:
        self._streams: dict[Any, _Open] = {}
        self._events: dict[Any, tuple[_Open, int, dict[int, int]]] = {}
        #: Whether a capture is open: the backends test it before anything else (hot path).
        self.engaged = False

    def capturing(self, stream: Any) -> bool:
        """Whether ``stream`` is capturing (the origin of a capture or joined to one)."""
        return stream in self._streams

    def is_origin(self, stream: Any) -> bool:
        """Whether ``stream`` began the capture it is in (so ``end`` will close it)."""
        c = self._streams.get(stream)
        return c is not None and c.origin is stream

    # -- capture operations ------------------------------------------------------------------
    def begin(self, origin: Any) -> None:
        c = self._streams.get(origin)
        if c is not None:
            raise CaptureError(
                f"begin_capture: {origin!r} is already capturing (into the capture begun on "
                f"{c.origin!r}); end that capture first"
            )
        self._streams[origin] = _Open(origin)
        self.engaged = True

    def _valid(self, c: _Open) -> None:
        if c.invalid is not None:
            raise CaptureError(
                f"the capture begun on {c.origin!r} was invalidated ({c.invalid}); call "
                "end_capture on its origin stream to discard it"
            )

    def _invalidate(self, c: _Open, why: str) -> None:
        self._valid(c)
        c.invalid = why
        raise CaptureError(
            f"{why}; CUDA invalidates a capture on this, so the capture begun on {c.origin!r} "
            "is now invalid: end_capture on its origin stream discards it"
        )

    def record(self, event: Any, stream: Any) -> bool:
        c = self._streams.get(stream)
        if c is None:
            self._events.pop(event, None)
            return False
        self._valid(c)
        lane, k = c.lanes[stream], c.records
        c.records += 1
        c.ops.append(("record", lane, k))
        self._events[event] = (c, k, dict(c.clocks[lane]))
        return True

    def wait(self, stream: Any, event: Any) -> bool:
        c = self._streams.get(stream)
        entry = self._events.get(event)
        if entry is None:
            if c is None:
                return False
            self._invalidate(c, f"capturing {stream!r} waits on {event!r}, which was not "
                                "recorded in the capture (wait before begin_capture, or record "
                                "the event inside the capture)")
        ec, k, clock = entry
        if c is None:
            self._valid(ec)
            c = ec
            c.lanes[stream] = len(c.clocks)
            c.clocks.append({})
            self._streams[stream] = c
        elif c is not ec:
            self._invalidate(c, f"capturing {stream!r} waits on {event!r}, which was recorded "
                                f"in another capture (begun on {ec.origin!r})")
        self._valid(c)
        lane = c.lanes[stream]
        c.ops.append(("wait", lane, k))
        _merge(c.clocks[lane], clock)
        return True

    def wait_external(self, stream: Any, event: Any) -> None:
        c = self._streams.get(stream)
        if c is None:
            raise CaptureError(f"wait_external: {stream!r} is not capturing (an external wait "
                               "only exists inside a capture; use wait outside one)")
        self._valid(c)
        if event in self._events:
            self._invalidate(c, f"wait_external on {event!r}, which was recorded in a capture: "
                                "use wait for events recorded inside the capture")
        c.ops.append(("xwait", c.lanes[stream], event))

    def launch(self, node: Any, stream: Any) -> bool:
        c = self._streams.get(stream)
        if c is None:
            return False
        self._valid(c)
        lane = c.lanes[stream]
        clock = c.clocks[lane]
        clock[lane] = clock.get(lane, 0) + 1
        c.ops.append(("kernel", lane, node))
        return True

    def end(self, origin: Any) -> Graph:
        """Close the capture begun on ``origin`` and return its program (always closes it)."""
        c = self._streams.get(origin)
        if c is None:
            raise CaptureError(f"end_capture: {origin!r} is not capturing; call begin_capture "
                               "on it first")
        if c.origin is not origin:
            raise CaptureError(f"end_capture: {origin!r} joined the capture begun on "
                               f"{c.origin!r}; end it on that stream")
        for s in c.lanes:
            self._streams.pop(s, None)
        self.engaged = bool(self._streams)
        c.closed = True
        for e in [e for e, entry in self._events.items() if entry[0] is c]:
            del self._events[e]
        if c.invalid is not None:
            raise CaptureError(f"end_capture: the capture begun on {origin!r} was invalidated "
                               f"({c.invalid}) and is discarded")
        joined = c.clocks[0]
        unjoined = [s for s, lane in c.lanes.items()
                    if lane and c.clocks[lane].get(lane, 0) > joined.get(lane, 0)]
        if unjoined:
            raise CaptureError(
                f"end_capture: captured work on {', '.join(map(repr, unjoined))} is not joined "
                f"back into {origin!r} (CUDA: cudaErrorStreamCaptureUnjoined); record an event "
                "on each after its last captured kernel and make the origin stream wait on it "
                "before end_capture. The capture is discarded"
            )
        return Graph(c.ops, len(c.lanes), c.records)

    # -- checks ------------------------------------------------------------------------------
    def check_prefetch(self, stream: Any) -> None:
        c = self._streams.get(stream)
        if c is not None:
            self._invalidate(c, f"prefetch on capturing {stream!r}: CUDA graphs have no "
                                "prefetch node and cudaMemPrefetchAsync invalidates a capture; "
                                "prefetch before begin_capture or before the graph launch")

    def check_host_wait(self, event: Any, what: str) -> None:
        entry = self._events.get(event)
        if entry is None:
            return
        c = entry[0]
        self._invalidate(c, f"{what} of {event!r}, recorded in the capture: captured work "
                            "does not run until the graph is launched")

    def check_synchronize(self) -> None:
        if self._streams:
            c = next(iter(self._streams.values()))
            self._invalidate(c, "device-wide synchronize while a stream capture is open")


def destroy(graph: Graph, wait_last_launch: Any, in_flight: set[Graph]) -> None:
    """The end of both backends' ``graph_destroy``: wait for the graph's last launch, forget
    it, and drop what it holds (its arrays among them)."""
    if graph.destroyed:
        return
    if graph.launched:
        wait_last_launch()
    in_flight.discard(graph)
    graph.destroyed = True
    graph.handle = None
    graph.nodes, graph.allocs, graph.ops = [], [], []


def check_launch(graph: Any, stream: Any, tracker: CaptureTracker) -> None:
    """Refuse a launch of a destroyed graph, of one whose arrays were freed, or into a capture."""
    if not isinstance(graph, Graph):
        raise CaptureError(f"graph_launch: {graph!r} is not a graph from end_capture")
    if graph.destroyed:
        raise CaptureError("graph_launch: the graph was destroyed")
    frees = explicit_frees()
    if graph.frees != frees:        # (its arrays were all live, and nothing was freed since)
        for alloc in graph.allocs:
            if alloc.freed:
                raise CaptureError(
                    "graph_launch: the graph uses an array that was freed (Array.free()); "
                    "arrays a graph uses must stay alive as long as the graph"
                )
        graph.frees = frees
    if tracker.engaged and tracker.capturing(stream):
        raise CaptureError(f"graph_launch: {stream!r} is capturing; launching a graph inside a "
                           "capture (a child graph) is not supported")


__all__ = ["CaptureTracker", "Expansion", "Graph", "check_launch"]
