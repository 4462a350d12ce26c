"""The recorder's cache: keys seen, the graphs captured for them, and the capture streams.

The model
---------
One :class:`GraphCache` per runtime (``runtime.graphs``, made on first use). Its ``entries``
map a recording's key (``asyncgpu.recorder.keys.RecordingKey``) to what is known of it: seen
once (the recorder's marker), failed to capture (another marker), or :class:`Variants`, the
captured graphs of that key (:class:`Placed` on several devices: one graph per device and
phase, ``asyncgpu.recorder.devices``). With explicit memory a graph that copies host-current
inputs in is only right while exactly those inputs are host-current, so a key holds up to
:data:`VARIANTS` graphs, told apart by :func:`~asyncgpu.runtime.frozen.copy_key` of what they
copy in, all captured with the schedule of the first (``FrozenGraph.plan``). Invariants:

* at most ``Options.graph_cache`` keys (least recently used evicted first), at most
  :data:`VARIANTS` graphs per key; every graph dropped from either is destroyed (the backend
  waits for its last launch first), so a graph's arrays live exactly as long as the graph;
* ``results`` (the arrays captured library calls write, ``asyncgpu.recorder.calls``) and
  ``memo`` (each segment's previous run, ``asyncgpu.recorder.keys.LaunchMemo``) are keyed by
  the recorder's token, so ``clear(token)`` forgets one recorder entirely;
* a recorded function the program dropped (:func:`dropped`, its finalizer) is forgotten so by
  every cache at the cache's next capture or the runtime's next wait for everything
  (``forget_dropped``): its graphs, and the arrays they keep alive, do not outlive it. (Not
  from the finalizer itself, which the collector may run inside a call holding the lock.)

Example::

    cache = graph_cache(rt)
    variants = cache.get(key)            # None, a marker, or Variants
    frozen = variants.use(copy_in)       # the graph for this set of host-current inputs

Plain Python: destroying goes through the backend.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict, deque
from typing import Any

from ..runtime.frozen import FrozenGraph, copy_key
from .keys import LaunchMemo


class GraphCache:
    """Per-runtime LRU of keys seen and graphs captured, plus the capture streams."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        # (``entries`` and ``memo`` are plain dicts in least-recently-used order, a use moving
        # its key to the end: a replay's lookups in them are then C calls where compiled)
        self.entries: dict[Any, Any] = {}
        self.lanes: dict[int, list[Any]] = {}      # device slot -> capture streams
        #: Result arrays of captured library calls, per (recording segment, position), then
        #: per call's arguments: the same arrays at every run (``asyncgpu.recorder.calls``).
        self.results: OrderedDict[Any, Any] = OrderedDict()
        #: The previous run of each recording segment (``asyncgpu.recorder.keys``).
        self.memo: dict[Any, LaunchMemo] = {}
        #: Tokens of recorded functions dropped since (:func:`dropped`), to forget.
        self.dropped: deque[Any] = deque()
        _caches.add(self)

    def get(self, key: Any) -> Any:
        entry = self.entries.pop(key, None)
        if entry is not None:
            self.entries[key] = entry       # (the most recently used)
        return entry

    def put(self, key: Any, entry: Any) -> None:
        if self.dropped:
            self.forget_dropped()
        old = self.entries.pop(key, None)
        if old is not entry:
            self._destroy(old)
        self.entries[key] = entry
        limit = self.runtime.options.graph_cache
        while len(self.entries) > limit:
            self._destroy(self.entries.pop(next(iter(self.entries))))

    def clear(self, token: Any = None) -> None:
        """Destroy the graphs (of one recorder, or all) and forget their keys."""
        self._forget(None if token is None else {token})

    def forget_dropped(self) -> None:
        """Under the runtime's lock: forget the recorded functions dropped since (their
        graphs destroyed, after their last launches)."""
        tokens = set()
        while self.dropped:
            tokens.add(self.dropped.popleft())
        self._forget(tokens)

    def _forget(self, tokens: set[Any] | None) -> None:
        """Destroy the graphs of the recorders ``tokens`` (None: all) and forget their keys."""
        for key in [k for k in self.entries if tokens is None or k.token[0] in tokens]:
            self._destroy(self.entries.pop(key))
        for key in [k for k in self.results if tokens is None or k[0][0] in tokens]:
            del self.results[key]
        for key in [k for k in self.memo if tokens is None or k[0] in tokens]:
            del self.memo[key]

    def _destroy(self, entry: Any) -> None:
        for frozen in graphs_in(entry):
            self.runtime.backend.graph_destroy(frozen.graph)

    def lane(self, i: int, device: int = 0) -> Any:
        """Capture stream ``i`` of device slot ``device``."""
        lanes = self.lanes.setdefault(device, [])
        while len(lanes) <= i:
            lanes.append(self.runtime.backend.create_stream(device))
        return lanes[i]


class Variants(OrderedDict):
    """The graphs of one key, per set of allocations they copy in (explicit memory: a graph
    is valid only while the same inputs are host-current, see ``asyncgpu.recorder.capture``;
    managed memory has one variant). The least recently used is destroyed beyond
    :data:`VARIANTS`."""

    def use(self, copy_in: tuple[Any, ...]) -> FrozenGraph | None:
        """The graph that copies in exactly ``copy_in``, if captured."""
        sig = copy_key(copy_in)
        frozen = self.get(sig)
        if frozen is not None:
            self.move_to_end(sig)
        return frozen

    def plan(self) -> Any:
        """The schedule every variant shares (that of the most recent one)."""
        return self.latest().plan if self else None

    def latest(self) -> FrozenGraph:
        """The variant used last (its ``inputs`` are every variant's)."""
        return next(reversed(self.values()))

    def add(self, rt: Any, frozen: FrozenGraph) -> None:
        self[copy_key(frozen.copy_in)] = frozen
        while len(self) > VARIANTS:
            _, old = self.popitem(last=False)
            rt.backend.graph_destroy(old.graph)


#: Graphs kept per key, one per set of host-current inputs (explicit memory).
VARIANTS = 4


class Placed:
    """A key's entry on several devices (``asyncgpu.recorder.devices``): the device slot of
    each launch, from its first run, and once captured the graphs, one per group."""

    __slots__ = ("slots", "graphs")

    def __init__(self, slots: list[int]) -> None:
        self.slots = slots
        self.graphs: list[FrozenGraph] | None = None


def graphs_in(entry: Any) -> list[FrozenGraph]:
    """The graphs of one cache entry (none for a marker)."""
    if isinstance(entry, Variants):
        return list(entry.values())
    if isinstance(entry, Placed) and entry.graphs is not None:
        return entry.graphs
    return []


def graphs_of(rt: Any, token: Any) -> list[FrozenGraph]:
    """Every graph (all variants) the recorder with ``token`` has in ``rt``'s cache."""
    cache = rt.graphs
    if cache is None:
        return []
    return [f for key, entry in cache.entries.items()
            if key.token[0] == token for f in graphs_in(entry)]


#: Every runtime's cache (a runtime keeps one while it lives).
_caches: weakref.WeakSet[GraphCache] = weakref.WeakSet()


def dropped(token: Any) -> None:
    """The finalizer of a recorded function (``weakref.finalize``): every cache forgets its
    graphs at its next capture or wait for everything. Only queues the token (a deque's
    append is atomic): the collector may run this inside any call, in any thread."""
    while True:
        try:
            caches = list(_caches)
            break
        except RuntimeError:    # (a cache made in another thread meanwhile: look again)
            continue
    for cache in caches:
        cache.dropped.append(token)


def graph_cache(rt: Any) -> GraphCache:
    cache = rt.graphs
    if cache is None:
        cache = rt.graphs = GraphCache(rt)
    return cache
