"""Host access to arrays: the waits, fetches and bookkeeping around the host touching bytes.

The model
---------
The host touches an array's bytes only between :meth:`HostAccess.begin_host_access` and
:meth:`~HostAccess.end_host_access`, under the runtime's lock: inside the context manager
:meth:`~HostAccess.host_access`, or in the three common accesses that skip its generator
(:meth:`~HostAccess.read_element`, :meth:`~HostAccess.read_host` for ``numpy()``,
:meth:`~HostAccess.write_host` for ``a[key] = value``). First the access
waits for the unfinished device nodes it conflicts with (the writers of its span, for a read;
readers and writers, for a write), except where the explicit memory model says the mirror is
current; with that model a span current only on the device is fetched first
(``asyncgpu.runtime.memory``), ordered after its writers on the device so the host waits once (the
whole allocation, when it is small and that waits for no other writer: a loop reading
elements of a small result then costs one round trip, not one per element). After
the access, the allocation's location is booked (HOST after a write; the explicit model's
transitions otherwise). :meth:`~HostAccess.synchronize`, the host's wait for everything,
lives here too. While other threads run, the three common accesses, ``synchronize`` and a
library call that waits for its inputs inside itself wait for the device without the lock
first (:meth:`~HostAccess._wait_unlocked`), so a thread waiting for its kernels does not hold
back other threads' launches. Invariants: nothing the host reads is still being written on
the device, and nothing the device reads later misses a host write (the location says a copy
is due).

A large host write (:data:`UNLOCKED_WRITE_BYTES` or more, every byte of an allocation, in the
explicit memory model, while other threads run) copies the values into the host memory
without the lock, so other threads (tenants) go on launching and reading meanwhile: its
begin is booked under the lock, the allocation is marked *busy* (``Issuing._host_busy``),
the lock is released for the copy, and the end is booked under the lock again. Whoever needs
a busy allocation under the lock first (a node that uses it, a copy to or from it, another
host access of it, its free: :meth:`HostAccess.settle_host_write`) waits for the copy, which
needs no lock, and books the end itself, so no wait needs the lock released and nothing
issued after the write sees the bytes before it. An interrupted write is ended by its own
thread, or by the next access of the array in that thread, so none waits for it forever.

Example::

    value = rt.read_element(y, 12)                  # y[3] of a float32 array
    with rt.host_access(x, 0, x.nbytes, write=True, dense=True):
        x._alloc.buffer.host[:] = data              # every byte: x becomes HOST

Plain Python, compiled with the launch path: the backend is told through ``host_access`` (a
hook; the checker's on ``sim``) and ``fetch_to_host``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..core.dag import RAW, WAW, Node
from ..core.deps import Access, access
from ..core.errors import AnnotationViolation, FreedArrayError, KernelFault
from .allocation import HOST
from .array import Array
from .checks import user_site
from .issue import Issuing
from .memory import WHOLE_FETCH_BYTES, holder

#: A managed-memory read of at least this many bytes migrates the pages to the host.
_MIGRATING_READ = 1 << 20
#: A host write of every byte of an allocation copies without the runtime's lock from this
#: many bytes on (a copy of 1 MiB takes about 0.1 ms: shorter ones keep the lock).
UNLOCKED_WRITE_BYTES = 1 << 20


class _HostWrite:
    """A large host write copying without the lock: what its end books, and whether the copy
    is done (``copied``) and succeeded (``ok``)."""

    __slots__ = ("array", "copied", "dense", "hi", "lo", "ok", "thread")

    def __init__(self, array: Array, lo: int, hi: int, dense: bool) -> None:
        self.array, self.lo, self.hi, self.dense = array, lo, hi, dense
        self.copied = threading.Event()
        self.ok = False
        self.thread = threading.current_thread()     # (the one that copies)


class HostAccess(Issuing):
    """The runtime's host-access methods, a layer of its class (``Runtime`` derives from
    this, this from :class:`~asyncgpu.runtime.issue.Issuing`, whose state it uses: the lock,
    tracker, streams, memory model, backend, recording and statistics)."""

    __slots__ = ()

    @contextlib.contextmanager
    def host_access(self, array: Array, lo: int, hi: int, write: bool, dense: bool = False
                    ) -> Iterator[None]:
        """Hold the lock while the host touches ``[lo, hi)`` of the array's allocation.

        Waits first for the unfinished nodes the access conflicts with (writers, for a read;
        readers and writers, for a write). ``dense``: a write sets every byte of the span (the
        explicit memory model then needs no copy of the old contents).
        """
        with self._lock:
            if self._host_busy:
                self.settle_host_write(array._alloc)
            self.begin_host_access(array, lo, hi, write, dense)
            yield
            self.end_host_access(array, lo, hi, write, dense)

    def read_element(self, array: Array, offset: int) -> Any:
        """The element at byte ``offset`` of the array's allocation, read on the host:
        :meth:`host_access` around one read, without a generator (a scalar read is common in
        a loop, and the context manager's frames were a third of its cost)."""
        end = offset + array.dtype.itemsize
        alloc = array._alloc
        with self._lock:
            if self._host_busy:
                self.settle_host_write(alloc)
            refused = False
            if self._short_reads:
                # what the full access does first, in its order: drain the releases, then end
                # the recording's segment (split) or raise. The segment's launch may book this
                # allocation (a copy back) or queue releases, so the checks come after.
                if self._releases:
                    self._drain_releases()
                recording = self.recording
                if recording is not None:
                    recording.refuse("host read of ", array)
                    refused = True
                location = alloc.location
                if ((location & HOST or not location) and not self._releases
                        and not self._instruments
                        and not alloc.freed and self.backend.fault is None):
                    # The mirror is current, or will be once a replayed graph's copy back of it
                    # completes: for this read the host access waits for that copy at most,
                    # fetches nothing and books nothing, so what is left of it is the epoch,
                    # the count and (under the checker) the backend's hook.
                    self.host_epoch += 1
                    pending = alloc.copy_back
                    if pending is not None:
                        alloc.copy_back = None
                        if not pending.finished:
                            self.streams.host_wait((pending,))
                            self.stats.sync("host-read")
                    if not self._plain_reads:
                        label = array.describe()
                        self.backend.host_access([self._access(array, offset, end, False, label)],
                                                 "host read of " + label)
                    self.stats.host_accesses += 1
                    return alloc.buffer.host[offset:end].view(array.dtype)[0]
            pending = [] if refused else self._conflicts_pending(array, offset, end, False)
            if not pending:
                self.begin_host_access(array, offset, end, False, False, refused)
                value = alloc.buffer.host[offset:end].view(array.dtype)[0]
                self.end_host_access(array, offset, end, False)
                return value
        self._wait_unlocked(pending)
        with self._lock:
            if self._host_busy:
                self.settle_host_write(alloc)
            self.begin_host_access(array, offset, end, False)
            value = alloc.buffer.host[offset:end].view(array.dtype)[0]
            self.end_host_access(array, offset, end, False)
        return value

    def read_host(self, array: Array) -> Any:
        """A host copy of the whole array: :meth:`host_access` around the copy, without a
        generator (``Array.numpy``, and NumPy's ``asarray`` through ``__array__``)."""
        lo, hi = array._lo, array._hi
        with self._lock:
            pending = self._conflicts_pending(array, lo, hi, False)
        self._wait_unlocked(pending)
        with self._lock:
            if self._host_busy:
                self.settle_host_write(array._alloc)
            self.begin_host_access(array, lo, hi, False)
            out = np.array(array._host_view(), copy=True)
            self.end_host_access(array, lo, hi, False)
        return out

    def synchronize(self) -> None:
        """Block until all scheduled work has finished."""
        # (the lock's bound acquire and release rather than ``with``, as in
        # ``Issuing.launch_kernel``)
        self._acquire()
        try:
            if not self._waits_unlocked():
                self._synchronize_locked()
                return
            # (the latest node of each stream, waited for first without the lock: see
            # _wait_unlocked)
            pending = [s.inflight[-1].event for s in self.streams.streams if s.inflight]
        finally:
            self._release()
        self._wait_unlocked(pending)
        self._acquire()
        try:
            self._synchronize_locked()
        finally:
            self._release()

    def _synchronize_locked(self, reason: str = "synchronize") -> None:
        """Wait for everything, counted as a host wait for ``reason`` (the user's
        ``synchronize``, which a recording refuses, or the runtime's own)."""
        if reason == "synchronize" and self.recording is not None:
            self.recording.refuse("synchronize")
        # (exported memory the program dropped before this synchronize began: the device's
        # work on it, other libraries' too, is done once it returns; what the drain after it
        # finds waits for the next)
        lent = self._lent
        if lent:
            self._lent = []
            self._lent_bytes = 0
        try:
            self.backend.synchronize()
        except (KernelFault, AnnotationViolation):
            # (reported once the device finished everything: what was in flight is done,
            # and counted so, before the faults reach the caller)
            self._all_finished(reason)
            self._free_lent(lent)
            raise
        self._all_finished(reason)
        self._free_lent(lent)

    def _free_lent(self, lent: list[Any]) -> None:
        for buffer in lent:
            self.backend.free(buffer)

    def _all_finished(self, reason: str = "synchronize") -> None:
        self.streams.all_finished()
        self.stats.sync(reason)
        self._drain_releases()
        self._forget_dropped_graphs()

    def _forget_dropped_graphs(self) -> None:
        """Under the lock: destroy the graphs of recorded functions the program dropped
        (``asyncgpu.recorder.cache``; the backend waits for their last launches)."""
        graphs = self.graphs
        if graphs is not None and graphs.dropped:
            graphs.forget_dropped()

    def _waits_unlocked(self) -> bool:
        """Under the lock: whether a host wait for the device is done first without it (see
        :meth:`_wait_unlocked`): other threads may go on meanwhile (the process runs several;
        a program of one thread keeps a read's single round trip, a fetch's copy queued
        behind the writers on the device), and the backend can (``wait_quietly``)."""
        return (self.recording is None and threading.active_count() > 1
                and hasattr(self.backend, "wait_quietly"))

    def _conflicts_pending(self, array: Array, lo: int, hi: int, write: bool) -> list[Any]:
        """Under the lock: the completion events a host access of ``[lo, hi)`` would wait for
        (writers of the span, for a read; readers and writers, for a write), where they are
        waited for without the lock first (:meth:`_waits_unlocked`); else none."""
        if not self._waits_unlocked():
            return []
        if array._alloc.freed:
            return []
        return self._latest([self._access(array, lo, hi, write, None)])

    def _call_pending(self, call: Any) -> list[Any]:
        """Under the lock: :meth:`_conflicts_pending` for the array arguments of a library
        call that waits for its inputs inside itself (``LibraryCall.data_dependent``)."""
        if not self._waits_unlocked():
            return []
        return self._latest([self._access(a, a._lo, a._hi, i in call.written, None)
                             for i, a in enumerate(call.arrays) if not a._alloc.freed])

    def _latest(self, accesses: list[Any]) -> list[Any]:
        """The completion events of the latest unfinished node on each stream that
        ``accesses`` conflict with."""
        found = self.deps.conflicts(accesses) if accesses else None
        return [n.event for n in self.streams.latest(found)] if found else []

    def _wait_nodes(self, nodes: list[Any], reason: str) -> list[Any]:
        """Under the lock: the completion events of ``nodes``, to wait for without it
        (:meth:`_wait_unlocked`) where the backend can; else (the simulator, which runs its
        device in the waiting thread, under the lock) waits for them here and returns none.
        The wait counts as a host synchronization for ``reason``."""
        if hasattr(self.backend, "wait_quietly"):
            self.stats.sync(reason)
            return [node.event for node in nodes]
        self.streams.host_wait(nodes)
        self.stats.sync(reason)
        return []

    def _unfinished(self, nodes: list[Any]) -> list[Any]:
        """Under the lock: those of ``nodes`` whose work has not completed (those that have
        are retired on the way: a node is finished once retired)."""
        streams = self.streams
        return [node for node in nodes if not node.finished and not streams._retire_if_done(node)]

    def _wait_unlocked(self, events: list[Any]) -> None:
        """Wait for ``events`` without holding the lock, so that other threads (tenants) go on
        launching while this one waits for the device. It changes nothing: the access that
        follows, under the lock, checks and waits again (for nothing, unless another thread
        launched a writer meanwhile) and reports any fault."""
        if events:
            wait = self.backend.wait_quietly
            for event in events:
                wait(event)

    def write_host(self, array: Array, lo: int, hi: int, dense: bool, key: Any,
                   value: Any) -> None:
        """``array[key] = value`` on the host, ``[lo, hi)`` of its allocation (``dense``: every
        byte of it): :meth:`host_access` around the write, without a generator. While the
        device still reads or writes the span, the wait for it is made without the lock
        first, as a read's (:meth:`_wait_unlocked`); a large write of every byte copies
        without the lock (see the module docstring)."""
        alloc = array._alloc
        large = (dense and hi - lo >= UNLOCKED_WRITE_BYTES and lo == 0 and hi == alloc.nbytes
                 and self.memory is not None)
        if large or type(value) is list or type(value) is tuple:
            # (converted first, without the lock: the copy below then calls no user code,
            # which could call back into the runtime and wait for this very write, and a
            # value that cannot be converted ([1, 2, 'x']) is refused before a byte changes,
            # as in CuPy, not after NumPy wrote its first items; converted as an assignment
            # converts, refusing what it refuses, where np.asarray(x, dtype=) would turn a
            # datetime64 into an int)
            if not (isinstance(value, np.ndarray) and value.dtype == array.dtype):
                converted = np.empty(np.shape(value), array.dtype)
                converted[...] = value
                value = converted
        busy = None
        try:
            with self._lock:
                pending = self._conflicts_pending(array, lo, hi, True)
                if not pending:
                    busy = self._write_locked(array, lo, hi, dense, key, value, large)
            if pending:
                self._wait_unlocked(pending)
                with self._lock:
                    busy = self._write_locked(array, lo, hi, dense, key, value, large)
            if busy is None:
                return
            self._copy_unlocked(array, key, value)
            busy.ok = True
        finally:
            if busy is None and self._host_busy:
                # (interrupted after booking its write busy, before it had it back: its own)
                mine = self._host_busy.get(alloc.id)
                if mine is not None and mine.thread is threading.current_thread():
                    busy = mine
            if busy is not None:
                busy.copied.set()       # (whatever happened: nobody waits for it forever)
                if self._host_busy.get(alloc.id) is busy:
                    with self._lock:
                        self.settle_host_write(alloc)

    def _write_locked(self, array: Array, lo: int, hi: int, dense: bool, key: Any, value: Any,
                      large: bool) -> _HostWrite | None:
        """Under the lock: the host write of :meth:`write_host`; or, for a large one while
        other threads run, its begin, booked busy, for the caller to copy without the lock."""
        alloc = array._alloc
        if self._host_busy:
            self.settle_host_write(alloc)
        self.begin_host_access(array, lo, hi, True, dense)
        # (the memory model asked again under the lock: a configure in another thread may have
        # switched to managed memory since, whose launches do not wait for such a copy)
        if not (large and self.memory is not None and self.recording is None
                and threading.active_count() > 1):
            array._host_view()[key] = value
            self.end_host_access(array, lo, hi, True, dense)
            return None
        busy = _HostWrite(array, lo, hi, dense)
        self._host_busy[alloc.id] = busy
        return busy

    def _copy_unlocked(self, array: Array, key: Any, value: Any) -> None:
        """The copy of a large host write, made without the lock (its own method: a test
        holds it to see what other threads do meanwhile)."""
        array._host_view()[key] = value

    def settle_host_write(self, alloc: Any) -> None:
        """Under the lock: if a large host write of ``alloc`` is copying without the lock,
        wait for its copy (which needs no lock) and book its end (:meth:`end_host_access`,
        once the copy succeeded). Called before anything uses the allocation's host memory:
        a host access of it, a copy to or from it."""
        busy = self._host_busy.pop(alloc.id, None)
        if busy is None:
            return
        if busy.thread is threading.current_thread():
            # (its own thread, so not copying: the write was interrupted before its copy, or
            # during it; unbooked, as a write the host never made)
            busy.copied.set()
        busy.copied.wait()
        if busy.ok:
            self.end_host_access(busy.array, busy.lo, busy.hi, True, busy.dense)

    def settle_host_writes(self) -> None:
        """Under the lock: :meth:`settle_host_write` for every allocation a large host write
        is copying into (the recorder's decisions read many allocations' locations)."""
        for busy in list(self._host_busy.values()):
            self.settle_host_write(busy.array._alloc)

    def _access(self, array: Array, lo: int, hi: int, write: bool, label: str) -> Access:
        """The host's access to ``[lo, hi)`` of the array's allocation, as the tracker and the
        backend's hook see it."""
        alloc = array._alloc
        return access(alloc.id, alloc, lo, hi, write, label)

    def begin_host_access(self, array: Array, lo: int, hi: int, write: bool,
                          dense: bool = False, refused: bool = False) -> None:
        """The first half of :meth:`host_access` (under the lock): waits, fetches, checks.
        ``refused``: the caller already told the recording (``read_element``)."""
        if self._releases:
            self._drain_releases()
        alloc = array._alloc
        if self.recording is not None and not refused:
            self.recording.refuse("host write of " if write else "host read of ", array)
        # after the segment that ends here was launched: an epoch that has not moved since a
        # graph's launch must mean no host access came after it (``FrozenGraph.settled``)
        self.host_epoch += 1
        label = array.describe()
        if alloc.freed:
            raise FreedArrayError(f"array {label} has been freed")
        acc = self._access(array, lo, hi, write, label)
        key = acc.key
        memory = self.memory
        fetch = memory is not None and memory.before_host(array, lo, hi, write, dense)
        # (a read of a current mirror waits for nothing: ``ExplicitMemory.host_waits``)
        found = ({} if memory is not None and not (write or fetch)
                 else self.deps.conflicts([acc]))
        # A small allocation is fetched whole when that waits for no writer the span does
        # not: the same round trip, and the host's next reads of it need none.
        # (not another library's memory: its mirror is never booked current)
        whole = (fetch and not write and hi - lo < alloc.nbytes <= WHOLE_FETCH_BYTES
                 and not alloc.fixed and not self.deps.writes_beyond(key, found))
        if whole:
            lo, hi = 0, alloc.nbytes
        if memory is not None:
            found = memory.host_waits(write, fetch, found)
            pending = alloc.copy_back
            if pending is not None:
                # a replayed graph's copy back (``ExplicitMemory.read_back``): it made the
                # mirror current, once it completes (a write conflicts with it anyway: it is
                # a reader of the device copy; a fetch means a device writer came after it)
                alloc.copy_back = None
                if not (write or pending.finished):
                    if not fetch:
                        found = {pending: [(RAW, label)]}
                    else:
                        # (the fetch writes the mirror bytes the copy back writes too: after it)
                        found = dict(found)
                        found[pending] = [(WAW, label)]
            if fetch and not write and lo == 0 and hi == alloc.nbytes and self.graph_read_back:
                memory.learn_read_back(alloc, label)
            if fetch and self._instruments:
                # traced: the fetch is a copy node (ordered after the span's writers on
                # the device), so the trace shows the transfer
                # (from the device holding the bytes, as an untraced fetch reads them)
                fetched = memory.copy(alloc, lo, hi, False, label, holder(alloc.location))
                found = dict(found) if write else {}
                # (the access reads, or partly writes, the mirror bytes the copy wrote)
                found[fetched] = [(WAW if write else RAW, label)]
                fetch = False
        after: list[Node] = []
        if found:
            if fetch and not write:
                # the fetch waits for the span's writers on the device: one round trip
                after = self.streams.latest(found)
            else:
                self.streams.host_wait(found)
            self.stats.sync("host-write" if write else "host-read")
        if not self.backend.host_coherent_while_busy and self.streams.inflight:
            self.synchronize()
        if fetch:
            memory.fetch(array, lo, hi, after, label)
        # (before the mirror is marked current: a backend that refuses the read, as the
        # simulator refuses what a faulted kernel was to write, is asked again next time)
        self.backend.host_access([acc], ("host write of " if write else "host read of ")
                                 + label)
        if whole:
            alloc.location |= HOST  # (fetched, or waited for its copy node: the mirror is current)
        self.stats.host_accesses += 1
        if self._instruments:
            node = Node("host-write" if write else "host-read", label, user_site(), [acc])
            node.finished = True
            node.edges = [(p, r, lbl) for p, rs in found.items() for r, lbl in rs]
            self._notify_node(node)

    def end_host_access(self, array: Array, lo: int, hi: int, write: bool,
                        dense: bool = False) -> None:
        """The second half of :meth:`host_access` (under the lock, after the host's access):
        books where the allocation's current copy is."""
        memory = self.memory
        alloc = array._alloc
        if write and dense:
            written = getattr(self.backend, "host_written", None)
            if written is not None:     # (the simulator's marks of what faulted work was
                written(alloc.buffer, lo, hi)   # to write: these bytes are the program's)
        if memory is not None:
            memory.after_host(array, lo, hi, write, dense)
        elif write:
            alloc.location = HOST
        elif hi - lo >= _MIGRATING_READ:
            # A large read migrates the pages to the host: prefetch them back before the
            # next kernel. A small one moves a page or two, which fault back cheaply.
            alloc.location |= HOST
