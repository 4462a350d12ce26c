"""Capturing a recording into a graph: its dependencies, schedule and the capture itself.

The model
---------
A recording's launches (``asyncgpu.recorder.recording``) depend on each other where they touch
overlapping bytes of one allocation and one of them writes (:func:`dependencies`: RAW, WAR,
WAW, in recorded order, so indices are a topological order), and the pieces of a launch its
tenant splits each follow the one before, though their rows are disjoint. :func:`plan` orders
them and assigns them to lanes (``asyncgpu.recorder.schedule``, per ``Options.graph_order`` and
``graph_streams``; the ``opara`` and ``ios`` orders time the launches first, see
``asyncgpu.recorder.profile``; short launches are then folded onto fewer lanes, the lane
budget); :func:`capture` issues them on the recorder's lane streams inside one
stream capture::

    origin: record fork                      (lane 0 is the origin)
    per launch, in the planned order:
        its lane waits for fork when first used, and for the events of its cross-lane
        predecessors (redundant waits dropped); launch; record its event if a later launch
        on another lane waits for it
    every other lane records a join event; the origin waits for each; end_capture

so the graph's inner order is exactly the launches' dependencies.

With explicit memory the allocations whose current copy is on the host when the recording is
captured (``copy_in``) are copied in *inside* the graph: one extra lane, forked from the origin,
issues their host-to-device copies back to back in the order their first users are launched, and
each lane waits for the copy of an allocation before its first launch that uses it (the copies
are one chain, so one wait covers every earlier copy). A replay then moves its inputs without a
node of its own per copy, and the copies overlap the branches that do not need them, as a
hand-written graph's transfers would. Such a graph is only valid while the same allocations are
host-current: the recorder keeps one graph per such set (its *variants*, sharing one plan).

The result is a :class:`~asyncgpu.runtime.frozen.FrozenGraph` (a runtime type: the runtime
issues it): the backend's graph, the union of the launches' accesses (what the replay node
declares to the dynamic DAG: a range written by any launch is written) and the launches
themselves, whose arrays the graph keeps alive.

Example: ``k1(x -> y); k2(x -> z); k3(y, z -> w)`` gives preds ``[[], [], [0, 1]]``; with
``opara`` streams k1 and k3 share lane 0, k2 runs on lane 1 and k3 waits for k2's event.

Plain Python: the backend does the capturing.
"""

from __future__ import annotations

import logging
from typing import Any

from ..core.dag import Node
from ..core.deps import Access
from ..core.errors import CaptureError
from ..runtime.splits import split_settings
from ..runtime.frozen import FrozenGraph
from . import profile, schedule
from .keys import Piece

log = logging.getLogger("asyncgpu")


def dependencies(launches: list[Any], all_write: bool = False) -> list[list[int]]:
    """``preds[i]``: earlier launches that launch ``i`` conflicts with (RAW, WAR, WAW), and for
    a piece of a split launch (:class:`~asyncgpu.recorder.keys.Piece`) the piece before it,
    which its data do not order; ``all_write``: every array argument counts as written (the
    ``no-const`` policy)."""
    last: dict[int, list[tuple[int, int, int, bool]]] = {}     # alloc -> (lo, hi, i, write)
    preds: list[list[int]] = []
    for i, launch in enumerate(launches):
        mine: set[int] = set()
        if type(launch) is Piece and launch.piece:
            mine.add(i - 1)         # (the pieces of one launch are consecutive)
        for a in launch.arrays:
            for lo, hi, j, w in last.get(a.key, ()):
                if lo < a.hi and a.lo < hi and (w or a.write or all_write) and j != i:
                    mine.add(j)
        for a in launch.arrays:
            last.setdefault(a.key, []).append((a.lo, a.hi, i, a.write))
        preds.append(sorted(mine))
    return preds


def plan(rt: Any, launches: list[Any], name: str = "recording", timed: bool = True,
         ) -> tuple[list[list[int]], list[int], list[int]]:
    """(preds, lanes, order) for capturing ``launches`` under the runtime's options.

    ``ios`` may add IOS's stage barriers to ``preds`` (and then fixes the lanes itself); when
    its search is skipped (too many launches, no timer) the ``opara`` order is used. The
    other orders' lanes are then held to ``graph_max_streams`` and to the lane budget.
    ``timed=False``: nothing is run to plan (the launches in topological order, no lane
    budget), as for the graphs of several devices, whose launches the timers cannot place.
    """
    preds = dependencies(launches, rt.no_const)
    opts = rt.options
    be = _capture_backend(rt.backend)
    kind = opts.graph_order if timed else "topological"
    if kind == "ios":
        stages = profile.ios_stages(rt, be, launches, preds, name)
        if stages is not None:
            preds, lanes, order = schedule.stage_plan(preds, stages)
            return preds, schedule.fold_lanes(lanes, opts.graph_max_streams), order
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
    lanes = schedule.fold_lanes(lanes, opts.graph_max_streams)
    if not timed:
        return preds, lanes, order
    return preds, _budget(rt, be, launches, preds, order, lanes), order


#: A graph branch's launch cost where it is neither set nor measurable (``sim``): seconds.
_LANE_COST_S = 1e-6


def _lane_cost_s(rt: Any, be: Any) -> float:
    """``graph_lane_cost_us`` in seconds, or when it is None the backend's measured cost."""
    cost_us = rt.options.graph_lane_cost_us
    if cost_us is not None:
        return cost_us * 1e-6
    measure = getattr(be, "lane_cost_s", None)
    return measure() if measure is not None else _LANE_COST_S


#: Bytes per second no device moves data faster than: a launch takes at least its traffic at
#: this rate, the lower bound that decides whether measuring for the lane budget can pay.
_FASTEST_BANDWIDTH = 10e12


def _budget(rt: Any, be: Any, launches: list[Any], preds: list[list[int]], order: list[int],
            lanes: list[int]) -> list[int]:
    """``lanes`` folded to the lane budget (``graph_lane_cost_us``), from measured durations
    (``_graph_profile.launch_times``: what each launch adds to a lane). The launches are timed
    only when folding would pay even if every launch took just its traffic at
    :data:`_FASTEST_BANDWIDTH` (long launches never pay for the measuring).
    """
    width = max(lanes, default=-1) + 1
    cost = _lane_cost_s(rt, be) if width > 1 else 0.0
    if cost <= 0:
        return lanes
    shortest = [profile.launch_bytes(launch) / _FASTEST_BANDWIDTH for launch in launches]
    if schedule.lane_budget(preds, order, lanes, shortest, cost) == width:
        return lanes
    with profile.stage_timer(rt, be, launches) as timer:
        durations = profile.launch_times(launches, timer)
    if durations is None:
        return lanes
    count = schedule.lane_budget(preds, order, lanes, durations, cost)
    if count < width:
        log.debug("asyncgpu: %d lanes folded to %d: the launches are too short for more "
                  "(lane budget %.2f us each)", width, count, cost * 1e6)
    return schedule.fold_lanes(lanes, count)


def capture(rt: Any, cache: Any, name: str, launches: list[Any],
            copy_in: tuple[Any, ...] = (), planned: Any = None, device: int = 0
            ) -> FrozenGraph:
    """Capture ``launches`` into a graph on the cache's lane streams (under the runtime lock);
    the allocations of ``copy_in`` are copied to the device inside the graph. ``planned``:
    the (preds, lanes, order) of another variant of the same launches, reused (it does not
    depend on which inputs are copied in, and ``opara``/``ios`` plans cost timed runs).
    ``device``: the slot of the device the launches run on (the lanes are its streams)."""
    be = _capture_backend(rt.backend)
    preds, lanes, order = planned if planned is not None else plan(rt, launches, name)
    waits = schedule.cross_waits(preds, lanes, order)
    recorded = {p for ws in waits for p in ws}
    built = [_node(rt, be, launch, device) for launch in launches]
    nodes = [node for node, _ in built]
    copies, needs = _copies(be, launches, order, copy_in)
    n_lanes = max(lanes) + 1
    streams = [cache.lane(i, device) for i in range(n_lanes + (1 if copies else 0))]
    origin = streams[0]
    events: dict[int, Any] = {}
    copied: list[Any] = []          # the event after each copy
    waited = [-1] * len(streams)    # per lane: the last copy it waited for
    joins: list[Any] = []
    try:
        # (inside the try: an interrupt as it returns would leave the capture open, and every
        # later synchronize refused; one before it began finds none to end)
        be.begin_capture(origin)
        fork = be.create_event(device)
        be.record(fork, origin)
        joined = {0}
        if copies:
            s = streams[n_lanes]
            be.wait(s, fork)
            joined.add(n_lanes)
            for node in copies:
                be.launch(node, s)
                copied.append(be.create_event(device))
                be.record(copied[-1], s)
        for v in order:
            lane = lanes[v]
            s = streams[lane]
            if lane not in joined:
                be.wait(s, fork)
                joined.add(lane)
            if needs[v] > waited[lane]:
                waited[lane] = needs[v]
                be.wait(s, copied[needs[v]])
            for p in waits[v]:
                be.wait(s, events[p])
            be.launch(nodes[v], s)
            call = built[v][1]
            if call is not None and call.error is not None:
                raise CaptureError(f"{call.describe()} failed during the capture: {call.error}")
            if v in recorded:
                events[v] = be.create_event(device)
                be.record(events[v], s)
        for lane in sorted(joined - {0}):
            e = be.create_event(device)
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
    log.debug("captured '%s': %d kernels and %d copies on %d streams", name, len(launches),
              len(copies), len(streams))
    whole = {a.id for a in copy_in}
    merged: dict[tuple[int, int, int], Access] = {}
    for node in copies:             # the graph writes the whole device copy of these
        a = node.accesses[0]
        merged[(a.key, a.lo, a.hi)] = a
    for launch in launches:
        for a in launch.arrays:
            if a.key in whole:
                continue
            k = (a.key, a.lo, a.hi)
            acc = merged.get(k)
            if acc is None:
                merged[k] = Access(a.key, a.alloc, a.lo, a.hi, a.write, a.label)
            elif a.write:
                acc.write = True
    frozen = FrozenGraph(graph, list(merged.values()), launches,
                         [fork, *events.values(), *copied, *joins], name, copy_in)
    frozen.plan = (preds, lanes, order)
    frozen.splits = split_settings(rt, launches)
    return frozen


def _copies(be: Any, launches: list[Any], order: list[int], copy_in: tuple[Any, ...]
            ) -> tuple[list[Node], list[int]]:
    """The copy nodes of ``copy_in`` in the order their first users launch, and per launch the
    index of the last copy it needs (-1: none)."""
    needs = [-1] * len(launches)
    if not copy_in:
        return [], needs
    wanted = {a.id for a in copy_in}
    first: dict[int, tuple[int, Any]] = {}      # alloc id -> (position of first user, access)
    for pos, v in enumerate(order):
        for a in launches[v].arrays:
            if a.key in wanted and a.key not in first:
                first[a.key] = (pos, a)
    copies: list[Node] = []
    index: dict[int, int] = {}
    for key, (_, a) in sorted(first.items(), key=lambda kv: kv[1][0]):
        alloc = a.alloc
        node = Node("copy", f"{a.label} to device", None,
                    [Access(key, alloc, 0, alloc.nbytes, True, a.label)])
        node.launch = be.copy_launch(alloc.buffer, 0, alloc.nbytes, True)
        index[key] = len(copies)
        copies.append(node)
    for v, launch in enumerate(launches):
        needs[v] = max((index[a.key] for a in launch.arrays if a.key in index), default=-1)
    return copies, needs


def _node(rt: Any, be: Any, launch: Any, device: int) -> tuple[Node, Any]:
    """The node capturing one launch on device slot ``device``: a kernel, or a library call
    (``_graph_calls``) whose temporaries stay pinned as long as the node (so the graph)
    exists."""
    if launch.launcher is not None:
        kernel = launch.launcher.kernel
        node = Node("kernel", kernel.name, launch.site, launch.arrays)
        node.device = device
        node.launch = be.kernel_launch(kernel, launch.launcher, launch.arrays, launch.values,
                                       launch.site, device)
        node.keepalive = launch.arrays
        return node, None
    call = launch.call()
    accesses = call.accesses()
    prepared = be.library_call(rt, call, accesses, device)
    if prepared is None:
        raise CaptureError(f"{call.describe()} must run at once (its result depends on the "
                           "data), so it cannot be captured")
    pinned: list[Any] = []
    if hasattr(prepared, "pinned"):
        prepared.pinned = pinned
    node = Node("call", call.name, launch.site, accesses)
    node.device = device
    node.launch = prepared
    node.keepalive = (call.arrays, pinned)
    return node, call


def _capture_backend(be: Any) -> Any:
    """The backend to capture with: under traces, the one they trace (timing events recorded
    around captured launches would be captured too, and querying them breaks the capture);
    traces nest, each wrapping the one before."""
    traced = getattr(be, "traced", None)     # (set by a trace's wrapper only)
    while traced is not None:
        be, traced = traced, getattr(traced, "traced", None)
    return be
