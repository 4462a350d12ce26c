"""The measured check of a regulation plan (``asyncgpu.regulate``'s third stage).

The model
---------
A model errs, so the plan is measured on the device too, stage by stage, each over the lead
tenant's next :data:`CHECK_STEPS` steps (the high-priority tenant, else the one whose steps
alone are the longest, modelled, so that every tenant ends steps in a stage). A stage's score
is the largest *slowdown* among the tenants (a tenant's mean step latency over its latency
alone; a step still under way that ran longer than any the tenant ended in the stage counts
as one as long as it ran so far, so a plan that stalls a tenant cannot score as if the tenant
were not there) plus ``LATE_WEIGHT`` times the high-priority lead's slowdown
in its slowest step beyond ``HIGH_TARGET``. The mean, not the median: a tenant's pace is its
mean step, and a plan that holds it behind another's steps now and then leaves its median
where it was while its steps per second fall (beside an exclusive lead, IMG's median step
stayed 1.4x its time alone while its mean went to 2.8x). Latencies alone are modelled from
the profile, which times kernels, not the host work between them; so each tenant is first
measured alone, the lead first (stages ``alone``, :meth:`PlanCheck._measure_alone`): its next
steps exclusive, each begun once no work is in flight; their median replaces its modelled
latency alone, and the lead's second slowest is what its slowest step is held to. Slowdowns,
not latencies: tenants run their steps one after another, each at its own pace, so a plan
that holds a tenant of short steps behind another's long launches multiplies its latency
while the slowest tenant's barely moves. The plan is measured, then (when it adds anything)
the tenants' own settings, and the plan is kept and stored only if it scores
:data:`PLAN_GAIN` of theirs or less (a plan within the measurement's noise of none changes
nothing worth its ordering), else the tenants' own settings are. A stage also measures the
tenants' *pace* (:func:`pace`): the seconds of their steps alone their threads ran a second,
by the host's clock (1.0: as fast as their steps one after another; it reads high where steps
are mostly host work: :data:`~asyncgpu.runtime.remedy_plans.CORE_BELOW`). Where the plan kept
ran under that (steps that are mostly host work, whose threads pass the interpreter lock from
core to core), the tenants' threads are run on one host core (``core``,
:mod:`asyncgpu.runtime.host_core`), kept where the pace rose to the plan's without it over
:data:`PLAN_GAIN` or more (and a high-priority lead's median step is no more than
:data:`MEDIAN_SLACK` slower). Then, if a high-priority lead beside normal tenants is still
over its target, remedies are measured in turn, while it is, each kept only if it brought the
stage's score to :data:`PLAN_GAIN` of what it was or less without making the lead's slowest
step or its median step slower (the score is the search's objective, measured: a remedy whose
cost to the other tenants outweighs the lead's gain is not kept; nor is one that trades the
lead's typical step for its slowest, which the score's weight on lateness alone could let
through): the normal tenants' long splittable launches in pieces (blocks that hold a
multiprocessor for a whole long launch keep the lead's blocks waiting, which pieces end); every
normal tenant's launches waiting for the lead's latest unfinished launch (a pointer from every
kernel to every kernel, ``"*"``: priority before throughput, as ``priority="high"`` asks); SM
partitions, the lead on SMs of its own (its launches then never arrive behind blocks the others
left resident); the lead's steps exclusive (``asyncgpu.runtime.exclusive``: the others'
launches wait on the host while its step runs, and keep one launch in flight between its
steps), which helps a lead whose steps arrive with gaps between them, as a service's requests
do, where pointers cannot keep the others from filling the device just before its next step;
last, its steps exclusive *and* the others' long launches in pieces, since what an exclusive
step still waits for as it begins is the one launch each other tenant has in flight (pieces,
which alone need not help, bound how long that launch is). The remedies' plans are made by
:class:`~asyncgpu.runtime.remedy_plans.RemedyPlans`.

:class:`PlanCheck` holds the check's methods; :class:`~asyncgpu.runtime.regulator.Regulator`
takes it as a base and keeps its state (the plan in force, the trial under way, the stored
plans, the remedies lost), and calls :meth:`PlanCheck._check` as the lead tenant's steps end.

Invariants: a stage is judged only on steps that ran wholly under its plan: each tenant's
first step that ends in a stage is left out (it may have begun under the one before), and the
lead's first step to begin in it waits on the host for the work in flight when the stage began
(``Trial.backlog``, :meth:`~asyncgpu.runtime.regulator.Regulator.begin`), which the new plan's
gate or pointers could not order; a remedy is kept
only where it measured better, and one that did not is not tried again; every stage's plan is
one the search or a remedy made, so results equal the unregulated run's.

Example::

    trial = self._start(plan, "plan", None)     # measure from the tenants' next steps
    self._check()                               # at each of the lead's step ends
"""

from __future__ import annotations

import dataclasses
import logging
import statistics
import time
from typing import Any

from ..core.plan import Plan
from ..core.device_model import simulate
from ..core.regulation import HIGH_TARGET, score
from .remedy_plans import RemedyPlans

log = logging.getLogger("asyncgpu")

#: Steps of a high-priority tenant measured under a searched plan before it is checked.
CHECK_STEPS = 30
#: A searched plan is kept when its measured score is this fraction of the tenants' own
#: settings' or less (two measurements of thirty steps each differ by a few percent alone).
PLAN_GAIN = 0.97
#: A remedy may leave the high-priority lead's median step up to this much slower (the noise
#: between two stages' medians of thirty steps).
MEDIAN_SLACK = 1.03
#: Steps of the lead measured alone before its plan is (``alone``): as many as a
#: stage's. Its latency alone is their second slowest: a step alone has the device to
#: itself, and one slow there (a hiccup of the host) would make the target generous for the
#: whole check.
ALONE_STEPS = CHECK_STEPS
#: Steps of each other tenant measured alone after the lead (its latency alone is their
#: median: its slowdowns are measured against it, no target).
OTHERS_ALONE_STEPS = 9
#: A tenant measured alone whose steps do not come (another tenant ran this many steps
#: meanwhile, held as they are, and the stage lasted this many of its modelled latencies
#: alone: a tenant of 0.2 ms steps runs 90 before one of 6 ms steps ends 9) keeps its
#: modelled latency alone.
ALONE_PATIENCE = 3 * CHECK_STEPS
#: The remedies for a late high-priority tenant, measured in turn (for the log).
REMEDIES = {"split": "other tenants' launches in pieces", "guard": "guard",
            "partition": "SM partitions", "exclusive": "exclusive steps",
            "pieces": "exclusive steps with the other tenants' launches in pieces"}


def gained(score: float, base: float) -> bool:
    """Whether a measured ``score`` is :data:`PLAN_GAIN` of ``base`` or less. A base of 0 (no
    latency alone to weigh the steps by: a given plan's profile of launches taking no time)
    is no measurement, and nothing gains on it."""
    return base > 0 and score <= PLAN_GAIN * base


class Trial:
    """The measurement of a plan in force (:meth:`PlanCheck._check`): the tenant whose steps
    pace it (``lead``: the high-priority one, else the one of the longest steps alone), each
    tenant's latency alone (``alones``, by number: what its slowdowns are measured against:
    its measured median step alone, else modelled; a tenant without a profile has none), the
    lead's latency alone its slowest step is held to (``alone``: its second slowest measured
    alone, else modelled; 0 without a profile), the tenant measured alone now (``subject``)
    and those still to be (``queue``), the stage (``alone``, ``plan``, ``own``, ``core``,
    ``split``, ``guard``, ``partition``, ``exclusive`` or ``pieces``), when it began
    (``started``, host clock), where each tenant's measured latencies began in this stage, the
    work in flight when it began (``backlog``: the last node of each stream, which the lead's
    first step in the stage waits for), when each tenant's step under way began (``opened``),
    each tenant's steps' beginnings in the stage (``begins``), the threads that began them
    (``threads``) and its period alone (``periods``), and the stages done: their plans, their measured scores, each with the
    lead's slowest and median step, and their paces (:func:`pace`)."""

    __slots__ = ("alone", "alones", "backlog", "begins", "first", "lead", "opened", "paces",
                 "periods", "plans", "queue", "scores", "stage", "started", "subject",
                 "threads")

    def __init__(self, lead: int, alones: dict[int, float], stage: str,
                 first: dict[int, int]) -> None:
        self.lead, self.alones, self.stage, self.first = lead, alones, stage, first
        self.alone = alones.get(lead, 0.0)
        self.subject = lead
        self.queue: list[int] = []
        self.backlog: list[Any] = []
        #: when the stage began, and each tenant's step under way (host clock), while one is
        self.started = time.perf_counter()
        self.opened: dict[int, float] = {}
        #: (the period alone: the median time from one beginning to the next, measured alone,
        #: the host's work between the steps counted; where it was measured)
        self.begins: dict[int, list[float]] = {}
        self.threads: dict[int, set[int]] = {}
        self.periods: dict[int, float] = {}
        self.scores: dict[str, tuple[float, float, float]] = {}
        #: each stage's pace (:func:`pace`), where measured
        self.paces: dict[str, float] = {}
        self.plans: dict[str, Plan] = {}


def own_settings(plan: Plan) -> Plan:
    """``plan`` without what it adds to the tenants' own settings (no splits, pointers,
    exclusive tenants, partitions or host core), modelled as the search's starting point."""
    return dataclasses.replace(plan, splits={}, after={}, exclusive=(), partitions={},
                               shared=(), one_core=(), after_outcome=plan.before)


def pace(trial: Trial) -> float | None:
    """The stage's *pace*: the seconds of the scored tenants' steps alone their threads ran a
    second (each tenant's steps begun a second in the stage, from its first beginning to its
    last, times its period alone, summed): 1.0 where they ran as fast as one after another,
    above where side by side paid. None where a scored tenant's period alone was not measured,
    or where one thread began steps of two scored tenants (its period alone then holds the
    others' steps: there is no pace one after another to compare with). Periods on the host's
    clock, not latencies on the device's: a period counts the host's work between a tenant's
    steps, and threads that wait for each other's turns at the interpreter lock lose their
    time there."""
    scored = [t for t, alone in trial.alones.items() if alone > 0]
    threads = [ident for t in scored for ident in trial.threads.get(t, ())]
    if len(threads) != len(set(threads)):
        return None
    total = 0.0
    for t in scored:
        period = trial.periods.get(t)
        if period is None:
            return None
        begins = trial.begins.get(t, [])
        if len(begins) >= 2 and begins[-1] > begins[0]:
            total += (len(begins) - 1) / (begins[-1] - begins[0]) * period
    return total


class PlanCheck(RemedyPlans):
    """The measured check's methods (a base of ``Regulator``, whose state they use); the
    remedies' plans are made by its base, :class:`~asyncgpu.runtime.remedy_plans.RemedyPlans`."""

    __slots__ = ()

    def _announce(self) -> None:
        """Tell the runtime's instruments where regulation stands, if that changed (the
        regulator does; the check calls it as a stage begins or the check ends)."""

    def _start(self, plan: Plan, stage: str, trial: Trial | None) -> Trial:
        """Begin measuring ``plan`` (stage ``stage``) from the tenants' next steps."""
        tenants = self.rt.tenants
        if trial is None:
            high = [t for t in self.tenants if tenants[t].priority == "high"]
            profiles = {p.name: p for p in plan.profile}
            # (a tenant without a profile has no latency alone to be slowed from: not scored)
            alones = {t: simulate((profiles[tenants[t].name],)).makespan_s
                      for t in self.tenants if tenants[t].name in profiles}
            # (without priorities, the tenant of the longest steps paces the stages: thirty
            # of a short tenant's steps may end before a long one's first measured step does)
            lead = high[0] if high else max(self.tenants, key=lambda t: alones.get(t, 0.0))
            trial = Trial(lead, alones, stage, {})
            self.alones = alones        # (what ``Regulation.alone`` shows, by name)
        trial.stage = stage
        trial.plans[stage] = plan
        trial.first = {t: tenants[t].measured + len(tenants[t].pending)
                       for t in self.tenants}
        # (work issued under the plan before, still queued: the others' launches a new gate
        # or pointer cannot reach, which the lead's first step would otherwise run behind)
        trial.backlog = self.rt._running()
        trial.begins = {}
        trial.threads = {}
        trial.started = time.perf_counter()
        self._trial = trial
        self._announce()
        return trial

    def _check(self) -> None:
        """Measure the plan in force on the device, then decide (the module docstring tells
        how). A stage ends once the lead tenant ran :data:`CHECK_STEPS` measured steps under
        it. Stages: ``alone`` (:meth:`_measure_alone`), ``plan``, ``own`` (when the plan adds
        to the tenants' own settings), ``core`` (:meth:`_core_plan`, :meth:`_judge_core`),
        then for a late high-priority lead ``split``, ``guard``, ``partition``, ``exclusive``
        and ``pieces`` (:meth:`_remedy`, :meth:`_judge`)."""
        trial = self._trial
        rt = self.rt
        tenants = rt.tenants
        backend = rt.backend
        elapsed = backend.elapsed_if_done
        for t in self.tenants:
            tenants[t].settle(elapsed)
        lead = tenants[trial.lead]
        if trial.stage == "alone":
            if self._alone_measured(trial) and not self._next_alone(trial):
                plan = trial.plans["plan"]
                self.apply(plan, measure=False)
                self._start(plan, "plan", trial)
            return
        measured = sorted(lead.latencies_after(trial.first[trial.lead] + 1))
        if len(measured) < CHECK_STEPS:
            return
        worst = measured[-1]
        slowdowns = []
        now = time.perf_counter()
        for t, alone in trial.alones.items():
            mine = tenants[t].latencies_after(trial.first[t] + 1)
            began = trial.opened.get(t)
            if began is not None and now - began > max(mine, default=0.0):
                # (a step under way longer than any it ended in the stage, one the plan holds:
                # it counts as long as it ran so far, or a plan that stalls a tenant's steps
                # would score as if that tenant did not run)
                mine.append(now - began)
            if mine and alone > 0:
                slowdowns.append(statistics.fmean(mine) / alone)
        high = lead.priority == "high" and trial.alone > 0
        trial.scores[trial.stage] = (score(slowdowns, [worst / trial.alone] if high else []),
                                     worst, measured[len(measured) // 2])
        paced = pace(trial)
        n = len(measured)
        log.info("asyncgpu: regulation stage %r measured: %r's steps p50 %.3f, p90 %.3f, "
                 "slowest %s ms; the tenants' slowdowns %s; pace %s", trial.stage, lead.name,
                 measured[n // 2] * 1e3, measured[int(0.9 * n)] * 1e3,
                 ", ".join(f"{v * 1e3:.3f}" for v in measured[-3:]),
                 ", ".join(f"{v:.2f}" for v in slowdowns),
                 "not measured" if paced is None else f"{paced:.2f}")
        self.measured[trial.stage] = trial.scores[trial.stage][0]
        if paced is not None:
            trial.paces[trial.stage] = self.paces[trial.stage] = paced
        stage, plan = trial.stage, self.plan
        if stage == "plan" and (plan.splits or plan.after or plan.exclusive):
            own = own_settings(plan)
            self.apply(own, measure=False)
            self._start(own, "own", trial)
            return
        if stage == "own":
            keep = "plan" if gained(trial.scores["plan"][0], trial.scores["own"][0]) else "own"
            log.info("asyncgpu: regulation measured the plan at %.2f and the tenants' own "
                     "settings at %.2f (score: the largest slowdown, plus the high-priority "
                     "tenant's lateness weighted); %s kept", trial.scores["plan"][0],
                     trial.scores["own"][0],
                     "the plan" if keep == "plan" else "their own settings")
            self._store(trial.plans["plan"], trial.plans[keep])
            self.apply(trial.plans[keep], measure=False)
            stage, worst = keep, trial.scores[keep][1]
        if stage == "core":
            stage = "core" if self._judge_core(trial, high) else "core-base"
            worst = trial.scores[stage][1]
        elif stage in ("plan", "own"):
            core = self._core_plan(trial, stage)
            if core is not None:
                log.info("asyncgpu: the tenants' steps ran at %.2f of their pace one after "
                         "another; their threads now run on one host core (%s), measured in turn",
                         trial.paces[stage], ", ".join(core.one_core))
                self._try(trial, stage, "core", core)
                return
        if stage in REMEDIES:
            kept, worst = self._judge(trial, stage, lead.name, worst)
            if not kept:
                stage += "-base"        # (the plan in force: the one without the remedy)
        self.checked[lead.name] = (worst, trial.alone)
        normal = [t for t in self.tenants if tenants[t].priority != "high"]
        if (not high or not normal or worst <= HIGH_TARGET * trial.alone
                or "pieces-base" in trial.plans):
            self._trial = None
            self._announce()
            return
        if "split-base" not in trial.plans and "split" not in self._lost:
            split = self._split_plan(self.plan, normal, trial.alone)
            if split is not None:
                self._remedy(trial, stage, "split", split, measured,
                             f"the other tenants' long launches now run in pieces "
                             f"({split.splits})")
                return
        kept = self.plan
        if "guard-base" not in trial.plans and "guard" not in self._lost:
            after = {name: dict(ks) for name, ks in kept.after.items()}
            for t in normal:
                after.setdefault(tenants[t].name, {})["*"] = (lead.name, "*")
            self._remedy(trial, stage, "guard", dataclasses.replace(kept, after=after),
                         measured, "the other tenants now wait for its launches")
            return
        if "partition-base" not in trial.plans and "partition" not in self._lost:
            partitioned = self._partition_plan(kept, trial.lead, normal)
            if partitioned is not None:
                self._remedy(trial, stage, "partition", partitioned, measured,
                             f"it now runs on SMs of its own, the other tenants on the "
                             f"rest ({partitioned.describe()})")
                return
        if "exclusive" not in self._lost and not lead.exclusive:
            self._remedy(trial, stage, "exclusive",
                         dataclasses.replace(kept, exclusive=(lead.name,)), measured,
                         "its steps now keep the other tenants' launches waiting (exclusive)")
            return
        if "pieces" not in self._lost:
            # (an exclusive step still waits for the one launch each other tenant has in
            # flight as it begins: pieces bound how long that is)
            pieces = self._split_plan(dataclasses.replace(kept, exclusive=(lead.name,)),
                                      normal, trial.alone)
            if pieces is not None:
                self._remedy(trial, stage, "pieces", pieces, measured,
                             f"its steps are now exclusive and the other tenants' long "
                             f"launches run in pieces ({pieces.splits})")
                return
        self._trial = None
        self._announce()

    def _judge_core(self, trial: Trial, high: bool) -> bool:
        """The end of the ``core`` stage: one core is kept (stored in place of the plan without
        it) if the stage's pace is the plan's without it over :data:`PLAN_GAIN` or more and,
        for a high-priority lead, its median step is at most :data:`MEDIAN_SLACK` slower; else
        that plan is back and one core is not tried again. Returns whether it was kept."""
        before, now = trial.paces["core-base"], trial.paces.get("core", 0.0)
        median, median_now = trial.scores["core-base"][2], trial.scores["core"][2]
        if now * PLAN_GAIN >= before and (not high or median_now <= MEDIAN_SLACK * median):
            log.info("asyncgpu: the tenants' threads on one host core kept (pace %.2f -> %.2f of "
                     "their steps one after another)", before, now)
            return self._settle(trial, "core", True)
        log.info("asyncgpu: the tenants' threads on one host core did not help (pace %.2f -> "
                 "%.2f, the lead's median step %.3f -> %.3f ms); the plan goes back to the one "
                 "without it", before, now, median * 1e3, median_now * 1e3)
        return self._settle(trial, "core", False)

    def _measure_alone(self, trial: Trial) -> None:
        """Begin the ``alone`` stages of ``trial``, just started on its plan, for each tenant
        it scores not yet measured alone beside this plan's shape (the lead first), where it
        scores two or more: under the tenants' own settings, that tenant exclusive, each of
        its steps begins once no work is in flight (``Runtime.begin_step``) and the others'
        launches wait meanwhile, for :data:`ALONE_STEPS` steps of the lead and
        :data:`OTHERS_ALONE_STEPS` of each other tenant; its latency alone is then measured,
        not modelled (a model of its kernels leaves out its step's host work: its reset, its
        launches' gaps, which make a host-heavy tenant's steps look several times slowed)."""
        tenants = self.rt.tenants
        if self.stood_in or sum(1 for a in trial.alones.values() if a > 0) < 2:
            return
        shape = trial.plans["plan"].shape
        for t in [trial.lead] + [t for t in self.tenants if t != trial.lead]:
            if trial.alones.get(t, 0.0) <= 0:
                continue
            known = self.book.alone.get((tenants[t].name, shape)) if shape else None
            if known is None:
                trial.queue.append(t)
            else:
                trial.alones[t] = known[0]
                if known[2] > 0:
                    trial.periods[t] = known[2]
                if t == trial.lead:
                    trial.alone = known[1]
        self._next_alone(trial)

    def _next_alone(self, trial: Trial) -> bool:
        """Begin the ``alone`` stage of the next tenant of ``trial.queue``; False if none is
        left."""
        if not trial.queue:
            return False
        trial.subject = trial.queue.pop(0)
        name = self.rt.tenants[trial.subject].name
        self.apply(dataclasses.replace(own_settings(trial.plans["plan"]), exclusive=(name,)),
                   measure=False)
        self._start(self.plan, "alone", trial)
        return True

    def _alone_measured(self, trial: Trial) -> bool:
        """At a step end during an ``alone`` stage: whether the subject's steps alone are
        measured; if so its latency alone is their median (for its slowdowns) and, for the
        lead, their second slowest (for its target). The first step after the stage began is
        left out, as in every stage (it may have begun before, beside the others). A tenant
        other than the lead whose steps do not come keeps its modelled latency alone."""
        tenants = self.rt.tenants
        t = trial.subject
        subject = tenants[t]
        need = ALONE_STEPS if t == trial.lead else OTHERS_ALONE_STEPS
        measured = sorted(subject.latencies_after(trial.first[t] + 1))
        if len(measured) < need:
            # (each other tenant's steps measured in the stage, its first left out)
            others = max((tenants[o].measured - trial.first[o] - 1 for o in self.tenants
                          if o != t), default=0)
            waited = time.perf_counter() - trial.started
            if (t == trial.lead or others < ALONE_PATIENCE
                    or waited < ALONE_PATIENCE * trial.alones[t]):
                return False
            log.info("asyncgpu: tenant %r ran %d steps while measured alone (the others %d); "
                     "its latency alone stays modelled", subject.name, len(measured), others)
            return True
        n = len(measured)
        modelled = trial.alones[t]
        trial.alones[t] = measured[n // 2]
        if t == trial.lead:
            trial.alone = measured[-2]
        shape = trial.plans["plan"].shape
        begins = trial.begins.get(t, [])
        gaps = sorted(b - a for a, b in zip(begins, begins[1:]))
        period = gaps[len(gaps) // 2] if gaps else 0.0
        if period > 0:
            trial.periods[t] = period
        if shape:
            self.book.alone[(subject.name, shape)] = (measured[n // 2], measured[-2], period)
        log.info("asyncgpu: tenant %r measured alone (%d steps): p50 %.3f ms, second slowest "
                 "%.3f ms (modelled %.3f ms), a step every %.3f ms", subject.name, n,
                 measured[n // 2] * 1e3, measured[-2] * 1e3, modelled * 1e3, period * 1e3)
        return True

    def _remedy(self, trial: Trial, stage: str, remedy: str, plan: Plan,
                measured: list[float], what: str) -> None:
        """Measure ``plan``, the plan in force with ``remedy`` added (``what`` it does, for
        the log), from the tenants' next steps, against the plan in force (stage ``stage``'s,
        whose lead latencies were ``measured``) as ``remedy + "-base"``."""
        worst = trial.scores[stage][1]
        log.info("asyncgpu: high-priority tenant %r took %.3f ms (the slowest of %d steps) "
                 "against %.3f ms alone; %s, measured in turn", self.rt.tenants[trial.lead].name,
                 worst * 1e3, len(measured), trial.alone * 1e3, what)
        self._try(trial, stage, remedy, plan)

    def _try(self, trial: Trial, stage: str, remedy: str, plan: Plan) -> None:
        """Measure ``plan`` as stage ``remedy``, the plan in force (stage ``stage``'s) kept as
        ``remedy + "-base"``, with what its stage measured, to be judged against."""
        base = remedy + "-base"
        trial.plans[base] = self.plan
        trial.scores[base] = trial.scores[stage]
        if stage in trial.paces:
            trial.paces[base] = trial.paces[stage]
        self.apply(plan, measure=False)
        self._start(plan, remedy, trial)

    def _settle(self, trial: Trial, remedy: str, kept: bool) -> bool:
        """A remedy measured: ``kept``, it is stored in place of the plan without it; else
        that plan is back and the remedy is not tried again. Returns ``kept``."""
        base = trial.plans[remedy + "-base"]
        if kept:
            self._store(base, self.plan)
        else:
            self._lost.add(remedy)
            self.apply(base, measure=False)
        return kept

    def _judge(self, trial: Trial, remedy: str, lead: str, worst: float) -> tuple[bool, float]:
        """The end of a remedy's measurement (one of :data:`REMEDIES`): kept (and stored in
        place of the plan without it) if it brought the score to :data:`PLAN_GAIN` of that
        plan's or less while the lead's slowest step is no slower and its median step at most
        :data:`MEDIAN_SLACK` slower, else that plan is back and the remedy is not tried
        again. Returns whether it was kept and the lead's slowest step under the plan now in
        force."""
        base = remedy + "-base"
        base_score, before, median = trial.scores[base]
        got, _, now = trial.scores[remedy]
        if gained(got, base_score) and worst <= before and now <= MEDIAN_SLACK * median:
            log.info("asyncgpu: high-priority tenant %r: the %s kept (slowest step %.3f -> "
                     "%.3f ms, score %.2f -> %.2f)", lead, REMEDIES[remedy], before * 1e3,
                     worst * 1e3, base_score, got)
            return self._settle(trial, remedy, True), worst
        log.info("asyncgpu: high-priority tenant %r: the %s did not help (slowest step %.3f "
                 "-> %.3f ms, score %.2f -> %.2f); the plan goes back to the one without it", lead,
                 REMEDIES[remedy], before * 1e3, worst * 1e3, base_score, got)
        return self._settle(trial, remedy, False), before
