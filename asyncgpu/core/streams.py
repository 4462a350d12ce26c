"""The stream manager: stream and event pools, waits, retirement and polling.

The model
---------
Streams come from a pool of non-blocking streams created on demand up to ``max_streams``; each
:class:`StreamState` keeps its unfinished nodes in issue order (``inflight``), a sequence counter,
and ``waited``: for every other stream, the highest sequence number it has already waited for.
A node gets one completion event from a pool, recorded right after its launch; the event goes
back to the pool when the node is finished (CUDA binds a wait to the capture current at the time
of the wait, so re-recording a recycled event cannot affect earlier waits). A replayed graph's
node may instead take the event the backend recorded right after the launch (the graph's own,
``issued(node, recorded)``), which never enters the pool (:func:`_pooled`).

This is the only place that decides when an event wait is needed: a parent on the same stream
needs none (stream order), several parents on one other stream need one wait (on the latest),
and a wait already implied by an earlier wait of this stream is skipped.

Retirement: :meth:`StreamManager.finished` marks a node and everything before it finished: the
earlier nodes of its stream and, transitively, its parents. With more than ``poll_threshold``
nodes in flight each launch polls up to two events of the least recently used stream that has
work in flight (its newest node, else its oldest), so a long loop without host access keeps a
bounded set of live nodes and a flat per-launch cost.

Several devices and tenants: every stream belongs to one device (``StreamState.device``, a
slot of the runtime's devices) and so does every event (CUDA records an event only on a stream
of its own device), so the event pool is per device. Streams are grouped in *pools*, one per
(tenant, device) (``StreamState.pool``, :func:`pool_of`): the free list and the
``max_streams`` bound are per pool, a node's stream is chosen among its pool's streams
(:meth:`StreamManager.choose`: a parent's stream is inherited only by a child of the same pool),
and a tenant's streams are created with its priority, in its SM partition if it has one
(:meth:`StreamManager.add_tenant`). Waits on parents of other pools are event waits like any
other.

The manager is plain Python: it calls the backend through ``create_stream(device)`` (with a
tenant's priority and partition: ``create_stream(device, priority, partition)``),
``create_event(device)``, ``record``,
``wait`` and ``event_done``, always passing streams explicitly.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .dag import EMPTY, Node
from .policies import NEW_STREAM, PARENT_STREAM, RandomStream, Serial


class StreamState:
    """One stream of the pool (runtime-owned; no public constructor)."""

    __slots__ = ("index", "handle", "inflight", "seq", "issue", "waited", "device", "pool")

    def __init__(self, index: int, handle: Any, device: int = 0, pool: int = 0) -> None:
        self.index = index
        self.handle = handle
        self.inflight: deque[Node] = deque()
        self.seq = 0
        #: the manager's count of issues at this stream's latest one (0: none yet), so that
        #: the streams a stretch of work moved are those past a mark (``moved_since``)
        self.issue = 0
        self.waited: dict[int, int] = {}
        self.device = device
        self.pool = pool

    def __repr__(self) -> str:
        return f"<stream {self.index}: {len(self.inflight)} in flight>"


class StreamManager:
    """Chooses streams, issues waits and records events, retires finished nodes."""

    __slots__ = ("_by_use", "_device", "_events", "_frees", "_inflight", "_limits",
                 "_members", "_partitions", "_pool", "_priorities", "backend", "devices",
                 "issues", "max_streams", "new_policy", "parent_policy", "poll_threshold",
                 "stats", "streams")

    def __init__(self, backend: Any, options: Any, stats: Any, devices: int = 1) -> None:
        self.backend = backend
        self.stats = stats
        self.max_streams = options.max_streams
        self.poll_threshold = options.poll_threshold
        serial = options.execution == "sync"
        self.new_policy = Serial() if serial else NEW_STREAM[options.new_stream]()
        self.parent_policy = None if serial else PARENT_STREAM[options.parent_stream]()
        if options.stress and not serial:
            self.new_policy = RandomStream(options.stress_seed)
            self.parent_policy = None
        self.streams: list[StreamState] = []
        self.devices = devices
        #: per pool (tenant, device): free streams, its streams; per device: pooled events;
        #: per tenant: the priority its streams are created with, and how many it may have
        #: on each device
        self._frees: list[deque[StreamState]] = [deque() for _ in range(devices)]
        self._members: list[list[StreamState]] = [[] for _ in range(devices)]
        self._events: list[list[Any]] = [[] for _ in range(devices)]
        self._priorities = [0]
        self._partitions: list[str | None] = [None]
        self._limits = [self.max_streams]
        #: the device and pool of the node being placed (what the policies' calls refer to)
        self._device = 0
        self._pool = 0
        self._by_use: dict[StreamState, None] = {}   # streams, least recently used first
        self._inflight = 0
        #: nodes issued so far, on any stream (a mark for ``moved_since``)
        self.issues = 0

    # -- tenants -----------------------------------------------------------------------------
    def add_tenant(self, priority: int, streams: int | None = None,
                   partition: str | None = None) -> int:
        """Pools for one more tenant, whose streams are created with ``priority`` (CUDA's:
        lower is more urgent), at most ``streams`` of them per device (None: ``max_streams``),
        in SM partition ``partition`` (the backend's ``reserve_sms``; None: any SM); returns
        its number."""
        self._priorities.append(priority)
        self._partitions.append(partition)
        self._limits.append(self.max_streams if streams is None
                            else min(streams, self.max_streams))
        self._frees.extend(deque() for _ in range(self.devices))
        self._members.extend([] for _ in range(self.devices))
        return len(self._priorities) - 1

    def tenant_streams(self, tenant: int) -> list[StreamState]:
        """Tenant ``tenant``'s streams, on every device."""
        first = tenant * self.devices
        return [s for pool in self._members[first:first + self.devices] for s in pool]

    def moved_since(self, tenant: int, mark: int) -> list[StreamState]:
        """Tenant ``tenant``'s streams on which something was issued after ``issues`` was
        ``mark`` (what a tenant's step moved: where its end is recorded)."""
        return [s for s in self.tenant_streams(tenant) if s.issue > mark]

    # -- the pool, as seen by the policies ---------------------------------------------------
    def can_grow(self) -> bool:
        return len(self._members[self._pool]) < self._limits[self._pool // self.devices]

    def grow(self) -> StreamState:
        device = self._device
        pool = self._pool
        handle = self._handle(pool // self.devices, device)
        s = StreamState(len(self.streams), handle, device, pool)
        self.streams.append(s)
        self._members[pool].append(s)
        self._by_use[s] = None
        self.stats.streams_created += 1
        return s

    def _handle(self, tenant: int, device: int) -> Any:
        """A new stream of the backend for tenant ``tenant`` on ``device``: its priority, in
        its SM partition if it has one."""
        priority = self._priorities[tenant]
        partition = self._partitions[tenant]
        if partition is not None:
            return self.backend.create_stream(device, priority, partition)
        if priority == 0:
            return self.backend.create_stream(device)
        return self.backend.create_stream(device, priority)

    def set_partition(self, tenant: int, partition: str | None) -> bool:
        """Move tenant ``tenant``'s streams into SM partition ``partition`` (reserved with the
        backend; None: any SM): its work in flight is waited for, then each of its streams
        gets a new handle there, and its later streams are made there. The wait is what
        keeps the order: a launch on a stream follows the stream's earlier ones without an
        event, which a new handle would not. The streams also forget which events they
        waited for; each has completed (its wait preceded work that has), so forgetting costs
        at most a wait enqueued again. Returns whether the host waited."""
        self._partitions[tenant] = partition
        streams = self.tenant_streams(tenant)
        unfinished = [n for s in streams for n in s.inflight if not n.finished]
        self.host_wait(unfinished)
        for s in streams:
            s.handle = self._handle(tenant, s.device)
            s.waited = {}
        return bool(unfinished)

    def own(self) -> list[StreamState]:
        """The streams of the pool being placed."""
        return list(self._members[self._pool])

    def first(self) -> StreamState:
        for s in self.streams:
            if s.pool == self._pool:
                return s
        return self.grow()

    def least_recently_used(self) -> StreamState:
        pool = self._pool
        for s in self._by_use:
            if s.pool == pool:
                return s
        return self.grow()

    def busy(self) -> list[int]:
        """Per device, the streams with work in flight (the ``stream-aware`` device policy)."""
        counts = [0] * self.devices
        for s in self.streams:
            if s.inflight:
                counts[s.device] += 1
        return counts

    # -- issuing -----------------------------------------------------------------------------
    def _new_event(self, device: int) -> Any:
        self.stats.events_created += 1
        return self.backend.create_event(device)

    # -- retirement --------------------------------------------------------------------------
    def all_finished(self) -> None:
        """After a device-wide synchronize: every node is finished."""
        for s in self.streams:
            if s.inflight:
                self.finished(s.inflight[-1])
        # (a retirement cut short by an exception leaves the count high: heal it here)
        self._inflight = 0

    def recover(self) -> None:
        """Rebuild the pool's bookkeeping after an exception interrupted :meth:`issued` or a
        retirement (the runtime has synchronized the device: nothing is in flight)."""
        for s in self.streams:
            while s.inflight:
                node = s.inflight.popleft()
                node.finished = True
                if node.event is not None:
                    if _pooled(node):
                        self._events[s.device].append(node.event)
                    node.event = None
            if s not in self._by_use:      # dropped between the two steps of the LRU move
                self._by_use[s] = None
        self._events = [[e for e in pool if e is not None] for pool in self._events]
        self._frees = [deque(members) for members in self._members]
        self._inflight = 0

    def latest(self, nodes: Any) -> list[Node]:
        """The unfinished ``nodes`` that finishing implies the rest: the latest of each stream."""
        latest: dict[int, Node] = {}
        for n in nodes:
            s = n.stream
            if n.finished or s is None:
                continue
            cur = latest.get(s.index)
            if cur is None or n.seq > cur.seq:
                latest[s.index] = n
        return list(latest.values())

    def host_wait(self, nodes: Any) -> None:
        """Block the host until ``nodes`` completed (one wait per stream: the latest node)."""
        self.retire(self.latest(nodes), True)

    def retire(self, nodes: list[Node], wait: bool = False) -> None:
        """Retire ``nodes``, which the host knows completed (something it waited for ran after
        them), or, with ``wait``, after waiting for each."""
        try:
            for n in nodes:
                if not n.finished:
                    if wait:
                        self.backend.host_wait(n.event)
                    self.finished(n)
        except BaseException:
            self.recount()      # a retirement cut short (KeyboardInterrupt) left it off
            raise

    def recount(self) -> None:
        """Recompute the in-flight count from the streams (after an interrupted retirement)."""
        self._inflight = sum(len(s.inflight) for s in self.streams)

    @property
    def inflight(self) -> int:
        """Number of unfinished device nodes."""
        return self._inflight

    def take_free(self) -> StreamState | None:
        free = self._frees[self._pool]
        while free:
            s = free.popleft()
            if not s.inflight:
                return s
        return None

    def choose(self, node: Node, parents: list[Node]) -> StreamState:
        """Pick the node's stream by policy, among the streams of its pool (tenant and device;
        does not enqueue anything)."""
        stream = None
        device = node.device
        self._device = device
        pool = self._pool = pool_of(node.tenant, device, self.devices)
        if parents and len(self._frees) > 1:
            # only a parent of the node's pool can hand its stream on
            parents = [p for p in parents
                       if p.stream is not None and p.stream.pool == pool]
        if parents and self.parent_policy is not None:
            stream = self.parent_policy.pick(parents)
        if stream is None:
            stream = self.new_policy.pick(self)
        return stream

    def wait_for_parents(self, node: Node, parents: list[Node]) -> None:
        """Make the node's stream wait for parents on other streams (never blocks the host)."""
        stream = node.stream
        if len(parents) == 1:
            latest: Any = parents       # (the common case, a chain: no per-stream map)
        else:
            by_stream: dict[int, Node] = {}
            for p in parents:
                ps = p.stream
                if ps is stream or ps is None:
                    continue
                cur = by_stream.get(ps.index)
                if cur is None or p.seq > cur.seq:
                    by_stream[ps.index] = p
            latest = by_stream.values()
        waited = stream.waited
        for p in latest:
            ps = p.stream
            if ps is stream or ps is None or waited.get(ps.index, -1) >= p.seq:
                continue
            self.backend.wait(stream.handle, p.event)
            waited[ps.index] = p.seq
            self.stats.event_waits += 1

    def issued(self, node: Node, recorded: Any = None) -> None:
        """Book the node on its stream and record its completion event (after the launch);
        ``recorded``: an event the backend already recorded right after it (a graph's own,
        see :func:`_pooled`), taken instead."""
        stream = node.stream
        stream.seq += 1
        node.seq = stream.seq
        self.issues += 1
        stream.issue = self.issues
        by_use = self._by_use
        del by_use[stream]     # move to the most recently used end
        by_use[stream] = None
        if recorded is None:
            events = self._events[stream.device]
            event = events.pop() if events else self._new_event(stream.device)
            self.backend.record(event, stream.handle)
        else:
            event = recorded
        node.event = event
        stream.inflight.append(node)
        self._inflight += 1
        self.stats.events_recorded += 1

    def poll(self) -> None:
        """Retire finished work by querying events, when many nodes are in flight."""
        if self._inflight <= self.poll_threshold:
            return
        # The stream whose newest work is oldest is the likeliest to have finished all of it,
        # and its tail's query retires the whole stream. (Polling the streams in turn fell in
        # step with the stream choice on independent launches: it kept querying the stream
        # just launched on, two queries per launch for one node retired.)
        for s in self._by_use:                  # least recently used first
            if s.inflight:
                break
        else:
            return
        tail = s.inflight[-1]
        if not self._retire_if_done(tail):
            head = s.inflight[0]
            if head is not tail:
                self._retire_if_done(head)

    def _retire_if_done(self, node: Node) -> bool:
        """Ask ``node``'s completion event; retire it (and what came before it) if it is done."""
        self.stats.events_queried += 1
        if not self.backend.event_done(node.event):
            return False
        self.stats.retired_by_poll += self.finished(node)
        return True

    def _on_finish(self, node: Node) -> None:
        stream = node.stream
        if _pooled(node):
            self._events[stream.device].append(node.event)
        node.event = None
        node.keepalive = None
        node.launch = None
        # The tracker may keep a finished node in its entries until they are next scanned;
        # the node must not keep the allocations alive meanwhile (their arrays may be gone).
        node.accesses = ()
        self._inflight -= 1
        if not stream.inflight:
            self._frees[stream.pool].append(stream)

    def finished(self, node: Node) -> int:
        """The host knows ``node`` completed: retire it and everything that must have completed
        before it, every earlier node of its stream and, transitively, every parent. Returns
        how many nodes this retired."""
        count = 0
        stack = [node]
        while stack:
            n = stack.pop()
            if n.finished:
                continue
            stream = n.stream
            if stream is None:          # host nodes: complete when created
                n.finished = True
                continue
            inflight = stream.inflight
            while inflight:
                m = inflight[0]
                if m.seq > n.seq:
                    break
                inflight.popleft()
                m.finished = True
                parents = m.parents
                if parents:
                    for p in parents:
                        if not p.finished:
                            stack.append(p)
                    m.parents = EMPTY
                self._on_finish(m)
                count += 1
        self.stats.nodes_retired += count
        return count


def pool_of(tenant: int, device: int, devices: int) -> int:
    """The pool of ``tenant``'s streams on device slot ``device`` of ``devices``."""
    return tenant * devices + device


def _pooled(node: Node) -> bool:
    """Whether the node's completion event came from the pool. A replayed graph's may be the
    graph's own (``Graph.done``, which its next launch records again: a wait on an earlier
    launch then waits for a later one too, which is never wrong), and must not be reused."""
    return not (node.kind == "graph" and node.event is getattr(node.keepalive, "done", None))


