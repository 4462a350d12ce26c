"""Counters kept by the runtime and the frozen snapshot returned by ``asyncgpu.statistics()``."""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Mapping

#: The integer counts (the rest of the fields are objects).
COUNTS = ("nodes", "kernels", "event_waits", "events_recorded", "nodes_retired",
          "retired_by_poll", "prefetches", "bytes_prefetched", "events_queried", "calls",
          "host_accesses", "streams_created", "events_created", "copies_to_device",
          "copies_to_host", "bytes_to_device", "bytes_to_host", "graphs_recorded",
          "graphs_replayed", "copies_peer", "bytes_peer")
_OBJECT_FIELDS = ("edges", "listener", "streams_used", "syncs", "placed", "serial", "quiet")
#: Each set of counters' number (``Statistics.counting``): a backend made anew counts anew.
_serials = itertools.count(1)


class Counters:
    """Mutable counters owned by one runtime (cheap on the launch path: slots)."""

    __slots__ = COUNTS + _OBJECT_FIELDS

    def __init__(self) -> None:
        self.serial = next(_serials)
        self.nodes = 0
        self.kernels = 0
        self.calls = 0
        self.host_accesses = 0
        self.edges: dict[str, int] = {"RAW": 0, "WAR": 0, "WAW": 0}
        self.streams_created = 0
        self.events_created = 0
        self.events_recorded = 0
        self.event_waits = 0
        self.syncs: dict[str, int] = {}
        self.prefetches = 0
        self.bytes_prefetched = 0
        self.copies_to_device = 0
        self.copies_to_host = 0
        self.bytes_to_device = 0
        self.bytes_to_host = 0
        self.nodes_retired = 0
        self.retired_by_poll = 0
        self.events_queried = 0
        self.streams_used: set[int] = set()
        self.graphs_recorded = 0
        self.graphs_replayed = 0
        self.copies_peer = 0
        self.bytes_peer = 0
        #: several devices: kernels and library calls placed, per device number
        self.placed: dict[int, int] = {}
        #: Called with the reason of each host synchronization while instruments are registered.
        self.listener: Any = None
        #: the threads whose synchronizations are not counted meanwhile: their waits are part of
        #: one the caller counts once (a synchronizing library call's host accesses)
        self.quiet: set[int] = set()

    def sync(self, reason: str) -> None:
        if self.quiet and threading.get_ident() in self.quiet:
            return
        self.syncs[reason] = self.syncs.get(reason, 0) + 1
        if self.listener is not None:
            self.listener(reason)

    def snapshot(self, backend: str, inflight: int) -> Statistics:
        return Statistics(
            backend=backend,
            nodes=self.nodes,
            kernels=self.kernels,
            calls=self.calls,
            host_accesses=self.host_accesses,
            edges=MappingProxyType(dict(self.edges)),
            streams_created=self.streams_created,
            streams_used=len(self.streams_used),
            events_created=self.events_created,
            events_recorded=self.events_recorded,
            event_waits=self.event_waits,
            host_syncs=MappingProxyType(dict(self.syncs)),
            prefetches=self.prefetches,
            bytes_prefetched=self.bytes_prefetched,
            copies_to_device=self.copies_to_device,
            copies_to_host=self.copies_to_host,
            bytes_to_device=self.bytes_to_device,
            bytes_to_host=self.bytes_to_host,
            nodes_retired=self.nodes_retired,
            retired_by_poll=self.retired_by_poll,
            events_queried=self.events_queried,
            inflight=inflight,
            graphs_recorded=self.graphs_recorded,
            graphs_replayed=self.graphs_replayed,
            copies_peer=self.copies_peer,
            bytes_peer=self.bytes_peer,
            placed=MappingProxyType(dict(self.placed)),
            counting=self.serial,
        )


@dataclass(frozen=True)
class Statistics:
    """A snapshot of the runtime's counters since it started, or since ``asyncgpu.configure``
    last made its backend anew (``counting`` numbers the counts: snapshots of two cannot be
    subtracted).

    ``calls`` counts library calls (``asyncgpu.cupy`` functions and ``Array`` operators);
    ``edges`` counts dependency edges by reason (RAW, WAR, WAW); ``host_syncs`` counts the times
    the host blocked, by reason (``host-read``, ``host-write``, ``synchronize``, ``sync-mode``,
    ``free``, ``library-call``, ``exported`` (memory of dropped exported arrays given back), and
    with tenants ``partition``, ``exclusive``,
    ``tenant-step``); ``inflight`` is the number of device nodes not yet known to be finished.
    ``events_recorded`` counts completion events recorded (one per device node; traces' timing
    events are not counted). ``prefetches``/``bytes_prefetched`` count host-to-device
    prefetches (managed memory). ``copies_to_device``/``copies_to_host`` and
    ``bytes_to_device``/``bytes_to_host`` count the copy nodes of the explicit memory model
    (``memory="explicit"``) and the bytes they move. ``graphs_recorded``/``graphs_replayed`` count CUDA graphs captured and launched
    by the recorder (0 until it is used). ``events_queried`` counts the completion events the
    polling of long loops asked about (``retired_by_poll`` the nodes those answers retired).
    With several devices, ``copies_peer``/``bytes_peer`` count the copies from one device to
    another (included in ``copies_to_device``/``bytes_to_device``) and ``placed`` the kernels
    and library calls each device number was given.
    """

    backend: str
    nodes: int
    kernels: int
    host_accesses: int
    calls: int = 0
    edges: Mapping[str, int] = field(default_factory=dict)
    streams_created: int = 0
    streams_used: int = 0
    events_created: int = 0
    events_recorded: int = 0
    event_waits: int = 0
    host_syncs: Mapping[str, int] = field(default_factory=dict)
    prefetches: int = 0
    bytes_prefetched: int = 0
    copies_to_device: int = 0
    copies_to_host: int = 0
    bytes_to_device: int = 0
    bytes_to_host: int = 0
    nodes_retired: int = 0
    retired_by_poll: int = 0
    events_queried: int = 0
    inflight: int = 0
    graphs_recorded: int = 0
    graphs_replayed: int = 0
    copies_peer: int = 0
    bytes_peer: int = 0
    placed: Mapping[int, int] = field(default_factory=dict)
    counting: int = 0

    def __sub__(self, earlier: Statistics) -> Statistics:
        """The counts between two snapshots of one runtime (``later - earlier``: what a stretch
        of the program did), by reason and device as the fields are; ``inflight``, a level
        rather than a count, is the later snapshot's."""
        if not isinstance(earlier, Statistics):
            return NotImplemented
        if earlier.backend != self.backend:
            raise ValueError(f"statistics of backend {self.backend!r} less those of "
                             f"{earlier.backend!r}: subtract snapshots of one runtime")
        if earlier.counting != self.counting:
            raise ValueError("statistics taken before asyncgpu.configure made the backend anew "
                             "(a change of memory, of the sim_* options, ...), whose counts "
                             "start at zero: take the earlier snapshot after the change")
        values: dict[str, Any] = {}
        for f in fields(self):
            now, then = getattr(self, f.name), getattr(earlier, f.name)
            if f.name in ("backend", "inflight", "counting"):
                values[f.name] = now
            elif isinstance(now, Mapping):
                diff = {k: now.get(k, 0) - then.get(k, 0) for k in {**then, **now}}
                values[f.name] = MappingProxyType({k: v for k, v in diff.items() if v})
            else:
                values[f.name] = now - then
        return Statistics(**values)

    def __hash__(self) -> int:
        # (a frozen snapshot hashes as its values do; its tables are read-only mappings,
        # which have no hash of their own)
        return hash(tuple(frozenset(v.items()) if isinstance(v, Mapping) else v
                          for v in (getattr(self, f.name) for f in fields(self))))

    def as_dict(self) -> dict[str, object]:
        """The snapshot as plain, JSON-friendly data."""
        out: dict[str, object] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = dict(v) if isinstance(v, Mapping) else v
        return out
