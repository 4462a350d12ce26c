"""IOS's stage search against brute force, the stage plan it turns into, and the ``ios`` launch
order end to end on the sim backend (its cost model makes the schedule deterministic)."""

from __future__ import annotations

import functools
import logging
import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from asyncgpu.recorder import (
    capture as _graph_capture, profile as _graph_profile, schedule as _graph_schedule, ios as _ios,
)
from asyncgpu.recorder.ios import SearchTooLarge, ios_schedule, schedule_cost

from recorder_kernels import deferred_launches


@st.composite
def dags(draw, max_n=7):
    n = draw(st.integers(1, max_n))
    return [sorted(draw(st.sets(st.integers(0, v - 1), max_size=v))) if v else []
            for v in range(n)]


def _random_latency(seed):
    """Any positive latency per stage (fixed per stage): the DP must not assume a shape."""
    @functools.lru_cache(maxsize=None)
    def lat(stage):
        return random.Random(f"{seed}/{stage}").uniform(0.1, 3.0)
    return lat


def _brute(preds, lat, r, s):
    """Least total latency over every sequence of stages, by exhaustive search."""
    n = len(preds)
    succs = [set() for _ in range(n)]
    for v, ps in enumerate(preds):
        for p in ps:
            succs[p].add(v)

    def components(E):
        parent = {v: v for v in E}

        def find(v):
            while parent[v] != v:
                v = parent[v]
            return v
        for v in E:
            for p in preds[v]:
                if p in E:
                    parent[find(p)] = find(v)
        comps = {}
        for v in E:
            comps.setdefault(find(v), []).append(v)
        return tuple(sorted(tuple(sorted(c)) for c in comps.values()))

    @functools.lru_cache(maxsize=None)
    def best(S):
        if not S:
            return 0.0
        items = sorted(S)
        out = float("inf")
        for mask in range(1, 1 << len(items)):
            E = frozenset(v for k, v in enumerate(items) if mask >> k & 1)
            if any(w in S and w not in E for v in E for w in succs[v]):
                continue
            stage = components(E)
            if len(stage) > s or any(len(g) > r for g in stage):
                continue
            out = min(out, best(S - E) + lat(stage))
        return out

    return best(frozenset(range(n)))


def _valid(preds, stages, r, s):
    where = {}
    for k, stage in enumerate(stages):
        assert 1 <= len(stage) <= s
        for j, group in enumerate(stage):
            assert 1 <= len(group) <= r and list(group) == sorted(group)
            for v in group:
                assert v not in where
                where[v] = (k, j)
    assert sorted(where) == list(range(len(preds)))
    for v, ps in enumerate(preds):
        for p in ps:   # a predecessor: an earlier stage, or the same group (earlier in it)
            assert where[p][0] < where[v][0] or where[p] == where[v]


@settings(max_examples=60, deadline=None)
@given(preds=dags(), r=st.integers(1, 4), s=st.integers(1, 4), seed=st.integers(0, 10**6))
def test_ios_dp_equals_brute_force(preds, r, s, seed):
    lat = _random_latency(seed)
    stages = ios_schedule(preds, lat, r, s)
    _valid(preds, stages, r, s)
    assert schedule_cost(stages, lat) == pytest.approx(_brute(preds, lat, r, s))


@settings(max_examples=40, deadline=None)
@given(preds=dags(9), size=st.integers(1, 9), seed=st.integers(0, 10**6))
def test_ios_in_parts_is_a_valid_schedule(preds, size, seed):
    lat = _random_latency(seed)
    stages = []
    for part in _ios.parts(len(preds), size):
        stages += _ios.ios_schedule_part(preds, part, lat, 2, 3)
    _valid(preds, stages, 2, 3)
    if size >= len(preds):
        assert stages == ios_schedule(preds, lat, 2, 3)


def test_ios_prefers_concurrency_when_it_pays_and_measures_each_stage_once():
    calls = []

    def lat(stage):
        calls.append(stage)
        return 1.0 + max(len(g) for g in stage)      # a barrier, groups overlap for free

    preds = [[], [], [], [0, 1, 2]]          # three independent launches, then their join
    stages = ios_schedule(preds, lat)
    assert stages == [((0,), (1,), (2,)), ((3,),)]
    assert len(calls) == len(set(calls))
    # with s=1 (one group per stage) the three must go one stage each, or into one group
    one = ios_schedule(preds, lat, r=3, s=1)
    assert all(len(stage) == 1 for stage in one)


def test_ios_budget_and_bad_parameters():
    wide = [[] for _ in range(16)]
    with pytest.raises(SearchTooLarge):
        ios_schedule(wide, lambda st: 1.0, r=1, s=16, max_endings=1000)
    with pytest.raises(ValueError, match="r and s"):
        ios_schedule(wide, lambda st: 1.0, r=0)


@settings(max_examples=40, deadline=None)
@given(preds=dags(8), seed=st.integers(0, 10**6))
def test_stage_plan_keeps_every_edge_and_orders_stages(preds, seed):
    stages = ios_schedule(preds, _random_latency(seed), 2, 3)
    out, lanes, order = _graph_schedule.stage_plan(preds, stages)
    pos = {v: k for k, v in enumerate(order)}
    for v, ps in enumerate(preds):
        assert set(ps) <= set(out[v])
    for v, ps in enumerate(out):
        assert all(pos[p] < pos[v] for p in ps)
    # every launch of a stage is ordered after every launch of the previous one: by an edge
    # into its group's first launch, and the lane's FIFO order inside the group
    for prev, stage in zip(stages, stages[1:]):
        for group in stage:
            assert {g[-1] for g in prev} <= set(out[group[0]])
            assert len({lanes[v] for v in group}) == 1
    assert all(lanes[v] == j for stage in stages for j, g in enumerate(stage) for v in g)


def test_classify_by_roofline():
    peak = 3e12
    assert _graph_profile.classify(40e-6, 100_000_000, peak) == "memory"
    assert _graph_profile.classify(40e-6, 1000, peak) == "compute"
    assert _graph_profile.classify(2e-6, 1000, peak) == "small"
    assert _graph_profile.heuristic_class(4096, 1024, {"regs": 16}) == "memory"
    assert _graph_profile.heuristic_class(4096, 1024, {"regs": 128}) == "compute"
    assert _graph_profile.heuristic_class(64, 1 << 20, None) == "compute"


# -- end to end on sim ------------------------------------------------------------------------
BIG = 1 << 16


def _kernels(ag):
    def _copy(x, y, n):
        y[:n] = x[:n]

    def _fill(y, n):
        y[:1] = np.float32(n)

    copy = ag.cuda_kernel("""extern "C" __global__ void copy(const float* x, float* y, int n) {
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
            y[i] = x[i];
    }""", "copy", out=["y"], sim=_copy)
    # many threads over four bytes: the cost model (and a GPU) calls it compute-bound
    spin = ag.cuda_kernel("""extern "C" __global__ void spin(float* y, int n) {
        float a = 0.0f;
        for (int i = 0; i < 4096; ++i) a = a * 0.5f + 1.0f;
        if (blockIdx.x == 0 && threadIdx.x == 0) y[0] = (float)n + 0.0f * a;
    }""", "spin", out=["y"], sim=_fill)
    return copy, spin


def test_measured_classes_on_sim(sim):
    ag = sim
    copy, spin = _kernels(ag)
    x = ag.zeros(BIG * 64, np.float32)
    y = ag.empty(BIG * 64, np.float32)
    t = ag.empty(1, np.float32)
    small = ag.empty(8, np.float32)

    def body():
        copy[132, 256](x, y, BIG * 64)          # 32 MiB moved: memory-bound
        spin[4096, 1024](t, 1)                  # 4M threads, 4 bytes: compute-bound
        copy[1, 32](x[:8], small, 8)            # tiny: latency-bound

    rt, launches = deferred_launches(body)
    from asyncgpu.recorder.capture import _capture_backend
    be = _capture_backend(rt.backend)
    with _graph_profile.stage_timer(rt, be, launches) as timer:
        assert _graph_profile.launch_classes(rt, be, launches, timer) == [
            "memory", "compute", "small"]
    with ag.configure(graph_measure=False):
        with _graph_profile.stage_timer(rt, be, launches) as timer:
            assert timer is None
            # attributes only: the big copy moves 8 bytes per thread, spin 4 bytes in all
            assert _graph_profile.launch_classes(rt, be, launches, timer)[:2] == [
                "memory", "compute"]


def test_opara_order_alternates_measured_classes(sim):
    ag = sim
    copy, spin = _kernels(ag)
    xs = [ag.zeros(BIG * 64, np.float32) for _ in range(2)]
    ys = [ag.empty(BIG * 64, np.float32) for _ in range(2)]
    ts = [ag.empty(1, np.float32) for _ in range(2)]

    def body():     # four independent launches: memory, memory, compute, compute
        copy[132, 256](xs[0], ys[0], BIG * 64)
        copy[132, 256](xs[1], ys[1], BIG * 64)
        spin[4096, 1024](ts[0], 1)
        spin[4096, 1024](ts[1], 2)

    with ag.configure(graph_order="opara"):
        rt, launches = deferred_launches(body)
        _, _, order = _graph_capture.plan(rt, launches)
    kinds = ["m", "m", "c", "c"]
    assert [kinds[v] for v in order] == ["c", "m", "c", "m"]     # compute first, alternating


def test_ios_order_end_to_end_and_fallback(sim, caplog):
    ag = sim
    copy, spin = _kernels(ag)
    n = 4096
    x = ag.array(np.arange(n, dtype=np.float32))
    ys = [ag.empty(n, np.float32) for _ in range(3)]
    z = ag.empty(n, np.float32)

    @ag.graph
    def step():
        for y in ys:                            # three small independent copies
            copy[4, 256](x, y, n)
        copy[4, 256](ys[2], z, n)               # then one that depends on the last

    with ag.configure(graph_order="ios"):
        rt, launches = deferred_launches(step.fn)
        preds, lanes, order = _graph_capture.plan(rt, launches)
        # small launches overlap for free in the cost model: the three copies share a stage
        assert sorted(order[:3]) == [0, 1, 2] and order[3] == 3
        assert len(set(lanes[:3])) == 3
        for _ in range(4):
            x[...] = np.arange(n, dtype=np.float32) + 1
            step()
            np.testing.assert_array_equal(z.numpy(), np.arange(n, dtype=np.float32) + 1)
        assert step.outcome == "replayed"
    with ag.configure(graph_order="ios", graph_ios_max=2), \
            caplog.at_level(logging.INFO, logger="asyncgpu"):
        rt, launches = deferred_launches(step.fn)
        _, _, order = _graph_capture.plan(rt, launches, "step")
        assert "more than graph_ios_max=2" in caplog.text and sorted(order) == [0, 1, 2, 3]
