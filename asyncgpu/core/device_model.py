"""The device model regulation plays plans on: co-running tenants' steps, launch by launch.

The model
---------
A *profile* of one step of each tenant (:class:`~asyncgpu.core.plan.TenantProfile`) holds
its launches in issue order (``Op``), each with its time alone on the device, the share of the
device's threads it holds while it runs (:func:`occupancy_share`, from its launch shape and
its kernel's registers and shared memory), the share of the device's bandwidth it uses, and
the earlier launches of the step it depends on. :func:`simulate` plays the tenants' steps,
all started together (or each at a start of its own), under a plan's splits and pointers:

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
* a piece of a launch split in ``k`` takes :data:`PIECE_S` more than its part of the work,
  and no less than :data:`HOST_PIECE_S`, the host's time to issue it (the pieces are
  launches the tenant's thread issues one after another, so a chain of short ones goes at
  the host's pace):
  an element-wise kernel's piece is launched on the same grid over a ``k``-th of the rows (a
  grid-stride kernel's, on its whole grid over a ``k``-th of the work), so it holds the same
  share for ``1/k`` of the time; a grid-offset kernel's piece runs a
  ``k``-th of the blocks, so its time follows its waves and its share its blocks (``Op.grid``:
  a piece of a grid that fits the device at once holds a ``k``-th of the share for as long as
  the whole launch, one of a grid of ``k`` waves or more the whole device for ``1/k`` of the
  time).

Its ``Outcome`` gives the *makespan* (all steps done), each tenant's step latency, and the
*residue*: the fraction of the device's threads left idle over the makespan, GACER's measure
of what co-running leaves unused. :func:`side_by_side` names the pairs of kernels that
overlap in a modelled run (where the search tries pointers, and what is profiled in pairs).

Invariants: the model is deterministic; pointers in a cycle raise ``ValueError``; a measured
pair only slows its launches (a factor of at least 1).

Example::

    a = TenantProfile("a", "normal", (Op("k", 1e-3, 1.0, 0.0, False, ()),))
    b = TenantProfile("b", "normal", (Op("j", 2e-3, 1.0, 0.0, False, ()),))
    simulate((a, b)).latency_s      # {"a": 1e-3, "b": 3e-3}: both fill the device
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from typing import Any

from .interference import THREADS_PER_SM
from .plan import Outcome, PairProfile, TenantProfile

#: Per (tenant, kernel, other tenant, other kernel): how much slower the first runs while the
#: second runs beside it, beyond the model's shares and bandwidths (:func:`pair_slowdowns`).
Slowdowns = dict[tuple[str, str, str, str], float]

#: A piece's own cost beyond its share of the launch (the launch gap between two pieces).
PIECE_S = 4e-6
#: The least a piece takes: the host's time to issue a launch (an H200 host's 3-array CUDA C
#: launch: 9 us; a piece is cut, bound and prepared as a launch of its own).
HOST_PIECE_S = 10e-6
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
            seconds, share = op.piece(k)
            if k > 1:
                seconds = max(seconds, HOST_PIECE_S) + PIECE_S
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
    return play(profiles, splits or {}, after or {}, starts, slow)[0]


def play(profiles: tuple[TenantProfile, ...], splits: dict[str, dict[str, int]],
         after: dict[str, dict[str, tuple[str, str]]], starts: dict[str, float] | None,
         slow: Slowdowns | None = None) -> tuple[Outcome, list[Any]]:
    """:func:`simulate`, and its tasks: every launch (and piece) with its tenant (``tenant``,
    an index into ``profiles``), ``high``, ``started_at`` and ``done_at``."""
    tasks = _tasks(profiles, splits, after, starts, slow)
    makespan, idle = _run(tasks)
    latency = {p.name: 0.0 for p in profiles}
    for task in tasks:
        name = profiles[task.tenant].name
        latency[name] = max(latency[name], task.done_at - task.release)
    return Outcome(makespan, latency, idle / makespan if makespan > 0 else 0.0), tasks


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


__all__ = ["BLOCKS_PER_SM", "CONTENTION", "HOST_PIECE_S", "MOST_SLOWDOWN", "PIECE_S",
           "REGISTERS_PER_SM", "SHARED_PER_SM", "Slowdowns", "occupancy", "occupancy_share",
           "pair_slowdowns", "play", "side_by_side", "simulate"]
