"""``asyncgpu.regulate``: profile the tenants' steps, search a regulation plan, run with it.

The model
---------
``regulate(plan="search")`` regulates the tenants that have run steps (or those named): a
:class:`Regulator` on the runtime goes through three stages.

1. *profiling*: each of those tenants' next ``steps`` steps is profiled. Every kernel launch
   in them runs alone on the device (after the previous profiled launch, of any tenant: an
   edge of reason ``profile``) between two timing events, and is noted with its launch shape,
   the bytes it moves and its data parents in the step. The tenants' own splits and pointers
   are set aside while profiling (the launches run whole; the search keeps them).
2. *search*: once the profiled steps of every tenant have completed on the device, the last
   one of each becomes the profile (``asyncgpu.core.regulation``), each launch timed at the
   least it took at its place in the profiled steps (a tenant that ran no step while another
   ran twice ``steps`` is idle and left out). A plan already found for the same
   *shape* (each tenant's step as its launches: kernel, grid, block) is reused, otherwise
   :func:`~asyncgpu.core.regulation.search` finds one within ``budget_s``. The plan's splits
   and pointers become the tenants' (beside their own), and the state is *regulated*.
3. *check*: a model errs, so the plan is measured on the device too, stage by stage, each
   over the lead tenant's next :data:`CHECK_STEPS` steps (the high-priority tenant, else the
   first regulated one); a stage's score is the slowest tenant's median step latency plus
   ``LATE_WEIGHT`` times the high-priority lead's p90 beyond ``HIGH_TARGET`` times its
   modelled latency alone. The plan is measured, then (when it adds anything) the tenants'
   own settings, and the plan is kept and stored only if it scores :data:`PLAN_GAIN` of
   theirs or less (a plan within the measurement's noise of none changes nothing worth its
   ordering), else the tenants' own settings are. Then, if a high-priority lead beside
   normal tenants is still over its target, two remedies are measured in turn, each kept
   only if it cut the lead's p90 to :data:`GUARD_GAIN` of what it was: first the normal
   tenants' splittable launches longer than :data:`SLICE` of the lead's latency alone are
   cut into pieces no longer than that (at most :data:`MOST_PIECES`; a model of the device
   shares its threads, but blocks that hold a multiprocessor for a whole long launch keep
   the lead's blocks waiting, which pieces end), then every normal tenant's launches wait
   for the lead's latest unfinished launch (a pointer from every kernel to every kernel,
   ``"*"``: priority before throughput, as ``priority="high"`` asks).

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
from typing import Any

from ..core.interference import Sample, heuristic_class, moved_bytes
from ..core.plan import Op, Plan, TenantProfile
from ..core.regulation import HIGH_TARGET, LATE_WEIGHT, occupancy, search, simulate
from .chunks import splittable

log = logging.getLogger("asyncgpu")

#: Steps of a high-priority tenant measured under a searched plan before it is checked.
CHECK_STEPS = 10
#: A searched plan is kept when its measured score is this fraction of the tenants' own
#: settings' or less (two measurements of ten steps each differ by a few percent alone).
PLAN_GAIN = 0.97
#: A guard is kept when it brings the high-priority tenant's p90 to this fraction or less.
GUARD_GAIN = 0.9
#: The split guard cuts normal tenants' launches into pieces of at most this fraction of the
#: high-priority tenant's latency alone, in at most ``MOST_PIECES`` pieces.
SLICE = 0.05
MOST_PIECES = 32
#: The remedies for a late high-priority tenant, measured in turn (for the log).
REMEDIES = {"split": "other tenants' launches in pieces", "guard": "guard"}


@dataclasses.dataclass(frozen=True)
class Regulation:
    """Where regulation stands (``asyncgpu.regulation()``): ``state`` (``off``,
    ``profiling`` or ``regulated``), the tenants regulated, the plan in force (or None), the
    tenants whose profiled steps are still awaited, how many plans are stored, were searched
    and were reused, per high-priority tenant checked under the plan its measured p90 step
    latency and its modelled latency alone (seconds), the stage of the plan's measurement now
    (``plan``, ``own``, ``split``, ``guard``; empty when none is under way), and the measured
    score of each stage done (seconds: the slowest tenant's median step latency, plus the
    high-priority tenant's lateness weighted as in the search)."""

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


class _Trial:
    """The measurement of a plan in force (:meth:`Regulator._check`): the tenant whose steps
    pace it (``lead``: the high-priority one, else the first regulated), its modelled latency
    alone, the stage (``plan``, ``own``, ``split`` or ``guard``), where each tenant's measured
    latencies began in this stage, and the measured scores and plans of the stages done."""

    __slots__ = ("alone", "first", "lead", "plans", "scores", "stage")

    def __init__(self, lead: int, alone: float, stage: str, first: dict[int, int]) -> None:
        self.lead, self.alone, self.stage, self.first = lead, alone, stage, first
        self.scores: dict[str, tuple[float, float]] = {}
        self.plans: dict[str, Plan] = {}


class _Step:
    """One open step of a regulated tenant on one thread: its launches' shape keys and, when
    profiled, its ops (kernel or recording name, timing sample, data parents in the step,
    share of the device, memory-bound, bytes moved, splittable) and each op's node's
    index."""

    __slots__ = ("index_of", "keys", "ops")

    def __init__(self) -> None:
        self.keys: list[tuple[Any, ...]] = []
        self.ops: list[tuple[Any, ...]] = []
        self.index_of: dict[Any, int] = {}


class Regulator:
    """One runtime's regulation (see the module docstring). Every method runs under the
    runtime's lock."""

    def __init__(self, rt: Any, tenants: list[int], steps: int, budget_s: float,
                 book: _Book | None = None) -> None:
        self.rt = rt
        #: the plans found so far, kept across ``regulate`` calls
        self.book = book if book is not None else _Book()
        self.tenants = tenants
        self.steps = steps
        self.budget_s = budget_s
        self.state = "profiling"
        self.plan: Plan | None = None
        self._open: dict[tuple[int, int], _Step] = {}
        self._profiled: dict[int, list[list[tuple[Any, ...]]]] = {t: [] for t in tenants}
        self._shapes: dict[int, tuple[Any, ...]] = {}
        self._last: Any = None          # the latest profiled node (the next waits for it)
        #: the measurement of the plan in force, if under way; and its result per lead tenant's
        #: name: (measured p90, modelled alone), seconds
        self._trial: _Trial | None = None
        self.checked: dict[str, tuple[float, float]] = {}
        self.measured: dict[str, float] = {}
        #: the remedies (``split``, ``guard``) measured no better: not tried again
        self._lost: set[str] = set()
        #: test hook (``asyncgpu.testing.regulation``): a profiled op's (seconds, share, grid)
        #: from its kernel's name and its measured seconds, modelled share and grid
        self.stand_in: Any = None

    # -- the runtime's calls -----------------------------------------------------------------
    def begin(self, index: int) -> None:
        if self.state == "off":
            return
        if index in self._profiled:
            self._open[(threading.get_ident(), index)] = _Step()
        if self.state == "profiling":
            self._try_finish()

    def launch(self, index: int, launcher: Any) -> _Step | None:
        """A kernel launch of tenant ``index``: noted in its open step; returns the step when
        the launch is to be profiled (the caller then issues it through :meth:`profile`)."""
        step = self._open.get((threading.get_ident(), index))
        if step is None:
            return None
        step.keys.append((launcher.kernel.name, launcher.grid3, launcher.block3))
        return step if self.state == "profiling" else None

    def profile(self, node: Any, launcher: Any, step: _Step) -> None:
        """Issue a profiled kernel launch: alone (after the previous profiled one), timed."""
        rt = self.rt
        backend = rt.backend
        share, threads, attrs, waves = self._shape(launcher)
        nbytes = moved_bytes(node.accesses)
        memory = heuristic_class(nbytes, threads, attrs) == "memory"
        sample = Sample(None, backend.timing_event(node.device),
                        backend.timing_event(node.device))
        grid = waves if launcher.kernel.grid_offset is not None else 0.0
        previous = self._note(node, step, sample, launcher.kernel.name, share, memory, nbytes,
                              splittable(launcher), grid)
        rt.issue_after(node, previous, "profile")

    def _shape(self, launcher: Any) -> tuple[float, int, dict[str, Any], float]:
        """A launch's share of the device (at most 1), its threads, its kernel's attributes
        (registers, shared memory; empty where the backend has none) and its ``occupancy``
        (above 1: the grid runs in waves)."""
        backend = self.rt.backend
        grid, block = launcher.grid3, launcher.block3
        blocks, per_block = grid[0] * grid[1] * grid[2], block[0] * block[1] * block[2]
        attrs = None
        attributes = getattr(backend, "kernel_attributes", None)
        if attributes is not None:
            try:
                attrs = attributes(launcher.kernel)
            except Exception:  # noqa: BLE001 - a kernel without attributes: shape only
                attrs = None
        attrs = attrs or {}
        waves = occupancy(blocks, per_block, getattr(backend, "sm_count", 132),
                          attrs.get("regs", 0), attrs.get("shared", 0))
        return min(1.0, waves), blocks * per_block, attrs, waves

    def graph(self, index: int, node: Any, frozen: Any) -> tuple[Any, ...] | None:
        """A graph launch (a recorded function's replay) of tenant ``index``: noted in its open
        step by the recording's name; while profiling, timed as one launch holding the share
        of the device its largest kernel holds (its kernels may run side by side inside it, so
        this is a floor), and the profiled launch it must wait for is returned (``()`` for
        none)."""
        step = self._open.get((threading.get_ident(), index))
        if step is None:
            return None
        step.keys.append((frozen.name, frozen.kernels))
        if self.state != "profiling":
            return None
        backend = self.rt.backend
        graph = frozen.graph
        share = max((self._shape(launch.launcher)[0] for launch in frozen.launches
                     if hasattr(launch, "launcher")), default=1.0)
        sample = Sample(graph, backend.timing_event(node.device),
                        backend.timing_event(node.device), getattr(graph, "done", None))
        return self._note(node, step, sample, frozen.name, share, False,
                          moved_bytes(node.accesses), False)

    def _note(self, node: Any, step: _Step, sample: Sample, name: str, share: float,
              memory: bool, nbytes: int, splittable: bool, grid: float = 0.0
              ) -> tuple[Any, ...]:
        """Put a profiled launch in its step (with its data parents there) and on its node;
        the previous profiled launch it waits for (``()`` for none)."""
        found = self.rt.deps.conflicts(node.accesses)
        parents = tuple(sorted(step.index_of[p] for p in found if p in step.index_of))
        node.keepalive = sample
        step.index_of[node] = len(step.ops)
        step.ops.append((name, sample, parents, share, memory, nbytes, splittable, grid))
        last = self._last
        self._last = node
        return () if last is None else (last,)

    def end(self, index: int) -> None:
        step = self._open.pop((threading.get_ident(), index), None)
        if step is None:
            return
        shape = tuple(step.keys)
        if self.state == "profiling":
            if step.ops:
                self._profiled[index].append(step.ops)
                self._shapes[index] = shape
            self._try_finish()
        elif self.plan is not None and self.plan.shape and shape != self._expected(index):
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
                         if len(self._profiled[t]) < self.steps)
        return Regulation(self.state, tuple(names[t].name for t in self.tenants), self.plan,
                          awaiting, len(book.plans), book.searched, book.reused,
                          dict(self.checked),
                          self._trial.stage if self._trial is not None else "",
                          dict(self.measured))

    # -- states ------------------------------------------------------------------------------
    def _expected(self, index: int) -> Any:
        name = self.rt.tenants[index].name
        for tenant, shape in self.plan.shape if self.plan else ():
            if tenant == name:
                return shape
        return None

    def _profile_again(self) -> None:
        self.apply(None)
        self.state = "profiling"
        self._profiled = {t: [] for t in self.tenants}
        self._shapes = {}
        for step in self._open.values():
            step.keys.clear()       # (an open step began regulated: not profiled)

    def apply(self, plan: Plan | None, measure: bool = True) -> None:
        """Make ``plan``'s splits and pointers the regulated tenants' (None: their own); with
        ``measure``, a plan searched on a profile is then measured (:meth:`_check`)."""
        self.plan = plan
        for t in self.tenants:
            tenant = self.rt.tenants[t]
            splits, after = tenant.given
            if plan is not None:
                more_splits, more_after = plan.tenant_settings(tenant.name)
                splits = {**(more_splits or {}), **(splits or {})} or None
                after = {**(more_after or {}), **(after or {})} or None
            tenant.splits, tenant.after = splits, after
        if measure:
            self._trial = None
        if plan is not None:
            self.state = "regulated"
            if measure and plan.profile:
                self._trial = self._start(plan, "plan", None)

    # -- the measured check ------------------------------------------------------------------
    def _start(self, plan: Plan, stage: str, trial: _Trial | None) -> _Trial:
        """Begin measuring ``plan`` (stage ``stage``) from the tenants' next steps."""
        tenants = self.rt.tenants
        if trial is None:
            high = [t for t in self.tenants if tenants[t].priority == "high"]
            lead = (high or self.tenants)[0]
            profile = next((p for p in plan.profile if p.name == tenants[lead].name), None)
            alone = simulate((profile,)).makespan_s if profile is not None else 0.0
            trial = _Trial(lead, alone, stage, {})
        trial.stage = stage
        trial.plans[stage] = plan
        trial.first = {t: len(tenants[t].latencies) + len(tenants[t].pending)
                       for t in self.tenants}
        return trial

    def _check(self) -> None:
        """Measure the plan in force on the device, then decide (see the module docstring).
        A stage ends once the lead tenant ran :data:`CHECK_STEPS` measured steps under it;
        its score is the slowest tenant's median step latency, plus ``LATE_WEIGHT`` times a
        high-priority lead's p90 beyond ``HIGH_TARGET`` times its modelled latency alone (the
        model's objective, measured). Stages: ``plan`` (the searched plan); ``own`` (the
        tenants' own settings, when the plan adds to them), the plan kept and stored if it
        scored :data:`PLAN_GAIN` of theirs or less, else theirs; then, for a high-priority
        lead still over its target beside normal tenants,
        ``split`` (the others' long splittable launches in pieces, :meth:`_split_plan`) and
        ``guard`` (the others wait for its launches), each kept only if it cut the lead's p90
        to :data:`GUARD_GAIN` of what it was."""
        trial = self._trial
        rt = self.rt
        tenants = rt.tenants
        backend = rt.backend
        for t in self.tenants:
            tenants[t].settle(backend.event_done, backend.elapsed_s)
        lead = tenants[trial.lead]
        measured = sorted(lead.latencies[trial.first[trial.lead]:])
        if len(measured) < CHECK_STEPS:
            return
        p90 = measured[min(len(measured) - 1, int(0.9 * len(measured)))]
        medians = []
        for t in self.tenants:
            mine = sorted(tenants[t].latencies[trial.first[t]:])
            if mine:
                medians.append(mine[len(mine) // 2])
        high = lead.priority == "high"
        late = max(0.0, p90 - HIGH_TARGET * trial.alone) if high else 0.0
        trial.scores[trial.stage] = (max(medians) + LATE_WEIGHT * late, p90)
        self.measured[trial.stage] = trial.scores[trial.stage][0]
        stage, plan = trial.stage, self.plan
        if stage == "plan" and (plan.splits or plan.after):
            # (modelled as the search's starting point: the tenants' own settings)
            own = dataclasses.replace(plan, splits={}, after={}, after_outcome=plan.before)
            self.apply(own, measure=False)
            self._start(own, "own", trial)
            return
        if stage == "own":
            keep = ("plan" if trial.scores["plan"][0] <= PLAN_GAIN * trial.scores["own"][0]
                    else "own")
            log.info("asyncgpu: regulation measured the plan at %.3f ms and the tenants' own "
                     "settings at %.3f ms (score); %s kept", trial.scores["plan"][0] * 1e3,
                     trial.scores["own"][0] * 1e3,
                     "the plan" if keep == "plan" else "their own settings")
            self._store(trial.plans["plan"], trial.plans[keep])
            self.apply(trial.plans[keep], measure=False)
            stage, p90 = keep, trial.scores[keep][1]
        if stage == "split":
            kept, p90 = self._judge(trial, "split", lead.name, p90)
            if not kept:
                stage = "split-base"
        if stage == "guard":
            _, p90 = self._judge(trial, "guard", lead.name, p90)
            self.checked[lead.name] = (p90, trial.alone)
            self._trial = None
            return
        self.checked[lead.name] = (p90, trial.alone)
        normal = [t for t in self.tenants if tenants[t].priority != "high"]
        if not high or not normal or p90 <= HIGH_TARGET * trial.alone:
            self._trial = None
            return
        if "split-base" not in trial.plans and "split" not in self._lost:
            split = self._split_plan(self.plan, normal, trial.alone)
            if split is not None:
                log.info("asyncgpu: high-priority tenant %r took %.3f ms (p90 of %d steps) "
                         "against %.3f ms alone; the other tenants' long launches now run in "
                         "pieces (%s), measured in turn", lead.name, p90 * 1e3, len(measured),
                         trial.alone * 1e3, split.splits)
                trial.plans["split-base"] = self.plan
                trial.scores["split-base"] = trial.scores[stage]
                self.apply(split, measure=False)
                self._start(split, "split", trial)
                return
        if "guard" in self._lost:
            self._trial = None
            return
        kept = self.plan
        after = {name: dict(ks) for name, ks in kept.after.items()}
        for t in normal:
            after.setdefault(tenants[t].name, {})["*"] = (lead.name, "*")
        log.info("asyncgpu: high-priority tenant %r took %.3f ms (p90 of %d steps) against "
                 "%.3f ms alone; the other tenants now wait for its launches, measured in turn",
                 lead.name, p90 * 1e3, len(measured), trial.alone * 1e3)
        trial.plans["guard-base"] = kept
        trial.scores["guard-base"] = trial.scores[stage]
        guarded = dataclasses.replace(kept, after=after)
        self.apply(guarded, measure=False)
        self._start(guarded, "guard", trial)

    def _judge(self, trial: _Trial, remedy: str, lead: str, p90: float) -> tuple[bool, float]:
        """The end of a remedy's measurement (``split`` or ``guard``): kept (and stored in
        place of the plan without it) if it cut the lead's p90 to :data:`GUARD_GAIN` of that
        plan's, else that plan is back and the remedy is not tried again. Returns whether it
        was kept and the lead's p90 under the plan now in force."""
        base = remedy + "-base"
        before = trial.scores[base][1]
        if p90 < GUARD_GAIN * before:
            log.info("asyncgpu: high-priority tenant %r: the %s kept (p90 %.3f -> %.3f ms)",
                     lead, REMEDIES[remedy], before * 1e3, p90 * 1e3)
            self._store(trial.plans[base], self.plan)
            return True, p90
        log.info("asyncgpu: high-priority tenant %r: the %s did not help (p90 %.3f -> %.3f ms); "
                 "the plan goes back to the one without it", lead, REMEDIES[remedy],
                 before * 1e3, p90 * 1e3)
        self._lost.add(remedy)
        self.apply(trial.plans[base], measure=False)
        return False, before

    def _split_plan(self, kept: Plan, normal: list[int], alone: float) -> Plan | None:
        """``kept`` with the ``normal`` tenants' splittable launches longer than :data:`SLICE`
        of the lead's latency ``alone`` (their time alone in the profile) cut into pieces no
        longer than that (a power of two, at most :data:`MOST_PIECES`; never fewer than
        ``kept`` has); None when that changes nothing. A kernel a pointer holds is left whole
        (a plan never splits and points one kernel)."""
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
                pieces = 2
                while pieces < MOST_PIECES and op.seconds / pieces > slice_s:
                    pieces *= 2
                if pieces > mine.get(op.kernel, 1):
                    mine[op.kernel] = pieces
                    changed = True
        if not changed:
            return None
        return dataclasses.replace(kept, splits={n: ks for n, ks in splits.items() if ks})

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
            # left out of this plan)
            idle = [t for t, n in zip(self.tenants, counts) if n == 0]
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
        book = self.book
        plan = book.plans.get(shape)
        if plan is not None:
            book.reused += 1
            log.info("asyncgpu: regulation plan reused: %s", plan.describe())
        else:
            profiles = tuple(self._profile(t, steps) for t, steps in lasts.items())
            given = {self.rt.tenants[t].name: self.rt.tenants[t].given for t in self.tenants}
            plan = search(profiles, self.budget_s, given, shape)
            book.plans[shape] = plan
            book.searched += 1
            log.info("asyncgpu: regulation plan searched in %.3f s over %d modelled runs: %s",
                     plan.search_s, plan.modelled, plan.describe())
        self._last = None
        self.apply(plan)

    def _profile(self, index: int, steps: list[list[tuple[Any, ...]]]) -> TenantProfile:
        """Tenant ``index``'s profile from its profiled ``steps``: the last one's launches,
        each timed at the least it took at its place in those of the same launches: a launch
        alone can only be lengthened (by another process's work on the device, say), so one
        slow sample does not make the plan."""
        rt = self.rt
        backend = rt.backend
        ops = steps[-1]
        names = [op[0] for op in ops]
        alike = [step for step in steps if [op[0] for op in step] == names]
        timed = []
        for i, (name, _, parents, share, memory, nbytes, splittable, grid) in enumerate(ops):
            seconds = None
            for step in alike:
                sample = step[i][1]
                took = max(backend.elapsed_s(sample.start, sample.end), 1e-9)
                if self.stand_in is not None:
                    took, share, grid = self.stand_in(name, took, share, grid)
                seconds = took if seconds is None else min(seconds, took)
            timed.append((name, seconds, share, memory, nbytes, parents, splittable, grid))
        # bandwidth as a share of the fastest rate a memory-bound launch reached (the device's
        # peak, near enough, when the mix has one)
        peak = max((nbytes / seconds for _, seconds, _, memory, nbytes, *_ in timed if memory),
                   default=0.0)
        out = [Op(name, seconds, share,
                  min(1.0, nbytes / seconds / peak) if memory and peak else 0.0,
                  splittable and rt.placement is None, parents, grid)
               for name, seconds, share, memory, nbytes, parents, splittable, grid in timed]
        tenant = rt.tenants[index]
        return TenantProfile(tenant.name, tenant.priority, tuple(out), tenant.streams == 1)


class _Book:
    """The plans a runtime found, by shape, and how many were searched and reused."""

    def __init__(self) -> None:
        self.plans: dict[Any, Plan] = {}
        self.searched = 0
        self.reused = 0


__all__ = ["Regulation", "Regulator"]
