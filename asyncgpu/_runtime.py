"""The execution context: one per backend, tying arrays, dependencies, streams and backend.

The pipeline every launch goes through (GrCUDA's order, which is what lets host-to-device
transfers overlap the parents' kernels)::

    validate -> dependencies -> choose stream -> prefetch host-current inputs on that stream
             -> wait for parents on other streams (events) -> launch -> record the node's event
             -> commit the accesses -> (sync mode: host waits) / (async: maybe poll events)

Validation happens before anything is enqueued, and the accesses are committed only after the
launch succeeded, so a refused launch leaves the DAG as it was.

Host accesses (``Array`` indexing, ``numpy()``) wait for the conflicting unfinished nodes only,
then touch the memory directly (``asyncgpu._host_access``); they run under the runtime's lock,
so calls from several host threads are linearized in the order they take the lock (documented in
docs/design.md).

``execution="sync"`` runs the same pipeline on one stream and waits after every node: the serial
baseline and the oracle the tests compare with.

``launch_kernel``, ``launch_graph`` and ``_issue`` are :class:`PythonIssuing`'s, or their
compiled twins in ``asyncgpu/csrc/issue.c`` (``asyncgpu._compiled``; docs/design.md, "Compiled
methods").
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections import Counter, deque
from collections.abc import Iterator
from typing import Any

from . import _compiled as compiled
from . import backends
from ._array import DEVICE, HOST, Allocation
from ._chunks import launch_chunked
from ._config import Options, options_from_env
from ._dag import Node, reduce_parents
from ._deps import Access, DependencyTracker, register_access_type
from ._graph_capture import FrozenGraph
from ._host_access import HostAccess
from ._kernel import ArrayArg, Launcher, user_site
from ._memory import ExplicitMemory
from ._statistics import Counters, Statistics
from ._streams import StreamManager

log = logging.getLogger("asyncgpu")

register_access_type(ArrayArg)      # (launch arguments are their own accesses)


class PythonIssuing:
    """The runtime's ``launch_kernel``, ``launch_graph`` and ``_issue`` in Python: the
    reference for the compiled versions in ``asyncgpu/csrc/issue.c`` (``asyncgpu._compiled``),
    which run the same steps, call the same methods in the same order and raise the same
    errors."""

    __slots__ = ()
    _lock: Any
    _releases: Any
    _issuing: Node | None
    _instruments: list[Any]

    def launch_kernel(self, launcher: Launcher, args: tuple[Any, ...]) -> None:
        """Validate and schedule one kernel launch; returns without waiting."""
        kernel = launcher.kernel
        with self._lock:
            if self._releases:
                self._drain_releases()
            site = user_site() if self.want_sites else None
            if self.recording is not None and self.recording.kernel(launcher, args, site):
                return
            arrays, values = kernel.bind(self, args, site)
            if (self.memory is not None and kernel.elementwise
                    and launch_chunked(self, launcher, args, arrays, values, site)):
                return
            accesses: list[Any] = arrays     # an ArrayArg is its own dependency access
            if self.no_const or self.alias_blind:
                accesses = [Access(id(a.array) if self.alias_blind else a.key, a.alloc, a.lo,
                                   a.hi, a.write or self.no_const, a.param) for a in arrays]
            launch = self.backend.kernel_launch(kernel, launcher, arrays, values, site)
            node = Node("kernel", kernel.name, site, accesses)
            node.launch = launch
            self.stats.kernels += 1
            self._issue(node)

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
            self.memory.before_device(node.accesses)
        enqueued = False
        try:
            self._issuing = node
            if found is None:
                found = self.deps.conflicts(node.accesses)
            parents = reduce_parents(found) if len(found) > 1 else list(found)
            streams = self.streams
            stream = streams.choose(node, parents)
            node.stream = stream
            node.parents = parents
            backend = self.backend
            accesses = node.accesses
            stats = self.stats
            if self.prefetch:
                for acc in accesses:
                    alloc = acc.alloc
                    if alloc.location & HOST and alloc.nbytes:
                        backend.prefetch(alloc.buffer, stream.handle)
                        stats.prefetches += 1
                        stats.bytes_prefetched += alloc.nbytes
                        alloc.location = DEVICE   # migrated: a second view in this launch needs none
            if parents:
                streams.wait_for_parents(node, parents)
            enqueued = True   # (set first: an interrupt may land right after the call)
            done = None       # (a graph launch may come with its completion event recorded)
            if graph is None:
                backend.launch(node, stream.handle)
            elif self._instruments and hasattr(backend, "launch_traced_graph"):  # a trace
                backend.launch_traced_graph(node, graph, stream.handle)
            else:
                done = backend.graph_launch(graph, stream.handle)
            # The launch is enqueued: from here on nothing may fail half-way.
            streams.issued(node, done)
            self.deps.commit(node, accesses)
            if graph is None or not explicit:
                for acc in accesses:
                    # (the accesses also keep the allocations alive until the node is finished)
                    alloc = acc.alloc
                    alloc.location = DEVICE if acc.write else alloc.location | DEVICE
            if self.eager_free:
                node.keepalive = None
                node.accesses = []
            stats.nodes += 1
            stats.streams_used.add(stream.index)
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
        except BaseException:
            # Before the launch only harmless work was enqueued (waits, prefetches) and no
            # bookkeeping had changed. From the launch on, the node may be queued on the
            # device while the DAG does not know it: drain, then mark everything finished.
            if enqueued:
                self._recover(node)
            raise
        finally:
            self._issuing = None

    def launch_graph(self, frozen: Any) -> None:
        """Schedule one launch of a captured graph (``asyncgpu._graph_capture.FrozenGraph``) as
        one node whose accesses are the union of the graph's (explicit memory: the copies it
        makes itself are booked by ``ExplicitMemory.before_graph``). The caller holds the
        runtime's lock: the recorder's paths here hold it already for the decision that leads
        here, and taking it again would cost a replay another acquire and release."""
        graph, accesses = frozen.graph, frozen.accesses
        if self._releases:
            self._drain_releases()
        site = user_site() if self.want_sites else None
        node = Node("graph", frozen.name, site, accesses)     # (shared: never mutated)
        if self.no_const:
            node.accesses = [Access(a.key, a.alloc, a.lo, a.hi, True, a.label)
                             for a in accesses]
        node.keepalive = graph
        self.stats.graphs_replayed += 1
        memory = self.memory
        epoch = self.host_epoch
        # (settled: launched at this epoch, so nothing of it is host-current and what it
        # writes is already booked DEVICE: the bookkeeping would change nothing)
        booked = (memory.before_graph(frozen) if memory is not None
                  and (frozen.settled != epoch or frozen.copy_in) else ())
        deps = self.deps
        found = counts = None
        last = frozen.last      # (tracker, its version, node) after the previous launch
        if last is not None and last[0] is deps and last[1] == deps.version:
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


class Runtime(*compiled.bases("RuntimeBase", PythonIssuing), HostAccess):
    """The scheduler for one backend (use the module-level API; no public constructor)."""

    # (slots: what every launch reads, which the compiled methods read at their offsets;
    # everything else lives in the instance dict)
    __slots__ = ("_instruments", "_issuing", "_issuing_compiled", "_lock", "_releases",
                 "alias_blind", "backend", "deps", "eager_free", "host_epoch", "memory",
                 "no_const", "options", "prefetch", "recording", "stats", "streams", "sync_mode",
                 "want_sites")

    def __init__(self, options: Options, backend: Any = None) -> None:
        self.options = options
        # ``backend`` replaces the one the options select (micro-benchmarks of the runtime's
        # own cost use a backend that does nothing)
        self.backend = backends.create(options) if backend is None else backend
        self.stats = Counters()
        self._lock = threading.RLock()
        self._releases: deque[tuple[int, Any]] = deque()
        self._instruments: list[Any] = []
        self._issuing: Node | None = None     # the node _issue is enqueueing (re-entry refused)
        self._issuing_compiled: Node | None = None    # the same, set by the compiled _issue
        #: The recording in progress (``asyncgpu._recorder``): launches are deferred into it.
        self.recording: Any = None
        #: Bumped by every host access: the only event that makes an allocation host-current
        #: again (a failed graph launch restores HOST only to allocations that were HOST when
        #: it began, which no graph launched since the last bump can use). A graph launched at
        #: the current epoch left its allocations on the device (``FrozenGraph.settled``).
        self.host_epoch = 0
        self.graphs: Any = None     # the recorder's GraphCache, created on first use
        self._configure(options)
        if options.trace:
            from ._trace import trace_process

            trace_process(self, options.trace)

    def _configure(self, options: Options) -> None:
        bugs = options.test_bugs
        self.options = options
        self.deps = DependencyTracker(drop_raw="drop_raw" in bugs, drop_war="drop_war" in bugs)
        self.streams = StreamManager(self.backend, options, self.stats)
        self.sync_mode = options.execution == "sync"
        #: The options a recording's key includes (how its graphs are scheduled).
        self.graph_config = (options.graph_streams, options.graph_order,
                             options.graph_max_streams, options.graph_lane_cost_us)
        self.no_const = options.dependency == "no-const"
        #: The explicit memory model (``asyncgpu._memory``), or None for managed memory.
        self.memory = ExplicitMemory(self) if options.memory == "explicit" else None
        self.prefetch = (options.prefetch == "auto" and self.backend.prefetches
                         and self.memory is None)
        self.want_sites = self.backend.wants_sites
        self.alias_blind = "alias_blind" in bugs
        self.host_no_wait = "host_no_wait" in bugs
        self.eager_free = "eager_free" in bugs

    def close(self) -> None:
        """The runtime is being replaced (``set_options``, after its synchronize): give back
        what its backend caches, such as the device memory pool's free blocks, which the
        garbage collector does not return to the device when the backend goes."""
        close = getattr(self.backend, "close", None)
        if close is not None:
            close()

    def reconfigure(self, options: Options) -> None:
        """Apply new policies (same backend): finishes all work first."""
        with self._lock:
            self.synchronize()
            self._configure(options)

    # -- memory ------------------------------------------------------------------------------
    def allocate(self, nbytes: int) -> Any:
        with self._lock:
            self._drain_releases()
            return self.backend.alloc(nbytes)

    def release_later(self, alloc_id: int, buffer: Any) -> None:
        """Called from ``Allocation.__del__``: queue the buffer (deque.append is atomic)."""
        self._releases.append((alloc_id, buffer))

    def _drain_releases(self) -> None:
        while self._releases:
            alloc_id, buffer = self._releases.popleft()
            self.deps.forget(alloc_id)
            self.backend.free(buffer)

    def free(self, alloc: Allocation) -> None:
        """Explicit free: wait for every unfinished node using the allocation, then release."""
        with self._lock:
            if self.recording is not None:
                self.recording.refuse(f"free of an array of {alloc.nbytes} bytes")
            self._drain_releases()
            found = self.deps.conflicts([Access(alloc.id, alloc, 0, alloc.nbytes, True, "free")])
            if found:
                self.streams.host_wait(list(found))
                self.stats.sync("free")
            alloc.freed = True
            Allocation.explicit_frees += 1
            buffer, alloc.buffer = alloc.buffer, None
            self.deps.forget(alloc.id)
            self.backend.free(buffer)

    # -- kernels -----------------------------------------------------------------------------
    def launch_call(self, call: Any) -> Any:
        """Validate and schedule one library call (``asyncgpu._library``); returns its result.

        The backend prepares the call (on ``sim`` it infers the result's metadata and may
        answer that the call must run at once; on ``cuda`` the call runs at enqueue, inside
        the node's stream) and the node goes through the same ``_issue`` as a kernel launch.
        """
        with self._lock:
            if self._releases:
                self._drain_releases()
            call.validate(self)
            site = user_site() if self.want_sites else None
            if self.recording is not None:
                deferred, results = self.recording.library_call(call, site)
                if deferred:
                    return results
            accesses = call.accesses(self.alias_blind)
            if self.no_const:
                for acc in accesses:
                    acc.write = True
            self.stats.calls += 1
            launch = self.backend.library_call(self, call, accesses)
            if launch is None:
                from ._library import run_now
                return run_now(self, call, call.resolve(self.backend.name))
            node = Node("call", call.name, site, accesses)
            node.launch = launch
            self._issue(node)
            if call.error is not None:   # failed at enqueue: issued anyway, then raised
                raise call.error
            return call.results

    def _recover(self, node: Node) -> None:
        """Make the bookkeeping consistent after an exception escaped ``_issue`` mid-way.

        The interrupted node may or may not be enqueued, booked on its stream, committed to
        the tracker: rather than undo each step, wait for all device work (the node's too)
        and mark every node finished, so no half-registered node can be a parent. Costs one
        device-wide synchronize, on the error path only.
        """
        try:
            self.backend.synchronize()
        except BaseException:   # a device fault, or capture mode: keep the first error
            log.warning("synchronize after an interrupted launch failed", exc_info=True)
            return
        node.finished = True
        self.streams.recover()
        self._drain_releases()

    # -- whole-runtime operations ------------------------------------------------------------
    def synchronize(self) -> None:
        """Block until all scheduled work has finished."""
        with self._lock:
            if self.recording is not None:
                self.recording.refuse("synchronize")
            self.backend.synchronize()
            self.streams.all_finished()
            self.stats.sync("synchronize")
            self._drain_releases()

    def statistics(self) -> Statistics:
        with self._lock:
            return self.stats.snapshot(self.backend.name, self.streams.inflight)

    def _notify_node(self, node: Node) -> None:
        """Instrument hooks of one issued node: node_added, edge_added per edge, node_issued."""
        self._notify("node_added", node)
        for parent, reason, label in node.edges:
            self._notify("edge_added", parent, node, reason, label)
        self._notify("node_issued", node)

    def _synchronized(self, reason: str) -> None:
        """``Counters.sync`` calls this while instruments are registered."""
        self._notify("synchronized", reason)

    def _notify(self, hook: str, *args: Any) -> None:
        for inst in list(self._instruments):
            fn = getattr(inst, hook, None)
            if fn is None:
                continue
            try:
                fn(*args)
            except Exception:
                log.exception("instrument %r raised in %s; removing it", inst, hook)
                self._instruments.remove(inst)

    @contextlib.contextmanager
    def instrument(self, obj: Any) -> Iterator[Any]:
        """Register an instrument for a block (see ``asyncgpu.Instrument`` for the hooks)."""
        with self._lock:
            self._instruments.append(obj)
            self.stats.listener = self._synchronized
        try:
            yield obj
        finally:
            with self._lock:
                if obj in self._instruments:
                    self._instruments.remove(obj)
                if not self._instruments:
                    self.stats.listener = None


def graph_repeat(frozen: Any, deps: DependencyTracker, accesses: Any) -> tuple[Any, ...]:
    """What a graph launched again right after itself depends on: ``(deps, [(reason,
    label)], ((reason, count), ...))``, kept on the graph (``FrozenGraph.repeat``) for the
    tracker it was computed with."""
    reasons = deps.self_conflicts(accesses)
    frozen.repeat = (deps, reasons, tuple(Counter(r for r, _ in reasons).items()))
    return frozen.repeat


def refuse_reentry(rt: Runtime, node: Node) -> None:
    """Raise if an ``_issue`` of this thread is enqueueing ``rt._issuing`` (called when the
    mark is set). Same thread, since the lock is re-entrant: a finalizer or callback ran in the
    middle of scheduling another node and launched; going on would corrupt the DAG.

    The compiled ``_issue`` always clears its marks, so its mark is proof. A Python one may
    leave its mark set when an interrupt lands on the line that clears it, so its frame is
    looked for on the stack."""
    issuing = rt._issuing
    if issuing is rt._issuing_compiled or _inside_issue(issuing):
        raise RuntimeError(
            f"{node.label()} was launched from inside another asyncgpu operation (a "
            "finalizer or callback running while asyncgpu schedules work); nothing was "
            "enqueued. Launch it after that operation returns"
        )


def _inside_issue(node: Node) -> bool:
    """Whether a caller of the ``_issue`` calling :func:`refuse_reentry` is a Python
    ``_issue`` enqueueing ``node``. (An ``_issue`` on the stack that has not reached its launch
    yet, one copying its inputs in, is a legitimate caller: it has not set the mark.)"""
    code = PythonIssuing._issue.__code__
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code is code and frame.f_locals.get("node") is node:
            return True
        frame = frame.f_back
    return False


compiled.register(Runtime, PythonIssuing, ("launch_kernel", "launch_graph", "_issue"))
compiled.configure("configure_issue", Runtime, Counters, Node, Allocation, user_site,
                   refuse_reentry,
                   PythonIssuing.launch_kernel, reduce_parents, HOST, DEVICE,
                   PythonIssuing.launch_graph, FrozenGraph, graph_repeat)


# -- the process-wide runtime ---------------------------------------------------------------
_runtime: Runtime | None = None
_options: Options | None = None
_global_lock = threading.Lock()


def current_options() -> Options:
    """The options in force (read from the environment the first time)."""
    global _options
    if _options is None:
        _options = options_from_env()
    return _options


def current_runtime() -> Runtime:
    """The runtime that module-level calls use, created on first use."""
    global _runtime
    rt = _runtime
    if rt is not None:
        return rt
    with _global_lock:
        if _runtime is None:
            _runtime = Runtime(current_options())
        return _runtime


def set_options(new: Options) -> None:
    """Switch options: same backend -> reconfigure in place; other backend -> new runtime."""
    global _runtime, _options
    with _global_lock:
        old = _runtime
        _options = new
        if old is None:
            return
        if _backend_identity(new) == _backend_identity(old.options):
            old.reconfigure(new)
        else:
            old.synchronize()
            old.close()
            _runtime = None


def _backend_identity(o: Options) -> tuple[Any, ...]:
    """The options a backend is built from: changing any of them needs a new runtime."""
    return (backends.resolve(o), o.memory, o.device, o.sim_seed, o.sim_strategy, o.sim_tick,
            o.debug_hb, o.packed_launch, o.stress, o.stress_seed)
