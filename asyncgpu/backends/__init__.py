"""Backend selection, and the happens-before checker attached to a backend's operation log.

A backend is the only code that touches the device (or simulates it). Both backends offer the
same operations, always with explicit streams: ``create_stream(device)``,
``create_event(device)``, ``record(event, stream)``, ``wait(stream, event)``, ``event_done``,
``host_wait(event)``, ``synchronize``, ``alloc``/``free``, ``prefetch(buffer, stream)``,
``kernel_launch`` (prepare, before enqueue; with several devices for the node's device slot)
and ``launch(node, stream)`` (enqueue), ``host_access`` (a hook). ``device`` is a slot of the
runtime's devices, 0 on a runtime of one. The explicit
memory model adds ``copy_launch(buffer, lo, hi, to_device, device, peer)`` (a copy node's
launch: with the host, or from device slot ``peer``) and ``fetch_to_host(buffer, lo, hi,
label, after, device)`` (a host read's copy out of slot ``device``, after the events ``after``,
waited for before it returns). A backend that caches resources beyond its arrays
offers ``close()``, called when its runtime is replaced (``cuda``: the memory pool's free blocks).

For traces (``asyncgpu.observe.trace``) each backend also offers a device clock:
``timing_event()`` (an event whose ``record`` captures a timestamp: CUDA timing events; on
``sim`` the executor's step count, a logical clock), ``clock_base(device, wait=True,
event=None)`` (an event marking "now": complete when it returns, or, with ``wait=False``, soon
after without the host waiting for it; ``event``: a timing event to record again instead of a
new one), ``elapsed_s(start, end)`` (seconds between two completed ones) and
``elapsed_if_done(start, end)`` (the same, or None while either has not completed: on
``cuda`` one driver call). They are used
while tracing and for tenants' step latencies, whose events the runtime keeps for the next
steps once they are measured.

Graphs (CUDA stream capture; the model is in :mod:`asyncgpu.backends.capture`):

* ``begin_capture(stream)``: from now on, work enqueued on ``stream``, and on every stream that
  waits on an event recorded in the capture, is recorded, not run. Relaxed capture mode on
  ``cuda``: other threads and harmless calls of our own (pool growth, module loading) stay legal;
  what truly breaks a capture raises :class:`~asyncgpu.core.errors.CaptureError` on both backends: a
  host wait or query of captured work, ``synchronize``, a prefetch on a capturing stream (CUDA
  graphs cannot hold prefetches: issue them before the launch), waiting on an outside event.
* ``wait_external(stream, event)`` (capturing streams only): every launch of the graph waits
  there for the event's record as of that launch (``cudaEventWaitExternal``), so work outside the
  graph, such as a prefetch, gates only the branch that needs it.
* ``end_capture(stream) -> graph``: every joined stream must have been joined back (the origin
  waits on an event recorded after its last kernel); on ``cuda`` the graph is instantiated.
* ``graph_launch(graph, stream)``: one launch of the whole graph, after the earlier work of
  ``stream``; later work of ``stream`` waits for all of it; launches of one graph never overlap.
  It may return an event it recorded on ``stream`` right after the launch (the graph's own,
  recorded again by its next launch): the runtime then takes it as the node's completion event
  instead of recording one more (``cuda``); ``None`` otherwise (``sim``, and the checker, whose
  happens-before log knows only the events it saw recorded).
* ``graph_destroy(graph)``: waits for its last launch, then frees it. A graph keeps the arrays it
  uses alive until then (and while a launch runs, even if dropped); launching a graph whose
  array was freed explicitly raises.

On the checked backend, captured operations reach the happens-before checker when the graph is
launched, each inner operation on a lane of its own; ``end_capture`` also checks the graph alone,
so a capture missing an inner edge raises :class:`RaceError` there.

:class:`CheckedBackend` forwards every operation and feeds the same log to
:class:`asyncgpu.core.hb.HappensBeforeChecker`: always on ``sim``, on ``cuda`` with
``ASYNCGPU_DEBUG_HB=1``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from ..core.backend import ForwardingBackend
from ..core.config import Options, enable_numba_simulator
from ..core.errors import (
    AnnotationViolation, BackendUnavailableError, KernelFault, RaceError,
)
from ..core.hb import HappensBeforeChecker
from ..runtime import backend_registry
from .capture import Expansion, check_launch

log = logging.getLogger("asyncgpu")
_cuda_usable: bool | None = None
#: Whether ``backend="auto"``'s line saying it runs on the simulator was logged: once a
#: process, not at every backend a ``configure`` (``memory=``, ``sim_seed=``...) builds again.
_said_simulator = False


def cuda_usable() -> bool:
    """Whether CuPy is installed and sees at least one GPU (cached)."""
    global _cuda_usable
    if _cuda_usable is None:
        try:
            import cupy

            _cuda_usable = cupy.cuda.runtime.getDeviceCount() > 0
        except Exception:  # no CuPy, no driver, or no device: all mean "not usable"
            _cuda_usable = False
    return _cuda_usable


def resolve(options: Options) -> str:
    """The backend name ``options.backend`` stands for on this machine."""
    if options.backend != "auto":
        return options.backend
    return "cuda" if cuda_usable() else "sim"


def selected(options: Options) -> tuple[int, ...]:
    """The device numbers ``options.devices`` selects on this machine (the simulator's
    ``sim_devices``, or the GPUs CUDA sees); DeviceError for a device it lacks."""
    from ..core.placement import select_devices

    if resolve(options) == "sim":
        return select_devices(options.devices, options.device, options.sim_devices,
                              "virtual devices (ASYNCGPU_SIM_DEVICES)")
    if not cuda_usable():
        raise BackendUnavailableError(
            "the cuda backend needs CuPy (pip install 'asyncgpu[cuda12]' or '[cuda13]') and a "
            "visible NVIDIA GPU; set ASYNCGPU_BACKEND=sim to run on the CPU simulator"
        )
    import cupy

    return select_devices(options.devices, options.device,
                          cupy.cuda.runtime.getDeviceCount(), "GPUs")


def create(options: Options) -> Any:
    """Create the backend the options ask for (wrapped in the checker where it applies)."""
    global _said_simulator
    name = resolve(options)
    if name == "sim":
        if options.backend == "auto" and not _said_simulator:
            _said_simulator = True
            log.warning("asyncgpu: no usable GPU found; using the CPU simulator (sim backend)")
        if "numba.cuda" not in sys.modules:
            enable_numba_simulator()
        from .sim.backend import SimBackend

        sim = SimBackend(options.sim_seed, options.sim_strategy, options.sim_tick,
                         split=options.memory == "explicit", devices=options.sim_devices)
        return CheckedBackend(sim, sim.replay_hint)
    if not cuda_usable():
        raise BackendUnavailableError(
            "the cuda backend needs CuPy (pip install 'asyncgpu[cuda12]' or '[cuda13]') and a "
            "visible NVIDIA GPU; set ASYNCGPU_BACKEND=sim to run on the CPU simulator"
        )
    from .cuda.backend import CudaBackend

    if options.devices != 1:
        from .cuda.multi import MultiCudaBackend

        numbers = selected(options)
        if len(numbers) > 1:
            multi: Any = MultiCudaBackend(options, numbers)
            if options.stress:
                from .cuda.stress import StressBackend
                multi = StressBackend(multi, options.stress_seed)
            return CheckedBackend(multi, lambda: "") if options.debug_hb else multi
        options = options.replace(device=numbers[0], devices=1)
    cuda: Any = CudaBackend(options)
    if options.stress:
        from .cuda.stress import StressBackend
        cuda = StressBackend(cuda, options.stress_seed)
    return CheckedBackend(cuda, lambda: "") if options.debug_hb else cuda


# the runtime makes its backends through this registration: it sits below this layer
backend_registry.register(create=create, resolve=resolve, select=selected)


class CheckedBackend(ForwardingBackend):
    """Forwards to a backend and checks the happens-before order of what it is asked to do."""

    def __init__(self, inner: Any, hint: Any) -> None:
        self.inner = inner
        self.hb = HappensBeforeChecker()
        self._hint = hint
        self.name = inner.name
        self.prefetches = inner.prefetches
        self.wants_sites = True
        self.host_coherent_while_busy = inner.host_coherent_while_busy
        self.plain_host_reads = False       # every host access goes to the checker

    def _checked(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except RaceError as exc:
            hint = self._hint()
            raise RaceError(f"{exc} ({hint})" if hint else str(exc)) from None

    def _capturing(self, stream: Any) -> bool:
        captures = self.inner.captures
        return captures.engaged and captures.capturing(stream)

    def record(self, event: Any, stream: Any) -> None:
        captured = self._capturing(stream)
        self.inner.record(event, stream)
        if not captured:        # captured work reaches the checker at graph launch
            self.hb.record(event, stream)

    def wait(self, stream: Any, event: Any) -> None:
        self.inner.wait(stream, event)
        if not self._capturing(stream):
            self.hb.wait(stream, event)

    def event_done(self, event: Any) -> bool:
        done = self.inner.event_done(event)
        if done:
            self.hb.host_sync_event(event)
        return done

    def host_wait(self, event: Any) -> None:
        try:
            self.inner.host_wait(event)
        except (KernelFault, AnnotationViolation):
            # the wait completed; the faults are the kernels' own, raised after it
            self.hb.host_sync_event(event)
            raise
        self.hb.host_sync_event(event)

    def synchronize(self) -> None:
        try:
            self.inner.synchronize()
        except (KernelFault, AnnotationViolation):
            self.hb.host_sync_all()       # drained all the same (see host_wait)
            raise
        self.hb.host_sync_all()

    def launch(self, node: Any, stream: Any) -> None:
        if self._capturing(stream):
            self.inner.launch(node, stream)
            return
        self._checked(self.hb.launch, stream, _accesses(node), node.label())
        self.inner.launch(node, stream)

    def host_access(self, accesses: Any, label: str) -> None:
        # the host touches the host copy: the same buffer as the device's in managed memory
        hb_accesses = [(a.alloc.buffer.host_uid, a.lo, a.hi, a.write) for a in accesses]
        self._checked(self.hb.host_access, hb_accesses, label)
        self.inner.host_access(accesses, label)

    def fetch_to_host(self, buffer: Any, lo: int, hi: int, label: str, after: list[Any],
                      device: int = 0) -> None:
        # the copy runs after the events and the host waits for it: for the checker, host
        # waits for the events, then a host access that reads the device copy and writes
        # the mirror
        self.inner.fetch_to_host(buffer, lo, hi, label, after, device)
        for event in after:
            self.hb.host_sync_event(event)
        self._checked(self.hb.host_access, [(_uid(buffer, device), lo, hi, False),
                                            (buffer.host_uid, lo, hi, True)], f"{label} to host")

    # -- graphs ------------------------------------------------------------------------------
    # (begin_capture and wait_external go to the inner backend unchecked: a capture's edges,
    # external waits among them, reach the checker at each launch of its graph)
    def end_capture(self, stream: Any) -> Any:
        graph = self.inner.end_capture(stream)
        keys = iter(range(1 << 62))
        alone = HappensBeforeChecker()
        try:    # the graph on its own: a missing inner edge is a race whatever surrounds it
            Expansion(graph, lambda: ("lane", next(keys)), lambda: ("event", next(keys))).issue(
                graph, "launch stream", alone.record, alone.wait,
                lambda node, lane: alone.launch(lane, _accesses(node), node.label()))
        except RaceError as exc:
            self.inner.graph_destroy(graph)
            raise RaceError(f"in the captured graph: {exc}") from None
        tag = object()      # this graph's lanes and events for the checker
        graph.hb = Expansion(graph, lambda: (tag, "lane", next(keys)),
                             lambda: (tag, "event", next(keys)))
        return graph

    def graph_launch(self, graph: Any, stream: Any) -> None:
        check_launch(graph, stream, self.inner.captures)
        hb = self.hb

        def kernel(node: Any, lane: Any) -> None:
            self._checked(hb.launch, lane, _accesses(node), node.label())

        graph.hb.issue(graph, stream, hb.record, hb.wait, kernel)
        self.inner.graph_launch(graph, stream)

    def graph_destroy(self, graph: Any) -> None:
        launched = graph.hb is not None and graph.hb.launched and not graph.destroyed
        self.inner.graph_destroy(graph)
        if launched:
            self.hb.host_sync_event(graph.hb.done)

    def free(self, buffer: Any) -> None:
        self._checked(self.hb.free, buffer.uid, f"free of buffer {buffer.uid}")
        for uid, _ in getattr(buffer, "others", {}).values():     # other devices' copies
            self._checked(self.hb.free, uid, f"free of buffer {buffer.uid}")
        self.inner.free(buffer)


def _accesses(node: Any) -> list[tuple[Any, int, int, bool]]:
    if node.kind == "copy":     # reads one copy, writes the other
        return node.launch.hb_accesses()
    device = node.device
    return [(_uid(a.alloc.buffer, device), a.lo, a.hi, a.write) for a in node.accesses]


def _uid(buffer: Any, device: int) -> Any:
    """The checker's name of device ``device``'s copy of ``buffer`` (each device's memory is
    its own)."""
    return buffer.uid if device == 0 else buffer.uid_on(device)
