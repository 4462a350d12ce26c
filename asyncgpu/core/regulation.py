"""Regulation: the plan of splits and pointers for tenants sharing a device, and its search.

The model
---------
GACER regulates co-running tenants at two granularities: *spatial* (an operator launched in
pieces, so that other tenants' work starts between them) and *temporal* (synchronization
pointers: an operator of one tenant waits for an operator of another, so the two never run
side by side). A :class:`~asyncgpu.core.plan.Plan` holds both, per tenant: ``splits`` (kernel name -> pieces) and
``after`` (kernel name -> (tenant, kernel) it waits for), as ``asyncgpu.tenant`` takes them.

The search works on a *profile* of one step of each tenant
(:class:`~asyncgpu.core.plan.TenantProfile`): its launches in issue order (``Op``), each with its time alone on the device, the share of the
device's threads it holds while it runs (:func:`occupancy_share`, from its launch shape and
its kernel's registers and shared memory), the share of the device's bandwidth it uses, and
the earlier launches of the step it depends on. :func:`simulate` plays the tenants' steps,
all started together, on a model of the device:

* a launch starts once its parents, and the launch its pointer names, are done; a tenant held
  to one stream runs its launches in issue order;
* the device's threads are capacity 1; a running launch keeps what it was given (blocks are
  not preempted), and capacity that frees up goes to the started launches still short of
  their share and then to waiting launches, high-priority tenants' first (CUDA's stream
  priorities), each in the order it became ready; a launch progresses at the fraction of its
  share it holds;
* launches that together ask for more than the device's bandwidth are slowed in proportion,
  and by :data:`CONTENTION` beyond it (they thrash each other's cache lines too);
* of two launches of two tenants *profiled in pairs* (:class:`~asyncgpu.core.plan.PairProfile`:
  timed alone and side by side on the device), one that ended later side by side than the
  model makes it runs slower while the other runs beside it, by the factor that makes its end
  in the model of the two the measured one (:func:`pair_slowdowns`): blocks that share a
  multiprocessor share its issue slots and caches, which threads and bandwidth alone do not
  capture;
* a piece of a launch split in ``k`` takes :data:`PIECE_S` more than its part of the work:
  an element-wise kernel's piece is launched on the same grid over a ``k``-th of the rows, so
  it holds the same share for ``1/k`` of the time; a grid-offset kernel's piece runs a
  ``k``-th of the blocks, so its time follows its waves and its share its blocks (``Op.grid``:
  a piece of a grid that fits the device at once holds a ``k``-th of the share for as long as
  the whole launch, one of a grid of ``k`` waves or more the whole device for ``1/k`` of the
  time).

Its ``Outcome`` gives the *makespan* (all steps done), each tenant's step latency, and the
*residue*: the fraction of the device's threads left idle over the makespan, GACER's measure
of what co-running leaves unused. The objective (:func:`evaluate`) is the largest *slowdown*
among the tenants (a tenant's step latency over its latency alone), plus :data:`LATE_WEIGHT`
times how far each high-priority tenant's worst slowdown exceeds :data:`HIGH_TARGET`, where
the worst is over its step starting with the others' and right after one of their long
launches took the device (a high-priority request arrives at any time). Slowdowns rather than
the makespan: tenants run their steps one after another, each at its own pace, so a plan
that holds a tenant of 2 ms steps behind another's 35 ms launch costs that tenant seventeen
steps' worth of time, which the makespan of one step each, set by the longest tenant, does
not see.

:func:`search` alternates spatial and temporal steps (coordinate descent): each split kernel's
pieces among :data:`PIECES`, then the pointers between launches that overlap in the current
plan's schedule (added, or removed where the plan has one), keeping the best change of each
sweep, until a sweep changes nothing or the time budget is spent. A pointer never holds a
high-priority tenant behind a normal one: that would trade its latency for the others'.

Invariants
----------
* A plan only adds ordering and pieces: every plan's results equal the unregulated run's
  (the runtime applies it through the tenants' splits and pointers).
* The search never returns a plan whose modelled cost is above the empty plan's.
* The search is deterministic for a given profile (ties keep the earlier candidate).
* No kernel is both split and held by a pointer in one tenant.
* No pointer of the search holds a high-priority tenant's kernel behind a normal tenant's.

Example::

    a = TenantProfile("a", "normal", (Op("big", 1e-3, 1.0, 0.0, True, ()),))
    b = TenantProfile("b", "high", (Op("small", 1e-4, 0.2, 0.0, False, ()),))
    plan = search((a, b), budget_s=0.1)
    plan.splits                 # {"a": {"big": 8}}: b's kernel starts between a's pieces
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import time
from typing import Any

from .interference import THREADS_PER_SM
from .plan import Outcome, PairProfile, Plan, TenantProfile

#: Per (tenant, kernel, other tenant, other kernel): how much slower the first runs while the
#: second runs beside it, beyond the model's shares and bandwidths (:func:`pair_slowdowns`).
Slowdowns = dict[tuple[str, str, str, str], float]

#: A piece's own cost beyond its share of the launch (the launch gap between two pieces).
PIECE_S = 4e-6
#: The pieces the search tries for a split kernel (1: whole).
PIECES = (1, 2, 4, 8)
#: A high-priority tenant's target: its step latency within this factor of its latency alone.
HIGH_TARGET = 1.2
#: How much a second of a high-priority tenant's lateness beyond its target costs.
LATE_WEIGHT = 4.0
#: A high-priority step is also started right after each of this many of the others' longest
#: launches starts, for its worst latency.
ARRIVALS = 3
#: Launches that together ask for ``d`` > 1 times the device's bandwidth each run ``d ** (1 +
#: CONTENTION)`` times slower: more than in proportion, as they also evict each other's cached
#: lines (HITS's two sparse products on an H200: 2.34x slower side by side where 2x is the share).
CONTENTION = 0.23
#: The most a launch is slowed by the measured pairs it overlaps (:func:`pair_slowdowns`).
MOST_SLOWDOWN = 4.0
#: The device's registers per SM and shared memory per SM (bytes), and the most blocks an SM
#: keeps: NVIDIA's compute capability 9.0 (H100, H200; threads per SM: ``THREADS_PER_SM``).
REGISTERS_PER_SM = 65536
SHARED_PER_SM = 228 << 10
BLOCKS_PER_SM = 32


def occupancy(blocks: int, threads_per_block: int, sms: int, regs: int = 0,
              shared: int = 0) -> float:
    """A launch of ``blocks`` blocks of ``threads_per_block`` threads on a device of ``sms``
    SMs: its blocks over the most blocks the device keeps resident at once, by threads,
    registers (``regs`` per thread) and shared memory (``shared`` bytes per block); above 1
    the grid runs in waves."""
    per_block = max(1, threads_per_block)
    per_sm = min(BLOCKS_PER_SM, THREADS_PER_SM // per_block or 1)
    if regs:
        per_sm = min(per_sm, REGISTERS_PER_SM // (regs * per_block) or 1)
    if shared:
        per_sm = min(per_sm, SHARED_PER_SM // shared or 1)
    return blocks / float(max(1, sms) * per_sm)


def occupancy_share(blocks: int, threads_per_block: int, sms: int, regs: int = 0,
                    shared: int = 0) -> float:
    """The share of the device's threads a launch holds while it runs: its
    :func:`occupancy`, at most 1 (a larger grid runs in waves)."""
    return min(1.0, occupancy(blocks, threads_per_block, sms, regs, shared))


class _Task:
    __slots__ = ("bandwidth", "children", "done_at", "held", "high", "kid", "left", "near",
                 "op", "order", "parents", "ready_at", "release", "share", "started_at",
                 "tenant", "waiting")

    def __init__(self, tenant: int, high: bool, op: int, seconds: float, share: float,
                 bandwidth: float) -> None:
        self.tenant, self.high, self.op = tenant, high, op
        self.left = seconds             # seconds of work alone still to do
        self.share, self.bandwidth = share, bandwidth
        self.parents: list[_Task] = []
        self.children: list[_Task] = []
        self.waiting = 0
        self.release = 0.0              # not before this time (its step's start)
        self.ready_at = -1.0
        self.held = 0.0
        self.order = 0
        self.started_at = -1.0
        self.done_at = -1.0
        self.kid = 0                    # its (tenant, kernel)'s number, for ``near``
        self.near: dict[int, float] | None = None   # measured slowdowns beside others' kernels


def _tasks(profiles: tuple[TenantProfile, ...], splits: dict[str, dict[str, int]],
           after: dict[str, dict[str, tuple[str, str]]],
           begin: dict[str, float] | None = None, slow: Slowdowns | None = None
           ) -> list[_Task]:
    """Every launch (and piece) of every step as a task with its parents; a tenant's step
    starts at ``begin[name]`` (default 0); ``slow``: :func:`pair_slowdowns`."""
    tasks: list[_Task] = []
    lasts: list[list[_Task]] = []       # per tenant, per op: the task that ends it
    firsts: list[list[_Task]] = []
    for t, prof in enumerate(profiles):
        high = prof.priority == "high"
        cut = splits.get(prof.name, {})
        ends, starts = [], []
        previous_end = None
        for i, op in enumerate(prof.ops):
            k = cut.get(op.kernel, 1) if op.splittable else 1
            seconds, share = op.seconds, op.share
            if k > 1 and op.grid:       # (a k-th of the blocks: time by waves, share by blocks)
                seconds = seconds * max(1.0, op.grid / k) / max(1.0, op.grid) + PIECE_S
                share = min(share, op.grid / k)
            elif k > 1:                 # (a k-th of the rows on the same grid)
                seconds = seconds / k + PIECE_S
            chain = [_Task(t, high, i, seconds, share, op.bandwidth) for _ in range(k)]
            for a, b in itertools.pairwise(chain):
                b.parents.append(a)
            for p in op.parents:
                chain[0].parents.append(ends[p])
            if prof.one_stream and previous_end is not None:
                chain[0].parents.append(previous_end)
            tasks += chain
            starts.append(chain[0])
            ends.append(chain[-1])
            previous_end = chain[-1]
        lasts.append(ends)
        firsts.append(starts)
    # pointers: a launch waits for the pointed-at tenant's latest launch of the kernel issued
    # before it; the steps are taken as issued at one pace, so "before" compares the two
    # launches' positions in their steps
    index = {p.name: t for t, p in enumerate(profiles)}
    for t, prof in enumerate(profiles):
        for i, op in enumerate(prof.ops):
            mine = after.get(prof.name, {})
            target = mine.get(op.kernel) or mine.get("*")
            if target is None or target[0] not in index:
                continue
            o = index[target[0]]
            other = profiles[o].ops
            at = (i + 1) / len(prof.ops)
            chosen = None
            for j, candidate in enumerate(other):
                if (target[1] in ("*", candidate.kernel)
                        and (j + 1) / len(other) <= at):
                    chosen = j
            if chosen is not None:
                firsts[t][i].parents.append(lasts[o][chosen])
    for task in tasks:
        task.waiting = len(task.parents)
        for p in task.parents:
            p.children.append(task)
    if begin:
        for task in tasks:
            task.release = begin.get(profiles[task.tenant].name, 0.0)
    if slow:
        kids: dict[tuple[str, str], int] = {}
        for task in tasks:
            key = (profiles[task.tenant].name, profiles[task.tenant].ops[task.op].kernel)
            task.kid = kids.setdefault(key, len(kids))
        near: dict[int, dict[int, float]] = {}
        for (tenant, kernel, other, other_kernel), factor in slow.items():
            mine, theirs = kids.get((tenant, kernel)), kids.get((other, other_kernel))
            if mine is not None and theirs is not None:
                near.setdefault(mine, {})[theirs] = factor
        for task in tasks:
            task.near = near.get(task.kid)
    return tasks


def _run(tasks: list[_Task]) -> tuple[float, float]:
    """Play the tasks on the model (each task's ``started_at`` and ``done_at`` set); returns
    the makespan and the idle capacity integrated over it (capacity x seconds)."""
    now = idle = 0.0
    # (tasks without parents yet to start, by the time their step starts, then in order)
    later = [(t.release, i, t) for i, t in enumerate(tasks) if t.waiting == 0]
    heapq.heapify(later)
    ready: list[_Task] = []
    running: list[_Task] = []
    order = finished = 0
    while finished < len(tasks):
        while later and later[0][0] <= now:
            t = heapq.heappop(later)[2]
            order += 1
            t.ready_at, t.order = now, order
            ready.append(t)
        # capacity that is free goes to started launches short of their share, then to ready
        # ones, high priority first, each in the order it became ready
        free = 1.0 - sum(t.held for t in running)
        for t in running:
            if free <= 1e-12:
                break
            more = min(t.share - t.held, free)
            if more > 0:
                t.held += more
                free -= more
        if free > 1e-12 and ready:
            ready.sort(key=lambda t: (not t.high, t.ready_at, t.order))
            still = []
            for t in ready:
                if free > 1e-12:
                    t.held = min(t.share, free)
                    t.started_at = now
                    free -= t.held
                    running.append(t)
                else:
                    still.append(t)
            ready = still
        if not running:
            if not later:
                raise ValueError("regulation model: no launch can run (pointers in a cycle)")
            idle += later[0][0] - now       # (no step has started yet)
            now = later[0][0]
            continue
        rates = [t.held / t.share for t in running]
        demand = sum(t.bandwidth * r for t, r in zip(running, rates))
        if demand > 1.0:
            slow = demand ** (1.0 + CONTENTION)
            rates = [r / slow if t.bandwidth > 0 else r for t, r in zip(running, rates)]
        if len(running) > 1:
            # (pairs measured slower side by side than the share and bandwidth say)
            for i, t in enumerate(running):
                near = t.near
                if near:
                    factor = 1.0
                    for other in running:
                        factor *= near.get(other.kid, 1.0)
                    if factor > 1.0:
                        rates[i] /= min(factor, MOST_SLOWDOWN)
        dt = min(t.left / r for t, r in zip(running, rates))
        if later:
            dt = min(dt, max(0.0, later[0][0] - now))
        idle += max(0.0, free) * dt
        now += dt
        still_running = []
        for t, r in zip(running, rates):
            t.left -= r * dt
            if t.left <= 1e-12 * max(1.0, t.left + r * dt):
                t.done_at = now
                t.held = 0.0
                finished += 1
                for c in t.children:
                    c.waiting -= 1
                    if c.waiting == 0:
                        if c.release > now:
                            order += 1
                            heapq.heappush(later, (c.release, len(tasks) + order, c))
                        else:
                            order += 1
                            c.ready_at, c.order = now, order
                            ready.append(c)
            else:
                still_running.append(t)
        running = still_running
    return now, idle


def simulate(profiles: tuple[TenantProfile, ...],
             splits: dict[str, dict[str, int]] | None = None,
             after: dict[str, dict[str, tuple[str, str]]] | None = None,
             starts: dict[str, float] | None = None, slow: Slowdowns | None = None
             ) -> Outcome:
    """Every tenant's step, started at ``starts[name]`` (default: together, at 0), under
    ``splits`` and ``after``, on the model of the module docstring, with the measured pairs'
    ``slow`` (:func:`pair_slowdowns`); a tenant's latency runs from its step's start."""
    return _play(profiles, splits or {}, after or {}, starts, slow)[0]


def _play(profiles: tuple[TenantProfile, ...], splits: dict[str, dict[str, int]],
          after: dict[str, dict[str, tuple[str, str]]], starts: dict[str, float] | None,
          slow: Slowdowns | None = None) -> tuple[Outcome, list[_Task]]:
    tasks = _tasks(profiles, splits, after, starts, slow)
    makespan, idle = _run(tasks)
    latency = {p.name: 0.0 for p in profiles}
    for task in tasks:
        name = profiles[task.tenant].name
        latency[name] = max(latency[name], task.done_at - task.release)
    return Outcome(makespan, latency, idle / makespan if makespan > 0 else 0.0), tasks


def evaluate(profiles: tuple[TenantProfile, ...], splits: dict[str, dict[str, int]],
             after: dict[str, dict[str, tuple[str, str]]], alone: dict[str, float],
             slow: Slowdowns | None = None) -> tuple[float, Outcome]:
    """The search's objective for a plan, and the plan's :class:`Outcome`: the largest of the
    tenants' slowdowns (step latency over latency ``alone``) with every step started
    together, plus :data:`LATE_WEIGHT` times each high-priority tenant's worst slowdown
    beyond :data:`HIGH_TARGET`. The worst latency
    is over its step starting together with the others' and right after each of the
    :data:`ARRIVALS` longest launches of the others starts (a high-priority step arrives when
    the others are at any point of theirs, and waits longest behind a launch that just took
    the device; the outcome's ``worst_s`` holds it). ``slow``: :func:`pair_slowdowns`."""
    outcome, tasks = _play(profiles, splits, after, None, slow)
    late: list[float] = []
    worst: dict[str, float] = {}
    for t, p in enumerate(profiles):
        if p.priority != "high" or len(profiles) < 2:
            continue
        w = outcome.latency_s[p.name]
        others = sorted((task for task in tasks if task.tenant != t and not task.high),
                        key=lambda task: task.started_at - task.done_at)[:ARRIVALS]
        for task in others:
            at = task.started_at + 1e-9
            w = max(w, simulate(profiles, splits, after, {p.name: at},
                                slow).latency_s[p.name])
        worst[p.name] = w
        if alone[p.name] > 0:
            late.append(w / alone[p.name])
    value = score([outcome.latency_s[p.name] / alone[p.name] for p in profiles
                   if alone[p.name] > 0], late)
    return value, Outcome(outcome.makespan_s, outcome.latency_s, outcome.residue, worst, value)


def score(slowdowns: list[float], high: list[float]) -> float:
    """A plan's score, modelled (:func:`evaluate`) or measured (``runtime.plan_check``): the
    largest of the tenants' ``slowdowns`` (step latency over latency alone), plus
    :data:`LATE_WEIGHT` times how far each of ``high``, the high-priority tenants' worst
    slowdowns, exceeds :data:`HIGH_TARGET`."""
    late = sum(max(0.0, h - HIGH_TARGET) for h in high)
    return max(slowdowns, default=0.0) + LATE_WEIGHT * late


def side_by_side(profiles: tuple[TenantProfile, ...], splits: dict[str, dict[str, int]],
                 after: dict[str, dict[str, tuple[str, str]]], slow: Slowdowns | None = None
                 ) -> list[tuple[int, str, int, str]]:
    """The pairs of kernels of two tenants that run side by side in the plan's modelled run,
    as (tenant, kernel, other tenant, other kernel), both ways, in order of first overlap."""
    tasks = _tasks(profiles, splits, after, None, slow)
    _run(tasks)
    spans = sorted((t.started_at, t.done_at, t.tenant, profiles[t.tenant].ops[t.op].kernel)
                    for t in tasks)
    pairs: dict[tuple[int, str, int, str], None] = {}
    for i, (s1, e1, t1, k1) in enumerate(spans):
        for s2, e2, t2, k2 in spans[i + 1:]:
            if s2 >= e1:
                break
            if t1 != t2 and s1 < e2:
                pairs.setdefault((t1, k1, t2, k2), None)
                pairs.setdefault((t2, k2, t1, k1), None)
    return list(pairs)


def search(profiles: tuple[TenantProfile, ...], budget_s: float = 0.5,
           given: dict[str, tuple[Any, Any]] | None = None,
           shape: tuple[Any, ...] = (), pairs: tuple[PairProfile, ...] = ()) -> Plan:
    """The plan of least cost (:func:`evaluate`) found within ``budget_s`` seconds (see the module
    docstring). ``given``: per tenant name, the splits and pointers it already has (its own,
    or None): the model runs with them, the plan includes them, and the search leaves those
    kernels alone. ``pairs``: launches of two tenants timed side by side, which the model
    follows (:func:`pair_slowdowns`); the plan keeps them."""
    t0 = time.perf_counter()
    slow = pair_slowdowns(profiles, pairs)
    splits: dict[str, dict[str, int]] = {}
    after: dict[str, dict[str, tuple[str, str]]] = {}
    fixed: set[tuple[str, str]] = set()
    for name, (own_splits, own_after) in (given or {}).items():
        if own_splits:
            splits[name] = dict(own_splits)
        if own_after:
            after[name] = dict(own_after)
        fixed |= {(name, k) for k in (own_splits or {})} | {(name, k) for k in (own_after or {})}
    alone = {p.name: simulate((p,), splits, after).makespan_s for p in profiles}
    best, before = evaluate(profiles, splits, after, alone, slow)
    modelled = len(profiles) + 1

    def value(s: dict[str, dict[str, int]], a: dict[str, dict[str, tuple[str, str]]]
              ) -> float:
        nonlocal modelled
        modelled += 1
        try:
            return evaluate(profiles, s, a, alone, slow)[0]
        except ValueError:      # (pointers in a cycle)
            return float("inf")

    def spent() -> bool:
        return time.perf_counter() - t0 > budget_s

    splittable = sorted({(p.name, op.kernel) for p in profiles for op in p.ops
                         if op.splittable and (p.name, op.kernel) not in fixed})
    changed = True
    while changed and not spent():
        changed = False
        # spatial: each split kernel's pieces, one kernel at a time
        for name, kernel in splittable:
            if kernel in after.get(name, {}) or spent():
                continue
            now = splits.get(name, {}).get(kernel, 1)
            for pieces in PIECES:
                if pieces != now:
                    trial = _with(splits, name, kernel, pieces if pieces > 1 else None)
                    v = value(trial, after)
                    if v < best * (1 - 1e-9):
                        best, splits, now, changed = v, trial, pieces, True
        # temporal: the best single change of a pointer: one removed, or one added between
        # kernels that run side by side
        choice = None
        for name, ks in after.items():
            for kernel in ks:
                if (name, kernel) not in fixed and not spent():
                    trial = _with(after, name, kernel, None)
                    v = value(splits, trial)
                    if v < best * (1 - 1e-9):
                        best, choice = v, trial
        for t1, k1, t2, k2 in side_by_side(profiles, splits, after, slow):
            name = profiles[t1].name
            if spent():
                break
            if (k1 in splits.get(name, {}) or k1 in after.get(name, {})
                    or (name, k1) in fixed
                    or profiles[t1].priority == "high" != profiles[t2].priority):
                continue        # (a high-priority tenant never waits for a normal one)
            trial = _with(after, name, k1, (profiles[t2].name, k2))
            v = value(splits, trial)
            if v < best * (1 - 1e-9):
                best, choice = v, trial
        if choice is not None:
            after, changed = choice, True
    chosen = evaluate(profiles, splits, after, alone, slow)[1]
    return Plan(splits, after, shape, before, chosen, modelled, time.perf_counter() - t0,
                profiles, pairs=tuple(pairs))


def pair_slowdowns(profiles: tuple[TenantProfile, ...], pairs: tuple[PairProfile, ...]
                   ) -> Slowdowns:
    """What the model takes from launches timed side by side: for each pair of ``pairs`` whose
    kernels are in ``profiles`` (the first launch of each in its tenant's step), the factor by
    which each of the two runs slower while the other runs beside it, so that in the model of
    the two alone side by side each ends, relative to its time alone, where it was measured
    to (``together_s / alone_s``); keyed by (tenant, kernel, other tenant, other kernel). The
    two factors are fitted in turn, each by bisection (a launch's end moves with its own
    factor). A launch the model already slows as much as measured, or more, gets none: a
    measurement only adds interference the shares and bandwidths leave out (blocks sharing a
    multiprocessor's issue slots and caches), up to :data:`MOST_SLOWDOWN`."""
    ops = {(p.name, op.kernel): op for p in profiles for op in reversed(p.ops)}
    slow: Slowdowns = {}
    for pair in pairs:
        a, b = ops.get((pair.tenant, pair.kernel)), ops.get((pair.other, pair.other_kernel))
        if (a is None or b is None or pair.tenant == pair.other or pair.alone_s <= 0
                or pair.other_alone_s <= 0):
            continue
        two = (TenantProfile(pair.tenant, "normal", (dataclasses.replace(a, parents=()),)),
               TenantProfile(pair.other, "normal", (dataclasses.replace(b, parents=()),)))
        forward = (pair.tenant, pair.kernel, pair.other, pair.other_kernel)
        backward = (pair.other, pair.other_kernel, pair.tenant, pair.kernel)
        goals = {forward: (pair.tenant, a.seconds, pair.together_s / pair.alone_s),
                 backward: (pair.other, b.seconds, pair.other_together_s / pair.other_alone_s)}
        factors = {forward: 1.0, backward: 1.0}

        def stretch(key: tuple[str, str, str, str], factor: float) -> float:
            name, alone, _ = goals[key]
            latency = simulate(two, slow={**factors, key: factor}).latency_s[name]
            return latency / alone

        for _ in range(3):          # (each fit moves the other launch's end a little)
            for key in (forward, backward):
                goal, base = goals[key][2], stretch(key, 1.0)
                low, high = 1.0, MOST_SLOWDOWN
                top = stretch(key, high)
                if base >= goal or top <= base * (1 + 1e-9):
                    factors[key] = 1.0      # (as slow already, or not beside the other)
                    continue
                if top > goal:
                    for _ in range(30):
                        mid = 0.5 * (low + high)
                        low, high = (mid, high) if stretch(key, mid) < goal else (low, mid)
                factors[key] = high
        for key, factor in factors.items():
            if factor > 1.0:
                slow[key] = factor
    return slow


def _with(table: dict[str, dict[str, Any]], name: str, kernel: str, value: Any
          ) -> dict[str, dict[str, Any]]:
    """A copy of ``table`` with ``table[name][kernel] = value`` (None: removed)."""
    out = {t: dict(ks) for t, ks in table.items()}
    mine = out.setdefault(name, {})
    if value is None:
        mine.pop(kernel, None)
    else:
        mine[kernel] = value
    return {t: ks for t, ks in out.items() if ks}
