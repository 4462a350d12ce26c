"""IOS's stage search: the best partition of a small DAG into stages, by measured latency.

The model (Ding et al., "IOS: Inter-Operator Scheduler for CNN Acceleration", MLSys 2021)
-----------------------------------------------------------------------------------------
A *schedule* runs the launches ``0..n-1`` of a DAG (``preds[i]``: the launches ``i`` follows;
indices are a topological order) as a sequence of *stages*, one after the other with a barrier
between them. A stage is a set of launches split into *groups*: the groups run concurrently
(one stream each), the launches of a group one after the other. Groups of a stage must be
independent, so here a stage's groups are the weakly connected components of its launches
(launches joined by an edge go in one group, and nothing else is merged: running two
independent launches one after the other is the two-stage schedule, which the search also
considers).

The search is IOS's dynamic programming over *endings*: for a set ``S`` of launches still to
schedule (a down-set: it holds every predecessor of its members), an ending ``E`` is a
non-empty subset of ``S`` with no edge from ``E`` to ``S - E`` (it can run last), and::

    cost[{}] = 0
    cost[S]  = min over endings E of S:  cost[S - E] + latency(groups of E)

where ``latency`` is *measured* (the caller's function; :mod:`asyncgpu.backends` times the
stage on the device, or evaluates the ``sim`` backend's cost model). IOS's pruning bounds the
endings tried: at most ``r`` launches per group and ``s`` groups per stage. Both the DP states
and the endings grow exponentially with the DAG's width, so the search has a budget
(``max_endings``): past it :class:`SearchTooLarge` is raised and the caller falls back to a
cheaper order.

Invariants: every launch is in exactly one stage; a launch's predecessors are in its own stage
(same group, earlier in it) or an earlier stage; the result minimises the sum of stage
latencies over all such schedules within ``r``/``s`` (checked against brute force in the tests).

Example::

    preds = [[], [], [0, 1]]                    # two independent launches, then a join
    lat = lambda groups: max(len(g) for g in groups)   # concurrency is free here
    ios_schedule(preds, lat)                    # [((0,), (1,)), ((2,),)]: cost 2

Plain Python; no CUDA.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

#: A stage: its groups, each a tuple of launch indices in launch (topological) order; groups
#: are sorted by their first launch.
Stage = tuple[tuple[int, ...], ...]

#: IOS's defaults (``max_group_size``, ``max_num_groups``).
DEFAULT_GROUP_SIZE = 3
DEFAULT_GROUPS = 8
#: Endings enumerated (over the whole search) before it gives up.
DEFAULT_MAX_ENDINGS = 200_000


class SearchTooLarge(Exception):
    """The search would enumerate more endings than its budget allows."""


def ios_schedule(preds: Sequence[Sequence[int]], latency: Callable[[Stage], float],
                 r: int = DEFAULT_GROUP_SIZE, s: int = DEFAULT_GROUPS,
                 max_endings: int = DEFAULT_MAX_ENDINGS) -> list[Stage]:
    """The stages of a schedule of least total ``latency`` (first stage first).

    ``latency(stage)`` is called once per distinct stage. ``r``: most launches per group;
    ``s``: most groups per stage. Raises :class:`SearchTooLarge` past ``max_endings``.
    """
    if r < 1 or s < 1:
        raise ValueError(f"ios_schedule: r and s must be at least 1; got r={r}, s={s}")
    n = len(preds)
    succ = [0] * n
    nbr = [0] * n           # undirected neighbours (for the groups)
    for v, ps in enumerate(preds):
        for p in ps:
            succ[p] |= 1 << v
            nbr[p] |= 1 << v
            nbr[v] |= 1 << p
    cost: dict[int, float] = {0: 0.0}
    choice: dict[int, tuple[int, Stage]] = {}
    measured: dict[Stage, float] = {}
    budget = [max_endings]

    def stage_latency(stage: Stage) -> float:
        t = measured.get(stage)
        if t is None:
            t = measured[stage] = float(latency(stage))
        return t

    def solve(full: int) -> float:
        # iterative deepening over down-sets (recursion depth could reach n)
        stack = [full]
        listed: dict[int, list[tuple[int, Stage]]] = {}
        while stack:
            S = stack[-1]
            if S in cost:
                stack.pop()
                continue
            endings = listed.get(S)
            if endings is None:
                endings = listed[S] = _endings(S, succ, nbr, r, s, budget)
            missing = [S & ~E for E, _ in endings if (S & ~E) not in cost]
            if missing:
                stack.extend(missing)
                continue
            best = None
            for E, stage in endings:
                total = cost[S & ~E] + stage_latency(stage)
                if best is None or total < best[0]:
                    best = (total, E, stage)
            assert best is not None      # the single-launch sinks are always endings
            cost[S] = best[0]
            choice[S] = (best[1], best[2])
            del listed[S]
            stack.pop()
        return cost[full]

    full = (1 << n) - 1
    solve(full)
    stages: list[Stage] = []
    S = full
    while S:
        E, stage = choice[S]
        stages.append(stage)
        S &= ~E
    stages.reverse()
    return stages


def _endings(S: int, succ: list[int], nbr: list[int], r: int, s: int,
             budget: list[int]) -> list[tuple[int, Stage]]:
    """The endings of ``S`` within the pruning bounds, with their groups."""
    members = [v for v in range(S.bit_length() - 1, -1, -1) if (S >> v) & 1]   # sinks first
    limit = r * s
    out: list[tuple[int, Stage]] = []

    def walk(k: int, E: int, size: int) -> None:
        if k == len(members):
            if E:
                budget[0] -= 1
                if budget[0] < 0:
                    raise SearchTooLarge(
                        "the IOS search enumerated more endings than its budget")
                stage = _groups(E, nbr, r, s)
                if stage is not None:
                    out.append((E, stage))
            return
        v = members[k]
        walk(k + 1, E, size)                        # v stays in S - E
        if size < limit and succ[v] & S & ~E == 0:  # all of v's successors in S are in E
            walk(k + 1, E | (1 << v), size + 1)

    walk(0, 0, 0)
    return out


def _groups(E: int, nbr: list[int], r: int, s: int) -> Stage | None:
    """The weakly connected components of ``E`` as a stage, or None past the bounds."""
    groups: list[tuple[int, ...]] = []
    left = E
    while left:
        low = left & -left
        comp, frontier = low, low
        while frontier:
            bit = frontier & -frontier
            frontier &= frontier - 1
            new = nbr[bit.bit_length() - 1] & E & ~comp
            comp |= new
            frontier |= new
        left &= ~comp
        members = tuple(v for v in range(comp.bit_length()) if (comp >> v) & 1)
        if len(members) > r:
            return None
        groups.append(members)
        if len(groups) > s:
            return None
    return tuple(sorted(groups))


def parts(n: int, size: int) -> list[range]:
    """Launches ``0..n-1`` cut into consecutive parts of at most ``size`` (IOS's
    ``max_part_size``): indices are a topological order, so each part's predecessors outside
    it are in earlier parts."""
    return [range(k, min(n, k + size)) for k in range(0, n, size)]


def ios_schedule_part(preds: Sequence[Sequence[int]], part: range,
                      latency: Callable[[Stage], float], r: int = DEFAULT_GROUP_SIZE,
                      s: int = DEFAULT_GROUPS, max_endings: int = DEFAULT_MAX_ENDINGS,
                      ) -> list[Stage]:
    """:func:`ios_schedule` of the launches in ``part`` (edges from earlier parts dropped:
    their stages come first), in the launches' own indices."""
    base = part.start
    local = [[p - base for p in preds[v] if p >= base] for v in part]
    stages = ios_schedule(local, lambda st: latency(_shift(st, base)), r, s, max_endings)
    return [_shift(st, base) for st in stages]


def _shift(stage: Stage, base: int) -> Stage:
    return tuple(tuple(v + base for v in g) for g in stage)


def schedule_cost(stages: Sequence[Stage], latency: Callable[[Stage], float]) -> float:
    """Total latency of a schedule (the quantity :func:`ios_schedule` minimises)."""
    return sum(float(latency(tuple(st))) for st in stages)
