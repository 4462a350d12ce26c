"""Capturing a recording into a graph: its dependencies, schedule and the capture itself.

The model
---------
A recording's launches (``asyncgpu._recorder``) depend on each other where they touch
overlapping bytes of one allocation and one of them writes (:func:`dependencies`: RAW, WAR,
WAW, in recorded order, so indices are a topological order). :func:`plan` orders them and
assigns them to lanes (``asyncgpu._graph_schedule``, per ``Options.graph_order`` and
``graph_streams``; the ``opara`` and ``ios`` orders time the launches first, see
``asyncgpu._graph_profile``); :func:`capture` issues them on the recorder's lane streams inside one
stream capture::

    origin: record fork                      (lane 0 is the origin)
    per launch, in the planned order:
        its lane waits for fork when first used, and for the events of its cross-lane
        predecessors (redundant waits dropped); launch; record its event if a later launch
        on another lane waits for it
    every other lane records a join event; the origin waits for each; end_capture

so the graph's inner order is exactly the launches' dependencies. The result is a
:class:`FrozenGraph`: the backend's graph, the union of the launches' accesses (what the replay
node declares to the dynamic DAG: a range written by any launch is written) and the launches
themselves, whose arrays the graph keeps alive.

Example: ``k1(x -> y); k2(x -> z); k3(y, z -> w)`` gives preds ``[[], [], [0, 1]]``; with
``opara`` streams k1 and k3 share lane 0, k2 runs on lane 1 and k3 waits for k2's event.

Plain Python: the backend does the capturing.
"""

from __future__ import annotations

import logging
from typing import Any

from . import _graph_profile as profile
from . import _graph_schedule as schedule
from ._dag import Node
from ._deps import Access
from ._errors import CaptureError

log = logging.getLogger("asyncgpu")


class FrozenGraph:
    """A captured graph and the union of its accesses (one cache entry)."""

    __slots__ = ("graph", "accesses", "launches", "events", "name", "kernels")

    def __init__(self, graph: Any, accesses: list[Access], launches: list[Any],
                 events: list[Any], name: str) -> None:
        self.graph = graph
        self.accesses = accesses
        self.launches = launches    # keeps the arrays alive with the graph
        self.events = events
        self.name = name
        self.kernels = len(launches)


def dependencies(launches: list[Any], all_write: bool = False) -> list[list[int]]:
    """``preds[i]``: earlier launches that launch ``i`` conflicts with (RAW, WAR, WAW);
    ``all_write``: every array argument counts as written (the ``no-const`` policy)."""
    last: dict[int, list[tuple[int, int, int, bool]]] = {}     # alloc -> (lo, hi, i, write)
    preds: list[list[int]] = []
    for i, launch in enumerate(launches):
        mine: set[int] = set()
        for a in launch.arrays:
            for lo, hi, j, w in last.get(a.key, ()):
                if lo < a.hi and a.lo < hi and (w or a.write or all_write) and j != i:
                    mine.add(j)
        for a in launch.arrays:
            last.setdefault(a.key, []).append((a.lo, a.hi, i, a.write))
        preds.append(sorted(mine))
    return preds


def plan(rt: Any, launches: list[Any], name: str = "recording",
         ) -> tuple[list[list[int]], list[int], list[int]]:
    """(preds, lanes, order) for capturing ``launches`` under the runtime's options.

    ``ios`` may add IOS's stage barriers to ``preds`` (and then fixes the lanes itself); when
    its search is skipped (too many launches, no timer) the ``opara`` order is used.
    """
    preds = dependencies(launches, rt.no_const)
    opts = rt.options
    be = _capture_backend(rt.backend)
    kind = opts.graph_order
    if kind == "ios":
        stages = profile.ios_stages(rt, be, launches, preds, name)
        if stages is not None:
            return schedule.stage_plan(preds, stages)
        kind = "opara"
    if kind == "opara":
        attrs = getattr(be, "kernel_attributes", None)
        demand = []
        for launch in launches:
            blocks, threads = profile.launch_threads(launch)
            a = (attrs(launch.launcher.kernel) if attrs is not None and launch.launcher
                 else None)
            demand.append(schedule.resource_demand(a, threads, blocks))
        with profile.stage_timer(rt, be, launches) as timer:
            classes = profile.launch_classes(rt, be, launches, timer)
        memory = [c != "compute" for c in classes]
        order = schedule.opara_order(preds, demand, memory)
    else:
        order = schedule.topological_order(preds)
    if opts.graph_streams == "nimble":
        lanes = schedule.nimble_streams(preds)
    elif opts.graph_streams == "single":
        lanes = [0] * len(launches)
    else:
        lanes = schedule.opara_streams(preds, order)
    return preds, lanes, order


def capture(rt: Any, cache: Any, name: str, launches: list[Any]) -> FrozenGraph:
    """Capture ``launches`` into a graph on the cache's lane streams (under the runtime lock)."""
    be = _capture_backend(rt.backend)
    preds, lanes, order = plan(rt, launches, name)
    waits = schedule.cross_waits(preds, lanes, order)
    recorded = {p for ws in waits for p in ws}
    built = [_node(rt, be, launch) for launch in launches]
    nodes = [node for node, _ in built]
    streams = [cache.lane(i) for i in range(max(lanes) + 1)]
    origin = streams[0]
    events: dict[int, Any] = {}
    joins: list[Any] = []
    be.begin_capture(origin)
    try:
        fork = be.create_event()
        be.record(fork, origin)
        joined = {0}
        for v in order:
            lane = lanes[v]
            s = streams[lane]
            if lane not in joined:
                be.wait(s, fork)
                joined.add(lane)
            for p in waits[v]:
                be.wait(s, events[p])
            be.launch(nodes[v], s)
            call = built[v][1]
            if call is not None and call.error is not None:
                raise CaptureError(f"{call.describe()} failed during the capture: {call.error}")
            if v in recorded:
                events[v] = be.create_event()
                be.record(events[v], s)
        for lane in sorted(joined - {0}):
            e = be.create_event()
            joins.append(e)
            be.record(e, streams[lane])
            be.wait(origin, e)
        graph = be.end_capture(origin)
    except BaseException:
        if be.captures.capturing(origin):
            try:
                be.end_capture(origin)
            except CaptureError:
                pass
        raise
    rt.stats.graphs_recorded += 1
    log.debug("captured '%s': %d kernels on %d streams", name, len(launches), len(streams))
    merged: dict[tuple[int, int, int], Access] = {}
    for launch in launches:
        for a in launch.arrays:
            k = (a.key, a.lo, a.hi)
            acc = merged.get(k)
            if acc is None:
                merged[k] = Access(a.key, a.alloc, a.lo, a.hi, a.write, a.label)
            elif a.write:
                acc.write = True
    return FrozenGraph(graph, list(merged.values()), launches, [fork, *events.values(), *joins],
                   name)


def _node(rt: Any, be: Any, launch: Any) -> tuple[Node, Any]:
    """The node capturing one launch: a kernel, or a library call (``_graph_calls``) whose
    temporaries stay pinned as long as the node (so the graph) exists."""
    if launch.launcher is not None:
        kernel = launch.launcher.kernel
        node = Node("kernel", kernel.name, launch.site, launch.arrays)
        node.launch = be.kernel_launch(kernel, launch.launcher, launch.arrays, launch.values,
                                       launch.site)
        node.keepalive = launch.arrays
        return node, None
    call = launch.call()
    accesses = call.accesses(rt.alias_blind)
    prepared = be.library_call(rt, call, accesses)
    if prepared is None:
        raise CaptureError(f"{call.describe()} must run at once (its result depends on the "
                           "data), so it cannot be captured")
    pinned: list[Any] = []
    if hasattr(prepared, "pinned"):
        prepared.pinned = pinned
    node = Node("call", call.name, launch.site, accesses)
    node.launch = prepared
    node.keepalive = (call.arrays, pinned)
    return node, call


def _capture_backend(be: Any) -> Any:
    """The backend to capture with: under a trace, the traced one (timing events recorded
    around captured launches would be captured too, and querying them breaks the capture)."""
    from ._trace import _TracingBackend

    return be.inner if isinstance(be, _TracingBackend) else be
