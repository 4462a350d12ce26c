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
* while the runtime has an exclusive tenant (its own setting, or a regulation plan's:
  ``Runtime.exclusive_changed`` consults the gate or sets it aside), each other tenant (the
  default one included) has at most one launch in flight: its next launch waits on the host for its
  previous one. So what an exclusive step finds on the device when it begins is at most one
  launch per other tenant, and what it waits for is that launch's end, not a queue of them.

The other tenants keep the device busy between the exclusive tenant's steps (a service that
answers requests as they come leaves gaps); their throughput is what is left. Work of the
exclusive tenant itself, and of a thread while it has an exclusive step open, is never held.
On several devices, a thread pinned (``asyncgpu.device``) to a device the exclusive tenants'
steps have not used is not held either; other launches, whose device is chosen later, under
the runtime's lock, are.

Invariants: a thread never waits here while it holds the runtime's lock (the gate is taken
before it, and a launch made under the lock is not held); an exclusive step's ``begin`` and
``end`` run under the runtime's lock, which is always taken before this module's own.

Example::

    with ag.tenant("detector", priority="high", exclusive=True):
        detect[grid, block](frames, boxes)      # others' launches wait meanwhile
"""

from __future__ import annotations

import threading
from typing import Any


class ExclusiveSteps:
    """The gate of one runtime's exclusive tenants (see the module docstring)."""

    __slots__ = ("_cond", "_holders", "_open", "_tails", "devices", "rt")

    def __init__(self, rt: Any) -> None:
        self.rt = rt
        self._cond = threading.Condition(threading.Lock())
        self._open = 0
        #: thread id -> its exclusive steps open (its own launches are never held)
        self._holders: dict[int, int] = {}
        #: per exclusive tenant, its latest closed step's last node on each stream it used:
        #: the others wait for them as for the open steps
        self._tails: dict[int, list[Any]] = {}
        #: the device slots the exclusive tenants' closed steps issued work to
        self.devices: set[int] = set()

    def begin(self, index: int) -> None:
        """Under the runtime's lock: an exclusive step of tenant ``index`` opens."""
        ident = threading.get_ident()
        with self._cond:
            self._open += 1
            self._holders[ident] = self._holders.get(ident, 0) + 1

    def end(self, index: int, tails: list[Any]) -> None:
        """Under the runtime's lock: the step closes; ``tails``: its last node on each stream
        it moved, which the others still wait for."""
        ident = threading.get_ident()
        with self._cond:
            self._open -= 1
            left = self._holders[ident] - 1
            if left:
                self._holders[ident] = left
            else:
                del self._holders[ident]
            self._tails[index] = tails
            self.devices.update(node.device for node in tails)
            if not self._open:
                self._cond.notify_all()

    def wait_turn(self) -> None:
        """Before a launch takes the runtime's lock: wait while an exclusive step is open or
        its work is unfinished, then for this thread's tenant's previous launch."""
        ident = threading.get_ident()
        rt = self.rt
        index = getattr(rt._pins, "tenant", 0)
        # (nor while this thread holds the runtime's lock, which the step's end needs)
        if rt.tenants[index].exclusive or ident in self._holders or rt._lock._is_owned():
            return
        slot = getattr(rt._pins, "slot", None)
        if slot is not None and self.devices and slot not in self.devices:
            return      # (pinned where no exclusive step runs: nothing to keep apart from)
        waited = False
        with self._cond:
            while self._open and ident not in self._holders:
                waited = True
                self._cond.wait()
            tails = [node for nodes in self._tails.values() for node in nodes]
        with rt._lock:      # (a node's event is recycled once it retires: read them under it)
            tenant = rt.tenants[index]
            last = tenant.latest
            if last is not None:
                tails.append(last)
            pending = [node for node in tails if not node.finished]
            if waited or pending:
                tenant.held += 1
            events = rt._wait_nodes(pending)
        # (without the runtime's lock, as a host read waits: the others go on issuing)
        rt._wait_unlocked(events)
