"""Stream allocation and launch order for a frozen graph (pure Python, no CUDA).

The model
---------
A recording is a DAG over its launches ``0..n-1``: ``preds[i]`` lists the earlier launches that
launch ``i`` must follow (a read after a write, a write after a read or a write of overlapping
bytes). Before the graph is captured two choices are made, both only about performance (any
choice gives the same results, because every DAG edge becomes a stream order or an event wait):

* **stream allocation** (``lanes``): which capture stream each launch goes on.

  - ``opara`` (Opara's Algorithm 1): walk the launches in launch order; a launch takes over the
    stream of its first predecessor that has not yet handed its stream to another launch, or
    gets a new stream. Every stream is a chain of true dependencies, so two unordered launches
    never share one (maximum logical concurrency); cheap, but many streams.
  - ``nimble`` (Nimble's assignment): transitive reduction of the DAG, then a maximum matching
    of the bipartite graph (left copy -> right copy of each reduced edge) by augmenting paths;
    matched edges glue launches into chains, a minimum path cover: maximum logical concurrency
    with the fewest cross-stream synchronizations (|reduced edges| - |matching|).
  - ``single``: every launch on one stream (the sequential graph, a baseline).

* **launch order** (``order``): the order the launches are enqueued in during the capture (any
  topological order).

  - ``topological``: the recorded order (the program's own).
  - ``opara`` (Opara's Algorithm 2): Kahn's algorithm with two ready queues, memory-bound and
    compute-bound; the two are alternated, and from the chosen queue the launch with the
    smallest resource demand is taken first (ties: the earliest).
  - ``ios``: IOS's stages (``asyncgpu.recorder.ios``) fix the order *and* the streams: stage by
    stage, group ``j`` of a stage on stream ``j``, and :func:`stage_plan` adds IOS's barrier between
    consecutive stages as extra edges (so the stream allocation option does not apply).

* **lane budget** (:func:`lane_budget`): every lane of a graph costs its launch about a
  microsecond (the driver starts each branch on its own; measured on the H100: a 10-branch graph
  of one-block kernels launches in 9 us, the same kernels as one chain in 1.5 us). For short
  launches that is more than the overlap gains, so with measured durations the lanes are
  folded (:func:`fold_lanes`, round-robin) to the count ``L`` that minimizes
  ``lane_cost * L + makespan``, the makespan estimated by :func:`makespan` (each launch starts
  when its lane and its predecessors are done), if that saves more than half a lane's cost
  (durations are measured, so noisy). Long launches keep every lane.

Waits: :func:`cross_waits` gives, for each launch, the predecessors on other streams it must
wait for, dropping those implied by an earlier wait of the same stream or by stream order.

Example::

    preds = [[], [0], [0], [1, 2]]          # a diamond
    lanes = opara_streams(preds, range(4))  # [0, 0, 1, 0]: 0->1->3 on stream 0, 2 on stream 1
    nimble_streams(preds)                   # [0, 0, 1, 0] too: 2 streams, 2 cross edges
    lane_budget([[]] * 10, range(10), list(range(10)), [2e-6] * 10, 1e-6)     # 5 lanes
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

STREAM_STRATEGIES = ("opara", "nimble", "single")
ORDER_STRATEGIES = ("topological", "opara", "ios")


def opara_streams(preds: Sequence[Sequence[int]], order: Iterable[int]) -> list[int]:
    """Opara's Algorithm 1: each launch inherits the stream of its first free predecessor."""
    n = len(preds)
    lanes = [-1] * n
    donated = [False] * n
    count = 0
    for v in order:
        for p in preds[v]:
            if not donated[p]:
                donated[p] = True
                lanes[v] = lanes[p]
                break
        else:
            lanes[v] = count
            count += 1
    return lanes


def transitive_reduction(preds: Sequence[Sequence[int]]) -> list[list[int]]:
    """Drop every edge ``p -> v`` implied by a longer path (the unique reduction of a DAG).

    Launch indices are a topological order (edges go from earlier to later launches).
    """
    n = len(preds)
    ancestors: list[int] = [0] * n      # bitsets
    reduced: list[list[int]] = []
    for v in range(n):
        ps = sorted(set(preds[v]), reverse=True)     # latest first: they imply the earlier
        covered = 0
        keep = []
        for p in ps:
            if not (covered >> p) & 1:
                keep.append(p)
            covered |= ancestors[p] | (1 << p)
        ancestors[v] = covered
        reduced.append(sorted(keep))
    return reduced


def nimble_streams(preds: Sequence[Sequence[int]]) -> list[int]:
    """Nimble's assignment: minimum path cover of the transitive reduction (max matching)."""
    n = len(preds)
    succs: list[list[int]] = [[] for _ in range(n)]
    for v, ps in enumerate(transitive_reduction(preds)):
        for p in ps:
            succs[p].append(v)
    match_right = [-1] * n      # right copy v -> matched left p
    match_left = [-1] * n       # left copy p -> matched right v
    for u in range(n):
        if succs[u]:
            _augment(u, succs, match_left, match_right)
    lanes = [-1] * n
    count = 0
    for v in range(n):                 # chains start at launches unmatched on the right
        if match_right[v] == -1:
            u = v
            while u != -1:
                lanes[u] = count
                u = match_left[u]
            count += 1
    return lanes


def _augment(u: int, succs: list[list[int]], match_left: list[int],
             match_right: list[int]) -> bool:
    """One augmenting path from free left vertex ``u`` (breadth-first; flips it if found)."""
    prev: dict[int, int] = {}
    queue = deque([u])
    while queue:
        x = queue.popleft()
        for v in succs[x]:
            if v in prev:
                continue
            prev[v] = x
            if match_right[v] == -1:
                while v != -1:          # flip the path back to u
                    x = prev[v]
                    nxt = match_left[x]
                    match_right[v] = x
                    match_left[x] = v
                    v = nxt
                return True
            queue.append(match_right[v])
    return False


def topological_order(preds: Sequence[Sequence[int]]) -> list[int]:
    """The recorded order (already topological: edges go from earlier to later launches)."""
    return list(range(len(preds)))


def opara_order(preds: Sequence[Sequence[int]], demand: Sequence[float],
                memory_bound: Sequence[bool]) -> list[int]:
    """Opara's Algorithm 2: alternate memory/compute-bound ready launches, smallest demand first.

    The alternation flips at every pick (Opara's parity rule, compute first); when only one
    class has ready launches it is used.
    """
    n = len(preds)
    indegree = [len(set(ps)) for ps in preds]
    succs: list[list[int]] = [[] for _ in range(n)]
    for v, ps in enumerate(preds):
        for p in set(ps):
            succs[p].append(v)
    ready: tuple[list[int], list[int]] = ([], [])    # (compute, memory)
    for v in range(n):
        if indegree[v] == 0:
            ready[bool(memory_bound[v])].append(v)
    order: list[int] = []
    pick_memory = False
    while len(order) < n:
        queue = ready[pick_memory] if ready[pick_memory] else ready[not pick_memory]
        pick_memory = not pick_memory
        best = min(range(len(queue)), key=lambda j: (demand[queue[j]], queue[j]))
        v = queue.pop(best)
        order.append(v)
        for s in succs[v]:
            indegree[s] -= 1
            if indegree[s] == 0:
                ready[bool(memory_bound[s])].append(s)
    return order


def stage_plan(preds: Sequence[Sequence[int]], stages: Sequence[Sequence[Sequence[int]]],
               ) -> tuple[list[list[int]], list[int], list[int]]:
    """(preds with stage barriers, lanes, order) for IOS's stages (first stage first).

    Group ``j`` of every stage goes on lane ``j``, its launches in order; the first launch of
    each group of stage ``k + 1`` also follows the last launch of every group of stage ``k``
    (with the lanes' FIFO order, all of stage ``k + 1`` follows all of stage ``k``).
    """
    out = [sorted(set(ps)) for ps in preds]
    lanes = [-1] * len(preds)
    order: list[int] = []
    ends: list[int] = []
    for stage in stages:
        for j, group in enumerate(stage):
            for v in group:
                lanes[v] = j
                order.append(v)
            out[group[0]] = sorted(set(out[group[0]]) | set(ends))
        ends = [group[-1] for group in stage]
    if sorted(order) != list(range(len(preds))):
        raise ValueError("stage_plan: the stages must hold every launch exactly once")
    return out, lanes, order


def resource_demand(attrs: dict[str, Any] | None, threads: int, blocks: int,
                    limits: dict[str, int] | None = None) -> float:
    """A launch's normalized resource demand (Opara's profile, from kernel attributes).

    The largest of: shared memory / shared memory per SM-block limit, threads per block / the
    thread limit, registers of a block / the register limit; scaled by the fraction of a wave
    the grid fills (a grid that does not fill the GPU leaves room for a concurrent kernel).
    Without attributes (``sim``, or a kernel the backend cannot query) only threads and grid
    count.
    """
    lim = {"shared": 48 * 1024, "threads": 1024, "regs": 65536, "sms": 132}
    if limits:
        lim.update(limits)
    attrs = attrs or {}
    shared = attrs.get("shared", 0) / lim["shared"]
    thr = threads / lim["threads"]
    regs = attrs.get("regs", 0) * threads / lim["regs"]
    wave = min(1.0, blocks / lim["sms"])
    return max(shared, thr, regs) * wave


def fold_lanes(lanes: Sequence[int], limit: int) -> list[int]:
    """At most ``limit`` lanes (0: no limit), folded round-robin. Safe for any folding: launches
    are captured in a topological order, so the stream order a shared lane adds only follows
    edges that order already respects; the cross-lane waits are computed after folding."""
    if not limit or not lanes or max(lanes) < limit:
        return list(lanes)
    return [lane % limit for lane in lanes]


def makespan(preds: Sequence[Sequence[int]], order: Sequence[int], lanes: Sequence[int],
             durations: Sequence[float]) -> float:
    """Estimated seconds from a graph's start to its end: launches enqueued in ``order``, each
    starting when its lane's previous launch and all its predecessors have ended (no limit on
    how many launches of different lanes overlap)."""
    end = [0.0] * len(preds)
    lane_end: dict[int, float] = {}
    for v in order:
        start = lane_end.get(lanes[v], 0.0)
        for p in preds[v]:
            if end[p] > start:
                start = end[p]
        end[v] = lane_end[lanes[v]] = start + durations[v]
    return max(end, default=0.0)


def lane_budget(preds: Sequence[Sequence[int]], order: Sequence[int], lanes: Sequence[int],
                durations: Sequence[float], lane_cost: float) -> int:
    """The lane count ``L`` (1 to the lanes used) that minimizes ``lane_cost * L`` plus the
    :func:`makespan` of the lanes folded to ``L``; ties keep more lanes, and every lane is kept
    unless folding saves more than half a lane's cost (measured durations are noisy: a graph
    near the break-even point should not get a different count at every capture)."""
    width = max(lanes, default=-1) + 1
    unfolded = lane_cost * width + makespan(preds, order, lanes, durations)
    best, best_cost = width, unfolded
    for count in range(width - 1, 0, -1):
        cost = lane_cost * count + makespan(preds, order, fold_lanes(lanes, count), durations)
        if cost < best_cost:
            best, best_cost = count, cost
    return best if unfolded - best_cost > lane_cost / 2 else width


def cross_waits(preds: Sequence[Sequence[int]], lanes: Sequence[int],
                order: Sequence[int]) -> list[list[int]]:
    """Per launch, the predecessors on other streams to wait for (redundant waits dropped).

    A stream that already waited for a later-or-equal launch of the predecessor's stream (in
    enqueue order) needs no second wait; stream order covers same-stream predecessors.
    """
    pos = {v: k for k, v in enumerate(order)}
    waited: dict[int, dict[int, int]] = {}     # lane -> other lane -> highest position waited
    out: list[list[int]] = [[] for _ in preds]
    for v in order:
        lane = lanes[v]
        seen = waited.setdefault(lane, {})
        latest: dict[int, int] = {}
        for p in preds[v]:
            pl = lanes[p]
            if pl == lane:
                continue
            if pos[p] > latest.get(pl, -1):
                latest[pl] = pos[p]
        for pl, k in sorted(latest.items()):
            if seen.get(pl, -1) >= k:
                continue
            seen[pl] = k
            out[v].append(order[k])
    return out
