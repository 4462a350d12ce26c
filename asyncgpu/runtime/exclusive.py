"""Exclusive tenants: a latency-critical tenant's steps with the device to themselves.

The model
---------
CUDA's stream priorities choose which *waiting* block of which kernel starts next; blocks
already resident on a multiprocessor share it, whatever their priority, and a kernel launched
beside another tenant's runs slower for as long as they share (1.5x to 3x for the suite's
kernels). A tenant made with ``asyncgpu.tenant(name, exclusive=True)`` is kept apart from the
others on the host, where the runtime decides what is enqueued:

* while one of its steps is open, and until the work the step issued has completed, every
  other thread's launches (kernels, library calls, recorded functions) wait on the host
  before anything is enqueued;
* while an exclusive tenant (its own setting, or a regulation plan's:
  ``Runtime.exclusive_changed`` consults the gate or sets it aside) is *active*, each other
  tenant (the default one included) has at most one launch in flight: its next launch waits
  on the host for its previous one. So what an exclusive step finds on the device when it
  begins is at most one launch per other tenant, and what it waits for is that launch's end,
  not a queue of them. An exclusive tenant is active from its first step until it has begun
  none for :data:`IDLE_PERIODS` of its periods (the median time between its latest steps'
  beginnings, the length of its step until it has run two; at least :data:`IDLE_FLOOR_S`
  seconds), so one that stopped running steps holds no one.

* a launch held by a step that stays open :data:`HOLD_LENGTHS` times as long as the exclusive
  tenants' latest steps were (at least :data:`HOLD_FLOOR_S`), with no node issued or retired
  meanwhile, goes beside it, with a warning, once: a step that waits on the host for another
  tenant's thread (a request that thread queues after its own launch) would otherwise hold that
  thread's launch, and itself, for good; one that issues or finishes work is slow, and holds the
  others as long as it is open. Until that step closes, the others' launches go at once, and its
  length (the wait included) does not count towards the next limit. A regulation plan makes tenants
  exclusive that were not made so (its check measures each tenant alone so), so a program that works
  unregulated keeps working regulated. A step of a thread that ended without leaving its block is
  closed, with a warning, at the next launch it holds;

* where a regulation plan gives the launches' times alone (its profile's, by tenant and
  kernel or recorded function: :attr:`ExclusiveSteps.launch_times`), an exclusive tenant
  whose steps come with gaps between them (a service's requests) is *looked ahead*: another
  tenant's launch that would fit in such a gap, but not in what is left of the current one
  before the exclusive tenant's next step is due (its latest beginning plus its period),
  waits on the host until that step has begun and closed. So the next step finds no launch
  of the others running that could have ended before it (a launch started beside another
  tenant's resident blocks runs slower for as long as they share; Orion schedules a
  best-effort kernel on the same test). A launch longer than the whole gap goes as before:
  holding it would hold it for good; so does one by the thread that begins the exclusive
  tenant's steps, which would wait for a step that cannot begin while it waits.

The other tenants keep the device busy between the exclusive tenant's steps (a service that
answers requests as they come leaves gaps); their throughput is what is left. Work of the
exclusive tenant itself, and of a thread while it has an exclusive step open, is never held.
On several devices, a thread pinned (``asyncgpu.device``) to a device the exclusive tenants'
steps have not used is not held either: neither the open step so far (its work is booked on
its device as it is issued) nor an earlier one; whether it is held is decided again under the
runtime's lock, where the open step issues. Other launches, whose device is chosen later,
under the runtime's lock, are held.

Invariants: a launch takes the runtime's lock through the gate (``enter``), which decides
under that lock whether it may go, so no launch slips in beside a step that opened while it
waited; a thread never waits here while it holds the runtime's lock (a launch made under the
lock is not held); an exclusive step's ``begin`` and ``end`` run under the runtime's lock,
which is always taken before this module's own.

Example::

    with ag.tenant("detector", priority="high", exclusive=True):
        detect[grid, block](frames, boxes)      # others' launches wait meanwhile
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from .finalizers import GuardedLock

log = logging.getLogger("asyncgpu")

#: An exclusive tenant that has begun no step for this many of its periods is idle: the other
#: tenants then go on without being held to one launch in flight (a service whose requests
#: come every period keeps them held between its steps; one that stopped does not).
IDLE_PERIODS = 4
#: ... and for at least this many seconds (a step that issues its launches and returns takes
#: microseconds on the host).
IDLE_FLOOR_S = 0.02
#: The beginnings of its latest steps an exclusive tenant's period is the median gap of.
RECENT_STEPS = 9
#: A launch held by an exclusive step open this many times as long as the exclusive tenants'
#: latest steps were, and at least :data:`HOLD_FLOOR_S` seconds, goes all the same: a step that
#: waits on the host for another tenant's thread (a request that thread queues after its own
#: launch) would otherwise wait for good for a launch it holds.
HOLD_LENGTHS = 20
HOLD_FLOOR_S = 0.5


class ExclusiveSteps:
    """The gate of one runtime's exclusive tenants (see the module docstring)."""

    __slots__ = ("_begun", "_cond", "_holder_threads", "_holders", "_length", "_lock", "_open",
                 "_overdue", "_overran", "_period", "_tails", "_thread", "devices",
                 "launch_times", "rt")

    def __init__(self, rt: Any) -> None:
        self.rt = rt
        # (taken with ``with self._lock``, not ``with self._cond``: a Ctrl-C that lands as the
        # acquire returns inside Condition.__enter__, Python code, would leave it held and every
        # later launch held behind it, in every thread; GuardedLock gives such a hold back)
        self._lock = GuardedLock()
        self._cond = threading.Condition(self._lock)
        self._open = 0
        #: thread id -> its exclusive steps open (its own launches are never held), and the
        #: thread (whether it still runs: an id is reused once its thread has ended)
        self._holders: dict[int, int] = {}
        self._holder_threads: dict[int, threading.Thread] = {}
        #: per exclusive tenant, its latest closed step's last node on each stream it used:
        #: the others wait for them as for the open steps
        self._tails: dict[int, list[Any]] = {}
        #: the device slots the exclusive tenants' steps, the open ones included, issued work
        #: to (added by ``Issuing._issue`` as each of their nodes is issued)
        self.devices: set[int] = set()
        #: per exclusive tenant, when its latest steps began (``time.perf_counter``), and its
        #: period: the median gap between them, or its only step's length (whether it is
        #: still active, :meth:`_idle`, asked at other tenants' launches: kept up to date
        #: here as its steps begin and end, not worked out there)
        self._begun: dict[int, deque[float]] = {}
        self._period: dict[int, float] = {}
        #: per exclusive tenant, how long its latest closed step was open (host clock), and
        #: the thread that began it
        self._length: dict[int, float] = {}
        self._thread: dict[int, int] = {}
        #: (tenant number, kernel or recorded function name) -> its time alone in seconds, from
        #: the regulation plan in force (``Regulator.apply``); empty: nothing is looked ahead
        self.launch_times: dict[tuple[int, str], float] = {}
        #: whether a held launch went past an open step (:data:`HOLD_LENGTHS`): logged once
        self._overdue = False
        #: the exclusive tenants whose open step a held launch went past: its length, which
        #: includes that wait, is not a step's length (the next limit would grow with it), and
        #: until the open steps close the others' launches go at once
        self._overran: set[int] = set()

    def begin(self, index: int) -> None:
        """Under the runtime's lock: an exclusive step of tenant ``index`` opens."""
        ident = threading.get_ident()
        begun = self._begun.setdefault(index, deque(maxlen=RECENT_STEPS))
        begun.append(time.perf_counter())
        if len(begun) > 1:
            gaps = sorted(b - a for a, b in zip(begun, list(begun)[1:]))
            self._period[index] = gaps[len(gaps) // 2]
        self._thread[index] = ident
        with self._lock:
            here = threading.current_thread()
            if self._holder_threads.get(ident, here) is not here:
                self._close_abandoned()     # (an ended thread's id, given to this one)
            # (one statement: an interrupt leaves the step opened for this thread, or not)
            self._open, self._holders[ident] = self._open + 1, self._holders.get(ident, 0) + 1
            self._holder_threads[ident] = here
            self._cond.notify_all()     # (launches looked ahead wait for this step to begin)

    def holding(self) -> int:
        """How many exclusive steps this thread has open."""
        return self._holders.get(threading.get_ident(), 0)

    def end(self, index: int, tails: list[Any], thread: int | None = None) -> None:
        """Under the runtime's lock: the step closes; ``tails``: its last node on each stream
        it moved, which the others still wait for; ``thread``: the identifier of the thread
        that began it, where another closes it (None: this one)."""
        ident = threading.get_ident() if thread is None else thread
        try:
            self._lock.acquire()
        except BaseException:
            # (a Ctrl-C as the lock was taken, which GuardedLock gave back: the step closes all
            # the same, or it would hold the others' launches while its thread lives)
            self.end(index, tails, ident)
            raise
        try:
            held = self._holders.get(ident, 0)
            if held:        # (none: closed already, its thread having ended: _close_abandoned)
                self._open -= 1
                if held > 1:
                    self._holders[ident] = held - 1
                else:
                    del self._holders[ident]
                    self._holder_threads.pop(ident, None)
            self._tails[index] = tails
            begun = self._begun[index]
            length = time.perf_counter() - begun[-1]
            if index in self._overran:      # (its length is the wait's, not a step's)
                self._overran.discard(index)
            else:
                self._length[index] = length
                if len(begun) == 1:
                    self._period[index] = length
            if not self._open:
                self._overran.clear()
                self._cond.notify_all()
        finally:
            self._lock.release()

    def enter(self, name: str | None = None) -> None:
        """Take the runtime's lock for a launch of this thread (a kernel, a library call, a
        recorded function: ``name``, the kernel's or the function's, where it may be looked
        ahead) and return holding it; first wait, without it, while an exclusive step is open
        or its work is unfinished, then for this thread's tenant's previous launch, and, looked
        ahead, for an exclusive step due before the launch would end. What lets the launch go
        is decided under the lock, where steps open: a step that opens while the launch waits
        for its previous one holds it too."""
        rt = self.rt
        ident = threading.get_ident()
        index = getattr(rt._pins, "tenant", 0)
        # (nor while this thread holds the runtime's lock, which the step's end needs)
        owned = rt._lock._is_owned()
        if owned or self._free(ident, index):
            rt._acquire()
            # (a pinned launch is decided again under the lock, where the open step issues:
            # it may have reached that device meanwhile)
            if owned or getattr(rt._pins, "slot", None) is None or self._free(ident, index):
                return
            rt._release()
        held = False
        while True:
            overdue = 0.0
            progress = None
            with self._lock:
                if self._open and ident not in self._holders:
                    self._close_abandoned()
                if self._open and ident not in self._holders:
                    held = True
                    limit = max(HOLD_FLOOR_S, HOLD_LENGTHS * max(self._length.values(),
                                                                 default=0.0))
                    if self._overran:
                        overdue = limit     # (an open step already waited for the others)
                    else:
                        progress = self._progress()
                        if not self._cond.wait_for(
                                lambda: not self._open or ident in self._holders, limit):
                            overdue = limit
            rt._acquire()       # (not under this module's lock: the runtime's comes first)
            if overdue and progress is not None and self._progress() != progress:
                # (the open step issued or finished work meanwhile: it is slow, not waiting
                # for this thread; look again, with the limit from now)
                rt._release()
                continue
            if overdue:
                self._went_past(index, overdue)
                return          # (holding the lock: the launch goes)
            try:
                events = self._turn(ident, index, held, name)
            except BaseException:       # (an event's query may report a fault)
                rt._release()
                raise
            if events is None:
                return                  # (holding the lock: the launch goes)
            rt._release()
            held = True
            if isinstance(events, float):
                # (looked ahead: until the exclusive step due begins, then, at the loop's
                # top, until it closes; or until it is overdue, to look again)
                with self._lock:
                    self._cond.wait_for(lambda: self._open, events)
                continue
            # (without the runtime's lock, as a host read waits: the others go on issuing;
            # the loop then checks again under it)
            rt._wait_unlocked(events)

    def _progress(self) -> tuple[int, int]:
        """The runtime's nodes issued and retired so far. While an exclusive step is open only
        the exclusive tenants' threads issue, and what completes is work they issued or work
        in flight before: a step whose count moves in :data:`HOLD_FLOOR_S` is slow (on the
        simulator, whose kernels run at its host waits, a step takes seconds), not waiting for
        a held launch. Read without the runtime's lock: two counters, each written whole."""
        stats = self.rt.stats
        return stats.nodes, stats.nodes_retired

    def _went_past(self, index: int, limit: float) -> None:
        """Under the runtime's lock: tenant ``index``'s launch waited ``limit`` seconds for
        an exclusive step that stayed open, and goes (said once)."""
        self.rt.tenants[index].held += 1
        with self._lock:
            self._overran.update(t for t, ident in self._thread.items() if ident in self._holders)
        if not self._overdue:
            self._overdue = True
            open_steps = [self.rt.tenants[t].name for t, ident in self._thread.items()
                          if ident in self._holders]
            log.warning(
                "asyncgpu: a launch of tenant %r waited %.2f s for the exclusive step of %s, "
                "open all that time, and goes beside it; does that step wait on the host for "
                "another tenant's thread (a queue, a lock, a result)? An exclusive step holds "
                "the other tenants' launches while it is open, so it must not wait for them "
                "(said once)", self.rt.tenants[index].name, limit,
                ", ".join(repr(n) for n in open_steps) or "a tenant")

    def _close_abandoned(self) -> None:
        """(Under this module's lock.) Close the exclusive steps of threads that ended without
        leaving them (a thread that died inside its tenant's block, a generator holding one
        left unclosed): they would hold every other launch for good."""
        for ident, thread in list(self._holder_threads.items()):
            if thread.is_alive():
                continue
            del self._holder_threads[ident]
            steps = self._holders.pop(ident, 0)
            self._open -= steps
            names = [self.rt.tenants[t].name for t, i in self._thread.items() if i == ident]
            log.warning("asyncgpu: a thread ended inside the exclusive block of tenant %s, "
                        "which it never left; its step is closed now (a tenant's block must "
                        "be left by the thread that entered it)",
                        ", ".join(repr(n) for n in names) or "?")
        if not self._open:
            self._overran.clear()
            self._cond.notify_all()

    def _turn(self, ident: int, index: int, held: bool,
              name: str | None = None) -> list[Any] | float | None:
        """Under the runtime's lock, for :meth:`enter`: None when the launch may go now (a
        tenant whose launch waited is counted ``held``), else the events to wait for without
        the lock before it looks again (none when a step opened meanwhile, or when the
        backend waited for them here), or, for a launch looked ahead (:meth:`_due`), how many
        seconds at most to wait for the exclusive step due to begin."""
        rt = self.rt
        tenant = rt.tenants[index]
        # (free: a plan changed meanwhile, or the exclusive tenants went idle)
        if not self._free(ident, index):
            if self._open:
                return []                   # (a step opened meanwhile: wait for its end)
            nodes = [node for tails in self._tails.values() for node in tails]
            if tenant.latest is not None:
                nodes.append(tenant.latest)
            pending = rt._unfinished(nodes)
            if pending:
                return rt._wait_nodes(pending, "exclusive")
            if name is not None and self.launch_times:
                wait = self._due(ident, index, name)
                if wait is not None:
                    return wait
        if held:
            tenant.held += 1
        return None

    def _due(self, ident: int, index: int, name: str) -> float | None:
        """Looking ahead (see the module docstring): None when tenant ``index``'s launch of
        ``name`` by thread ``ident`` may go, else how long to wait at most for the exclusive
        step due before it would end (one period, to look again if that step is late)."""
        took = self.launch_times.get((index, name))
        if took is None:
            return None
        now = time.perf_counter()
        tenants = self.rt.tenants
        for exclusive, begun in self._begun.items():
            period = self._period.get(exclusive)
            length = self._length.get(exclusive)
            if (not tenants[exclusive].exclusive or period is None or length is None
                    or self._thread.get(exclusive) == ident):
                # (nor for a tenant whose steps this very thread begins: it would wait for
                # a step that cannot begin while it waits)
                continue
            # (a launch longer than the gap between two of its steps never fits: it goes as
            # before, one in flight, rather than wait for good)
            if took <= period - length and now + took > begun[-1] + period:
                return period
        return None

    def _free(self, ident: int, index: int) -> bool:
        """Whether a launch of thread ``ident``, tenant ``index``, is never held: the tenant is
        exclusive, the thread has an exclusive step open, or it is pinned to a device no
        exclusive step has used (the open ones' launches so far included)."""
        rt = self.rt
        if rt.tenants[index].exclusive or ident in self._holders:
            return True
        slot = getattr(rt._pins, "slot", None)
        if slot is not None and bool(self.devices) and slot not in self.devices:
            return True
        return self._idle()

    def _idle(self) -> bool:
        """Whether no exclusive tenant is active (see the module docstring): none has a step
        open, and each has begun none for :data:`IDLE_PERIODS` of its periods."""
        if self._open:
            return False
        now = time.perf_counter()
        tenants = self.rt.tenants
        period = self._period
        for index, begun in self._begun.items():
            # (a step begun and not ended is open: the test above)
            if tenants[index].exclusive and now - begun[-1] < max(
                    IDLE_PERIODS * period.get(index, 0.0), IDLE_FLOOR_S):
                return False
        return True
