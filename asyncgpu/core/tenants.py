"""Tenants: named sources of work sharing the device(s), each with its streams and statistics.

The model
---------
A runtime's work comes from *tenants*. Tenant 0 is the default one, the source of everything
issued outside ``asyncgpu.tenant``; each other tenant has a name, a priority (its streams are
created with CUDA's stream priority: ``high`` is the device's most urgent, ``normal`` its
default) and a pool of streams of its own on each device (``core.streams``: a node is issued on
a stream of its tenant's pool), of at most ``streams`` streams (one: the tenant's work runs in
issue order, as a model on one stream of its own would). A tenant may also have splittable
kernels (element-wise, or with a grid offset) launched in pieces (``splits``,
``asyncgpu.runtime.splits.launch_split``), and
*pointers* (``after``: GACER's synchronization pointers, chosen by the user): its launches of
kernel ``k`` wait for the latest launch of kernel ``j`` by tenant ``t``, so the two never
overlap; a tenant remembers its latest launch of each kernel (``last``). Tenants share one
dependency tracker: a node of one tenant that uses data another tenant's node wrote waits
for it, as any other node would.

A tenant counts what it issued (:class:`Tenant.count`) and its *steps*: each entry into
``asyncgpu.tenant(...)`` is a step, whose latency runs from its start (a clock event of each
device it used) to the completion of the last work it issued on each stream, measured on the
device's clock by timing events and read once they completed (:meth:`Tenant.settle`); its later
steps record those events again (:meth:`Tenant.spare_event`). A timing event costs the device
more than the host: on an H200 a measured step of a few small kernels took 20-50 us longer to
reach the host's read than one not measured. A tenant's steps that come more often than one per
:data:`SAMPLE_GAP_S` are therefore measured a random sample of, about one per
:data:`SAMPLE_GAP_S` (:meth:`Tenant.sample`), unless every step is asked for (the option
``step_timing="every"``; a regulation check measures every step).

Invariants: tenant numbers are dense and never reused while the runtime lives; a name means one
tenant, with the priority, stream limit, splits and pointers it was first given.

Example::

    t = Tenant(1, "detector", "high", -5, streams=2)
    t.count("kernel")
    t.statistics().kernels          # 1
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any

#: The priority names a tenant may be given.
PRIORITIES = ("normal", "high")
#: How many of its latest measured steps' latencies a tenant keeps (a service runs steps for
#: as long as it lives; its statistics describe the recent ones).
LATENCY_WINDOW = 10_000
#: The most timing events a tenant keeps per device to record again (a settle frees two or so
#: per step measured; the runtime settles every 64 steps).
SPARE_EVENTS = 256
#: A tenant's steps begun this many seconds apart or more (on average) are each measured;
#: closer ones are measured a random sample of, with the chance of their mean gap over this:
#: about a hundred steps a second per tenant, which cost the device well under 1% of its time
#: and still give a p99 from a few seconds of steps.
SAMPLE_GAP_S = 10e-3
#: The weight of the latest gap between two steps in their running mean.
_GAP_WEIGHT = 0.125


def stream_priority(priority: str, least: int, greatest: int) -> int:
    """CUDA's stream priority for ``priority`` on a device whose range is [greatest, least]
    (lower is more urgent)."""
    if priority not in PRIORITIES:
        raise ValueError(f"tenant priority must be one of {', '.join(PRIORITIES)}; got "
                         f"{priority!r}")
    return greatest if priority == "high" else least


@dataclass(frozen=True)
class TenantStatistics:
    """What one tenant issued and how long its steps took (``asyncgpu.tenants()``).

    ``latencies_s``: the latencies, in seconds, of the latest completed steps (at most
    ``LATENCY_WINDOW``, 10,000), in the order they were measured;
    ``pending``: measured steps whose work the runtime has not yet seen complete (call
    ``asyncgpu.synchronize()`` first for all of them); ``unmeasured``: steps not timed (steps
    begun less than 10 ms apart on average are timed a random sample of, about a hundred a
    second, since timing a step slows its work on the device; the option
    ``step_timing="every"`` times each); ``held``: its launches that waited on the host for an
    exclusive tenant (``asyncgpu.tenant(..., exclusive=True)``) or for its own previous launch
    while there is one.
    """

    name: str
    priority: str
    kernels: int = 0
    calls: int = 0
    copies: int = 0
    graphs: int = 0
    steps: int = 0
    pending: int = 0
    held: int = 0
    latencies_s: tuple[float, ...] = field(default=(), repr=False)
    unmeasured: int = 0

    def latency_s(self, q: float) -> float | None:
        """The ``q`` quantile (0.5: median, 0.99: p99) of the step latencies, or None."""
        if not (isinstance(q, (int, float)) and 0 <= q <= 1):
            raise ValueError(f"TenantStatistics.latency_s: q must be a quantile in [0, 1] (0.5: "
                             f"the median, 0.99: p99); got {q!r}")
        if not self.latencies_s:
            return None
        ordered = sorted(self.latencies_s)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


#: The names of the kernels and recorded functions declared in this process, what a tenant's
#: ``split`` and ``after`` name: a name none of them has is most likely misspelt
#: (:meth:`Tenant.undeclared`).
DECLARED: set[str] = set()


class Tenant:
    """One tenant of a runtime (see the module docstring)."""

    __slots__ = ("_begun", "_chance", "_gap", "after", "counts", "exclusive", "given", "held",
                 "index", "last", "latencies", "latest", "latest_on", "measured", "name",
                 "partition", "partition_name", "pending", "priority", "sms", "spare", "splits",
                 "steps", "stream_priority", "streams", "unmeasured")

    def __init__(self, index: int, name: str, priority: str, stream_priority: int,
                 streams: int | None = None, splits: dict[str, int] | None = None,
                 after: dict[str, tuple[str, str]] | None = None,
                 exclusive: bool = False, sms: int | None = None) -> None:
        self.index = index
        self.name = name
        self.priority = priority
        self.stream_priority = stream_priority
        self.streams = streams      # its streams per device at most (None: max_streams)
        #: the SMs it asked for a partition of its own on each device (which holds them rounded
        #: up to whole groups: ``asyncgpu.core.partitions``); None: none, any SM
        self.sms = sms
        #: the SMs of the partition its streams are in now: its own ``sms``, or a regulation
        #: plan's (``Runtime.partition_tenant``); None: any SM
        self.partition = sms
        #: that partition's name with the backend (``reserve_sms``): the tenant's own name, or
        #: the name of a partition a plan has it share with other tenants (``Plan.partition``)
        self.partition_name = None if sms is None else name
        #: splittable kernels it launches in pieces: kernel name -> pieces (None: none)
        self.splits = splits
        #: pointers: its kernel name -> (tenant name, kernel name) it waits for (None: none)
        self.after = after
        #: its steps keep the others' launches waiting (``asyncgpu.runtime.exclusive``)
        self.exclusive = exclusive
        #: the splits, pointers and exclusive it was given (``splits``, ``after`` and
        #: ``exclusive`` add a regulation plan's)
        self.given = (splits, after, exclusive)
        #: its latest launch of each kernel, by name (what another tenant's pointer names); for
        #: a recording replayed as several graphs (several devices), the tuple of them all
        self.last: dict[str, Any] = {}
        #: several devices: its latest kernel or graph launch on each device slot (what a
        #: pointer naming ``"*"`` waits for there)
        self.latest_on: dict[int, Any] = {}
        #: its latest kernel, library call or graph launch (an exclusive tenant's neighbours
        #: keep one in flight: ``asyncgpu.runtime.exclusive``)
        self.latest: Any = None
        self.counts = {"kernel": 0, "call": 0, "copy": 0, "graph": 0}
        self.steps = 0
        #: its launches held on the host by an exclusive tenant (``ExclusiveSteps``)
        self.held = 0
        #: steps issued, not yet measured: (start events per device, end events)
        self.pending: list[tuple[dict[int, Any], list[tuple[int, Any]]]] = []
        #: the latest measured steps' latencies, and how many steps were measured in all
        self.latencies: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self.measured = 0
        #: per device slot: timing events of measured steps, to record again
        self.spare: dict[int, list[Any]] = {}
        #: steps not measured (:meth:`sample`); the host time the latest step began, the
        #: running mean of the gaps between steps, the sample's random numbers (seeded by the
        #: tenant's number: a run's choices depend only on its steps' times)
        self.unmeasured = 0
        self._begun: float | None = None
        self._gap = 4 * SAMPLE_GAP_S      # (a new tenant's first steps are each timed)
        self._chance = random.Random(index).random

    def settings(self) -> tuple[Any, ...]:
        """What a tenant keeps from its first use: priority, streams, splits, pointers,
        exclusive (as it was given them: a regulation plan adds to them), SMs asked for."""
        return (self.priority, self.streams) + self.given + (self.sms,)

    def undeclared(self) -> list[str]:
        """The kernel names this tenant was given (its ``split``'s and ``after``'s, the
        pointed-at kernels too; ``"*"`` names any) that no kernel or recorded function declared
        so far has (:data:`DECLARED`), sorted."""
        splits, after, _ = self.given
        named = set(splits or ()) | set(after or ())
        named.update(kernel for _, kernel in (after or {}).values())
        return sorted(n for n in named if n != "*" and n not in DECLARED)

    def count(self, kind: str) -> None:
        """One more node of ``kind`` issued."""
        counts = self.counts
        if kind in counts:
            counts[kind] += 1

    def settle(self, elapsed: Any) -> None:
        """Measure the pending steps, oldest first, up to the first whose events have not all
        completed (``elapsed(start, end)``: seconds between two timing events of one device,
        None while either has not completed: the backend's ``elapsed_if_done``); their events are kept
        to be recorded again (:meth:`spare_event`). A step's latency is its start's time to
        its latest end's; later steps wait for an earlier one, so latencies come in step order
        and a completed step costs one call per end, without a query of each event."""
        pending = self.pending
        spare = self.spare
        settled = 0
        for starts, ends in pending:
            longest = 0.0
            for d, e in ends:
                took = elapsed(starts[d], e)
                if took is None:
                    break
                if took > longest:
                    longest = took
            else:
                self.latencies.append(longest)
                self.measured += 1
                settled += 1
                for d, e in (*starts.items(), *ends):
                    kept = spare.setdefault(d, [])
                    if len(kept) < SPARE_EVENTS:
                        kept.append(e)
                continue
            break
        if settled:
            del pending[:settled]

    def sample(self, now: float) -> bool:
        """Whether the step beginning at host time ``now`` (seconds) is measured: every step
        while the steps' running mean gap is :data:`SAMPLE_GAP_S` or more, else with the
        chance of that gap over it (a long pause weighs as four such gaps at most, so the
        sample follows a return to short steps within a few dozen of them)."""
        begun = self._begun
        self._begun = now
        if begun is not None:
            gap = now - begun
            if gap > 4 * SAMPLE_GAP_S:
                gap = 4 * SAMPLE_GAP_S
            self._gap += (gap - self._gap) * _GAP_WEIGHT
        if self._gap >= SAMPLE_GAP_S or self._chance() * SAMPLE_GAP_S < self._gap:
            return True
        self.unmeasured += 1
        return False

    def spare_event(self, device: int) -> Any:
        """A timing event of device slot ``device`` that a measured step no longer needs, to
        record again (creating an event costs the host more than recording one); None if
        there is none."""
        kept = self.spare.get(device)
        return kept.pop() if kept else None

    def latencies_after(self, first: int) -> list[float]:
        """The latencies of the steps measured after the first ``first`` measured ones (those
        still in the window)."""
        n = self.measured - first
        return list(self.latencies)[-n:] if n > 0 else []

    def statistics(self) -> TenantStatistics:
        c = self.counts
        return TenantStatistics(self.name, self.priority, c["kernel"], c["call"], c["copy"],
                                c["graph"], self.steps, len(self.pending), self.held,
                                tuple(self.latencies), self.unmeasured)
