"""The ``sim`` backend: a lazy, adversarial CPU implementation of CUDA's ordering rules.

The model
---------
Nothing runs at launch. Each stream is a FIFO queue of operations: kernels, event records,
event waits and prefetches. Queued work advances only in steps, and a step is one of:

* *begin* the head operation of a stream whose previous operation has ended (a wait may begin
  only once the capture it was bound to at enqueue time is complete);
* *end* a running kernel.

A kernel *begins* by copying the bytes it may read into a private snapshot and *ends* by running
on that snapshot and publishing the bytes it may write. Between the two any number of other
steps can happen, so a missing dependency (read-after-write, write-after-read, write-after-write)
turns into a wrong value instead of hiding behind timing. Steps are taken when the host waits
(only until what it waits for is complete, choosing among everything enabled) and, with
probability ``sim_tick``, at API calls; a *strategy* chooses among enabled steps:

``random``  uniform;  ``reverse``  most recently enqueued first;  ``starve``  begin before end,
so kernels stay in flight as long as possible;  ``pct``  random stream priorities with a few
priority changes (Burckhardt et al.);  ``lazy``  random, but no steps at API calls;
``eager``  run everything after every call (a control: it hides ordering bugs).

Stream capture (``begin_capture``/``end_capture``/``graph_launch``, see
:mod:`asyncgpu.backends.capture`): work enqueued on a capturing stream is recorded into a graph
instead of the queues; a launch expands the graph onto lane streams of its own, so the executor
interleaves its inner operations like any others and the checker sees each of them.

One seed reproduces one execution; error messages carry ``ASYNCGPU_SIM_SEED`` and
``ASYNCGPU_SIM_STRATEGY``. Ordering is *checked* separately by the happens-before checker
(``asyncgpu.core.hb``), whose verdict does not depend on the order chosen here.

Annotations are enforced: ``const`` arrays are passed read-only (a kernel writing one raises
:class:`AnnotationViolation` naming the argument), ``out`` arrays are poisoned (all bytes 0xFF:
NaN for floats), as is memory from ``empty`` and memory given back to the pool.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import random
from collections import deque
from typing import Any

import numpy as np

from ...core.backend import Backend
from ...core.errors import (AnnotationViolation, DeadlockError, KernelFault, OutOfMemoryError,
                            gathered)
from ...core.partitions import GRAIN, SmLedger, reserve_on_each
from ..capture import CaptureTracker, Expansion, Graph, check_launch, destroy
from .buffers import ForeignSimBuffer, SimBuffer, SimCopy
from .fault_marks import FaultMarks, Marks
from .kernels import make_launch
from .interrupts import uninterrupted
from .library import make_call
from .timing import SimStageTimer

log = logging.getLogger("asyncgpu.sim")

#: The SMs of a simulated device, for its partitions (an H100's or H200's 132).
SMS = 132


class Capture:
    """What one ``record`` captured: done once the record marker has been reached.

    ``step`` is the logical time (the executor's step count) at which it was reached: the
    simulator's clock for traces.
    """

    __slots__ = ("done", "step")

    def __init__(self) -> None:
        self.done = False
        self.step = -1


class SimEvent:
    __slots__ = ("capture", "index", "device")

    def __init__(self, index: int, device: int = 0) -> None:
        self.capture: Capture | None = None   # never recorded: waiting on it is a no-op
        self.index = index
        self.device = device

    def __repr__(self) -> str:
        return f"<sim event {self.index}>"


class SimStream:
    __slots__ = ("index", "ops", "running", "device", "priority")

    def __init__(self, index: int, device: int = 0, priority: int = 0) -> None:
        self.index = index
        self.device = device
        self.priority = priority    # CUDA's: lower is more urgent (kept, not simulated)
        self.ops: deque[Op] = deque()
        self.running: Any = None    # state of the head op between begin and end

    def __repr__(self) -> str:
        return f"<sim stream {self.index}>"


class Op:
    __slots__ = ("kind", "payload", "label", "order")

    def __init__(self, kind: str, payload: Any, label: str, order: int) -> None:
        self.kind = kind          # "kernel" (kernels, calls, copies) | "record" | "wait" | "prefetch"
        self.payload = payload
        self.label = label
        self.order = order


class SimBackend(Backend):
    """CPU backend; see the module docstring."""

    name = "sim"
    sm_count = SMS
    prefetches = True
    wants_sites = True
    host_coherent_while_busy = True
    #: ``host_access`` does nothing, so a read of a current mirror need not call it
    #: (``HostAccess.read_element``); faults surface where simulated ops run, never here
    plain_host_reads = True
    fault = None

    def __init__(self, seed: int | None, strategy: str, tick: float, split: bool = False,
                 devices: int = 1) -> None:
        #: Split memory (``memory="explicit"``): separate host and device bytes per buffer.
        self.split = split
        #: Virtual devices, each with a memory of its own (``SimBuffer.on``).
        self.device_count = devices
        if seed is None:
            seed = random.SystemRandom().randrange(2**32)
        self.seed = seed
        self.strategy = strategy
        self.tick = 0.0 if strategy == "lazy" else tick
        self.rng = random.Random(seed)
        self.streams: list[SimStream] = []
        self._events = 0
        self._order = itertools.count()
        self._errors: list[BaseException] = []
        #: bytes a kernel or call that faulted was to write, until overwritten
        self._faulted = FaultMarks()
        self._pool: dict[int, list[SimBuffer]] = {}
        self._priority: dict[int, float] = {}
        self._pct_changes = {self.rng.randrange(1, 400) for _ in range(3)}
        self.steps = 0
        self.max_running = 0
        self.captures = CaptureTracker()
        self._graphs_in_flight: set[Graph] = set()
        #: per virtual device, its SM partitions (``reserve_sms``)
        self._sms: list[SmLedger] = []
        log.info("sim backend: ASYNCGPU_SIM_SEED=%d ASYNCGPU_SIM_STRATEGY=%s", seed, strategy)

    def replay_hint(self) -> str:
        return f"replay with ASYNCGPU_SIM_SEED={self.seed} ASYNCGPU_SIM_STRATEGY={self.strategy}"

    # -- streams and events ------------------------------------------------------------------
    def partitionable_sms(self) -> int:
        """The SMs of a device that partitions may hold (:data:`SMS` in whole groups)."""
        return SMS // GRAIN * GRAIN

    def reserve_sms(self, owner: str, sms: int) -> int:
        """``owner``'s partition of at least ``sms`` SMs on every device, as the ``cuda``
        backend makes it on a device of :data:`SMS` SMs (the simulator runs every stream's
        work alike: the partition is bookkeeping); its SMs."""
        if not self._sms:
            self._sms = [SmLedger([GRAIN] * (SMS // GRAIN)) for _ in range(self.device_count)]
        return reserve_on_each(self._sms, owner, sms)

    def release_sms(self, owner: str) -> None:
        """``owner``'s partition given back on every device (nothing if it has none)."""
        for ledger in self._sms:
            ledger.release(owner)

    def create_stream(self, device: int = 0, priority: int = 0,
                      partition: str | None = None) -> SimStream:
        self._check_device(device)
        if partition is not None and not any(partition in ledger.owners for ledger in self._sms):
            raise ValueError(f"sim backend: no SM partition for tenant {partition!r}")
        least, greatest = self.stream_priorities()
        if not greatest <= priority <= least:
            # (CUDA clamps; a priority outside the range is the runtime's bug, not the user's)
            raise ValueError(f"sim backend: stream priority {priority} outside CUDA's range "
                             f"[{greatest}, {least}]")
        s = SimStream(len(self.streams), device, priority)
        self.streams.append(s)
        self._priority[s.index] = self.rng.random()
        return s

    @staticmethod
    def stream_priorities() -> tuple[int, int]:
        """(least, greatest) stream priority, as CUDA's ``deviceGetStreamPriorityRange``
        answers on an H100 or H200."""
        return 0, -5

    def create_event(self, device: int = 0) -> SimEvent:
        self._check_device(device)
        self._events += 1
        return SimEvent(self._events, device)

    def _check_device(self, device: int) -> None:
        if not 0 <= device < self.device_count:
            raise ValueError(f"sim backend: no virtual device {device} (it has "
                             f"{self.device_count}: ASYNCGPU_SIM_DEVICES)")

    def _enqueue(self, stream: SimStream, kind: str, payload: Any, label: str) -> None:
        stream.ops.append(Op(kind, payload, label, next(self._order)))

    def record(self, event: SimEvent, stream: SimStream) -> None:
        if event.device != stream.device:
            # (CUDA: cudaErrorInvalidResourceHandle)
            raise ValueError(f"sim backend: {event!r} of device {event.device} recorded on "
                             f"{stream!r} of device {stream.device}: CUDA records an event "
                             "only on a stream of its own device")
        if self.captures.engaged and self.captures.record(event, stream):
            return
        self._record(event, stream)
        self._maybe_tick()

    def _record(self, event: SimEvent, stream: SimStream) -> None:
        # (whole, a signal's handler held back: an event given a new capture whose record was
        # never enqueued is waited for forever, and a replay's ``done`` event is recorded again
        # at each replay, which the next one waits for)
        uninterrupted(self._record_whole, event, stream)

    def _record_whole(self, event: SimEvent, stream: SimStream) -> None:
        capture = Capture()
        self._enqueue(stream, "record", capture, f"record {event!r}")
        event.capture = capture

    def wait(self, stream: SimStream, event: SimEvent) -> None:
        if self.captures.engaged and self.captures.wait(stream, event):
            return
        self._wait(stream, event)

    def _wait(self, stream: SimStream, event: SimEvent) -> None:
        self._enqueue(stream, "wait", event.capture, f"wait {event!r}")

    def wait_external(self, stream: SimStream, event: SimEvent) -> None:
        self.captures.wait_external(stream, event)

    def prefetch(self, buffer: SimBuffer, stream: SimStream) -> None:
        if self.captures.engaged:
            self.captures.check_prefetch(stream)
        self._enqueue(stream, "prefetch", buffer, "prefetch")

    def launch(self, node: Any, stream: SimStream) -> None:
        if node.device != stream.device:
            raise ValueError(f"sim backend: {node.label()} of device {node.device} launched on "
                             f"{stream!r} of device {stream.device}")
        # (whole, as a driver call is: a signal's exception lands after the kernel is queued,
        # so the runtime knows it may have run; raised before, nothing it overwrites is lost)
        uninterrupted(self._launch, node, stream)

    def _launch(self, node: Any, stream: SimStream) -> None:
        node.launch.device = node.device        # (a captured one runs there at each launch)
        if self.captures.engaged and self.captures.launch(node, stream):
            return
        self._enqueue(stream, "kernel", node.launch, node.label())

    # -- the logical clock (traces) -----------------------------------------------------------
    def timing_event(self, device: int = 0) -> SimEvent:
        """An event whose record captures the logical time it is reached at."""
        return self.create_event(device)

    def clock_base(self, device: int = 0, wait: bool = True,
                   event: SimEvent | None = None) -> SimEvent:
        """An already-complete event at the current logical time (a trace's origin; ``wait``
        changes nothing: the logical clock is the executor's). ``event``: an event to use
        again, else a new one."""
        if event is None:
            event = self.create_event(device)
        event.capture = Capture()
        event.capture.done = True
        event.capture.step = self.steps
        return event

    def elapsed_s(self, start: SimEvent, end: SimEvent) -> float:
        """Logical time between two reached records: one executor step counts as 1 us."""
        a, b = start.capture, end.capture
        if a is None or b is None or not (a.done and b.done):
            raise RuntimeError("elapsed_s needs two recorded events that have been reached")
        return (b.step - a.step) * 1e-6

    def elapsed_if_done(self, start: SimEvent, end: SimEvent) -> float | None:
        """:meth:`elapsed_s`, or None while either record has not been reached."""
        if self.event_done(start) and self.event_done(end):
            return self.elapsed_s(start, end)
        return None

    def event_done(self, event: SimEvent) -> bool:
        if self.captures.engaged:
            self.captures.check_host_wait(event, "event query")
        return event.capture is None or event.capture.done

    def host_wait(self, event: SimEvent) -> None:
        if self.captures.engaged:
            self.captures.check_host_wait(event, "host wait")
        capture = event.capture
        while capture is not None and not capture.done:
            self._step(forced=True)
        self._raise_errors()

    def synchronize(self) -> None:
        self.captures.check_synchronize()
        while any(s.ops for s in self.streams):
            self._step(forced=True)
        self._graphs_in_flight.clear()
        self._raise_errors()

    # -- graphs ------------------------------------------------------------------------------
    def begin_capture(self, stream: SimStream) -> None:
        self.captures.begin(stream)

    def end_capture(self, stream: SimStream) -> Graph:
        graph = self.captures.end(stream)
        device = graph.device = stream.device
        graph.handle = Expansion(graph, lambda: self.create_stream(device),
                                 lambda: self.create_event(device))
        return graph

    def graph_launch(self, graph: Graph, stream: SimStream) -> None:
        check_launch(graph, stream, self.captures)
        graph.handle.issue(graph, stream, self._record, self._wait, self._enqueue_kernel)
        graph.launched = True
        # queued operations hold buffers, not arrays: the graph (so its arrays) must outlive them
        self._graphs_in_flight.add(graph)
        self._maybe_tick()

    def _enqueue_kernel(self, node: Any, stream: SimStream) -> None:
        self._enqueue(stream, "kernel", node.launch, node.label())

    def graph_destroy(self, graph: Graph) -> None:
        destroy(graph, lambda: self.host_wait(graph.handle.done), self._graphs_in_flight)

    def host_access(self, accesses: Any, label: str) -> None:
        """Host accesses need no simulation: memory is coherent and waits were done. A read of
        what a faulted kernel was to write raises (``FaultMarks.check``)."""
        if self._faulted:
            for a in accesses:
                if not a.write:
                    self._faulted.check(a.alloc.buffer.uid, a.lo, a.hi, label)

    def host_written(self, buffer: SimBuffer, lo: int, hi: int) -> None:
        """The host wrote every byte of ``[lo, hi)`` of ``buffer`` (after the write: one that
        was refused wrote nothing): they are the program's again."""
        if buffer.uid in self._faulted:
            self._faulted.unmark(buffer.uid, lo, hi)

    # -- memory ------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> SimBuffer:
        free = self._pool.get(nbytes)
        if free:
            buf = free.pop()     # LIFO reuse: a use-after-free sees the new owner's data
            buf.poison()
            return buf
        try:
            return SimBuffer(nbytes, self.split)
        except OutOfMemoryError:
            if not self._pool:
                raise
        self._pool.clear()      # (freed buffers of other sizes: given back, as CuPy's pool does)
        return SimBuffer(nbytes, self.split)

    def foreign_buffer(self, owner: Any, ptr: int, nbytes: int, what: str,
                       host_addressable: bool, slot: int = 0) -> SimBuffer:
        """A buffer over ``nbytes`` of another library's host memory at ``ptr``, kept alive
        by ``owner`` (``asyncgpu.runtime.interop``; on ``sim`` every import is host memory)."""
        dev = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(ptr)) if nbytes \
            else np.empty(0, np.uint8)
        return ForeignSimBuffer(owner, dev, self.split)

    def free(self, buffer: SimBuffer) -> None:
        self._faulted.pop(buffer.uid, None)
        if isinstance(buffer, ForeignSimBuffer):
            buffer.owner = None      # the producer's memory: not ours to poison or reuse
            return
        buffer.poison()
        self._pool.setdefault(buffer.nbytes, []).append(buffer)

    def copy_launch(self, buffer: SimBuffer, lo: int, hi: int, to_device: bool,
                    device: int = 0, peer: int | None = None) -> SimCopy:
        """Prepare a copy of ``[lo, hi)`` between the host mirror and device ``device`` (split
        mode), or from device ``peer`` to device ``device``."""
        return SimCopy(buffer, lo, hi, to_device, device, peer)

    def fetch_to_host(self, buffer: SimBuffer, lo: int, hi: int, label: str,
                      after: list[SimEvent], device: int = 0) -> None:
        """Copy ``[lo, hi)`` of device ``device``'s copy to the host mirror once the events
        ``after`` (the span's writers) have completed: the simulator runs the work up to them
        first. (What the caller did not list is the checker's to catch.)"""
        for event in after:
            self.host_wait(event)
        buffer.host[lo:hi] = buffer.on(device)[lo:hi]

    # -- kernels -----------------------------------------------------------------------------
    def kernel_launch(self, kernel: Any, launcher: Any, arrays: list[Any], values: list[Any],
                      site: str | None, device: int = 0) -> Any:
        # (the device it runs on is the stream's, set when it is enqueued)
        return make_launch(kernel, launcher, arrays, values, site)

    def library_call(self, runtime: Any, call: Any, accesses: list[Any], device: int = 0
                     ) -> Any:
        return make_call(runtime, call, accesses)

    def stage_timer(self, runtime: Any, launches: list[Any]) -> Any:
        """The recorder's stage timer: a deterministic cost model (``timing``)."""
        return SimStageTimer(launches)

    # -- the executor ------------------------------------------------------------------------
    def _maybe_tick(self) -> None:
        if self.strategy == "eager":
            while any(s.ops for s in self.streams):
                if not self._step(forced=False):
                    return
            return
        if self.tick and self.rng.random() < self.tick:
            for _ in range(self.rng.randint(1, 3)):
                if not self._step(forced=False):
                    break

    def _enabled(self) -> list[tuple[str, SimStream]]:
        steps = []
        for s in self.streams:
            if not s.ops:
                continue
            if s.running is not None:
                steps.append(("end", s))
                continue
            head = s.ops[0]
            if head.kind == "wait" and head.payload is not None and not head.payload.done:
                continue
            steps.append(("begin", s))
        return steps

    def _choose(self, steps: list[tuple[str, SimStream]]) -> tuple[str, SimStream]:
        strategy = self.strategy
        if strategy == "reverse":
            return max(steps, key=lambda st: st[1].ops[0].order)
        if strategy == "starve":
            begins = [st for st in steps if st[0] == "begin"]
            return self.rng.choice(begins or steps)
        if strategy == "pct":
            if self.steps in self._pct_changes:
                top = max(steps, key=lambda st: self._priority[st[1].index])
                self._priority[top[1].index] = -self.rng.random()
            return max(steps, key=lambda st: self._priority[st[1].index])
        return self.rng.choice(steps)

    def _step(self, forced: bool) -> bool:
        steps = self._enabled()
        if not steps:
            if forced:
                heads = [f"stream {s.index}: {s.ops[0].label}" for s in self.streams if s.ops]
                raise DeadlockError(
                    "deadlock: the host waits for work that can never start; queue heads: "
                    + ("; ".join(heads) or "none") + f" ({self.replay_hint()})"
                )
            return False
        kind, stream = self._choose(steps)
        uninterrupted(self._advance, kind, stream)
        return True

    def _advance(self, kind: str, stream: SimStream) -> None:
        """One step: ``stream``'s head operation begins (a kernel) or takes effect (its end, or
        any other operation), with SIGINT held back (``interrupts.uninterrupted``)."""
        self.steps += 1
        op = stream.ops[0]
        if kind == "begin":
            if op.kind == "kernel":
                try:
                    stream.running = op.payload.begin()
                except MemoryError as exc:
                    self._begin_failed(stream, op, exc)
                    return
                running = sum(1 for s in self.streams if s.running is not None)
                self.max_running = max(self.max_running, running)
                return
            stream.ops.popleft()
            if op.kind == "record":
                op.payload.done = True
                op.payload.step = self.steps
            return
        stream.ops.popleft()
        state, stream.running = stream.running, None
        try:
            op.payload.end(state)
        except AnnotationViolation as exc:
            self._errors.append(AnnotationViolation(f"{exc} ({self.replay_hint()})"))
            self._faulted.mark(op.payload, self._errors[-1])
            # (and the const arguments it wrote, which a GPU would have changed)
            self._faulted.mark_spans(getattr(exc, "written", ()), self._errors[-1])
        except Exception as exc:  # the kernel's own error: reported at the next host wait
            self._kernel_failed(op, exc)
        except BaseException as exc:
            # (KeyboardInterrupt, SystemExit... raised by the kernel's code: it did not finish,
            # so it is a fault like any other; Ctrl-C still stops the host's wait, as the
            # program expects of it, and the fault waits for the next host wait)
            self._kernel_failed(op, exc)
            if isinstance(exc, KeyboardInterrupt):
                raise
        else:
            if self._faulted:
                for uid, lo, hi, overwritten in op.payload.written_ranges():
                    if overwritten and uid in self._faulted:
                        self._faulted.unmark(uid, lo, hi)

    def _kernel_failed(self, op: Any, exc: BaseException) -> None:
        """``op``'s kernel or call raised ``exc``: a fault reported at the next host wait, and
        what it was to write marked as the fault's (its reads raise until written again)."""
        what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        err = KernelFault(f"{op.label} raised {what} ({self.replay_hint()})")
        err.__cause__ = exc
        self._errors.append(err)
        self._faulted.mark(op.payload, err)

    def _begin_failed(self, stream: SimStream, op: Any, exc: MemoryError) -> None:
        """What ``op`` needs of the host's memory to begin did not fit: a fault of that
        operation alone, reported at the next wait; the queue behind it goes on."""
        stream.ops.popleft()
        err = KernelFault(
            f"{op.label} could not run on the simulator: the host's memory had no room for "
            f"what it needs there (its private copy of the bytes it reads, which the GPU does "
            f"not need, or a device's copy of an array) ({exc}); free arrays or use smaller "
            f"ones ({self.replay_hint()})")
        err.__cause__ = exc
        self._errors.append(err)
        self._faulted.mark(op.payload, err)

    def faulted_marks(self) -> Marks:
        """The bytes a faulted kernel or call was to write, by buffer ``uid``, with the fault."""
        return self._faulted.copied()

    def mark_faulted(self, marks: Marks) -> None:
        """Mark these buffers (by ``uid``) as a faulted kernel's (a backend made anew takes
        over the marks of the one before: ``asyncgpu.runtime.switch``)."""
        self._faulted.update(marks)

    def _raise_errors(self) -> None:
        # every pending fault, not only the first: each names its launch site
        if self._errors:
            errors, self._errors = self._errors, []
            raise gathered(errors)

    def keep_faults(self, fault: BaseException) -> None:
        """Hand back a fault that was raised where it could not reach the user (the runtime's
        recovery from an interrupted launch): the next host wait raises it again."""
        self._errors.insert(0, fault)
