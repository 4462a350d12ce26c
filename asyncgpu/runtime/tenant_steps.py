"""The tenants of a runtime and their steps: a mixin of ``Runtime``.

The model
---------
A tenant (``asyncgpu.tenant``, ``asyncgpu.core.tenants.Tenant``) is made on its first use with
the settings it keeps; each entry of its scope is a *step*: ``begin_step`` notes every
device's clock and the count of issues, ``end_step`` records a timing event behind the work
the step issued on each stream it moved, and the step is measured once they complete
(``tenant_statistics``, and every :data:`SETTLE_EVERY` steps). A tenant's steps that come
less than 10 ms apart are timed a sample of (``Tenant.sample``; ``step_timing="every"``, or a
regulation check under way, times each): a step not timed records neither. An exclusive tenant's steps
also open and close the runtime's gate (``asyncgpu.runtime.exclusive``), which is consulted
while any tenant is exclusive (``exclusive_changed``); a step the regulator measures alone
begins once no work is in flight, and the lead's first step in a stage of the regulator's
check once the work in flight when the stage began has completed. While a regulation plan runs
tenants on one host core (``one_core``, ``asyncgpu.runtime.host_core``), a step of theirs first
moves its thread there.

Invariants: every method runs under the runtime's lock (but a step that waits so, which waits
for the device without it before it begins); a step closes the gate it opened, whatever
changed meanwhile, even when recording its end fails or it never began.

Example::

    index = rt.tenant_index("detector", "high")
    rt.begin_step(index, out := [])
    begun = out[0]
    ...                                     # the step's launches
    rt.end_step(index, begun)
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..core.tenants import Tenant, stream_priority
from .exclusive import ExclusiveSteps

log = logging.getLogger("asyncgpu")

#: A tenant's steps are measured (and let go of their timing events) every this many steps,
#: not only when statistics are asked for: a service may never ask.
SETTLE_EVERY = 64


class TenantSteps:
    """The tenant methods of ``Runtime`` (whose state, declared by ``Issuing``, they use)."""

    __slots__ = ()

    def tenant_index(self, name: str, priority: str, streams: int | None = None,
                     splits: dict[str, int] | None = None,
                     after: dict[str, tuple[str, str]] | None = None,
                     exclusive: bool = False, sms: int | None = None) -> int:
        """The number of tenant ``name``, made with ``priority``, at most ``streams`` streams
        per device, ``splits``, pointers ``after``, ``exclusive`` and a partition of ``sms``
        SMs on first use; ValueError if it exists with other settings, or if the device has
        not ``sms`` SMs left outside other tenants' partitions (nothing is made then)."""
        with self._lock:
            for tenant in self.tenants:
                if tenant.name == name:
                    if tenant.index and tenant.settings() != (priority, streams, splits, after,
                                                              exclusive, sms):
                        raise ValueError(
                            f"asyncgpu.tenant({name!r}, priority={priority!r}, "
                            f"streams={streams!r}, split={splits!r}, after={after!r}, "
                            f"exclusive={exclusive!r}, sms={sms!r}): this tenant has priority "
                            f"{tenant.priority!r} and streams={tenant.streams!r}, "
                            f"split={tenant.given[0]!r}, after={tenant.given[1]!r}, "
                            f"exclusive={tenant.given[2]!r}, sms={tenant.sms!r} (a tenant "
                            "keeps the settings it was first given); use another name for "
                            "other settings")
                    return tenant.index
            if sms is not None:
                reserve = getattr(self.backend, "reserve_sms", None)
                if reserve is None:
                    raise ValueError(f"asyncgpu.tenant({name!r}, sms={sms}): the "
                                     f"{self.backend.name} backend has no SM partitions")
                granted = reserve(name, sms)
                log.info("asyncgpu: tenant %r runs on %d SMs of its own on each device", name,
                         granted)
            ranges = getattr(self.backend, "stream_priorities", None)
            least, greatest = ranges() if ranges is not None else (0, 0)
            level = stream_priority(priority, least, greatest)
            index = self.streams.add_tenant(level, streams, name if sms is not None else None)
            self.tenants.append(Tenant(index, name, priority, level, streams, splits, after,
                                       exclusive, sms))
            self._tenanted = True
            if exclusive:
                self.exclusive_changed()
            if self.regulator is not None:      # (a plan given before its tenants were made)
                self.regulator.joined(index)
            return index

    def partition_tenant(self, index: int, sms: int | None, name: str | None = None) -> None:
        """Under the runtime's lock: tenant ``index`` (one without ``sms`` of its own) runs on
        partition ``name`` (the backend's ``reserve_sms``; None: one of its own, named for
        the tenant) of ``sms`` SMs from now on (a regulation plan's; ``sms`` None: on any SM
        again). Several tenants moved into one name share its partition, made by the first
        of them with its ``sms``. The tenant's work in flight is waited for first
        (``StreamManager.set_partition``), and a partition its last tenant leaves is given
        back (``release_sms``: its SMs free for other tenants); ValueError if the device has
        not ``sms`` SMs outside other partitions (the tenant then runs on any SM)."""
        tenant = self.tenants[index]
        name = None if sms is None else name or tenant.name
        if (sms, name) == (tenant.partition, tenant.partition_name):
            return
        backend = self.backend
        left = tenant.partition_name
        if left is not None:
            if self.streams.set_partition(index, None):
                self.stats.sync("partition")    # (the host waited: counted, and traced so)
            tenant.partition = tenant.partition_name = None
            if all(t.partition_name != left for t in self.tenants):
                backend.release_sms(left)
        if sms is not None:
            backend.reserve_sms(name, sms)
            if self.streams.set_partition(index, name):
                self.stats.sync("partition")
            tenant.partition, tenant.partition_name = sms, name

    def exclusive_changed(self) -> None:
        """Under the runtime's lock, after a tenant became exclusive or stopped being so (its
        own setting, or a regulation plan's): the gate (one per runtime, made for the first
        exclusive tenant) is consulted while there is an exclusive tenant and set aside once
        none is left, so the others keep one launch in flight only meanwhile. A step open
        while it is set aside still ends on it, and is still waited for if it is consulted
        again before that."""
        if any(t.exclusive for t in self.tenants):
            if self.exclusive_steps is None:
                self.exclusive_steps = ExclusiveSteps(self)
            self.gate = self.exclusive_steps
        else:
            self.gate = None

    def begin_step(self, index: int, out: list[Any]) -> None:
        """A step of tenant ``index`` begins: appends to ``out`` the clock of every device, and
        the count of issues so far (what :meth:`end_step` needs; appended as the last thing,
        so that a caller interrupted right after the call still finds it). The clocks are not
        waited for (a round trip to the device per step): a step is measured once they and
        its ends completed. A step of a tenant that a regulation plan runs on one host core
        (``asyncgpu.runtime.host_core``) first moves its thread there, if it is not yet. A step
        the regulator measures alone (``Regulator.begin``; its tenant is exclusive then, so the
        others' launches wait from here on) first waits on the host until no work is in
        flight, and its clocks start after; the lead's first step in a stage of the regulator's
        check waits so for the work in flight when the stage began. An exception (an
        interrupt) before it appended leaves no exclusive step of this thread open."""
        core = self.one_core
        if core is not None and index in core.members:
            core.enter()        # (before the lock: what runs under it already runs there)
        gate = None
        held = 0
        regulator = None
        try:
            with self._lock:
                regulator = self.regulator
                wait = regulator is not None and regulator.begin(index)
                # (the gate the step opened, closed by its end whatever a plan changes)
                if self.tenants[index].exclusive and self.gate is not None:
                    gate = self.gate
                    held = gate.holding()
                    gate.begin(index)
                # (every step while a regulation check measures them, or if asked for)
                timed = (self.options.step_timing == "every"
                         or (regulator is not None and regulator.checking())
                         or self.tenants[index].sample(time.perf_counter()))
                if not wait:
                    out.append((self._step_clocks(index) if timed else None,
                                self.streams.issues, gate, self.backend))
                    return
            while True:
                with self._lock:
                    running = self._running() if wait is True else self._unfinished(wait)
                    if not running:
                        out.append((self._step_clocks(index), self.streams.issues, gate,
                                    self.backend))
                        return
                    events = self._wait_nodes(running, "tenant-step")
                # (without the lock, as a host read waits; the others' launches now wait at
                # the gate, but an exclusive tenant's own may come meanwhile: look again)
                self._wait_unlocked(events)
        except BaseException:
            if not out:
                with self._lock:
                    if gate is not None and gate.holding() > held:
                        gate.end(index, [])     # (a step that never began holds no one)
                    if regulator is not None and regulator is self.regulator:
                        regulator.abandon(index)    # (nor is it one the regulator awaits)
            raise

    def _step_clocks(self, index: int) -> dict[int, Any]:
        """Under the lock: a step's start, a clock event per device (tenant ``index``'s)."""
        backend = self.backend
        spare = self.tenants[index].spare_event
        return {d: backend.clock_base(d, False, spare(d)) for d in range(len(self.devices))}

    def _running(self) -> list[Any]:
        """Under the lock: the last node of each stream whose work has not completed (what
        has is retired on the way)."""
        return self._unfinished([s.inflight[-1] for s in self.streams.streams if s.inflight])

    def end_step(self, index: int, begun: Any, failed: bool = False,
                 thread: int | None = None) -> None:
        """The step of tenant ``index`` begun with ``begun`` ends (``failed``: by an exception):
        a timing event behind the work it issued on each stream it moved; measured once they
        complete (``tenant_statistics``, and every ``SETTLE_EVERY`` steps here). ``thread``:
        the identifier of the thread that began it, where another ends it (None: this one). A
        step that a configure rebuilt the backend in is counted but not measured: its start is
        on the old backend's clocks, its end would be on the new one's."""
        starts, mark, gate, began_on = begun
        with self._lock:
            backend = self.backend
            ends = []
            tenant = self.tenants[index]
            same = began_on is backend
            measured = same and starts is not None
            # (after a rebuild the streams are new, and all their work is the step's)
            moved = self.streams.moved_since(index, mark if same else 0)
            try:
                for s in moved if measured else ():
                    event = tenant.spare_event(s.device)
                    if event is None:
                        event = backend.timing_event(s.device)
                    backend.record(event, s.handle)
                    ends.append((s.device, event))
            finally:
                if gate is not None:
                    # (whatever failed: a step left open would hold the others for good)
                    gate.end(index, [s.inflight[-1] for s in moved if s.inflight], thread)
            tenant.steps += 1
            if tenant.steps == 1 and (tenant.splits or tenant.after):
                _say_undeclared(tenant)
            if measured:
                tenant.pending.append((starts, ends))
            # (not while a capture is open: querying an event it recorded would break it)
            if (measured and len(tenant.pending) % SETTLE_EVERY == 0
                    and not getattr(getattr(backend, "captures", None), "engaged", False)):
                tenant.settle(backend.elapsed_if_done)
            if self.regulator is not None:
                self.regulator.end(index, failed, thread)

    def tenant_statistics(self) -> dict[str, Any]:
        """Every tenant's :class:`~asyncgpu.core.tenants.TenantStatistics` by name, its
        completed steps measured (``asyncgpu.tenants``)."""
        with self._lock:
            backend = self.backend
            elapsed = backend.elapsed_if_done
            for tenant in self.tenants:
                tenant.settle(elapsed)
            return {t.name: t.statistics() for t in self.tenants}


def _say_undeclared(tenant: Any) -> None:
    """After a tenant's first step: a warning naming each kernel its ``split`` or ``after``
    names that no kernel or recorded function declared so far has (a misspelt name would
    otherwise leave its setting without effect, unseen)."""
    for name in tenant.undeclared():
        log.warning("asyncgpu.tenant(%r): split= or after= names %r, and no kernel or recorded "
                    "function of that name was declared by the end of the tenant's first step; "
                    "a kernel is named by its function's name (asyncgpu.kernel) or the name "
                    "given to asyncgpu.cuda_kernel, a recorded function by its recording's",
                    tenant.name, name)
