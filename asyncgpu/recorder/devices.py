"""Recordings on several devices: one graph per device and phase.

The model
---------
A CUDA graph captured from a stream holds the work of that stream's device, while the launches
of one recording may be placed on several devices. On a runtime over several devices the
recorder (``asyncgpu.recorder.finish``) therefore issues a recording's first run eagerly,
placed launch by launch by the device policy (or on the device pinned when it was recorded),
and keeps each launch's device. The next run splits the launches into *groups*
(:func:`device_groups`): a launch's *phase* is the largest phase among the launches it depends
on (``capture.dependencies``: RAW, WAR, WAW), plus one where that launch is on another device;
a group is the launches of one device and one phase, in recorded order. :func:`capture_groups`
captures each group on its device's streams as one graph (``capture.capture``), and a replay
launches the graphs in phase order as nodes of the dynamic DAG placed on their devices, so the
peer copies and cross-device events between them are the runtime's, as for any node.

The pieces of a launch its tenant splits (``asyncgpu.recorder.keys.Piece``) are placed as the
whole launch is, all on one device, and take the phase of the latest of them, so they land in
one graph, which runs each after the one before (their rows are disjoint: in two graphs
nothing would order them).

Invariants: every launch a group depends on is in that group or in a group of an earlier
phase, so launching the groups phase by phase launches each graph after those it needs;
groups of one phase on different devices share no conflicting bytes, so they overlap.

Example: ``k1(a) on 0; k2(b) on 1; k3(a, b -> c) on 0`` gives phases ``[0, 0, 1]`` and the
groups ``(0, [k1]), (1, [k2]), (0, [k3])``: two graphs that run side by side, then one that
waits for both (a peer copy brings ``b`` to device 0 first).
"""

from __future__ import annotations

from typing import Any

from ..runtime.frozen import FrozenGraph
from .capture import capture, dependencies, plan
from .keys import Piece


def device_groups(preds: list[list[int]], slots: list[int], firsts: list[int] | None = None
                  ) -> list[tuple[int, list[int]]]:
    """The groups of launches with predecessors ``preds`` placed on device slots ``slots``:
    ``(slot, indices)`` in phase order (then by device), indices in recorded order.
    ``firsts[i]``: the first launch of the consecutive run that must share launch ``i``'s
    group (the pieces of one split launch; ``i`` itself otherwise)."""
    phase: list[int] = []
    for i, ps in enumerate(preds):
        mine = 0
        for p in ps:
            mine = max(mine, phase[p] + (slots[p] != slots[i]))
        phase.append(mine)
        if firsts is not None and firsts[i] != i:
            # (a later piece may need another device's launch the earlier ones did not:
            # they wait with it; no launch between them can depend on them yet)
            for j in range(firsts[i], i):
                phase[j] = mine
    groups: dict[tuple[int, int], list[int]] = {}
    for i, slot in enumerate(slots):
        groups.setdefault((phase[i], slot), []).append(i)
    return [(slot, indices) for (_, slot), indices in sorted(groups.items())]


def issue_placed(rt: Any, launches: list[Any]) -> list[int]:
    """Issue ``launches`` eagerly, one node each; returns the device slot each was placed on:
    the device whose count of placed nodes its issue raised (``Statistics.placed``), else (a
    launch that issued nothing, an empty one) where it was pinned, or its first argument's
    home."""
    slots: list[int] = []
    placed = rt.stats.placed
    for launch in launches:
        before = dict(placed)
        launch.issue(rt)
        number = next((n for n, count in placed.items() if count != before.get(n, 0)), None)
        if type(launch) is Piece and launch.piece:
            slots.append(slots[-1])     # (the first piece issued them all, on its device)
        elif number is not None:
            slots.append(rt.devices.index(number))
        elif launch.pin >= 0 or not launch.arrays:
            slots.append(max(launch.pin, 0))
        else:
            slots.append(launch.arrays[0].alloc.home)
    return slots


def capture_groups(rt: Any, cache: Any, name: str, launches: list[Any], slots: list[int]
                   ) -> list[FrozenGraph]:
    """One graph per group of :func:`device_groups`, in launch order; a failed capture
    destroys those already made and raises its ``CaptureError``."""
    graphs: list[FrozenGraph] = []
    try:
        firsts = [i - launch.piece if type(launch) is Piece else i
                  for i, launch in enumerate(launches)]
        for slot, indices in device_groups(dependencies(launches, rt.no_const), slots,
                                           firsts):
            group = [launches[i] for i in indices]
            # (untimed: timing a group would run its launches on the first device)
            frozen = capture(rt, cache, f"{name} on device {rt.devices[slot]}", group, (),
                             plan(rt, group, name, timed=False), slot)
            frozen.recording = name
            graphs.append(frozen)
    except BaseException:
        for frozen in graphs:
            rt.backend.graph_destroy(frozen.graph)
        raise
    return graphs
