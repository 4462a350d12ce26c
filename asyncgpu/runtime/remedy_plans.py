"""The plans the measured check tries beyond the searched one (``asyncgpu.runtime.plan_check``).

The model
---------
Each remedy of the check is the plan in force with one thing added, made here from the plan's
profile and the runtime's tenants; the check measures it on the device and keeps it only where
it measured better. :meth:`RemedyPlans._core_plan`: the tenants' threads on one host core,
where the tenants' steps, mostly host work, ran slower side by side than one after another;
:meth:`RemedyPlans._split_plan`: the other tenants' long splittable launches in pieces no
longer than a slice of a late high-priority tenant's latency alone;
:meth:`RemedyPlans._partition_plan`: that tenant on SMs of its own, the others on the rest.

Invariants: a remedy's plan only adds to the plan in force (pieces, a partition, a core; the
partition plan drops pointers, which partitions make pointless); None where the remedy does
not apply or would change nothing; nothing here changes the runtime.

Example::

    split = self._split_plan(self.plan, normal, trial.alone)   # None: nothing to cut
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from ..core.device_model import simulate
from ..core.partitions import GRAIN
from ..core.plan import Plan
from . import host_core

log = logging.getLogger("asyncgpu")

#: The tenants' threads are tried on one host core where the plan kept measured a pace under
#: this. Not 1: a period alone is measured while the other tenants' threads are held at the
#: exclusive gate, where they still wake between the subject's steps, so a host-bound
#: tenant's period alone is longer than its step one after another (1.6-2x in the small
#: mixes on the GPU machine: paces of 1.24 where the mix ran at 0.6 of one after another),
#: while a device-bound mix's reads true (1.7-1.8 where it ran at 1.6-1.7).
CORE_BELOW = 1.25

#: ... and only where their steps are mostly host work: their kernels, modelled alone from
#: the profile, take under this share of their periods alone (summed over the tenants). A
#: device-bound mix's pace reads true, and under 1.25 there it says its kernels slow each
#: other, which one core does not change (the small mixes on the GPU machine: 0.1-0.5; DL
#: and IMG at medium scale, whose pace was 1.13: 0.8).
HOST_BOUND_BELOW = 0.5

#: The split guard cuts normal tenants' launches into pieces of at most this fraction of the
#: high-priority tenant's latency alone, in at most ``MOST_PIECES`` pieces.
SLICE = 0.05
MOST_PIECES = 32


class RemedyPlans:
    """The remedies' plans (a base of ``PlanCheck``, whose state they read: the runtime, the
    regulated tenants, the plan in force, the remedies lost)."""

    __slots__ = ()

    def _core_plan(self, trial: Any, stage: str) -> Plan | None:
        """The plan in force with the scored tenants' threads on one host core
        (``Plan.one_core``), where stage ``stage`` measured a pace under :data:`CORE_BELOW`
        and their steps are mostly host work (:func:`device_share` under
        :data:`HOST_BOUND_BELOW`). None where they are not, where one core was measured worse
        before, where fewer than two tenants are scored, where the platform does not let a
        thread choose its cores, or where the program asked that threads stay where they are
        (``regulate(host_core=False)``)."""
        kept = self.plan
        scored = [t for t in self.tenants if trial.alones.get(t, 0.0) > 0]
        paced = trial.paces.get(stage, CORE_BELOW)
        if (not self.host_core or "core" in self._lost or kept is None or len(scored) < 2
                or paced >= CORE_BELOW or not host_core.supported()):
            return None
        names = tuple(self.rt.tenants[t].name for t in scored)
        share = device_share(trial.plans["plan"], names, [trial.periods[t] for t in scored])
        if share >= HOST_BOUND_BELOW:
            log.info("asyncgpu: the tenants' steps ran at %.2f of their pace one after another, "
                     "but their kernels take %.2f of their time alone: mostly device work, so "
                     "their threads stay where they are", paced, share)
            return None
        return dataclasses.replace(kept, one_core=names)

    def _partition_plan(self, kept: Plan, lead: int, normal: list[int]) -> Plan | None:
        """``kept`` with the lead on SMs of its own, as many as the blocks of its largest
        launch (in whole groups), and the ``normal`` tenants on the rest of the SMs that can be
        partitioned, which they share (their launches may slow each other, as without
        partitions, but never the lead's), and without ``kept``'s pointers (apart, the lead's
        launches no longer arrive behind the others' blocks, so a pointer would only hold one
        tenant behind another's launch). None where that does not fit: the lead's launches
        fill more than half the device (a partition would be a smaller GPU for it), the rest
        is under one group, a tenant has a partition of its own (``sms``) or replays recorded
        steps (a graph runs on every SM), or the runtime runs on several devices."""
        rt = self.rt
        tenants = rt.tenants
        backend = rt.backend
        chosen = [lead] + normal
        if (getattr(backend, "reserve_sms", None) is None or rt.placement is not None
                or any(tenants[t].sms is not None for t in self.tenants)):
            return None
        ops = {p.name: p.ops for p in kept.profile}
        mine = [ops.get(tenants[t].name) for t in chosen]
        if any(not o or any(op.blocks <= 0 for op in o) for o in mine):
            return None
        need = -(-max(op.blocks for op in mine[0]) // GRAIN) * GRAIN
        rest = (backend.partitionable_sms() - need) // GRAIN * GRAIN
        if 2 * need > backend.sm_count or rest < GRAIN:
            return None
        names = [tenants[t].name for t in normal]
        partitions = {tenants[lead].name: need, **{name: rest for name in names}}
        return dataclasses.replace(kept, partitions=partitions, after={},
                                   shared=tuple(names) if len(names) > 1 else ())

    def _split_plan(self, kept: Plan, normal: list[int], alone: float) -> Plan | None:
        """``kept`` with the ``normal`` tenants' splittable launches longer than :data:`SLICE`
        of the lead's latency ``alone`` (their time alone in the profile) cut into pieces no
        longer than that (a power of two, at most :data:`MOST_PIECES`; never fewer than
        ``kept`` has), or as short as pieces get: a launch split by its grid is cut no finer
        than its waves (``Op.piece``: a piece of a grid the device holds at once takes as long
        as the whole launch, so such a launch is left whole); None when that changes nothing.
        A kernel a pointer holds is left whole (a plan never splits and points one kernel)."""
        slice_s = SLICE * alone
        if slice_s <= 0:
            return None
        names = {self.rt.tenants[t].name for t in normal}
        splits = {name: dict(kernels) for name, kernels in kept.splits.items()}
        changed = False
        for profile in kept.profile:
            if profile.name not in names:
                continue
            mine = splits.setdefault(profile.name, {})
            held = kept.after.get(profile.name, {})
            for op in profile.ops:
                if not op.splittable or op.seconds <= slice_s or op.kernel in held:
                    continue
                pieces = 1
                while pieces < MOST_PIECES and op.piece(pieces)[0] > slice_s:
                    if op.piece(2 * pieces)[0] >= op.piece(pieces)[0]:
                        break       # a piece of a grid that fits the device lasts as long
                    pieces *= 2
                if pieces > mine.get(op.kernel, 1):
                    mine[op.kernel] = pieces
                    changed = True
        if not changed:
            return None
        return dataclasses.replace(kept, splits={n: ks for n, ks in splits.items() if ks})


def device_share(plan: Plan, names: tuple[str, ...], periods: list[float]) -> float:
    """The share of the tenants ``names``' periods alone (``periods``, host clock, summed)
    that their steps' kernels take, modelled alone from ``plan``'s profile (0 for a tenant
    without one)."""
    profiles = {p.name: p for p in plan.profile}
    kernels = sum(simulate((profiles[n],)).makespan_s for n in names if n in profiles)
    total = sum(periods)
    return kernels / total if total > 0 else 0.0


__all__ = ["CORE_BELOW", "HOST_BOUND_BELOW", "MOST_PIECES", "RemedyPlans", "SLICE",
           "device_share"]
