"""A frozen graph: a captured recording as the runtime issues it (one launch, one node).

The model
---------
The recorder (``asyncgpu.recorder``) captures a recording's launches into a backend graph; the
result is a :class:`FrozenGraph`, the one thing the runtime needs to know of it to launch it
(``Runtime.launch_graph``, ``asyncgpu.runtime.issue``): the backend's graph, the union of the
launches' accesses (what its replay node declares to the dynamic DAG), the launches whose
arrays it keeps alive, and the bookkeeping of explicit memory (which allocations it copies in,
reads, overwrites, writes and copies back). It lives in the runtime layer because the issue
path takes it; the recorder builds it.

Invariants: ``inputs`` and ``overwritten`` split the allocations the launches use by whether
the first launch using one may read its old bytes (through any of its arguments); ``settled``
equals ``Runtime.host_epoch`` only while no host access came after its last launch (then none
of its inputs is host-current).

Example::

    frozen = FrozenGraph(graph, accesses, launches, events, "step")
    rt.launch_graph(frozen)          # one node; its edges come from ``frozen.accesses``
"""

from __future__ import annotations

from typing import Any

from ..core.deps import Access
from .memory import host_current, overwrites


class FrozenGraph:
    """A captured graph and the union of its accesses (one cache entry).

    ``copy_in``: the allocations the graph copies to the device itself (their accesses are
    writes of the whole allocation: the graph writes the device copy); ``copy_only``: those of
    them no launch writes (host and device copies are both current after a replay);
    ``written``: the allocations a launch writes;
    ``inputs``/``overwritten``: the allocations the graph touches, split by whether its first
    use may read the old bytes (a static replay checks that the host-current inputs are
    exactly ``copy_in``; an overwritten one needs no copy wherever its current copy is);
    ``read_back``: the written allocations the host fetched whole after a launch, which each
    launch copies back to the host behind itself (``ExplicitMemory.read_back``). The slot of
    the device its launches run on is its graph's (``Graph.device``: on several devices each
    graph holds one device's work, ``asyncgpu.recorder.devices``).
    """

    __slots__ = ("graph", "accesses", "launches", "events", "name", "recording", "kernels",
                 "copy_in",
                 "copy_only", "copy_bytes", "inputs", "overwritten", "written", "plan", "last",
                 "repeat", "settled", "read_back", "replay_version", "splits", "__weakref__")

    def __init__(self, graph: Any, accesses: list[Access], launches: list[Any],
                 events: list[Any], name: str, copy_in: tuple[Any, ...] = ()) -> None:
        self.graph = graph
        self.accesses = accesses
        self.launches = launches    # keeps the arrays alive with the graph
        self.events = events
        self.name = name
        #: the recorded function's name (what a tenant's pointer names it by), where ``name``
        #: also says the device (on several devices, one graph per device and phase)
        self.recording = name
        #: its launches, a launch split in pieces (``asyncgpu.recorder.keys.Piece``) counted
        #: once: the pieces are a tenant's split, not the step's shape (``Regulator.graph``)
        self.kernels = sum([1 for launch in launches if not getattr(launch, "piece", 0)])
        self.copy_in = copy_in
        written = {a.key: a.alloc for launch in launches for a in launch.arrays if a.write}
        self.written = tuple(a for a in written.values() if a.nbytes)
        self.copy_only = tuple(a for a in copy_in if a.id not in written)
        self.copy_bytes = sum(a.nbytes for a in copy_in)
        self.inputs, self.overwritten = graph_inputs(launches)
        self.plan: Any = None       # (preds, lanes, order) it was captured with
        #: how the tenant split its kernels when it was captured (``splits.split_settings``):
        #: a static call under other splits runs its body (``asyncgpu.recorder.entry``)
        self.splits: Any = None
        #: (tracker, version, node) after its last launch, and (tracker, the reasons it
        #: conflicts with itself): ``Runtime.launch_graph``'s shortcut for a repeated launch
        self.last: Any = None
        self.repeat: Any = None
        #: ``Runtime.host_epoch`` right after its last launch: while the epoch stands still,
        #: none of its allocations is host-current (see :meth:`host_current`).
        self.settled = -1
        #: explicit memory: ((allocation, label), ...) it copies back to the host after each
        #: launch (``ExplicitMemory.read_back``), and the tracker's version once its last
        #: launch (and those copies) were issued
        self.read_back: tuple[Any, ...] = ()
        self.replay_version = -1

    def host_current(self, rt: Any) -> tuple[Any, ...]:
        """Its inputs that are host-current now (``asyncgpu.runtime.memory.host_current``): none
        while nothing has made one host-current since its last launch left them all on the
        device."""
        if self.settled == rt.host_epoch:
            return ()
        return host_current(self.inputs)

    @property
    def lanes(self) -> int:
        """The streams its launches were captured on (after the lane budget; copy lane not
        counted)."""
        return max(self.plan[1]) + 1 if self.plan is not None else 1


def copy_key(allocs: tuple[Any, ...]) -> tuple[int, ...]:
    """What tells the graphs of one recorded key apart (``asyncgpu.recorder.cache``): the
    ids of the allocations ``allocs`` a graph copies in (compiled, a static replay's lookup
    of its graph is a C call)."""
    return tuple([a.id for a in allocs]) if allocs else ()


def graph_inputs(launches: list[Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The allocations ``launches`` use, each once: (those whose old bytes they may read,
    those the first launch using them overwrites whole).

    A launch's accesses to one allocation count together: a launch that gets it whole as a
    write-only argument and again as an argument it reads (``k(out=z, x=z)``) reads the old
    bytes, whichever argument comes first."""
    first: dict[int, Any] = {}      # alloc id -> the allocation, in order of first use
    whole: set[int] = set()         # those the first launch using them overwrites whole
    for launch in launches:
        new: dict[int, Any] = {}
        covers: set[int] = set()
        reads: set[int] = set()
        for a in launch.arrays:
            key = a.key
            if key in first:
                continue            # (an earlier launch used it first)
            new[key] = a.alloc
            if overwrites(a):
                covers.add(key)
            elif a.read or not a.write:
                reads.add(key)
        first.update(new)
        whole.update(covers - reads)
    inputs = tuple([alloc for key, alloc in first.items() if key not in whole])
    overwritten = tuple([alloc for key, alloc in first.items() if key in whole])
    return inputs, overwritten
