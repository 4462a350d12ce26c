"""Traces: what ran where and when, why each edge exists, and what overlapped.

The model
---------
``with asyncgpu.trace() as t:`` (or ``ASYNCGPU_TRACE=path`` for the whole process:
:mod:`asyncgpu.observe.process`) records, per node: its name, the user's launch site, its
stream, its parents with the reason of each edge (RAW/WAR/WAW and the array), the host time
it was enqueued, and its device start and end; prefetches and host synchronizations are
intervals of their own.

A trace is attached to one runtime by two things, both removed when it ends:

* a *tracing backend* that the runtime and its stream manager talk to instead of the real one.
  It forwards every operation, and around each kernel launch and each prefetch it records a
  timing event on the same stream (before and after), and it times host waits. The runtime's
  launch path is unchanged: when no trace is active nothing at all is added to it.
* an *instrument* (see ``asyncgpu.instrument``) that receives each node with its edges.

Device times are read lazily: the first read of a trace after work was issued synchronizes the
runtime, then converts every event to seconds since the trace's origin (``clock_base``, taken
when the trace started, so device and host times share an origin to within microseconds on the
GPU). Timing events come from a per-backend pool and go back to it once read. On a runtime over
several devices each device has its own pool and its own origin, taken one after the other when
the trace starts (CUDA records an event only on a stream of its own device, and measures time
only between events of one device), so the devices' timelines line up to within the few
microseconds those origins are apart.

On ``sim`` the device clock is *logical*: the simulator's step count (one step shown as 1 us),
so timelines show orderings and overlaps the simulator chose, not physical durations.

Example::

    with ag.trace() as t:
        square[8, 256](x, x1, n); square[8, 256](y, y1, n); reduce[8, 256](x1, y1, res, n)
        res[0]
    t.metrics()                         # {"CT": ..., "TC": ..., "CC": ..., "TOT": ...}
    t.save("out/", "vec")               # vec.trace.json, vec.dot, vec.timeline.png, vec.dag.png
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import weakref
from typing import Any

from ..core.backend import ForwardingBackend
from ..core.errors import RecordingError
from ..runtime.current import current_runtime
from ..runtime.recording_hook import recording_of, this_thread
from . import metrics as _metrics
from .draw import NEEDS, can_draw, draw_dag, draw_timeline
from .export import chrome_trace, to_dot
from .records import NodeRecord, PrefetchRecord, RegulationRecord, SyncRecord, finite

log = logging.getLogger("asyncgpu")

#: Spare timing events: backend -> device slot -> events
_pools: weakref.WeakKeyDictionary[Any, dict[int, list[Any]]] = weakref.WeakKeyDictionary()
#: Pending timing events beyond which a launch first reads the completed ones (bounds the
#: number of live events in a whole-process trace).
_HARVEST = 4096


class _TracingBackend(ForwardingBackend):
    """Forwards to the real backend; brackets launches and prefetches with timing events."""

    wants_sites = True

    def __init__(self, inner: Any, trace: Trace) -> None:
        self.inner = inner
        #: The backend under the trace: the layers below tell a trace's wrapper by this
        #: attribute (capture uses the traced backend; configure refuses a new backend)
        #: without importing this module.
        self.traced = inner
        #: a process trace (``ASYNCGPU_TRACE``), which follows a new backend where a trace
        #: block refuses one
        self.process = trace.process_path is not None
        self._trace = trace
        self.name = inner.name
        self.prefetches = inner.prefetches
        self.host_coherent_while_busy = inner.host_coherent_while_busy

    def prefetch(self, buffer: Any, stream: Any) -> None:
        t, inner = self._trace, self.inner
        if not t._active:           # (ended before a trace begun after it: passes through)
            inner.prefetch(buffer, stream)
            return
        # (the prefetch is for the node being issued, on its device's stream)
        device = getattr(t._rt._issuing, "device", 0)
        e0, e1 = t._event(device), t._event(device)
        enq = time.perf_counter() - t._t0
        inner.record(e0, stream)
        inner.prefetch(buffer, stream)
        inner.record(e1, stream)
        rec = PrefetchRecord(t._track(stream), buffer.nbytes, t._next_order(), enq)
        t._prefetches.append(rec)
        t._pending_prefetches.append(rec)
        t._events.append((rec, e0, e1, device))

    def launch_traced_graph(self, node: Any, graph: Any, stream: Any) -> None:
        """A replayed graph (``asyncgpu.recorder.recording``): bracketed and recorded like a
        kernel."""
        self.launch(node, stream, graph)

    def launch(self, node: Any, stream: Any, graph: Any = None) -> None:
        t, inner = self._trace, self.inner
        if not t._active:
            _launch(inner, node, stream, graph)
            return
        device = node.device
        e0, e1 = t._event(device), t._event(device)
        enq = time.perf_counter() - t._t0
        inner.record(e0, stream)
        _launch(inner, node, stream, graph)
        inner.record(e1, stream)
        rec = NodeRecord(node.id, node.kind, node.name, node.site, t._track(stream),
                         t._next_order(), enq)
        if node.tenant:
            rec.tenant = t._rt.tenants[node.tenant].name
        t._nodes[node.id] = rec
        for p in t._pending_prefetches:
            p.node = node.id
        t._pending_prefetches.clear()
        t._events.append((rec, e0, e1, device))
        if len(t._events) >= t._harvest_at:
            t._harvest()

    def host_wait(self, event: Any) -> None:
        t = self._trace
        t0 = time.perf_counter()
        self.inner.host_wait(event)
        if not t._active:
            return
        waited = t._event_owner.get(id(event))
        t._sync(t0, [waited] if waited is not None else [])

    def synchronize(self) -> None:
        t = self._trace
        t0 = time.perf_counter()
        self.inner.synchronize()
        if t._active:
            t._sync(t0, None)


def _launch(backend: Any, node: Any, stream: Any, graph: Any) -> None:
    """Launch ``node`` (a kernel, or a replay of ``graph``) on ``backend``: a trace begun before
    this one, which this one's layer wraps, records it too."""
    if graph is None:
        backend.launch(node, stream)
    elif isinstance(backend, _TracingBackend):
        backend.launch(node, stream, graph)
    else:
        backend.graph_launch(graph, stream)


class Trace:
    """The record of one traced region (from :func:`asyncgpu.trace`); read it after the block.

    Reading any of ``nodes``, ``prefetches``, ``metrics()`` or an export synchronizes the
    runtime first if traced work may still be running.
    """

    def __init__(self, runtime: Any) -> None:
        self._rt = runtime
        self._lock = threading.Lock()
        self._nodes: dict[int, NodeRecord] = {}
        self._host_nodes: list[NodeRecord] = []
        self._prefetches: list[PrefetchRecord] = []
        self._pending_prefetches: list[PrefetchRecord] = []
        self._syncs: list[SyncRecord] = []
        self._unlabelled: list[SyncRecord] = []
        self._regulation: list[RegulationRecord] = []
        self._events: list[tuple[Any, Any, Any, int]] = []
        self._event_owner: dict[int, int] = {}
        self._tracks: dict[int, int] = {}
        self._order = 0
        self._harvest_at = _HARVEST
        self._active = False
        self._backend: _TracingBackend | None = None
        #: where a process trace (``ASYNCGPU_TRACE``) writes itself; None: a trace block
        self.process_path: str | None = None
        self.backend_name = getattr(runtime.backend, "name", "?")
        self.logical_clock = self.backend_name == "sim"

    # -- lifetime ----------------------------------------------------------------------------
    def start(self) -> Trace:
        """Begin tracing (:func:`trace` starts the trace it returns); a trace starts once, so
        that its times have one origin: ``RuntimeError`` for a second start."""
        rt = self._rt
        if recording_of(rt, this_thread()) is not None:
            # (nothing enqueued yet: the launches recorded are issued when the recording ends,
            # after such a trace, which would come back empty, or synchronize to be read)
            raise RecordingError(
                "asyncgpu.trace() started inside a recording (a recorded function's body or a "
                "record block): the launches recorded are issued when the recording ends, so "
                "the trace would see none of them; start it around the recorded call or block "
                "(with asyncgpu.trace() as t: step())")
        with rt._lock:
            if self._backend is not None:
                # (a second layer of the same trace over its first would pass each call to
                # itself, and stop() would loop for good holding the runtime's lock)
                raise RuntimeError(
                    "this trace has started already (asyncgpu.trace() starts the trace it "
                    "returns) and a trace starts once; for another, call asyncgpu.trace()")
            inner = rt.backend
            root = inner
            while isinstance(root, _TracingBackend):
                root = root.inner
            self._root = root
            self._pools = _pools.setdefault(root, {})
            devices = len(getattr(rt, "devices", None) or (0,))
            self._bases = [root.clock_base(d) if d else root.clock_base() for d in range(devices)]
            self._t0 = time.perf_counter()
            self._saved = (inner, rt.want_sites)
            self._backend = _TracingBackend(inner, self)
            rt.backend = self._backend
            rt.streams.backend = self._backend
            rt.want_sites = True
            rt._instruments.append(self)
            rt.stats.listener = rt._synchronized
            self._active = True
            if rt.regulator is not None and rt.regulator.state != "off":
                # (regulation in force as the trace starts: its first record)
                self.regulation_changed(*rt.regulator.where())
        return self

    def stop(self) -> None:
        """Detach from the runtime (work already issued keeps its timing events)."""
        rt = self._rt
        with rt._lock:
            if not self._active:
                return
            self._active = False
            if self in rt._instruments:
                rt._instruments.remove(self)
            if not rt._instruments:
                rt.stats.listener = None
            if rt.backend is not self._backend:
                # (a trace begun after this one, in another thread, is still on: this one's
                # layer passes work through until that one ends and takes both off)
                return
            inner, want_sites = self._saved
            while isinstance(inner, _TracingBackend) and not inner._trace._active:
                inner, want_sites = inner._trace._saved      # (ended out of order before)
            rt.backend = inner
            if isinstance(rt.streams.backend, _TracingBackend):
                rt.streams.backend = inner
            rt.want_sites = want_sites if rt.backend is inner else rt.backend.wants_sites

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- recording (called under the runtime's lock) -----------------------------------------
    def _event(self, device: int) -> Any:
        pool = self._pools.get(device)
        if pool:
            return pool.pop()
        return self._root.timing_event(device) if device else self._root.timing_event()

    def _read(self, rec: Any, e0: Any, e1: Any, device: int) -> None:
        """Set a record's device times from its two completed events, and pool the events."""
        base = self._bases[device]
        elapsed = self._root.elapsed_s
        rec.start_s = elapsed(base, e0)
        rec.end_s = elapsed(base, e1)
        self._pools.setdefault(device, []).extend((e0, e1))

    def _track(self, handle: Any) -> int:
        key = id(handle)
        track = self._tracks.get(key)
        if track is None:
            track = self._tracks[key] = len(self._tracks)
        return track

    def _next_order(self) -> int:
        self._order += 1
        return self._order

    def _sync(self, t0: float, waited: list[int] | None) -> None:
        rec = SyncRecord("host-wait", self._next_order(), t0 - self._t0,
                         time.perf_counter() - self._t0, waited)
        self._syncs.append(rec)
        self._unlabelled.append(rec)

    # instrument hooks
    def node_issued(self, node: Any) -> None:
        parents = [(p.id, reason, label) for p, reason, label in node.edges]
        rec = self._nodes.get(node.id)
        if rec is None:   # a host access: complete when issued
            rec = NodeRecord(node.id, node.kind, node.name, node.site, None, self._next_order(),
                             time.perf_counter() - self._t0)
            # (the thread that issues it is the host's: its tenant scope says whose it is)
            index = node.tenant or getattr(self._rt._pins, "tenant", 0)
            if index:
                rec.tenant = self._rt.tenants[index].name
            self._host_nodes.append(rec)
        rec.parents = parents
        if node.event is not None:
            self._event_owner[id(node.event)] = node.id

    def synchronized(self, reason: str) -> None:
        """The runtime counted one synchronization (``statistics().host_syncs``): the waits
        the backend made for it become one record, as long as they all took, naming every node
        waited for (None where one of them was a device-wide synchronize)."""
        waits = self._unlabelled
        if not waits:
            return
        first = waits[0]
        first.reason = reason
        if len(waits) > 1:
            first.end_s = max(w.end_s for w in waits)
            first.waited = (None if any(w.waited is None for w in waits)
                            else [i for w in waits for i in w.waited])
            # (the waits not yet labelled are the last records: ``_sync`` appends to both)
            del self._syncs[len(self._syncs) - len(waits) + 1:]
        waits.clear()

    def regulation_changed(self, state: str, plan: Any, stage: str) -> None:
        self._regulation.append(RegulationRecord(
            self._next_order(), time.perf_counter() - self._t0, state,
            plan.describe() if plan is not None else "", stage))

    def _harvest(self) -> None:
        """Read the timing events that have completed, without waiting (long traces).

        Asks the backend below the happens-before checker: the trace observing an event must
        not count as the runtime having synchronized with it.
        """
        done = getattr(self._root, "inner", self._root).event_done
        pending = []
        for item in self._events:
            if done(item[2]):
                self._read(*item)
            else:
                pending.append(item)
        self._events = pending
        self._harvest_at = max(_HARVEST, 2 * len(pending))

    # -- reading -----------------------------------------------------------------------------
    def _resolve(self) -> None:
        with self._rt._lock, self._lock:   # the runtime's lock first, as on the launch path
            if not self._events:
                return
            self._rt.synchronize()
            for item in self._events:
                self._read(*item)
            self._events = []

    @property
    def started(self) -> float:
        """``time.perf_counter()`` when the trace started: the records' times count from it."""
        return self._t0

    @property
    def nodes(self) -> list[NodeRecord]:
        """Every traced node (kernels and host accesses) in issue order."""
        self._resolve()
        return sorted([*self._nodes.values(), *self._host_nodes], key=lambda r: r.order)

    @property
    def device_nodes(self) -> list[NodeRecord]:
        """The device nodes (kernels, library calls, graphs, copies) in issue order."""
        return [n for n in self.nodes if n.stream is not None]

    @property
    def kernels(self) -> list[NodeRecord]:
        """The device nodes that compute (kernels, library calls, graphs) in issue order."""
        return [n for n in self.device_nodes if n.kind != "copy"]

    @property
    def copies(self) -> list[NodeRecord]:
        """The copy nodes of explicit memory (host to device and back) in issue order."""
        return [n for n in self.device_nodes if n.kind == "copy"]

    @property
    def prefetches(self) -> list[PrefetchRecord]:
        self._resolve()
        return list(self._prefetches)

    @property
    def syncs(self) -> list[SyncRecord]:
        """Host synchronizations (host clock), labelled with the runtime's reason."""
        return list(self._syncs)

    @property
    def regulation(self) -> list[RegulationRecord]:
        """Regulation's changes while traced (host clock), the one in force as the trace
        started first: its state, the plan in force, the stage of its check."""
        return list(self._regulation)

    @property
    def streams(self) -> int:
        """Number of distinct streams the traced device work used."""
        return len({n.stream for n in self.device_nodes} | {p.stream for p in self._prefetches})

    def metrics(self) -> dict[str, float]:
        """The GrCUDA paper's overlap metrics CT, TC, CC, TOT (see ``asyncgpu.observe.metrics``)."""
        comp = [(n.start_s, n.end_s) for n in self.kernels]
        # transfers: prefetches (managed memory) and copy nodes (explicit memory)
        xfer = [(p.start_s, p.end_s) for p in [*self.prefetches, *self.copies]]
        return _metrics.overlap(comp, xfer)

    def tenant_busy(self) -> dict[str, float]:
        """Each tenant's busy time over the trace, in seconds, by name (``"default"``: the work
        outside any tenant): how long the device ran work it issued (kernels, library calls,
        graphs, copies; prefetches belong to no tenant), its nodes that overlapped counted
        once."""
        spans: dict[str, list[tuple[float, float]]] = {}
        for n in self.device_nodes:
            if n.start_s is not None and n.end_s is not None:
                spans.setdefault(n.tenant, []).append((n.start_s, n.end_s))
        return {name: sum(hi - lo for lo, hi in _metrics.union(intervals))
                for name, intervals in spans.items()}

    # -- exports -----------------------------------------------------------------------------
    def chrome_trace(self) -> dict[str, Any]:
        """The trace as Chrome/Perfetto JSON: a host track and one track per stream.

        Open it at https://ui.perfetto.dev or chrome://tracing. Edges are flow arrows.
        """
        return chrome_trace(self)

    def save_chrome(self, path: str) -> None:
        """Write :meth:`chrome_trace` as JSON."""
        with open(path, "w") as f:
            json.dump(self.chrome_trace(), f)

    def to_dot(self, kernels_only: bool = False) -> str:
        """The DAG as Graphviz DOT: streams as colours, edges labelled with reason and array."""
        return to_dot(self.device_nodes if kernels_only else self.nodes)

    def save_timeline(self, path: str, title: str = "") -> None:
        """A PNG timeline (host and one row per stream) through matplotlib."""
        draw_timeline(self, path, title)

    def save_dag(self, path: str, title: str = "", kernels_only: bool = True) -> None:
        """A PNG picture of the DAG (laid out by depth; streams as colours) through matplotlib:
        of its first ``asyncgpu.observe.draw.DAG_NODES`` nodes (100), with one logged line
        when there are more (``to_dot`` has them all)."""
        draw_dag(self.device_nodes if kernels_only else self.nodes, path, title)

    def save(self, directory: str, stem: str = "trace") -> dict[str, str]:
        """Write ``stem.trace.json``, ``.dot``, ``.timeline.png``, ``.dag.png`` and
        ``.metrics.json`` into ``directory``; returns kind -> path. Without matplotlib the
        pictures are left out, with one logged warning saying what to install."""
        os.makedirs(directory, exist_ok=True)
        drawn = can_draw()
        paths = {k: os.path.join(directory, f"{stem}.{ext}") for k, ext in (
            ("trace", "trace.json"), ("dot", "dot"), ("timeline", "timeline.png"),
            ("dag", "dag.png"), ("metrics", "metrics.json"))
            if drawn or not ext.endswith(".png")}
        self.save_chrome(paths["trace"])
        with open(paths["dot"], "w") as f:
            f.write(self.to_dot())
        # (the metrics before the pictures: a picture that fails leaves them written)
        with open(paths["metrics"], "w") as f:
            json.dump(dict(finite(self.metrics()), backend=self.backend_name,
                           logical_clock=self.logical_clock), f, indent=1)
        if drawn:
            self.save_timeline(paths["timeline"], stem)
            self.save_dag(paths["dag"], stem)
        else:
            log.warning("asyncgpu: %s; wrote the trace without them", NEEDS)
        return paths


def trace() -> Trace:
    """Trace the work issued in a ``with`` block: ``with asyncgpu.trace() as t:``.

    Records per node its name, launch site, stream, parents (with RAW/WAR/WAW and the array),
    host enqueue time and device start and end (timing events, only while tracing), plus
    prefetches, host synchronizations and regulation's changes (``t.regulation``). Read it
    after the block: ``t.metrics()`` (CT, TC, CC,
    TOT), ``t.tenant_busy()`` (each tenant's device busy time), ``t.save_chrome(path)``,
    ``t.to_dot()``, ``t.save_timeline(path)``, ``t.save_dag(path)``,
    ``t.save(directory, stem)``. On ``sim`` device times are logical.

    Returns
    -------
    Trace
    """
    return Trace(current_runtime()).start()
