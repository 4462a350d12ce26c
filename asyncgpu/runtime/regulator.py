"""``asyncgpu.regulate``: profile the tenants' steps, search a regulation plan, run with it.

The model
---------
``regulate(plan="search")`` regulates the tenants that have run steps (or those named): a
:class:`Regulator` on the runtime goes through three stages.

1. *profiling*: each of those tenants' next ``steps`` steps is profiled. Every kernel launch
   in them runs alone on the device (after the previous profiled launch, of any tenant: an
   edge of reason ``profile``) between two timing events, and is noted with its launch shape,
   the bytes it moves and its data parents in the step. The tenants' own splits and pointers
   are set aside while profiling (the launches run whole; the search keeps them). Then the
   kernels of two tenants that the model runs side by side are profiled in pairs: timed
   alone and side by side on scratch copies (:func:`asyncgpu.runtime.pair_profiles.time_pairs`).
2. *search*: once the profiled steps of every tenant have completed on the device, the last
   one of each becomes the profile (``asyncgpu.core.regulation``), each launch timed at the
   least it took at its place in the profiled steps (a tenant that ended no step, and has none
   under way, while another ran twice ``steps`` is idle and left out;
   :mod:`asyncgpu.runtime.step_profiles`). A plan already found for the same *shape* (each
   tenant's step as its launches: kernel, grid, block) is reused, otherwise
   :func:`~asyncgpu.core.regulation.search` finds one within ``budget_s``. The plan's splits
   and pointers become the tenants' (beside their own), and the state is *regulated*.
3. *check*: a model errs, so the plan is measured on the device too, stage by stage
   (:mod:`asyncgpu.runtime.plan_check`), and kept only where it measured better than the
   tenants' own settings; where the tenants' steps ran slower side by side than they would
   one after another (host-bound steps, whose threads pass the interpreter lock from core to
   core), their threads are run on one host core (:mod:`asyncgpu.runtime.host_core`), kept
   where that measured faster; a high-priority tenant still over its target gets remedies,
   each kept only where it helped. Its target is its latency alone, measured first: a few of
   its steps run with the device to themselves.

While regulated, each step of a regulated tenant is checked against the plan's shape when it
ends; a step of another shape (the workload changed) sets the plan aside and profiling starts
again, ending in the stored plan for that shape if there is one. ``regulate(plan=p)`` runs
with a given :class:`~asyncgpu.core.plan.Plan` (searched earlier, perhaps saved with
``Plan.save``); ``regulate(plan="off")`` gives the tenants back their own settings.

Invariants: a plan only adds pieces and ordering, so results equal the unregulated run's;
every state change happens under the runtime's lock; a tenant's own splits and pointers are
never overridden.

Example::

    for _ in range(3):
        with ag.tenant("a"): step_a()
        with ag.tenant("b", priority="high"): step_b()
    ag.regulate(plan="search")     # the next 2 steps of a and b are profiled, then the plan runs
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any

from ..core.plan import Plan
from ..core.regulation import search
from .plan_check import PlanCheck, Trial
from .pair_profiles import time_pairs
from .step_profiles import Step, StepProfiles
from .host_core import OneCore

log = logging.getLogger("asyncgpu")


@dataclasses.dataclass(frozen=True)
class Regulation:
    """Where regulation stands (``asyncgpu.regulation()``): ``state`` (``off``,
    ``profiling`` or ``regulated``), the tenants regulated, the plan in force (or None), the
    tenants whose profiled steps are still awaited, how many plans are stored, were searched
    and were reused, per high-priority tenant checked under the plan its slowest measured step
    of the last stage and its latency alone (seconds: its second slowest step measured alone,
    the check's first stage, else modelled), the stage of the plan's measurement now
    (``alone``, ``plan``, ``own``, ``core``, ``split``, ``guard``, ``partition``,
    ``exclusive``, ``pieces``; empty when none is under way), the measured score of each stage
    done (the largest of the tenants' slowdowns, mean step latency over latency alone, plus
    the high-priority tenant's lateness weighted as in the search), each scored tenant's
    latency alone that its slowdowns are measured against (seconds: its median step measured
    alone, else modelled from its profile), and each stage's measured pace (``pace``: the
    seconds of the tenants' steps alone their threads ran a second: 1.0 where as fast as one
    after another, above where side by side paid; none where one thread began steps of two
    of them; ``asyncgpu.runtime.plan_check.pace``)."""

    state: str
    tenants: tuple[str, ...] = ()
    plan: Plan | None = None
    awaiting: tuple[str, ...] = ()
    stored: int = 0
    searched: int = 0
    reused: int = 0
    checked: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    checking: str = ""
    measured: dict[str, float] = dataclasses.field(default_factory=dict)
    alone: dict[str, float] = dataclasses.field(default_factory=dict)
    pace: dict[str, float] = dataclasses.field(default_factory=dict)


class Regulator(PlanCheck, StepProfiles):
    """One runtime's regulation (see the module docstring). Every method runs under the
    runtime's lock."""

    def __init__(self, rt: Any, tenants: list[int], steps: int, budget_s: float,
                 book: _Book | None = None, host_core: bool = True) -> None:
        self.rt = rt
        #: whether a plan may run the tenants' threads on one host core (``regulate``'s
        #: ``host_core``): the check's ``core`` stage, and a given plan's ``one_core``
        self.host_core = host_core
        #: the plans found so far, kept across ``regulate`` calls
        self.book = book if book is not None else _Book()
        self.tenants = tenants
        self.steps = steps
        self.budget_s = budget_s
        self.state = "profiling"
        self.plan: Plan | None = None
        self._open: dict[tuple[int, int], Step] = {}
        self._profiled: dict[int, list[list[tuple[Any, ...]]]] = {t: [] for t in tenants}
        self._shapes: dict[int, tuple[Any, ...]] = {}
        self._last: Any = None          # the latest profiled node (the next waits for it)
        #: the measurement of the plan in force, if under way; and its result per lead tenant's
        #: name: (its slowest step measured, latency alone), seconds
        self._trial: Trial | None = None
        self.checked: dict[str, tuple[float, float]] = {}
        self.measured: dict[str, float] = {}
        #: each stage's measured pace (``Trial.paces``), by stage
        self.paces: dict[str, float] = {}
        #: per scored tenant (by number), its latency alone (``Regulation.alone``): the
        #: latest trial's, which its alone stages update
        self.alones: dict[int, float] = {}
        #: the remedies (``plan_check.REMEDIES``) measured no better: not tried again
        self._lost: set[str] = set()
        #: test hook (``asyncgpu.testing.regulation``): a profiled op's (seconds, share, grid)
        #: from its kernel's name and its measured seconds, modelled share and grid; and
        #: whether the profile in force was taken with it (then its modelled latencies alone
        #: are the test's, and none is measured: ``PlanCheck._measure_alone``)
        self.stand_in: Any = None
        self.stood_in = False
        #: test hook: a timed pair's seconds (each alone, each's end side by side) from its
        #: kernels' names and what was measured (with ``stand_in`` set, pairs are timed only
        #: with it)
        self.pair_stand_in: Any = None
        #: what the instruments were last told (:meth:`_announce`)
        self._announced: tuple[str, Plan | None, str] | None = None
        self._announce()

    # -- the runtime's calls -----------------------------------------------------------------
    def begin(self, index: int) -> bool | list[Any]:
        """A step of tenant ``index`` begins; returns what ``Runtime.begin_step`` waits for
        before its clocks start: True for every launch in flight (a step of the tenant an
        ``alone`` stage of the check measures runs alone), the nodes in flight when the stage
        began for the lead's first step in a stage (``Trial.backlog``: it is measured under
        the stage's plan, not behind work issued before it), else nothing (False or an empty
        list)."""
        if self.state == "off":
            return False
        if index in self._profiled:
            self._open[(threading.get_ident(), index)] = Step()
        if self.state == "profiling":
            self._try_finish()
        trial = self._trial
        if trial is None:
            return False
        now = time.perf_counter()
        trial.opened.setdefault(index, now)
        trial.begins.setdefault(index, []).append(now)
        trial.threads.setdefault(index, set()).add(threading.get_ident())
        if trial.stage == "alone":
            return index == trial.subject
        if index != trial.lead:
            return False
        backlog, trial.backlog = trial.backlog, []
        return backlog

    def checking(self) -> bool:
        """Whether a check of the plan in force is under way (it reads every step's
        latency, so each step is timed meanwhile)."""
        return self._trial is not None

    def abandon(self, index: int) -> None:
        """This thread's step of tenant ``index`` never began after all (its beginning was
        interrupted): forgotten, if :meth:`begin` had opened it."""
        if self._open.pop((threading.get_ident(), index), None) is not None:
            if self._trial is not None:
                self._trial.opened.pop(index, None)

    def end(self, index: int, failed: bool = False, thread: int | None = None) -> None:
        """A step of tenant ``index`` ended (``failed``: by an exception). A step that failed
        or launched nothing says nothing of the workload's shape: it is neither profiled nor
        taken for a step of another shape (a service whose requests now and then fail or
        find their answer cached keeps its plan). ``thread``: the identifier of the thread
        that began it, where another ends it (None: this one)."""
        if self._trial is not None:
            self._trial.opened.pop(index, None)
        ident = threading.get_ident() if thread is None else thread
        step = self._open.pop((ident, index), None)
        if step is None:
            return
        shape = tuple(step.keys)
        usual = bool(shape) and not failed
        if self.state == "profiling":
            profiled = self._profiled.get(index)
            if usual and step.ops and profiled is not None:  # (None: left out of the profile)
                profiled.append(step.ops)
                self._shapes[index] = shape
            self._try_finish()
        elif (usual and self.plan is not None and self.plan.shape
              and shape != self._expected(index)):
            name = self.rt.tenants[index].name
            log.info("asyncgpu: tenant %r ran a step of another shape; the regulation plan is "
                     "set aside and the tenants are profiled again", name)
            self._profile_again()
        elif self._trial is not None:
            self._check()

    def status(self) -> Regulation:
        book = self.book
        if self.state == "off":
            return Regulation("off", stored=len(book.plans), searched=book.searched,
                              reused=book.reused)
        if self.state == "profiling":
            self._try_finish()
        if self._trial is not None:
            self._check()
        names = self.rt.tenants
        awaiting = tuple(names[t].name for t in self.tenants
                         if self.state == "profiling" and len(self._profiled[t]) < self.steps)
        return Regulation(self.state, tuple(names[t].name for t in self.tenants), self.plan,
                          awaiting, len(book.plans), book.searched, book.reused,
                          dict(self.checked),
                          self._trial.stage if self._trial is not None else "",
                          dict(self.measured),
                          {names[t].name: alone for t, alone in self.alones.items()},
                          dict(self.paces))

    # -- states ------------------------------------------------------------------------------
    def _expected(self, index: int) -> Any:
        name = self.rt.tenants[index].name
        for tenant, shape in self.plan.shape if self.plan else ():
            if tenant == name:
                return shape
        return None

    def _drop_plan(self, state: str) -> None:
        """No plan in force and no check under way (the tenants' own settings); ``state``
        from now on."""
        self._trial = None
        self.apply(None, measure=False)
        self.state = state

    def _profile_again(self) -> None:
        self._drop_plan("profiling")
        self._profiled = {t: [] for t in self.tenants}
        self._shapes = {}
        for step in self._open.values():
            step.keys.clear()       # (an open step began regulated: not profiled)
        self._announce()

    def stop(self) -> None:
        """Regulation ends (``regulate`` again, or ``plan="off"``): the tenants' own settings."""
        self._drop_plan("off")
        self._announce()

    def where(self) -> tuple[str, Plan | None, str]:
        """The state, the plan in force (None: the tenants' own settings) and the stage of
        the plan's check under way (``""``: none)."""
        return self.state, self.plan, self._trial.stage if self._trial is not None else ""

    def _launch_times(self, plan: Plan | None) -> dict[tuple[int, str], float]:
        """``plan``'s launch times alone (``Plan.launch_times``) by the regulated tenants'
        numbers: what the exclusive tenants' gate looks ahead with (``runtime.exclusive``)."""
        if plan is None:
            return {}
        numbers = {self.rt.tenants[t].name: t for t in self.tenants}
        return {(numbers[tenant], name): seconds
                for (tenant, name), seconds in plan.launch_times().items() if tenant in numbers}

    def _announce(self) -> None:
        """Tell the runtime's instruments (``regulation_changed``: a trace records it)
        :meth:`where` regulation stands, when it changed."""
        now = self.where()
        last = self._announced
        if last is not None and last[0] == now[0] and last[1] is now[1] and last[2] == now[2]:
            return
        self._announced = now
        if self.rt._instruments:
            self.rt._notify("regulation_changed", *now)

    def joined(self, index: int) -> None:
        """Tenant ``index`` was just made: regulated from now on where the plan in force names
        it (a plan given before its tenants were made), with the plan's settings."""
        if (self.state == "off" or self.plan is None or index in self.tenants
                or self.rt.tenants[index].name not in self.plan.named()):
            return
        self.tenants = sorted([*self.tenants, index])
        self._profiled[index] = []
        self.apply(self.plan, measure=False)
        self._announce()

    def apply(self, plan: Plan | None, measure: bool = True) -> None:
        """Make ``plan``'s splits, pointers, exclusive tenants, partitions and host core the
        regulated tenants' (None: their own); with ``measure``, a plan searched on a profile is
        then measured (:meth:`_check`)."""
        self.plan = plan
        rt = self.rt
        for t in self.tenants:
            tenant = rt.tenants[t]
            splits, after, exclusive = tenant.given
            if plan is not None:
                more_splits, more_after = plan.tenant_settings(tenant.name)
                splits = {**(more_splits or {}), **(splits or {})} or None
                after = {**(more_after or {}), **(after or {})} or None
                exclusive = exclusive or tenant.name in plan.exclusive
            tenant.splits, tenant.after, tenant.exclusive = splits, after, exclusive
        self._partition(plan)
        self._one_core(plan)
        rt.exclusive_changed()
        if rt.exclusive_steps is not None:
            rt.exclusive_steps.launch_times = self._launch_times(plan)
        if measure:
            self._trial = None
        if plan is not None:
            self.state = "regulated"
            if measure and plan.profile and self.tenants:
                self._trial = self._start(plan, "plan", None)
                self._measure_alone(self._trial)
        if measure:
            self._announce()

    def _one_core(self, plan: Plan | None) -> None:
        """Run the threads of the regulated tenants ``plan`` names in ``one_core`` on one host
        core (``asyncgpu.runtime.host_core``; none without a plan, nor where ``host_core`` is
        off); the threads moved for the plan before get their cores back where that
        changes."""
        rt = self.rt
        names = plan.one_core if plan is not None else ()
        if names and not self.host_core:
            log.info("asyncgpu: the plan's tenants %s stay on the host cores they run on "
                     "(regulate(host_core=False))", ", ".join(names))
            names = ()
        members = frozenset(t for t in self.tenants if rt.tenants[t].name in names)
        core = rt.one_core
        if core is not None and core.members == members:
            return
        if core is not None:
            core.release()
        rt.one_core = OneCore(members) if members else None

    def _partition(self, plan: Plan | None) -> None:
        """Move the regulated tenants (those without ``sms`` of their own, whose partition is
        never changed) into ``plan``'s partitions: first every tenant whose partition changes
        out of its own, so that the SMs it held are free, then each into its new one."""
        rt = self.rt
        moves = []
        for t in self.tenants:
            tenant = rt.tenants[t]
            if tenant.sms is not None:
                continue
            target = plan.partition(tenant.name) if plan is not None else None
            if target != ((tenant.partition_name, tenant.partition)
                          if tenant.partition is not None else None):
                rt.partition_tenant(t, None)
                moves.append((t, target))
        for t, target in moves:
            if target is None:
                continue
            name, sms = target
            try:
                rt.partition_tenant(t, sms, name)
            except ValueError as exc:   # (no room left: the stage measures without it)
                log.warning("asyncgpu: regulation could not give tenant %r a partition of %d "
                            "SMs: %s", rt.tenants[t].name, sms, exc)

    def _store(self, old: Plan, new: Plan) -> None:
        """``new`` replaces ``old`` among the stored plans."""
        for shape, stored in self.book.plans.items():
            if stored is old:
                self.book.plans[shape] = new

    def _try_finish(self) -> None:
        """End the profile once every tenant's profiled steps are complete on the device."""
        counts = [len(self._profiled[t]) for t in self.tenants]
        if max(counts, default=0) >= 2 * self.steps:
            # (a tenant that ran no step while another ran twice the profile's is idle: it is
            # left out of this plan; not one whose step is under way, only slower to end, as
            # a step of many launches is while they are profiled one at a time)
            under_way = {t for _, t in self._open}
            idle = [t for t, n in zip(self.tenants, counts) if n == 0 and t not in under_way]
            if idle:
                log.info("asyncgpu: regulation leaves out idle tenant(s) %s",
                         ", ".join(repr(self.rt.tenants[t].name) for t in idle))
                self.tenants = [t for t in self.tenants if t not in idle]
                for t in idle:
                    del self._profiled[t]
                counts = [n for n in counts if n]
        if min(counts, default=0) < self.steps:
            return
        backend = self.rt.backend
        # (the profiled launches run one at a time, in order: the last ones done, all are)
        lasts = {t: self._profiled[t][-self.steps:] for t in self.tenants}
        if not all(backend.event_done(op[1].end) for steps in lasts.values()
                   for op in steps[-1]):
            return
        shape = tuple((self.rt.tenants[t].name, self._shapes[t]) for t in self.tenants)
        self.stood_in = self.stand_in is not None
        book = self.book
        plan = book.plans.get(shape)
        if plan is not None:
            book.reused += 1
            log.info("asyncgpu: regulation plan reused: %s", plan.describe())
        else:
            profiles = tuple(self._profile(t, steps) for t, steps in lasts.items())
            given = {self.rt.tenants[t].name: self.rt.tenants[t].given[:2] for t in self.tenants}
            # (a stand-in profile's times are the test's: pairs only with stand-ins of theirs)
            pairs = (() if self.stand_in is not None and self.pair_stand_in is None else
                     time_pairs(self.rt, profiles, [steps[-1] for steps in lasts.values()],
                                given, self.pair_stand_in))
            plan = search(profiles, self.budget_s, given, shape, pairs)
            book.plans[shape] = plan
            book.searched += 1
            log.info("asyncgpu: regulation plan searched in %.3f s over %d modelled runs: %s",
                     plan.search_s, plan.modelled, plan.describe())
            if pairs and log.isEnabledFor(logging.INFO):
                # (what the pairs changed: the tenants' own settings modelled without them)
                unpaired = search(profiles, 0.0, given, shape).before
                log.info("asyncgpu: the tenants' own settings modelled at a score of %.2f with "
                         "the pairs profiled, %.2f without them", plan.before.score,
                         unpaired.score)
        self._last = None
        # (the profiled launches keep the tenants' arrays: let them go)
        self._profiled = {t: [] for t in self.tenants}
        self.apply(plan)


class _Book:
    """The plans a runtime found, by shape, and how many were searched and reused."""

    def __init__(self) -> None:
        self.plans: dict[Any, Plan] = {}
        #: a tenant's latency measured alone beside a plan's shape, by (its name, the
        #: shape): (median, second slowest, its steps' period alone; 0: not measured) seconds
        self.alone: dict[tuple[str, Any], tuple[float, float, float]] = {}
        self.searched = 0
        self.reused = 0


__all__ = ["Regulation", "Regulator"]
