"""Issuing work: the pipeline every launch, library call and replayed graph goes through.

The model
---------
GrCUDA's order, which is what lets host-to-device transfers overlap the parents' kernels::

    validate -> dependencies -> choose stream -> prefetch host-current inputs on that stream
             -> wait for parents on other streams (events) -> launch -> record the node's event
             -> commit the accesses -> (sync mode: host waits) / (async: maybe poll events)

:class:`Issuing` holds the runtime's ``launch_kernel``, ``launch_graph`` and ``_issue``
(``Runtime`` takes it as a base).

Invariants
----------
* Validation happens before anything is enqueued, and the accesses are committed only after
  the launch succeeded, so a refused launch leaves the DAG as it was.
* Once a node may be enqueued, an exception makes ``Runtime._recover`` drain the device and
  mark everything finished: no half-registered node can become a parent.
* A launch from a finalizer or callback while a node is being enqueued is refused
  (:func:`refuse_reentry`).

Example::

    k[1, 32](x, y)     # Launcher -> Runtime.launch_kernel -> _issue(node)
"""

from __future__ import annotations

import sys
import weakref
from collections import Counter
from typing import Any

from ..core.compiled import EXTENSIONS

from ..core.dag import Node, reduce_parents
from ..core.deps import Access, DependencyTracker
from ..core.errors import ArgumentError, DeviceError, LaunchError
from ..core.interference import Sample
from ..core.placement import STREAM_AWARE, device_bit
from .allocation import HOST, Requeue
from .chunks import axis_length, chunk_plan, launch_chunked
from .splits import launch_split, split_count
from .kernel import Launcher, user_site


#: Whether this module runs compiled (an extension module has no Python frames to look at).
_COMPILED = __file__.endswith(EXTENSIONS)
#: Bytes of dropped exported arrays held back (``Issuing._return_buffer``) past which the
#: runtime synchronizes the device to give them back.
LENT_BYTES = 256 << 20


class Issuing:
    """The runtime's ``launch_kernel``, ``launch_graph`` and ``_issue``: the pipeline of the
    module docstring."""

    __slots__ = ("_acquire", "_host_busy", "_instruments", "_issuing", "_lock", "_plain_reads",
                 "_release", "_releases", "_lent", "_lent_bytes", "_short_reads",
                 "backend", "deps", "graph_config", "graphs", "host_epoch", "last_replay",
                 "memory", "no_const", "options", "prefetch", "graph_read_back", "recording",
                 "retired", "stats", "streams", "sync_mode", "want_sites", "devices",
                 "placement", "_pins", "open_pins", "tenants", "_tenanted", "interference", "_rule",
                 "regulator", "gate", "exclusive_steps", "one_core")

    def launch_kernel(self, launcher: Launcher, args: tuple[Any, ...], pieces: int = 0) -> None:
        """Validate and schedule one kernel launch; returns without waiting. ``pieces``: the
        number of pieces a recording split it into (``asyncgpu.recorder.keys.Piece``, issued
        eagerly), used instead of the tenant's splits (which may have changed since)."""
        kernel = launcher.kernel
        # (the lock's bound acquire and release rather than ``with``: compiled, a with
        # statement looks up and binds the lock's __enter__ and __exit__ at every launch)
        if self.gate is None:
            self._acquire()
        else:
            # (an exclusive tenant's gate: takes the lock when free; the name, to look ahead)
            self.gate.enter(kernel.name)
        try:
            if self._releases:
                self._drain_releases()
            site = user_site() if self.want_sites else None
            if self.recording is not None and self.recording.kernel(launcher, args, site):
                return
            arrays, values = kernel.bind(self, args, site)
            if kernel.elementwise and (self.memory is None or self.sync_mode or self._tenanted):
                # (the contract holds in every mode; explicit memory checks it in chunk_plan)
                axis_length(kernel, arrays, values, site)
            accesses: list[Any] = arrays     # an ArrayArg is its own dependency access
            if self.no_const:
                accesses = [Access(a.key, a.alloc, a.lo, a.hi, True, a.param) for a in arrays]
            node = Node("kernel", kernel.name, site, accesses)
            if self.placement is not None:
                # (before the backend prepares it, or its pieces, for that device)
                self._place(node)
            pointer = None
            profiled = None
            if self._tenanted:
                index = getattr(self._pins, "tenant", 0)
                tenant = self.tenants[index]
                if self.regulator is not None and index:
                    # (noted in the tenant's step; while profiling, run alone and timed)
                    profiled = self.regulator.launch(index, launcher)
                if profiled is None and tenant.after:
                    pointer = self._pointer(tenant.after, kernel.name)
                if not pieces and tenant.splits:
                    pieces = split_count(tenant, kernel)
                if (profiled is None and pieces
                        and launch_split(self, launcher, args, arrays, values, site, pieces,
                                         node.device, pointer)):
                    return
            # (not in sync execution: one node at a time, nothing for the chunks to overlap)
            if (profiled is None and pointer is None and self.memory is not None
                    and kernel.elementwise and not self.sync_mode):
                chunks = chunk_plan(self, kernel, arrays, values, site, node.device)
                if chunks is not None:
                    launch_chunked(self, launcher, args, site, chunks, node.device)
                    return
            if self.placement is None:
                node.launch = self.backend.kernel_launch(kernel, launcher, arrays, values, site)
            else:
                node.launch = self.backend.kernel_launch(kernel, launcher, arrays, values, site,
                                                         node.device)
            self.stats.kernels += 1
            if profiled is not None:
                self.regulator.profile(node, launcher, profiled, args, arrays)
                return
            if pointer is not None:
                self.issue_after(node, pointer, "pointer")
                return
            rule = self.interference
            if rule is not None:
                tenant = getattr(self._pins, "tenant", 0) if self._tenanted else 0
                apart = rule.partners(node, launcher, arrays, tenant, self.streams, self.deps)
                if apart:
                    self.issue_after(node, apart, "interference")
                    return
            self._issue(node)
        finally:
            self._release()

    def _pointer(self, after: dict[str, tuple[str, str]], name: str) -> tuple[Node, ...] | None:
        """The nodes a launch of kernel ``name`` waits for by the tenant's pointers ``after``,
        those unfinished, or None: the pointed-at tenant's latest launch of the pointed-at
        kernel, or every graph of its latest replay of the pointed-at recording (on several
        devices one per device and phase); for ``"*"``, its latest launch, on several devices
        its latest launch on each device (a replay's graphs are each on one device)."""
        target = after.get(name)
        if target is None:
            target = after.get("*")
            if target is None:
                return None
        for tenant in self.tenants:
            if tenant.name == target[0]:
                if target[1] == "*" and self.placement is not None:
                    on = tenant.latest_on
                    last: Any = tuple([on[slot] for slot in sorted(on)])
                else:
                    last = tenant.last.get(target[1])
                    if last is None:
                        return None
                    if type(last) is not tuple:
                        return None if last.finished else (last,)
                waits = tuple([n for n in last if not n.finished])
                return waits or None
        return None

    def issue_after(self, node: Node, previous: Any, reason: str) -> None:
        """``_issue`` with the unfinished nodes of ``previous`` among the node's parents: an
        ordering the tenant or the scheduler asked for, not the data's (an edge of
        ``reason``: ``split`` between a split launch's pieces, ``pointer`` for a tenant's
        pointer, ``interference`` for launches kept apart, ``profile`` for the launches a
        regulation profile runs one at a time), which the edges statistics do not
        count. The node's copies in are issued first, as ``_issue`` would, so they are found
        too (a copy node has none)."""
        if self.memory is not None and node.kind != "copy":
            self.memory.before_device(node.accesses, node.device)
        found, counts = self._ordered(node, previous, reason)
        self._issue(node, None, found, counts)

    def _ordered(self, node: Node, previous: Any, reason: str) -> tuple[Any, Any]:
        """The node's parents by data with the unfinished nodes of ``previous`` added (edges of
        ``reason``), and the data edges' counts (what ``_issue`` takes as ``found`` and
        ``edge_counts``)."""
        found = self.deps.conflicts(node.accesses)
        for p in previous:
            if not p.finished:
                found.setdefault(p, []).append((reason, p.name))
        # (counted among the parents kept once the ordering edges are in, as ``_issue`` keeps
        # them: a data parent an earlier piece already follows is no edge of this one)
        kept = reduce_parents(found) if len(found) > 1 else list(found)
        counts: dict[str, int] = {}     # (a Counter is a Python class: dearer to build)
        for p in kept:
            for why, _ in found[p]:
                if why != reason:
                    counts[why] = counts.get(why, 0) + 1
        return found, tuple(counts.items())

    def _graph_order(self, node: Node, frozen: Any) -> Any:
        """What a tenant's graph launch waits for beside its data: ``(nodes, reason)`` (the
        previous profiled launch while its tenant is profiled, then timed; or its tenant's
        pointers naming the graph or a kernel in it), or None."""
        index = getattr(self._pins, "tenant", 0)
        if not index:
            return None
        regulator = self.regulator
        if regulator is not None:
            previous = regulator.graph(index, node, frozen)
            if previous is not None:
                return previous, "profile"
        after = self.tenants[index].after
        if not after:
            return None
        # (in launch order, each once: the parents' order must not depend on string hashes)
        names = dict.fromkeys([frozen.recording] + [launch.launcher.kernel.name
                                               for launch in frozen.launches
                                               if hasattr(launch, "launcher")])
        waits: list[Node] = []
        for name in names:
            for p in self._pointer(after, name) or ():
                if p not in waits:
                    waits.append(p)
        return (waits, "pointer") if waits else None

    def _issue(self, node: Node, graph: Any = None,
               found: dict[Node, list[tuple[str, str]]] | None = None,
               edge_counts: Any = None) -> None:
        # (``found`` and ``edge_counts``, the reasons counted, are given for a graph launched
        # again: see launch_graph)
        if self._issuing is not None:
            refuse_reentry(self, node)
        explicit = self.memory is not None
        if explicit and graph is None and node.kind != "copy":
            # (copy nodes are parents of this one; a graph's are booked by before_graph)
            self.memory.before_device(node.accesses, node.device)
        enqueued = False
        try:
            self._issuing = node
            if found is None:
                found = self.deps.conflicts(node.accesses)
            parents = reduce_parents(found) if len(found) > 1 else [p for p in found]
            if self._tenanted:
                node.tenant = getattr(self._pins, "tenant", 0)
            streams = self.streams
            stream = streams.choose(node, parents)
            node.stream = stream
            node.parents = parents
            backend = self.backend
            accesses = node.accesses
            stats = self.stats
            if self.prefetch:
                bit = device_bit(node.device)
                for acc in accesses:
                    alloc = acc.alloc
                    location = alloc.location
                    # (touched by the host, or, with several devices, last on another one)
                    if (location & HOST or location and not location & bit) and alloc.nbytes:
                        backend.prefetch(alloc.buffer, stream.handle)
                        stats.prefetches += 1
                        stats.bytes_prefetched += alloc.nbytes
                        alloc.location = bit   # migrated: a second view in this launch needs none
            if parents:
                streams.wait_for_parents(node, parents)
            enqueued = True   # (set first: an interrupt may land right after the call)
            done = None       # (a graph launch may come with its completion event recorded)
            if graph is None:
                timed = node.keepalive
                if timed is not None and type(timed) is Sample and timed.start is not None:
                    # (a launch on trial by the interference rule: timed on the device)
                    backend.record(timed.start, stream.handle)
                    backend.launch(node, stream.handle)
                    backend.record(timed.end, stream.handle)
                else:
                    backend.launch(node, stream.handle)
            elif self._instruments and hasattr(backend, "launch_traced_graph"):  # a trace
                backend.launch_traced_graph(node, graph, stream.handle)
            else:
                timed = node.keepalive
                if type(timed) is Sample:     # (profiled by the regulation: timed)
                    backend.record(timed.start, stream.handle)
                    done = backend.graph_launch(graph, stream.handle)
                    backend.record(timed.end, stream.handle)
                else:
                    done = backend.graph_launch(graph, stream.handle)
            # The launch is enqueued: from here on nothing may fail half-way.
            streams.issued(node, done)
            self.deps.commit(node, accesses)
            if graph is None or not explicit or self.placement is not None:
                bit = device_bit(node.device)
                several = self.placement is not None
                for acc in accesses:
                    # (the accesses also keep the allocations alive until the node is finished)
                    alloc = acc.alloc
                    alloc.location = bit if acc.write else alloc.location | bit
                    if several and alloc.home < 0:
                        # (a library call's result, made after the call was placed: its home
                        # is where the call ran)
                        alloc.home = node.device
            stats.nodes += 1
            stats.streams_used.add(stream.index)
            if self._tenanted:
                tenant = self.tenants[node.tenant]
                tenant.count(node.kind)
                if node.kind == "kernel" or node.kind == "graph":
                    last = tenant.last          # (what a pointer may name; "*": any kernel)
                    last[node.name] = node
                    last["*"] = node
                    if self.placement is not None:
                        tenant.latest_on[node.device] = node    # ("*" on several devices)
                if node.kind != "copy":
                    tenant.latest = node
                if self.placement is not None and tenant.exclusive:
                    # (a thread pinned to a device this step or an earlier one of an exclusive
                    # tenant used is held by the gate, from the step's first launch there on)
                    steps = self.exclusive_steps
                    if steps is not None:
                        steps.devices.add(node.device)
            if self.placement is not None and node.kind != "copy":
                placed = stats.placed
                number = self.devices[node.device]
                placed[number] = placed.get(number, 0) + 1
            if found:
                edges = stats.edges
                if edge_counts is not None:
                    for reason, count in edge_counts:
                        edges[reason] += count
                else:
                    for p in parents:
                        for reason, _ in found[p]:
                            edges[reason] += 1
            if self._instruments:
                node.edges = [(p, reason, label) for p in parents for reason, label in found[p]]
                self._notify_node(node)
            if self.sync_mode:
                backend.host_wait(node.event)
                streams.finished(node)
                stats.sync("sync-mode")
            elif streams._inflight > streams.poll_threshold:
                streams.poll()
        except BaseException as exc:
            # Before the launch only harmless work was enqueued (waits, prefetches) and no
            # bookkeeping had changed. From the launch on, the node may be queued on the
            # device while the DAG does not know it: drain, then mark everything finished
            # (a launch the backend refused before it ran wrote nothing).
            if enqueued:
                self._recover(node, not isinstance(exc, (LaunchError, ArgumentError)))
            raise
        finally:
            self._issuing = None

    def _drain_releases(self) -> None:
        """Free the buffers of arrays dropped since (``release_later``; forgotten by the
        dependency tracker first), of those that are dead now.

        An allocation queued by its ``__del__`` may live on: the collector calls the
        finalizers of a whole cycle before it looks whether one of them stored an object of
        the cycle somewhere. Its buffer is given back only if the reference taken off the
        queue is the last one; else it gets a ``Requeue``, which queues it again when it is
        collected next (``asyncgpu.runtime.allocation``). (The queue holds the allocation
        itself: a weak reference queued instead could be cleared by a later collection that
        frees the allocation's cycle again, before a finalizer brings it back once more.) An
        explicit free a finalizer made (``Runtime.free_later``) waits here for the work using
        the array."""
        releases = self._releases
        kept = None
        while releases:
            alloc = releases.popleft()
            buffer = alloc.buffer
            if buffer is None:      # (given back already)
                continue
            if alloc.freed:         # (an explicit free a finalizer made: ``free_later``)
                if not self.free_deferred(alloc):
                    if kept is None:
                        kept = []
                    kept.append(alloc)
                continue
            alloc_id = alloc.id
            exported = alloc.exported
            alloc.requeue = None    # (the cycle with its Requeue: it alone would keep it alive)
            alive = weakref.ref(alloc)
            del alloc
            alloc = alive()
            if alloc is not None:
                alloc.requeue = Requeue(alloc)
                alloc = None
                continue
            self.deps.forget(alloc_id)
            self._return_buffer(buffer, exported)
        if kept is not None:
            releases.extend(kept)
        if self._lent_bytes > LENT_BYTES and not self.backend.captures.engaged:
            self._synchronize_locked("exported")

    def _return_buffer(self, buffer: Any, exported: bool) -> None:
        """Give a buffer back to the backend's pool, every node using it finished; that of an
        exported allocation only after the next synchronize of the whole device
        (``HostAccess._synchronize_locked``): another library may still run work on it, on a
        stream of its own, enqueued while the array was alive, and the pool would hand the
        memory to a kernel of ours meanwhile. Past :data:`LENT_BYTES` of such memory the
        runtime synchronizes the device itself at its next entry point (``_drain_releases``),
        so that a program which drops exported arrays without ever synchronizing does not
        hold the GPU's memory away from the other library."""
        if exported:
            self._lent.append(buffer)
            self._lent_bytes += buffer.nbytes
        else:
            self.backend.free(buffer)

    def pinned(self) -> int:
        """The slot this thread pinned (``asyncgpu.device``), or -1."""
        slot = getattr(self._pins, "slot", None)
        return -1 if slot is None else slot

    def _place(self, node: Node) -> None:
        """Several devices: the device of a kernel or library call about to be prepared,
        pinned (``asyncgpu.device``) or chosen by the placement policy from its arguments'
        locations (library calls: where their data is). A node that writes another library's
        memory runs on that memory's device (``Allocation.fixed``)."""
        slot = getattr(self._pins, "slot", None)
        fixed = -1
        for acc in node.accesses:
            alloc = acc.alloc
            if alloc.fixed and acc.write and alloc.home != fixed:
                if fixed >= 0 or (slot is not None and slot != alloc.home):
                    _refuse_fixed(self, node, acc, slot if fixed < 0 else fixed)
                fixed = alloc.home
        if fixed >= 0:
            slot = fixed
        elif slot is None:
            placement = self.placement
            accesses = node.accesses
            needs = []
            for acc in accesses:
                alloc = acc.alloc
                # (a kernel's arguments say whether the old bytes are read; a library call's
                # accesses all read: ``Access.read``)
                needs.append((alloc.location, alloc.nbytes, acc.read, alloc.home))
            if len(needs) > 1:
                needs = _one_need_per_allocation(accesses, needs)
            busy = self.streams.busy() if placement.code == STREAM_AWARE else ()
            slot = placement.choose(needs, busy, node.kind == "call")
        node.device = slot
        for acc in node.accesses:
            alloc = acc.alloc
            if not alloc.fixed:
                alloc.home = slot

    def launch_graph(self, frozen: Any) -> None:
        """Schedule one launch of a captured graph (``asyncgpu.runtime.frozen.FrozenGraph``) as
        one node whose accesses are the union of the graph's (explicit memory: the copies it
        makes itself are booked by ``ExplicitMemory.before_graph``). The caller holds the
        runtime's lock: the recorder's paths here hold it already for the decision that leads
        here, and taking it again would cost a replay another acquire and release."""
        graph, accesses = frozen.graph, frozen.accesses
        if self._releases:
            self._drain_releases()
        if self._host_busy:
            self.settle_host_writes()   # (the graph's variant and copies follow locations)
        site = user_site() if self.want_sites else None
        node = Node("graph", frozen.name, site, accesses)     # (shared: never mutated)
        if self.no_const:
            node.accesses = [Access(a.key, a.alloc, a.lo, a.hi, True, a.label)
                             for a in accesses]
        node.keepalive = graph
        self.stats.graphs_replayed += 1
        memory = self.memory
        epoch = self.host_epoch
        placed = self.placement is not None
        if placed:
            # several devices: the graph holds one device's work and copies nothing in; its
            # inputs are made current on its device by copy nodes, as a kernel's are
            node.device = frozen.graph.device
            if memory is not None:
                memory.before_placed_graph(frozen, node.accesses, node.device)
            booked = ()
        else:
            # (settled: launched at this epoch, so nothing of it is host-current and what it
            # writes is already booked DEVICE: the bookkeeping would change nothing)
            booked = (memory.before_graph(frozen) if memory is not None
                      and (frozen.settled != epoch or frozen.copy_in) else ())
        deps = self.deps
        found = counts = None
        ordered = self._graph_order(node, frozen) if self._tenanted else None
        last = frozen.last      # (tracker, its version, node) after the previous launch
        if ordered is not None:
            found, counts = self._ordered(node, ordered[0], ordered[1])
        elif last is not None and last[0] is deps and last[1] == deps.version:
            previous = last[2]
            if not previous.finished:
                # Launched again with nothing committed since: the previous launch is the
                # only parent needed, if the graph conflicts with itself at all.
                repeat = frozen.repeat
                if repeat is None or repeat[0] is not deps:
                    repeat = graph_repeat(frozen, deps, node.accesses)
                if repeat[1]:
                    found, counts = {previous: repeat[1]}, repeat[2]
        try:
            self._issue(node, graph, found, counts)
        except BaseException:
            if booked and not node.finished:    # not launched (or unknown)
                memory.graph_not_launched(booked)
            raise
        frozen.last = (deps, deps.version, node)
        frozen.settled = self.host_epoch
        if booked:
            memory.after_graph(frozen)
        if self.graph_read_back and self.recording is None and not placed:
            self.last_replay = weakref.ref(frozen)    # (a cleared graph must not stay alive)
            frozen.replay_version = deps.version
            if frozen.read_back:
                memory.read_back(frozen)

    def launched_together(self, graphs: list[Any]) -> None:
        """The graphs of one replay (several devices: one per device and phase) were just
        launched, each its own node: a pointer naming their recording waits for them all
        (each node alone is its tenant's latest launch of its own graph's name only)."""
        if self._tenanted and graphs:
            nodes = tuple([frozen.last[2] for frozen in graphs])
            self.tenants[nodes[0].tenant].last[graphs[0].recording] = nodes


def graph_repeat(frozen: Any, deps: DependencyTracker, accesses: Any) -> tuple[Any, ...]:
    """What a graph launched again right after itself depends on: ``(deps, [(reason,
    label)], ((reason, count), ...))``, kept on the graph (``FrozenGraph.repeat``) for the
    tracker it was computed with."""
    reasons = deps.self_conflicts(accesses)
    frozen.repeat = (deps, reasons, tuple(Counter(r for r, _ in reasons).items()))
    return frozen.repeat


def refuse_reentry(rt: Any, node: Node) -> None:
    """Raise if an ``_issue`` of this thread is enqueueing ``rt._issuing`` (called when the
    mark is set). Same thread, since the lock is re-entrant: a finalizer or callback ran in the
    middle of scheduling another node and launched; going on would corrupt the DAG.

    Compiled, ``_issue`` always clears its mark (no interrupt can land between C statements),
    so the mark is proof. In Python an interrupt may land on the line that clears it, so the
    ``_issue`` frame that set it is looked for on the stack."""
    if _COMPILED or _inside_issue(rt._issuing):
        raise RuntimeError(
            f"{node.label()} was launched from inside another asyncgpu operation (a "
            "finalizer or callback running while asyncgpu schedules work); nothing was "
            "enqueued. Launch it after that operation returns"
        )


def _inside_issue(node: Node) -> bool:
    """Whether a caller of the ``_issue`` calling :func:`refuse_reentry` is a Python
    ``_issue`` enqueueing ``node``. (An ``_issue`` on the stack that has not reached its launch
    yet, one copying its inputs in, is a legitimate caller: it has not set the mark.)"""
    code = vars(Issuing)["_issue"].__code__
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code is code and frame.f_locals.get("node") is node:
            return True
        frame = frame.f_back
    return False


def _one_need_per_allocation(accesses: list[Any], needs: list[Any]) -> list[Any]:
    """``needs`` (one per access) with an allocation that several arguments view counted once,
    read if any of them reads it."""
    merged: dict[int, Any] = {}
    for acc, need in zip(accesses, needs):
        key = acc.alloc.id
        if key in merged and not need[2]:       # (another argument on it reads it)
            need = (need[0], need[1], merged[key][2], need[3])
        merged[key] = need
    return list(merged.values())


def _refuse_fixed(rt: Any, node: Node, acc: Any, slot: int) -> None:
    """DeviceError: ``node`` writes another library's memory (``acc``) on one device and must
    run on another (pinned there, or writing another library's memory there)."""
    what = f"kernel '{node.name}'" if node.kind == "kernel" else f"'{node.name}'"
    param = getattr(acc, "param", None)
    argument = f"argument '{param}'" if param else "an argument"
    raise DeviceError(
        f"{what} writes {argument}, another library's memory on GPU "
        f"{rt.devices[acc.alloc.home]}, and must also run on GPU {rt.devices[slot]}; a write of "
        "imported memory runs on the memory's GPU, so that its owner sees it: launch it there "
        "(asyncgpu.device), or write a copy (asyncgpu.array(x))")
