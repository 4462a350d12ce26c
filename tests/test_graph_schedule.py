"""Stream allocation and launch order for frozen graphs, on hand-built and random DAGs."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from asyncgpu.recorder.schedule import (
    cross_waits, fold_lanes, lane_budget, makespan, nimble_streams, opara_order, opara_streams,
    resource_demand, topological_order, transitive_reduction,
)

DIAMOND = [[], [0], [0], [1, 2]]
FAN = [[], [0], [0], [0], [1, 2, 3]]       # a root, three branches, a join (an inception block)


@st.composite
def dags(draw, max_n=8):
    n = draw(st.integers(1, max_n))
    return [sorted(draw(st.sets(st.integers(0, v - 1), max_size=v))) if v else []
            for v in range(n)]


def reachable(preds):
    """reach[v] = set of ancestors of v."""
    reach = []
    for v, ps in enumerate(preds):
        s = set(ps)
        for p in ps:
            s |= reach[p]
        reach.append(s)
    return reach


def test_opara_streams_on_hand_built_dags():
    assert opara_streams(DIAMOND, range(4)) == [0, 0, 1, 0]
    assert opara_streams(FAN, range(5)) == [0, 0, 1, 2, 0]
    assert opara_streams([[], [0], [1], [2]], range(4)) == [0, 0, 0, 0]
    assert opara_streams([[], [], []], range(3)) == [0, 1, 2]
    # a predecessor donates its stream once: the second child of 0 gets a new one, unless
    # another predecessor is still free
    assert opara_streams([[], [0], [0]], range(3)) == [0, 0, 1]
    assert opara_streams([[], [0], [0, 1]], range(3)) == [0, 0, 0]


def test_transitive_reduction_on_hand_built_dags():
    assert transitive_reduction([[], [0], [0, 1], [0, 1, 2]]) == [[], [0], [1], [2]]
    assert transitive_reduction(FAN) == FAN
    assert transitive_reduction([[], [0], [1], [0, 2]]) == [[], [0], [1], [2]]


def test_nimble_uses_fewer_streams_than_opara_where_chains_can_be_reused():
    # two independent chains of two, then a launch after both, then two more independent
    preds = [[], [0], [], [2], [1, 3], [4], [4]]
    nim = nimble_streams(preds)
    op = opara_streams(preds, range(len(preds)))
    assert len(set(nim)) == 3 and len(set(op)) == 3
    assert nimble_streams([[], [0], [0], [1, 2], [3], [3]]).count(0) >= 3


@settings(max_examples=150, deadline=None)
@given(dags())
def test_transitive_reduction_keeps_exactly_the_unimplied_edges(preds):
    reach = reachable(preds)
    red = transitive_reduction(preds)
    for v, ps in enumerate(preds):
        want = {p for p in ps if not any(p in reach[q] for q in ps if q != p)}
        assert set(red[v]) == want
    assert reachable(red) == reach


def _brute_matching(preds):
    edges = [(p, v) for v, ps in enumerate(preds) for p in ps]
    for k in range(len(edges), 0, -1):
        for combo in itertools.combinations(edges, k):
            lefts = [p for p, _ in combo]
            rights = [v for _, v in combo]
            if len(set(lefts)) == k and len(set(rights)) == k:
                return k
    return 0


@settings(max_examples=100, deadline=None)
@given(dags(max_n=7))
def test_nimble_is_a_minimum_path_cover_with_maximum_concurrency(preds):
    lanes = nimble_streams(preds)
    reach = reachable(preds)
    red = transitive_reduction(preds)
    # maximum concurrency: launches sharing a stream are ordered (a path links them)
    for a, b in itertools.combinations(range(len(preds)), 2):
        if lanes[a] == lanes[b]:
            assert a in reach[b]
    # chains follow reduced edges, and there are as few as a maximum matching allows
    by_lane = {}
    for v, lane in enumerate(lanes):
        by_lane.setdefault(lane, []).append(v)
    for chain in by_lane.values():
        for a, b in zip(chain, chain[1:]):
            assert a in red[b]
    assert len(by_lane) == len(preds) - _brute_matching(red)


@settings(max_examples=150, deadline=None)
@given(dags(), st.data())
def test_opara_streams_are_chains_of_true_edges(preds, data):
    order = opara_order(preds, [data.draw(st.floats(0, 1)) for _ in preds],
                        [data.draw(st.booleans()) for _ in preds])
    lanes = opara_streams(preds, order)
    pos = {v: k for k, v in enumerate(order)}
    last = {}
    for v in order:
        lane = lanes[v]
        if lane in last:
            assert last[lane] in preds[v]      # inherited from a direct predecessor
        last[lane] = v
    assert sorted(pos) == list(range(len(preds)))


@settings(max_examples=150, deadline=None)
@given(dags(), st.data())
def test_orders_are_topological_and_waits_cover_every_cross_edge(preds, data):
    demand = [data.draw(st.floats(0, 1)) for _ in preds]
    memory = [data.draw(st.booleans()) for _ in preds]
    for order in (topological_order(preds), opara_order(preds, demand, memory)):
        pos = {v: k for k, v in enumerate(order)}
        assert all(pos[p] < pos[v] for v, ps in enumerate(preds) for p in ps)
        for lanes in (opara_streams(preds, order), nimble_streams(preds)):
            waits = cross_waits(preds, lanes, order)
            # what each launch's stream has waited for, per other stream, by its turn
            covered = {}
            for v in order:
                seen = covered.setdefault(lanes[v], {})
                for p in waits[v]:
                    assert lanes[p] != lanes[v] and p in preds[v]
                    seen[lanes[p]] = max(seen.get(lanes[p], -1), pos[p])
                for p in preds[v]:
                    if lanes[p] != lanes[v]:
                        assert seen.get(lanes[p], -1) >= pos[p], (v, p)


def test_opara_order_alternates_classes_smallest_demand_first():
    # five independent launches: 0, 1 memory-bound; 2, 3, 4 compute-bound
    preds = [[], [], [], [], []]
    demand = [0.5, 0.1, 0.9, 0.2, 0.3]
    memory = [True, True, False, False, False]
    assert opara_order(preds, demand, memory) == [3, 1, 4, 0, 2]
    # a dependency holds a launch back until its predecessor is placed
    assert opara_order([[], [0], []], [0.9, 0.0, 0.5], [False] * 3) == [2, 0, 1]


def test_resource_demand_grows_with_attributes_and_grid():
    small = resource_demand(None, 128, 1)
    big = resource_demand(None, 1024, 1000)
    assert 0 < small < big == 1.0
    assert resource_demand({"shared": 48 * 1024}, 32, 132) == 1.0
    assert resource_demand({"regs": 255}, 256, 132) > resource_demand({"regs": 32}, 256, 132)


US = 1e-6


def test_lane_budget_folds_short_independent_launches_and_keeps_long_ones():
    ten = [[] for _ in range(10)]
    lanes = opara_streams(ten, range(10))
    assert lanes == list(range(10))
    # 2 us each, 1 us per lane: 5 lanes (5 + 4 us) beat 10 (10 + 2) and 4 (4 + 6)
    assert lane_budget(ten, range(10), lanes, [2 * US] * 10, 1 * US) == 5
    # 100 us each: every lane pays for itself
    assert lane_budget(ten, range(10), lanes, [100 * US] * 10, 1 * US) == 10
    # free lanes: never fold
    assert lane_budget(ten, range(10), lanes, [2 * US] * 10, 0.0) == 10


def test_lane_budget_keeps_a_side_branch_that_shortens_the_graph():
    # a chain of 95 us with a 5 us side launch: folding the side launch into the chain would
    # lengthen the graph by 5 us to save 1 us of launch
    preds = [[], [0], [0], [1, 2]]
    lanes = opara_streams(preds, range(4))
    assert lane_budget(preds, range(4), lanes, [1 * US, 94 * US, 5 * US, 0], 1 * US) == 2
    # ... but not a side launch much shorter than the lane costs
    assert lane_budget(preds, range(4), lanes, [1 * US, 94 * US, 0.2 * US, 0], 1 * US) == 1
    # near the break-even point (folding would save 0.4 us, under half a lane) every lane stays,
    # so noise in the measured durations does not change the count from capture to capture
    assert lane_budget(preds, range(4), lanes, [1 * US, 94 * US, 0.6 * US, 0], 1 * US) == 2


def test_makespan_of_hand_built_schedules():
    assert makespan(DIAMOND, range(4), [0, 0, 1, 0], [1, 2, 3, 1]) == 5     # 0, then 2, then 3
    assert makespan(DIAMOND, range(4), [0, 0, 0, 0], [1, 2, 3, 1]) == 7     # all on one lane
    assert makespan([[], []], range(2), [0, 1], [4, 4]) == 4
    assert fold_lanes([0, 1, 2, 3, 4], 2) == [0, 1, 0, 1, 0]
    assert fold_lanes([0, 1, 2], 0) == [0, 1, 2] == fold_lanes([0, 1, 2], 3)


@given(dags(max_n=10), st.data())
@settings(max_examples=150, deadline=None)
def test_lane_budget_never_costs_more_than_every_lane(preds, data):
    n = len(preds)
    order = topological_order(preds)
    lanes = opara_streams(preds, order)
    width = max(lanes) + 1
    durations = data.draw(st.lists(st.floats(0, 1e-4), min_size=n, max_size=n))
    cost = data.draw(st.floats(0, 5e-6))
    count = lane_budget(preds, order, lanes, durations, cost)
    assert 1 <= count <= width
    folded = fold_lanes(lanes, count)
    assert max(folded) + 1 == count
    # folding only adds stream order: the graph can only get longer, and only by less than
    # the lanes it saves
    assert makespan(preds, order, folded, durations) >= makespan(preds, order, lanes, durations)
    # (summed as lane_budget sums them: another order rounds the last bit differently)
    saved = ((cost * width + makespan(preds, order, lanes, durations))
             - (cost * count + makespan(preds, order, folded, durations)))
    assert saved >= -1e-12
    assert count == width or saved > cost / 2      # folds only when it pays for the noise
