"""The execution context: one per backend, tying arrays, dependencies, streams and backend.

One runtime per backend and device, with mutable options: ``asyncgpu.configure`` reconfigures
it in place, rebuilds its backend object and moves its arrays there, or (another backend or
device) retires it; ``asyncgpu.runtime.switch`` has the model and why it was chosen.

The class is built in layers: :class:`~asyncgpu.runtime.issue.Issuing` declares the state and
holds the pipeline launches, library calls and replayed graphs go through (``launch_kernel``,
``launch_graph``, ``_issue``); ``HostAccess`` adds the host's accesses, ``TenantSteps``
(``asyncgpu.runtime.tenant_steps``) the tenants and their steps; ``Runtime`` the rest.

Host accesses (``Array`` indexing, ``numpy()``) wait for the conflicting unfinished nodes only,
then touch the memory directly (``asyncgpu.runtime.host_access``); they run under the runtime's
lock, so calls from several host threads are linearized in the order they take the lock
(documented in docs/design.md).

``execution="sync"`` runs the same pipeline on one stream and waits after every node: the serial
baseline and the oracle the tests compare with.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from ..core.backend import Backend
from ..core.compiled import is_compiled
from ..core.config import BACKEND_BUILD, Options
from ..core.dag import Node
from ..core.deps import Access, DependencyTracker
from ..core.errors import (AnnotationViolation, DeviceError, KernelFault, OutOfMemoryError,
                           RecordingError)
from ..core.interference import THREADS_PER_SM, InterferenceRule
from ..core.placement import Placement, select_devices
from ..core.tenants import Tenant
from ..core.statistics import Counters, Statistics
from ..core.streams import StreamManager
from . import backend_registry, current
from . import switch as _switch
from .allocation import DEVICE, Allocation, count_explicit_free
from .exclusive import ExclusiveSteps
from .finalizers import GuardedLock, watch
from .host_access import HostAccess
from .kernel import user_site
from .library import run_now
from .memory import ExplicitMemory
from .recording_hook import deferring_elsewhere
from .tenant_steps import TenantSteps

log = logging.getLogger("asyncgpu")

#: Called with every new runtime once it is configured. The layers above register here what
#: they attach to a runtime (``asyncgpu.observe.trace``: the whole-process trace that
#: ``ASYNCGPU_TRACE`` asks for), so the runtime needs no import of them.
NEW_RUNTIME_HOOKS: list[Callable[[Any], None]] = []
#: Called with a runtime before ``configure`` builds it a new backend (the work finished, the
#: lock held); each returns what to call once the new backend is in place, or None (a process
#: trace, ``ASYNCGPU_TRACE``, ends its file there and begins the next).
REBUILD_HOOKS: list[Callable[[Any], Callable[[], None] | None]] = []
#: Whether the one line saying the launch path runs uncompiled was logged (once a process).
_said_uncompiled = False


def _say_if_uncompiled() -> None:
    global _said_uncompiled
    if not _said_uncompiled and not is_compiled():
        _said_uncompiled = True
        log.warning("asyncgpu: the launch path runs as plain Python (it was not compiled at "
                    "install: no C compiler or Cython there, or ASYNCGPU_BUILD=python); results "
                    "are the same, each launch costs the host about twice as much")


class Runtime(HostAccess, TenantSteps):
    """The scheduler for one backend (use the module-level API; no public constructor)."""

    __slots__ = ("__weakref__",)     # (the state is declared by Issuing, which reads it most)

    def __init__(self, options: Options, backend: Any = None) -> None:
        _say_if_uncompiled()
        self.options = options
        # ``backend`` replaces the one the options select (micro-benchmarks of the runtime's
        # own cost use a backend that does nothing)
        if backend is None:
            backend = backend_registry.create(options)
        elif not isinstance(backend, Backend):
            # (compiled, the runtime holds its backend as a Backend: say so in both builds)
            raise TypeError(f"a backend derives from asyncgpu.core.backend.Backend (or "
                            f"ForwardingBackend, to wrap another); got {type(backend).__name__}")
        self.backend = backend
        self.stats = Counters()
        # (``sim`` runs the program's code, kernels and twins, inside the runtime's calls: a
        # finalizer the collector runs there must not take the lock, ``asyncgpu.runtime.
        # finalizers``; ``cuda`` keeps the C lock on its launch path)
        watch()
        self._lock = GuardedLock() if backend.name == "sim" else threading.RLock()
        # (bound once: compiled, ``lock.acquire()`` looks the method up at every launch)
        self._acquire, self._release = self._lock.acquire, self._lock.release
        self._releases: deque[Allocation] = deque()
        #: buffers of exported allocations given back, held until the next synchronize of the
        #: whole device (``Issuing._return_buffer``)
        self._lent: list[Any] = []
        self._lent_bytes = 0
        #: allocation id -> the large host write copying into its host memory without the lock
        #: (``HostAccess.write_host``)
        self._host_busy: dict[int, Any] = {}
        self._instruments: list[Any] = []
        self._issuing: Node | None = None     # the node _issue is enqueueing (re-entry refused)
        #: The recording in progress (``asyncgpu.recorder.recording``): launches are deferred
        #: into it.
        self.recording: Any = None
        #: Bumped by every host access: the only event that makes an allocation host-current
        #: again (a failed graph launch restores HOST only to allocations that were HOST when
        #: it began, which no graph launched since the last bump can use). A graph launched at
        #: the current epoch left its allocations on the device (``FrozenGraph.settled``).
        self.host_epoch = 0
        self.graphs: Any = None     # the recorder's GraphCache, created on first use
        #: (what the arrays were made on, what configure switched to) once another backend or
        #: device was selected (``asyncgpu.runtime.switch.retire``): its arrays are refused
        self.retired: tuple[str, str] | None = None
        #: The host's device numbers this runtime runs on, by slot (``Node.device``).
        self.devices = runtime_devices(options, self.backend)
        #: ``asyncgpu.device``: the slot pinned by the calling thread (``slot``), if any; and
        #: ``asyncgpu.tenant``: the tenant the thread issues for (``tenant``), if any.
        self._pins = threading.local()
        #: Every thread's open pins (``asyncgpu.device`` blocks): mark -> (thread, slot).
        self.open_pins: dict[object, tuple[int, int, threading.Thread]] = {}
        #: The tenants by number (``asyncgpu.core.tenants``; 0: the default one), and whether
        #: there is another (only then does an issue look up its thread's tenant).
        self.tenants = [Tenant(0, "default", "normal", 0)]
        self._tenanted = False
        #: ``asyncgpu.regulate``: the tenants' regulation (``asyncgpu.runtime.regulator``), or
        #: None
        self.regulator: Any = None
        #: exclusive tenants' gate (``asyncgpu.runtime.exclusive``), made with the first one
        #: and kept (``exclusive_steps``); ``gate`` is it while a tenant is exclusive, else None
        self.exclusive_steps: ExclusiveSteps | None = None
        self.gate: ExclusiveSteps | None = None
        #: the core the regulated tenants' steps run on (``asyncgpu.runtime.host_core``) while
        #: a plan gives them one, else None
        self.one_core: Any = None
        self._configure(options)
        for hook in NEW_RUNTIME_HOOKS:
            hook(self)

    def _configure(self, options: Options) -> None:
        self._apply(options, self._build(options, self.backend, self.stats))

    def _build(self, options: Options, backend: Any, stats: Counters) -> tuple[Any, ...]:
        """The parts of the runtime ``options`` ask for over ``backend`` (its streams counted
        in ``stats``) that may fail to build: dependencies, streams (with the tenants' pools),
        placement, the interference rule and the memory model, for :meth:`_apply`. Nothing of
        the runtime changes here, so that a ``configure`` that fails leaves it as it was
        (docs/reliability.md, promise 3)."""
        devices = len(self.devices)
        streams = StreamManager(backend, options, stats, devices)
        for tenant in self.tenants[1:]:     # (a reconfigured runtime keeps its tenants)
            partition = tenant.partition_name
            if partition is not None:    # (again: the backend may be a new one)
                backend.reserve_sms(partition, tenant.partition)
            streams.add_tenant(tenant.stream_priority, tenant.streams, partition)
        placement = None
        if devices > 1:
            # (the links are measured only for the policies that weigh them)
            timed = options.device_policy in ("min-min", "min-max")
            placement = Placement(options.device_policy, devices, options.device_data_threshold,
                                  getattr(backend, "bandwidth", None) if timed else None)
        # ``parallel`` on one device: the pairs of heavy launches kept apart
        # (``asyncgpu.core.interference``). Its verdicts are facts about this device's kernels,
        # so the rule (``_rule``) outlives a change of options that keeps the backend, even one
        # that sets it aside (``execution="sync"``): otherwise every ``with configure(...)``
        # block would try its pairs again, running each pair one after the other at its second
        # meeting.
        rule = getattr(self, "_rule", None)
        if rule is None or rule.backend is not backend:
            rule = InterferenceRule(backend, getattr(backend, "sm_count", 132) * THREADS_PER_SM,
                                    getattr(backend, "kernel_attributes", None))
        memory = ExplicitMemory(self) if options.memory == "explicit" else None
        return DependencyTracker(), streams, placement, rule, memory

    def _apply(self, options: Options, built: tuple[Any, ...]) -> None:
        """Put in place what :meth:`_build` made for ``options`` (over the runtime's backend,
        already the new one where ``configure`` rebuilt it): assignments only."""
        self.options = options
        #: Several devices: where each kernel and library call runs (``placement``; None: one
        #: device). The explicit memory model (``memory``, ``asyncgpu.runtime.memory``), or
        #: None for managed memory.
        self.deps, self.streams, self.placement, self._rule, self.memory = built
        self.sync_mode = options.execution == "sync"
        #: ``parallel`` on one device: the interference rule in force (``_rule``), or None.
        self.interference = None
        if options.interference and not self.sync_mode and options.max_streams > 1 \
                and len(self.devices) == 1:
            self.interference = self._rule
        #: The options a recording's key includes (how its graphs are scheduled).
        self.graph_config = (options.graph_streams, options.graph_order,
                             options.graph_max_streams, options.graph_lane_cost_us)
        self.no_const = options.dependency == "no-const"
        #: ``graph_read_back`` in force (explicit memory only), and a weak reference to the
        #: graph launched last (``launch_graph``): a host fetch right after it teaches it what
        #: to copy back
        self.graph_read_back = options.graph_read_back and self.memory is not None
        #: a host read of one element of a current mirror may take the short path
        #: (``read_element``: explicit memory), and skip the backend's host-access hook too
        #: where it does nothing for such a read (not under the checker)
        self._short_reads = self.memory is not None and self.backend.host_coherent_while_busy
        self._plain_reads = getattr(self.backend, "plain_host_reads", False)
        self.last_replay: Any = None
        self.prefetch = (options.prefetch == "auto" and self.backend.prefetches
                         and self.memory is None)
        self.want_sites = self.backend.wants_sites

    def device_name(self, slot: int) -> str:
        """How messages and copy nodes name device slot ``slot``: ``GPU 1`` (``sim``: ``device
        1``), by the host's number."""
        prefix = "GPU" if self.backend.name == "cuda" else "device"
        return f"{prefix} {self.devices[slot]}"

    def pinned_slot(self, number: int) -> int:
        """The slot of device number ``number`` (``asyncgpu.device``); DeviceError if this
        runtime does not run on it."""
        if type(number) is bool or not hasattr(type(number), "__index__"):
            # (True and 2.0 equal device numbers, and "1" prints like one)
            raise DeviceError(f"asyncgpu.device({number!r}): a device number is an int; got "
                              f"a {type(number).__name__}")
        if number < 0:
            raise DeviceError(f"asyncgpu.device({number}): a device number is >= 0; this "
                              f"runtime runs on device(s) {', '.join(map(str, self.devices))}")
        if number not in self.devices:
            raise DeviceError(
                f"asyncgpu.device({number}): this runtime runs on device(s) "
                f"{', '.join(map(str, self.devices))}; pin one of those, or configure "
                f"devices to include {number} (asyncgpu.configure(devices=...), "
                "ASYNCGPU_DEVICES)")
        return self.devices.index(number)

    def pin(self, number: int) -> object:
        """Run this thread's kernels and library calls on device ``number`` until
        :meth:`unpin` of the mark returned (``asyncgpu.device``).

        A thread's pins are a list in the order entered; the latest still open rules. Blocks
        leave in reverse order, except a block in a generator, which may be left after one
        entered later (as tenants' blocks): that one leaves the list, and the later one still
        rules."""
        slot = self.pinned_slot(number)
        pins = self._pins
        entered = getattr(pins, "entered", None)
        if entered is None:
            entered = pins.entered = []
        mark = object()
        entered.append((mark, slot))
        self.open_pins[mark] = (threading.get_ident(), slot, threading.current_thread())
        pins.slot = slot
        return mark

    def live_pins(self) -> list[tuple[int, int]]:
        """The pins open now, as (thread identifier, device slot), the latest last; those of
        threads that ended without leaving their block (entered by hand, or held by a
        generator never closed) are dropped first, with a warning: no thread can leave them."""
        for mark, (_, slot, thread) in list(self.open_pins.items()):
            if not thread.is_alive():
                del self.open_pins[mark]
                log.warning("asyncgpu: a thread ended inside asyncgpu.device(%s), which it never "
                            "left; its pin is dropped (a device block must be left by the "
                            "thread that entered it)", self.devices[slot])
        return [(ident, slot) for ident, slot, _ in self.open_pins.values()]

    def unpin(self, mark: object, pins: dict[str, Any] | None = None) -> None:
        """Leave the pin ``mark`` of :meth:`pin` for the thread whose ``_pins`` dictionary is
        ``pins`` (None: this thread's): it runs on the latest pin it still has open, else
        where the policy says."""
        if pins is None:
            pins = self._pins.__dict__
        self.open_pins.pop(mark, None)
        entered = pins.get("entered") or []
        # (its own, and any left by another thread: no longer open)
        entered[:] = [e for e in entered if e[0] is not mark and e[0] in self.open_pins]
        pins["slot"] = entered[-1][1] if entered else None

    def close(self) -> None:
        """The runtime is being replaced (``set_options``, after its synchronize): give back
        what its backend caches, such as the device memory pool's free blocks, which the
        garbage collector does not return to the device when the backend goes."""
        close = getattr(self.backend, "close", None)
        if close is not None:
            close()

    def reconfigure(self, options: Options) -> None:
        """Apply new options (same backend and device): finishes all work first, and builds a
        new backend for the arrays to move to where an option it is built from changed
        (``asyncgpu.runtime.switch``). A fault of the finished work is raised before anything
        changes; so is a failure to build any part of the new configuration (the backend,
        its streams, the converted buffers...), which leaves options, arrays and memory model
        as they were."""
        with self._lock:
            rebuild = _switch.needs_rebuild(self.options, options)
            if rebuild:
                changed = [f"{name}={getattr(options, name)!r}" for name in BACKEND_BUILD
                           if getattr(options, name) != getattr(self.options, name)]
                current.refuse_while_traced(self, ", ".join(changed))
            self.synchronize()
            if not rebuild:
                self._configure(options)
                return
            resumes = [hook(self) for hook in REBUILD_HOOKS]
            try:
                # (the new backend's parts are built before anything changes: a failure
                # leaves the old backend, its arrays and options in place)
                built = _switch.rebuild_backend(
                    self, options, lambda backend, stats: self._build(options, backend, stats))
                self._apply(options, built)
            finally:
                for resume in resumes:
                    if resume is not None:
                        resume()

    def retire(self, new: Options) -> None:
        """Another backend or device is selected (``new``; all work finished): give back the
        backend's resources and refuse this runtime's arrays from now on
        (``asyncgpu.runtime.switch.retire``)."""
        _switch.retire(self, new)

    # -- memory ------------------------------------------------------------------------------
    def allocate(self, nbytes: int) -> Any:
        with self._lock:
            self._drain_releases()
            return self.allocating(self.backend.alloc, nbytes)

    def allocating(self, alloc: Callable[[int], Any], nbytes: int) -> Any:
        """``alloc(nbytes)``, tried again after each way of giving back the memory of arrays
        the program dropped, before the device's refusal (``OutOfMemoryError``) is the
        caller's: as CuPy's pool empties itself and collects before it gives up. Under the
        lock.

        A dropped array's memory is held by the unfinished work that uses it until that work
        retires, which happens at a host wait or when polling finds it done; a program that
        drops a temporary in each step without ever waiting would run out of memory where
        its serial run fits. So, first, wait for the work in flight (every stream: other
        threads' too; inside a recorded function too, whose own launches are deferred, not in
        flight), retire it and free what that released (counted as the host wait
        ``allocation``; not while a stream capture is open, which a synchronize would break;
        a fault met by the wait is raised here, as at any wait); then, collect the arrays
        dropped in reference cycles (a full collection: tens of milliseconds where Numba and
        CuPy are loaded). The graphs of recorded functions the program dropped are destroyed
        on the way (``asyncgpu.recorder.cache``)."""
        try:
            return alloc(nbytes)
        except OutOfMemoryError:
            if ((self.streams.inflight or self._lent or self._releases)
                    and not self.backend.captures.engaged):
                # (dropped graphs and exported memory go too)
                self._synchronize_locked("allocation")
            else:
                self._drain_releases()
                self._forget_dropped_graphs()
        try:
            return alloc(nbytes)
        except OutOfMemoryError:
            gc.collect()        # (finalizers only queue their buffers, and dropped graphs)
            self._drain_releases()
            self._forget_dropped_graphs()
        return alloc(nbytes)

    def release_later(self, alloc: Allocation) -> None:
        """Called from ``Allocation.__del__``: queue the allocation (deque.append is atomic),
        whose buffer ``_drain_releases`` gives back if nothing brought it back by then."""
        self._releases.append(alloc)

    def free_later(self, alloc: Allocation) -> None:
        """Explicit free from a finalizer the collector runs (``Array.free``), which may run
        inside another call or on a thread that call waits for: the allocation is freed now
        (later use raises) and queued; ``_drain_releases`` gives it back (:meth:`free_deferred`)
        at the runtime's next entry point."""
        alloc.freed = True
        count_explicit_free()
        self._releases.append(alloc)

    def free_deferred(self, alloc: Allocation) -> bool:
        """Under the lock, from ``_drain_releases``: give back an allocation :meth:`free_later`
        queued, once the work using it has finished; a fault that wait meets is kept for the
        next host wait. False (nothing done) while a recording or a stream capture is open,
        which a wait would break: it stays queued."""
        if self.recording is not None or self.backend.captures.engaged:
            return False
        fault = self._give_back(alloc)
        if fault is not None:
            self.backend.keep_faults(fault)
        return True

    def free(self, alloc: Allocation) -> None:
        """Explicit free: wait for every unfinished node using the allocation, then release.

        A fault the wait meets (of any earlier work, as at any host wait) is raised after the
        release, once the device has finished everything: the array is freed all the same, so
        that ``try: ... finally: x.free()`` leaks nothing, and the fault is not lost."""
        with self._lock:
            if self.recording is not None:
                self.recording.refuse(f"free of an array of {alloc.nbytes} bytes")
                other = deferring_elsewhere(self, alloc)
                if other is not None:
                    # (its launches are issued when that thread's body returns: a free now
                    # would make them fail there, or run on memory given back)
                    raise RecordingError(
                        f"free of an array of {alloc.nbytes} bytes that the recording of "
                        f"'{other.name}' in another thread has deferred launches on: they run "
                        "only when that recording ends; free the array after that thread's "
                        "recorded function or block has returned (the array is not freed)")
            self._drain_releases()
            fault = self._give_back(alloc)
            if fault is not None:
                raise fault

    def _give_back(self, alloc: Allocation) -> BaseException | None:
        """Under the lock: wait for every unfinished node using the freed ``alloc``, then
        give its buffer back; returns the fault the wait met, if any (see :meth:`free`)."""
        if self._host_busy:     # (a large host write still copying into its memory)
            self.settle_host_write(alloc)
        found = self.deps.conflicts([Access(alloc.id, alloc, 0, alloc.nbytes, True, "free")])
        fault = None
        if found:
            try:
                self.streams.host_wait(list(found))
                self.stats.sync("free")
            except (KernelFault, AnnotationViolation) as exc:
                # (the wait stopped at the fault, maybe before the allocation's own nodes
                # finished: wait for everything, keeping any further fault for the next
                # host wait, as a synchronize would report it)
                fault = exc
                try:
                    self._synchronize_locked("free")
                except (KernelFault, AnnotationViolation) as later:
                    self.backend.keep_faults(later)
        if not alloc.freed:         # (a deferred one was marked when it was asked for)
            alloc.freed = True
            count_explicit_free()
        buffer, alloc.buffer = alloc.buffer, None
        if buffer is not None:      # (a deferred free the wait above gave back already)
            self.deps.forget(alloc.id)
            self._return_buffer(buffer, alloc.exported)
        return fault

    # -- kernels -----------------------------------------------------------------------------
    def launch_call(self, call: Any) -> Any:
        """Validate and schedule one library call (``asyncgpu.runtime.library``); returns its
        result.

        The backend prepares the call (on ``sim`` it infers the result's metadata and may
        answer that the call must run at once; on ``cuda`` the call runs at enqueue, inside
        the node's stream) and the node goes through the same ``_issue`` as a kernel launch.
        """
        if call.data_dependent():
            # (such a call waits inside itself for its inputs' kernels: wait for them first
            # without the lock, as a host read does, so other threads go on launching)
            with self._lock:
                pending = self._call_pending(call)
            self._wait_unlocked(pending)
        if self.gate is None:
            self._acquire()
        else:
            self.gate.enter()       # (an exclusive tenant's gate: takes the lock when free)
        try:
            return self._call_locked(call)
        finally:
            self._release()

    def _call_locked(self, call: Any) -> Any:
        """Under the lock: :meth:`launch_call`'s validation and issue."""
        if self._releases:
            self._drain_releases()
        call.validate(self)
        site = user_site() if self.want_sites else None
        if self.recording is not None:
            deferred, results = self.recording.library_call(call, site)
            if deferred:
                return results
        accesses = call.accesses()
        if self.no_const:
            for acc in accesses:
                acc.write = True
        node = Node("call", call.name, site, accesses)
        if self.placement is not None:
            self._place(node)       # (before the backend prepares it there)
            launch = self.backend.library_call(self, call, accesses, node.device)
        else:
            launch = self.backend.library_call(self, call, accesses)
        if launch is None:
            results = run_now(self, call, call.resolve(self.backend.name))
            self.stats.calls += 1       # (counted once it ran: a refused call is none)
            return results
        self.stats.calls += 1
        node.launch = launch
        self._issue(node)
        if call.error is not None:   # failed at enqueue: issued anyway, then raised
            raise call.error
        return call.results

    def _recover(self, node: Node, ran: bool = True) -> None:
        """Make the bookkeeping consistent after an exception escaped ``_issue`` mid-way.

        The interrupted node may or may not be enqueued, booked on its stream, committed to
        the tracker: rather than undo each step, wait for all device work (the node's too)
        and mark every node finished, so no half-registered node can be a parent. Costs one
        device-wide synchronize, on the error path only. ``ran`` False: the backend refused
        the launch before anything of it ran, so it wrote nothing.
        """
        interrupt = None
        while True:
            try:
                self.backend.synchronize()
            except (KernelFault, AnnotationViolation) as fault:
                # earlier work's fault, not this launch's error: the device is drained all the
                # same, and the fault must still reach the user, at the next host wait
                self.backend.keep_faults(fault)
            except KeyboardInterrupt as exc:
                # (a simulated kernel's twin raising one, or Ctrl-C again: the wait stopped
                # short of the rest, and a recovery left half-way would leave this node half
                # issued; finished first, the interrupt goes on after)
                interrupt = exc
                continue
            except BaseException:   # capture mode, a deadlock: the error in flight goes first
                log.warning("synchronize after an interrupted launch failed", exc_info=True)
                return
            break
        node.finished = True
        if ran and node.kind in ("kernel", "call"):
            # It may have run: its writes make its device's copy the current one, as the normal
            # path would have booked them. Safe if it did not run: its copies to the device were
            # issued before the launch (explicit memory), so both copies hold the same bytes.
            bit = DEVICE << node.device
            for acc in node.accesses:
                alloc = acc.alloc
                alloc.location = bit if acc.write else alloc.location | bit
        self.streams.recover()
        self._drain_releases()
        if interrupt is not None:
            raise interrupt

    # -- whole-runtime operations ------------------------------------------------------------
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


def runtime_devices(options: Options, backend: Any) -> tuple[int, ...]:
    """The device numbers the runtime runs on: the backend's (``cuda`` over several GPUs),
    else what ``options.devices`` selects among the backend's ``device_count`` (``sim``:
    DeviceError for a virtual device it lacks); one GPU is ``options.device`` (which the
    ``cuda`` backend itself checks)."""
    numbers = getattr(backend, "devices", None)
    if numbers is not None:
        return tuple(numbers)
    if backend.name == "cuda":
        return (backend.device,)
    if options.devices == 1 and backend.name != "sim":
        return (options.device,)
    what = "virtual devices (ASYNCGPU_SIM_DEVICES)" if backend.name == "sim" else "GPUs"
    return select_devices(options.devices, options.device, getattr(backend, "device_count", 1),
                          what)


current.install(Runtime)
