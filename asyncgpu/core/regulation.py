"""Regulation: the plan of splits and pointers for tenants sharing a device, and its search.

The model
---------
GACER regulates co-running tenants at two granularities: *spatial* (an operator launched in
pieces, so that other tenants' work starts between them) and *temporal* (synchronization
pointers: an operator of one tenant waits for an operator of another, so the two never run
side by side). A :class:`~asyncgpu.core.plan.Plan` holds both, per tenant: ``splits``
(kernel name -> pieces) and ``after`` (kernel name -> (tenant, kernel) it waits for), as
``asyncgpu.tenant`` takes them.

A plan is judged on the device model of :mod:`asyncgpu.core.device_model`, which plays one
step of each tenant from their profiles. The objective (:func:`evaluate`) is the largest
*slowdown* among the tenants (a tenant's step latency over its latency alone), plus
:data:`LATE_WEIGHT` times how far each high-priority tenant's worst slowdown exceeds
:data:`HIGH_TARGET`, where the worst is over its step starting with the others' and right
after one of their long launches took the device (a high-priority request arrives at any
time). Slowdowns rather than the makespan: tenants run their steps one after another, each at
its own pace, so a plan that holds a tenant of 2 ms steps behind another's 35 ms launch costs
that tenant seventeen steps' worth of time, which the makespan of one step each, set by the
longest tenant, does not see.

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

import time
from typing import Any

from .device_model import Slowdowns, pair_slowdowns, play, side_by_side, simulate
from .plan import Outcome, PairProfile, Plan, TenantProfile

#: The pieces the search tries for a split kernel (1: whole).
PIECES = (1, 2, 4, 8)
#: A high-priority tenant's target: its step latency within this factor of its latency alone.
HIGH_TARGET = 1.2
#: How much a second of a high-priority tenant's lateness beyond its target costs.
LATE_WEIGHT = 4.0
#: A high-priority step is also started right after each of this many of the others' longest
#: launches starts, for its worst latency.
ARRIVALS = 3


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
    outcome, tasks = play(profiles, splits, after, None, slow)
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
