"""Regulation: the model of co-running tenants, the search for a plan of splits and pointers,
and ``asyncgpu.regulate`` on the simulator (profile, search, run with the plan, reuse it, and
profile again when the workload changes), with results equal to the unregulated run's."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time

import numpy as np
import programs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import cuda
from test_properties import assert_same, serial

import asyncgpu as ag
from asyncgpu.core.plan import Op, Outcome, PairProfile, Plan, TenantProfile
from asyncgpu.core.device_model import (
    CONTENTION,
    HOST_PIECE_S,
    MOST_SLOWDOWN,
    PIECE_S,
    occupancy_share,
    pair_slowdowns,
    simulate,
)
from asyncgpu.core.regulation import HIGH_TARGET, evaluate, search
from asyncgpu.runtime import pair_profiles, plan_check, remedy_plans
from asyncgpu.runtime.current import current_runtime
from asyncgpu.testing.regulation import profiled_as


@pytest.fixture(autouse=True)
def _regulation_off_between_tests():
    """No test leaves a plan in force for the next test its worker runs (the runtime, and its
    regulation, outlive a ``configure`` block), even one that fails before turning it off."""
    yield
    ag.regulate(plan="off")


def op(kernel, ms, share=1.0, bandwidth=0.0, splittable=False, parents=()):
    return Op(kernel, ms * 1e-3, share, bandwidth, splittable, tuple(parents))


# -- the model ------------------------------------------------------------------------------------
def test_a_tenants_independent_launches_run_side_by_side_and_a_chain_in_order():
    both = TenantProfile("t", "normal", (op("a", 1.0, 0.5), op("b", 1.0, 0.5)))
    chain = TenantProfile("t", "normal", (op("a", 1.0, 0.5), op("b", 1.0, 0.5, parents=[0])))
    one_stream = TenantProfile("t", "normal", both.ops, one_stream=True)
    assert simulate((both,)).makespan_s == pytest.approx(1e-3)
    assert simulate((chain,)).makespan_s == pytest.approx(2e-3)
    assert simulate((one_stream,)).makespan_s == pytest.approx(2e-3)
    assert simulate((chain,)).residue == pytest.approx(0.5)     # half the device idle


def test_two_tenants_filling_the_device_take_turns_and_leave_no_residue():
    a = TenantProfile("a", "normal", (op("k", 1.0),))
    b = TenantProfile("b", "normal", (op("j", 2.0),))
    out = simulate((a, b))
    assert out.makespan_s == pytest.approx(3e-3)
    assert out.residue == pytest.approx(0.0)
    assert out.latency_s == pytest.approx({"a": 1e-3, "b": 3e-3})


def test_launches_over_the_bandwidth_together_are_slower_than_in_sequence():
    a = TenantProfile("a", "normal", (op("k", 1.0, 0.5, 1.0),))
    b = TenantProfile("b", "normal", (op("j", 1.0, 0.5, 1.0),))
    together = simulate((a, b)).makespan_s
    assert together == pytest.approx(1e-3 * 2 ** (1 + CONTENTION))
    assert together > 2e-3
    apart = simulate((a, b), after={"b": {"j": ("a", "k")}}).makespan_s
    assert apart == pytest.approx(2e-3)


def test_a_high_priority_launch_gets_the_device_first_but_does_not_preempt():
    low = TenantProfile("low", "normal", (op("big", 1.0),))
    high = TenantProfile("high", "high", (op("small", 0.1),))
    assert simulate((low, high)).latency_s["high"] == pytest.approx(0.1e-3)
    late = simulate((low, high), starts={"high": 0.5e-3})
    assert late.latency_s["high"] == pytest.approx(0.6e-3)      # waited for the rest of big


def test_a_split_lets_a_high_priority_step_in_between_the_pieces():
    low = TenantProfile("low", "normal", (op("big", 1.0, splittable=True),))
    high = TenantProfile("high", "high", (op("small", 0.1),))
    whole = simulate((low, high), starts={"high": 0.1e-3}).latency_s["high"]
    pieces = simulate((low, high), splits={"low": {"big": 4}},
                      starts={"high": 0.1e-3}).latency_s["high"]
    assert whole == pytest.approx(1.0e-3)
    assert pieces == pytest.approx(0.25e-3 + PIECE_S)       # the rest of the first piece


def test_pieces_shorter_than_the_hosts_time_to_issue_one_are_modelled_at_the_hosts_pace():
    """The host issues each piece as a launch of its own (B&S's 0.1 ms launches, cut in 8,
    measured 2-3x worse on an H200), so pieces shorter than that go at the host's pace."""
    short = TenantProfile("low", "normal", (op("short", 0.04, 0.5, splittable=True),))
    cut = simulate((short,), splits={"low": {"short": 8}})
    assert cut.makespan_s == pytest.approx(8 * (HOST_PIECE_S + PIECE_S))
    assert cut.makespan_s > 2 * simulate((short,)).makespan_s


@pytest.mark.parametrize("grid, alone_ms", [
    (0.5, 4 * 1.0),         # fits the device at once: each piece holds an eighth as long
    (8.0, 1.0),             # eight waves: each piece holds the device a quarter as long
])
def test_a_grid_pieces_time_follows_its_waves_and_its_share_its_blocks(grid, alone_ms):
    big = Op("big", 1e-3, min(1.0, grid), 0.0, True, (), grid)
    pieces = simulate((TenantProfile("low", "normal", (big,)),), splits={"low": {"big": 4}})
    assert pieces.makespan_s == pytest.approx(alone_ms * 1e-3 + 4 * PIECE_S)
    # beside it a launch of half the device starts at once only where the pieces leave room
    other = TenantProfile("other", "normal", (op("half", 0.1, 0.5),))
    side = simulate((TenantProfile("low", "normal", (big,)), other), splits={"low": {"big": 4}})
    assert side.latency_s["other"] == pytest.approx(
        0.1e-3 if grid < 1 else 1e-3 / 4 + PIECE_S + 0.1e-3)


def test_a_pointer_from_every_kernel_waits_for_the_latest_launch_of_any():
    a = TenantProfile("a", "high", (op("k", 1.0, 0.4), op("j", 1.0, 0.4, parents=[0])))
    b = TenantProfile("b", "normal", (op("x", 0.1, 0.4), op("y", 1.0, 0.4, parents=[0])))
    held = simulate((a, b), after={"b": {"*": ("a", "*")}})
    assert held.latency_s == pytest.approx({"a": 2e-3, "b": 3e-3})


def test_a_pointer_waits_for_the_latest_launch_of_its_kernel_before_it():
    a = TenantProfile("a", "normal", (op("k", 1.0, 0.4), op("k", 1.0, 0.4, parents=[0])))
    b = TenantProfile("b", "normal", (op("x", 0.1, 0.4), op("j", 1.0, 0.4, parents=[0])))
    free = simulate((a, b))
    held = simulate((a, b), after={"b": {"j": ("a", "k")}})
    assert free.latency_s["b"] == pytest.approx(1.1e-3)
    assert held.latency_s["b"] == pytest.approx(3e-3)       # after a's second k (at 2 ms)


@pytest.mark.parametrize("k_end_ms, j_end_ms", [
    (1.0, 1.0),         # no slower side by side: the model's free overlap stands
    (1.5, 1.5),         # both slower: the model follows the measurement
    (1.6, 1.0),         # one slower, the other not
    (3.0, 3.2),         # slower than taking turns (they thrash each other)
])
def test_a_pair_profiled_side_by_side_is_modelled_as_it_measured(k_end_ms, j_end_ms):
    a = TenantProfile("a", "normal", (op("k", 1.0, 0.3),))
    b = TenantProfile("b", "normal", (op("j", 1.0, 0.3),))
    # (timed on the device's timer, whose times alone need not be the profile's)
    pair = PairProfile("a", "k", "b", "j", 2e-3, 2e-3, 2 * k_end_ms * 1e-3,
                       2 * j_end_ms * 1e-3)
    slow = pair_slowdowns((a, b), (pair,))
    assert simulate((a, b)).latency_s == pytest.approx({"a": 1e-3, "b": 1e-3})
    assert simulate((a, b), slow=slow).latency_s == pytest.approx(
        {"a": k_end_ms * 1e-3, "b": j_end_ms * 1e-3}, rel=1e-4)
    assert simulate((a,), slow=slow).makespan_s == pytest.approx(1e-3)     # alone: unchanged


def test_a_short_launch_slowed_beside_a_long_one_is_modelled_slowed_though_the_pair_is_not():
    # (the pair ends when the long launch does, as alone: only the short one's end shows it)
    a = TenantProfile("a", "normal", (op("short", 1.0, 0.3),))
    b = TenantProfile("b", "normal", (op("long", 10.0, 0.3),))
    pair = PairProfile("a", "short", "b", "long", 1e-3, 10e-3, 3e-3, 10e-3)
    out = simulate((a, b), slow=pair_slowdowns((a, b), (pair,)))
    assert out.latency_s == pytest.approx({"a": 3e-3, "b": 10e-3}, rel=1e-4)


def test_a_slowdown_beyond_the_most_is_modelled_at_the_most():
    a = TenantProfile("a", "normal", (op("k", 1.0, 0.3),))
    b = TenantProfile("b", "normal", (op("j", 10.0, 0.3),))
    pair = PairProfile("a", "k", "b", "j", 1e-3, 10e-3, 9e-3, 10e-3)
    out = simulate((a, b), slow=pair_slowdowns((a, b), (pair,)))
    assert out.latency_s["a"] == pytest.approx(MOST_SLOWDOWN * 1e-3, rel=1e-4)


def test_a_pair_the_model_already_makes_slower_than_measured_is_left_to_the_model():
    # (both fill the device: the model has them take turns; measured, they overlapped a little)
    a = TenantProfile("a", "normal", (op("k", 1.0),))
    b = TenantProfile("b", "normal", (op("j", 2.0),))
    pair = PairProfile("a", "k", "b", "j", 1e-3, 2e-3, 1.2e-3, 2.5e-3)
    assert pair_slowdowns((a, b), (pair,)) == {}


def test_a_measured_pair_slows_only_those_two_kernels_and_only_while_they_overlap():
    a = TenantProfile("a", "normal", (op("k", 1.0, 0.3), op("m", 1.0, 0.3, parents=[0])))
    b = TenantProfile("b", "normal", (op("j", 2.0, 0.3),))
    slow = pair_slowdowns((a, b), (PairProfile("a", "k", "b", "j", 1e-3, 2e-3, 2e-3, 3e-3),))
    out = simulate((a, b), slow=slow)
    # k and j each at half speed while they overlap (k: 2 ms), then m beside the rest of j
    assert out.latency_s["a"] == pytest.approx(3e-3, rel=1e-4)
    assert out.latency_s["b"] == pytest.approx(3e-3, rel=1e-4)


def test_the_search_keeps_apart_a_pair_measured_to_slow_the_high_tenant():
    """The shares say the two fit side by side; measured, the high tenant's launch takes
    longer beside the other's. The plan then holds the normal tenant's launch behind it."""
    a = TenantProfile("a", "normal", (op("big", 2.0, 0.5),))
    b = TenantProfile("b", "high", (op("small", 1.0, 0.3),))
    assert search((a, b), budget_s=1.0).after == {}
    pair = PairProfile("a", "big", "b", "small", 2e-3, 1e-3, 2.4e-3, 2.2e-3)
    plan = search((a, b), budget_s=1.0, pairs=(pair,))
    assert plan.after == {"a": {"big": ("b", "small")}}
    assert plan.after_outcome.latency_s["b"] == pytest.approx(1e-3)
    assert plan.pairs == (pair,)


def test_occupancy_counts_threads_registers_and_shared_memory():
    assert occupancy_share(132, 1024, 132) == pytest.approx(0.5)          # 2 blocks per SM
    assert occupancy_share(264, 1024, 132) == pytest.approx(1.0)
    assert occupancy_share(132, 256, 132, regs=128) == pytest.approx(0.5)  # registers: 2
    assert occupancy_share(132, 128, 132, shared=100 << 10) == pytest.approx(0.5)
    assert occupancy_share(10_000, 256, 132) == 1.0


# -- the search -----------------------------------------------------------------------------------
def test_the_search_splits_a_long_kernel_to_keep_a_high_priority_tenant_on_time():
    low = TenantProfile("low", "normal", (op("big", 2.0, splittable=True),))
    high = TenantProfile("high", "high", (op("small", 0.1),))
    plan = search((low, high), budget_s=1.0)
    assert plan.splits == {"low": {"big": 8}}
    assert plan.after == {}
    assert plan.after_outcome.worst_s["high"] < plan.before.worst_s["high"] / 4
    assert plan.after_outcome.score < plan.before.score
    assert plan.describe().startswith("low: big in 8 (modelled score ")


def test_the_search_keeps_two_bandwidth_bound_launches_apart_with_a_pointer():
    a = TenantProfile("a", "normal", (op("m", 1.0, 0.5, 0.9), op("c", 1.0, 0.5, parents=[0])))
    b = TenantProfile("b", "normal", (op("n", 1.0, 0.5, 0.9), op("d", 1.0, 0.5, parents=[0])))
    plan = search((a, b), budget_s=1.0)
    assert plan.after in ({"a": {"m": ("b", "n")}}, {"b": {"n": ("a", "m")}})
    assert plan.after_outcome.makespan_s < plan.before.makespan_s


def test_the_search_does_not_hold_a_tenant_of_short_steps_behind_a_long_launch():
    """A pointer holding VEC's bandwidth-bound ``square`` (2 ms) behind DL's 35 ms ``conv2d``
    spares DL a little sharing, and would shorten the makespan of one step each; but VEC runs
    its steps at its own pace, and each would take 17 times its time alone."""
    dl = TenantProfile("dl", "high", (op("conv2d", 35, 0.25, 0.5),
                                      op("pool", 3, 0.25, 0.5, parents=[0]),
                                      op("conv2d", 35, 0.25, 0.5, parents=[1])))
    bs = TenantProfile("bs", "normal", (op("bs", 1.2, 0.25, 0.6, splittable=True),))
    vec = TenantProfile("vec", "normal", (op("square", 2, 0.25, 0.6, splittable=True),
                                          op("reduce", 1, 0.25, 0.3, parents=[0])))
    plan = search((dl, bs, vec), budget_s=1.0)
    assert plan.after == {}
    latency = plan.after_outcome.latency_s
    assert latency["vec"] < 2 * 3e-3 and latency["bs"] < 2 * 1.2e-3


def test_the_search_leaves_a_tenants_own_splits_and_pointers_alone():
    low = TenantProfile("low", "normal", (op("big", 2.0, splittable=True),))
    high = TenantProfile("high", "high", (op("small", 0.1),))
    plan = search((low, high), budget_s=1.0, given={"low": ({"big": 2}, None)})
    assert plan.splits == {"low": {"big": 2}}


def test_a_search_without_time_returns_the_tenants_own_plan():
    low = TenantProfile("low", "normal", (op("big", 2.0, splittable=True),))
    high = TenantProfile("high", "high", (op("small", 0.1),))
    plan = search((low, high), budget_s=0.0)
    assert plan.splits == {} and plan.after == {}


@st.composite
def profiles(draw):
    out = []
    for t in range(draw(st.integers(2, 3))):
        ops = []
        for i in range(draw(st.integers(1, 4))):
            parents = draw(st.lists(st.integers(0, i - 1), max_size=2, unique=True)) if i else []
            ops.append(Op(f"k{draw(st.integers(0, 3))}", draw(st.floats(1e-5, 1e-3)),
                          draw(st.floats(0.05, 1.0)), draw(st.sampled_from([0.0, 0.5, 1.0])),
                          draw(st.booleans()), tuple(parents)))
        out.append(TenantProfile(f"t{t}", draw(st.sampled_from(["high", "normal"])),
                                 tuple(ops), draw(st.booleans())))
    return tuple(out)


@settings(max_examples=40, deadline=None)
@given(ps=profiles())
def test_the_searched_plan_never_models_worse_than_none_and_is_the_same_each_time(ps):
    plan = search(ps, budget_s=10.0)
    alone = {p.name: simulate((p,)).makespan_s for p in ps}
    assert evaluate(ps, plan.splits, plan.after, alone)[0] <= \
        evaluate(ps, {}, {}, alone)[0] * (1 + 1e-9)
    again = search(ps, budget_s=10.0)
    assert (again.splits, again.after) == (plan.splits, plan.after)
    priority = {p.name: p.priority for p in ps}
    for name, kernels in plan.after.items():
        assert not set(kernels) & set(plan.splits.get(name, {}))
        for other, _ in kernels.values():       # (never high behind normal)
            assert priority[name] != "high" or priority[other] == "high"


def test_a_plan_saved_and_loaded_is_the_same(tmp_path):
    plan = Plan({"a": {"k": 4}}, {"b": {"j": ("a", "k")}},
                (("a", (("k", (1, 1, 1), (32, 1, 1)),)),),
                Outcome(1e-3, {"a": 1e-3}, 0.5, {"a": 2e-3}), None, 12, 0.01,
                (TenantProfile("a", "high", (op("k", 1.0, 0.5, 0.25, True, []),
                                             Op("g", 1e-3, 1.0, 0.0, True, (0,), 3.5)), True),),
                ("a",), (PairProfile("a", "k", "b", "j", 1e-3, 2e-3, 1.5e-3, 2.5e-3),),
                {"a": 40, "b": 88, "c": 88}, ("b", "c"), ("a", "b"))
    path = str(tmp_path / "plan.json")
    plan.save(path)
    assert Plan.load(path) == plan


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(after={"a": {"gemm": "bk"}}), "after must map a kernel name"),
    (lambda d: d.update(after={"a": {"gemm": ["b"]}}), "after must map a kernel name"),
    (lambda d: d.update(after={"a": {"gemm": ["b", "k", "x"]}}), "after must map a kernel"),
    (lambda d: d.update(exclusive="ranker"), "exclusive must be a tuple of tenant names"),
    (lambda d: d["splits"]["a"].update(k=2.5), r"split must map .*got \{'k': 2.5\}"),
    (lambda d: d["splits"]["a"].update(k="3"), r"split must map .*got \{'k': '3'\}"),
    (lambda d: d["splits"]["a"].update(k=True), r"split must map .*got \{'k': True\}"),
    (lambda d: d["splits"]["a"].update(k=None), "split must map"),
    (lambda d: d.update(partitions={"a": 8.7}), "partition must be a positive int"),
    (lambda d: d.update(splits=[["a", 2]]), "splits must map tenant names to objects"),
    (lambda d: d.update(profile=[{"name": "a", "ops": []}]), "profile, pairs or outcomes"),
    (lambda d: d.update(pairs=[[1]]), "profile, pairs or outcomes"),
    # (values of the wrong type where the runtime computes with them: refused as loaded, not
    # as a TypeError of the regulator's after it set the plan in force aside)
    (lambda d: d.update(profile=[{"name": "a", "priority": "high", "one_stream": False,
                                  "ops": [["k", "fast", 1.0, 0.0, False, []]]}]),
     "profile 'a', launch 0: seconds must be a finite number of seconds"),
    (lambda d: d.update(profile=[{"name": "a", "priority": "high", "one_stream": False,
                                  "ops": [["k", 1e-3, 1.0, 0.0, False, [0]]]}]),
     "launch 0: parents must be a tuple of earlier launches' indices"),
    (lambda d: d.update(profile=[{"name": "a", "priority": "urgent", "one_stream": False,
                                  "ops": []}]), "priority must be 'high' or 'normal'"),
    (lambda d: d.update(pairs=[["a", "k", "b", "j", 1e-3, "2", 1e-3, 1e-3]]),
     "other_alone_s must be a finite number of seconds"),
    (lambda d: d.update(before={"makespan_s": None, "latency_s": {}, "residue": 0.1}),
     "before: makespan_s must be a finite number"),
    # (nested keys misspelt, and fields too many: refused, not read as their defaults)
    (lambda d: d.update(profile=[{"name": "a", "priority": "high", "one_stram": True,
                                  "ops": []}]), "unknown key 'one_stram' in a profile"),
    (lambda d: d.update(before={"makespan_s": 1.0, "latency_s": {}, "residue": 0.1,
                                "scroe": 2.0}), "unknown key 'scroe' in an outcome"),
    (lambda d: d.update(profile=[{"name": "a", "priority": "high", "one_stream": False,
                                  "ops": [["k", 1e-3, 1.0, 0.0, False, [], 0, 4, 9]]}]),
     "a launch of profile 'a' must be a list of 6 to 8 fields"),
    (lambda d: d.update(shape="bogus"), r"shape must be a tuple of \(tenant name"),
    (lambda d: d.update(exclusive=[""]), r"'' is no tenant's name"),
    (lambda d: d.update(splits={"shared by a": {"k": 2}}), r"'shared by a' is no tenant's"),
    (lambda d: d.update(shape=[["a"]]), r"shape must be a tuple of \(tenant name"),
])
def test_a_plan_edited_in_its_json_file_wrongly_is_refused_as_loaded(edit, message):
    """Nothing is converted to fit (a pointer "bk" is not tenant b's kernel k, 2.5 pieces are
    not 2): a ValueError names the field, whatever the edit broke."""
    d = json.loads(Plan({"a": {"k": 4}}).to_json())
    edit(d)
    with pytest.raises(ValueError, match=message):
        Plan.from_json(json.dumps(d))


@pytest.mark.parametrize("plan, message", [
    (Plan(partitions={"a": 8, "b": 16}, shared=("a", "b")), "must give each the same SMs"),
    (Plan({"default": {"k": 2}}), "'default' .* cannot be regulated"),
    (Plan(exclusive=("default",)), "'default' .* cannot be regulated"),
])
def test_a_plan_the_runtime_could_not_apply_as_written_is_refused_by_check(plan, message):
    with pytest.raises(ValueError, match=message):
        plan.check()


@pytest.mark.parametrize("kwargs, message", [
    ({"budget_s": float("nan")}, "budget_s must be a finite number"),
    ({"budget_s": float("inf")}, "budget_s must be a finite number"),
    ({"budget_s": True}, "budget_s must be a finite number"),
    ({"plan": "off", "tenants": ["nope"]}, "takes no tenants="),
])
def test_regulate_refuses_a_budget_that_is_no_time_and_tenants_for_off(kwargs, message):
    with ag.configure(backend="sim"):
        with pytest.raises(ValueError, match=message):
            ag.regulate(**kwargs)


def test_a_plan_refused_by_regulate_leaves_the_plan_in_force_as_it_was():
    good = Plan({"reg-a": {"k": 2}})
    bad = Plan({"reg-a": {"k": 3}}, profile=(TenantProfile(
        "reg-a", "high", (Op("k", "fast", 1.0, 0.0, True, ()),)),))
    with ag.configure(backend="sim"):
        ag.regulate(plan=good)
        with pytest.raises(ValueError, match="seconds must be a finite number"):
            ag.regulate(plan=bad)
        assert ag.regulation().plan == good and ag.regulation().state == "regulated"
        ag.regulate(plan="off")


def test_a_plan_file_with_a_key_plans_do_not_have_is_refused_by_name(tmp_path):
    d = json.loads(Plan({"a": {"k": 4}}).to_json())
    d["exlusive"] = ["a"]                   # (misspelt: the tenant would not be exclusive)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=r"unknown key 'exlusive'.*keys are splits, after, "
                                         r".*exclusive.*one_core"):
        Plan.load(str(path))
    del d["exlusive"]
    path.write_text(json.dumps(d))
    assert Plan.load(str(path)) == Plan({"a": {"k": 4}})     # (every key to_json writes)


def test_a_plan_without_its_optional_fields_loads():
    assert Plan.from_json('{"splits": {"a": {"k": 2}}}') == Plan({"a": {"k": 2}})
    with pytest.raises(ValueError, match="not a plan's JSON"):
        Plan.from_json('{"splits": ')


# -- asyncgpu.regulate on the simulator -----------------------------------------------------------
def square(x, y, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] = x[i] * x[i]


def add_one(x, y, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] = x[i] + 1.0


class Mix:
    """Two tenants: ``low`` squares a long array (element-wise: splittable), ``high`` adds one
    to a short one; each step checks nothing, the test reads the results."""

    def __init__(self, tag, n=4096):
        self.big = ag.kernel(const=["x"], out=["y"], elementwise="n")(square)
        self.small = ag.kernel(const=["x"], out=["y"])(add_one)
        self.n = n
        self.x, self.y = ag.array(np.arange(float(n))), ag.empty(n)
        self.u, self.v = ag.array(np.ones(64)), ag.empty(64)
        self.low = ag.tenant(f"low-{tag}")
        self.high = ag.tenant(f"high-{tag}", priority="high")
        self.names = [self.low.name, self.high.name]

    def step(self, blocks=4):
        with self.low:
            self.big[blocks, 32](self.x, self.y, self.n)
        with self.high:
            self.small[1, 32](self.u, self.v, 64)

    def recorded_low(self):
        """The low tenant's launch as a recorded function (``@ag.graph``)."""
        @ag.graph
        def low_step():
            self.big[4, 32](self.x, self.y, self.n)
        return low_step

    def right(self):
        return (self.y.numpy().tolist() == (np.arange(float(self.n)) ** 2).tolist()
                and self.v.numpy().tolist() == [2.0] * 64)


#: the long kernel, filling the device, beside the short one
TIMES = {"square": 2e-3, "add_one": 1e-4}
SHARES = {"square": 1.0, "add_one": 0.1}


def regulated(mix, rounds=3):
    """Regulate ``mix`` with the stand-in times: profile its next 2 steps, search, and run
    ``rounds`` steps with the plan."""
    mix.step()
    ag.regulate(plan="search", tenants=mix.names)
    with profiled_as(TIMES, SHARES):
        for _ in range(2):
            mix.step()
        ag.synchronize()
        assert ag.regulation().state == "regulated"
    for _ in range(rounds):
        mix.step()
    ag.synchronize()


@pytest.mark.parametrize("memory", ["explicit", "managed"])
@pytest.mark.parametrize("strategy", ["random", "reverse", "starve"])
def test_a_regulated_mix_runs_with_its_searched_plan_and_gives_the_same_results(memory,
                                                                              strategy):
    with ag.configure(backend="sim", memory=memory, sim_strategy=strategy, sim_seed=3):
        mix = Mix(f"{memory}-{strategy}")
        with ag.instrument(programs.Edges()) as seen:
            regulated(mix)
        state = ag.regulation()
        assert state.plan.splits == {f"low-{memory}-{strategy}": {"square": 8}}
        assert state.tenants == (f"low-{memory}-{strategy}", f"high-{memory}-{strategy}")
        assert mix.right()
        squares = [reasons for n, reasons in seen.kernels if n.name == "square"]
        assert len(squares) == 3 + 8 * 3          # first step and two profiled whole, then 8
        assert sum(r.count("split") for r in squares) == 7 * 3
        ag.regulate(plan="off")


def test_a_launch_slowed_in_one_profiled_step_is_profiled_at_its_time_alone():
    # (another process's work on the device lengthens one sample: the plan must not follow it)
    with ag.configure(backend="sim", sim_seed=5):
        mix = Mix("one-slow-sample")
        mix.step()
        ag.regulate(plan="search", tenants=mix.names)
        with profiled_as({**TIMES, "add_one": [50 * TIMES["add_one"], TIMES["add_one"]]},
                         SHARES):
            for _ in range(2):
                mix.step()
            ag.synchronize()
            state = ag.regulation()         # (the profile is taken here, with the stand-ins)
        assert state.state == "regulated"
        ops = {p.name: p.ops for p in state.plan.profile}
        (short,) = ops["high-one-slow-sample"]
        assert short.seconds == TIMES["add_one"]
        assert state.plan.splits == {"low-one-slow-sample": {"square": 8}}
        mix.step()
        ag.synchronize()
        assert mix.right()
        ag.regulate(plan="off")


def test_regulate_profiles_launches_in_pairs_and_the_search_models_what_they_measured():
    with ag.configure(backend="sim", sim_seed=4):
        mix = Mix("pairs")
        mix.step()
        ag.regulate(plan="search", tenants=mix.names)
        with profiled_as(TIMES, {"square": 0.5, "add_one": 0.1},
                         together={("square", "add_one"): (2.1e-3, 0.4e-3)}):
            for _ in range(2):
                mix.step()
            ag.synchronize()
            state = ag.regulation()
        assert state.state == "regulated"
        assert state.plan.pairs == (PairProfile("high-pairs", "add_one", "low-pairs", "square",
                                                TIMES["add_one"], TIMES["square"], 0.4e-3,
                                                2.1e-3),)
        # (the short launch beside the long one measured slower than its share and
        # bandwidth say: the model follows)
        without = search(state.plan.profile, budget_s=1.0).before.latency_s["high-pairs"]
        assert state.plan.before.latency_s["high-pairs"] > 1.5 * without
        mix.step()
        ag.synchronize()
        assert mix.right()
        ag.regulate(plan="off")


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_pairs_are_timed_by_the_backend_and_leave_the_programs_results_alone(memory,
                                                                             monkeypatch):
    monkeypatch.setattr(pair_profiles, "PAIR_LEAST_S", 0.0)    # (the simulator's launches are short)
    with ag.configure(backend="sim", memory=memory, sim_seed=6):
        mix = Mix(f"timed-pairs-{memory}")
        mix.step()
        ag.regulate(plan="search", tenants=mix.names)
        for _ in range(2):
            mix.step()
        ag.synchronize()
        state = ag.regulation()
        assert state.state == "regulated"
        (pair,) = state.plan.pairs
        assert {pair.kernel, pair.other_kernel} == {"square", "add_one"}
        assert pair.together_s >= pair.alone_s > 0
        assert pair.other_together_s >= pair.other_alone_s > 0
        mix.step()
        ag.synchronize()
        assert mix.right()
        ag.regulate(plan="off")


class _Broken:
    """A stage timer that fails at ``fails`` (``make``: being made; ``time``: timing)."""

    def __init__(self, real, fails):
        if fails == "make":
            raise RuntimeError("no scratch memory for the timed launches")
        self.real = real

    def time(self, stage):
        return self.real.time(stage)

    def time_groups(self, stage):
        raise RuntimeError("the device refused the timed launches")

    def close(self):
        pass


@pytest.mark.parametrize("fails, message", [
    ("make", "could not prepare the launches for timing"),
    ("time", "could not time launches side by side"),
])
def test_pairs_that_cannot_be_timed_leave_a_plan_searched_without_them(fails, message,
                                                                        monkeypatch, caplog):
    monkeypatch.setattr(pair_profiles, "PAIR_LEAST_S", 0.0)
    with ag.configure(backend="sim", sim_seed=7):
        backend = current_runtime().backend
        real = backend.stage_timer
        monkeypatch.setattr(backend, "stage_timer",
                            lambda rt, launches: _Broken(real(rt, launches), fails))
        mix = Mix(f"untimed-pairs-{fails}")
        mix.step()
        ag.regulate(plan="search", tenants=mix.names)
        with caplog.at_level("WARNING", logger="asyncgpu"):
            for _ in range(2):
                mix.step()
            ag.synchronize()
            state = ag.regulation()
        assert state.state == "regulated" and state.plan.pairs == ()
        assert message in caplog.text
        mix.step()
        ag.synchronize()
        assert mix.right()
        ag.regulate(plan="off")


def test_profiled_launches_run_one_at_a_time_across_tenants():
    with ag.configure(backend="sim", sim_seed=1):
        mix = Mix("profiled")
        mix.step()
        ag.regulate(plan="search", tenants=mix.names)
        with ag.instrument(programs.Edges()) as seen:
            mix.step()
            mix.step()
        reasons = [r for _, r in seen.kernels]
        assert [r.count("profile") for r in reasons] == [0, 1, 1, 1]
        ag.regulate(plan="off")


def test_a_plan_is_reused_for_the_same_shape_and_searched_again_for_another():
    with ag.configure(backend="sim", sim_seed=2):
        mix = Mix("reuse")
        regulated(mix)
        first = ag.regulation()             # (the runtime keeps earlier tests' plans too)
        ag.regulate(plan="search", tenants=mix.names)   # same: profiled, then the stored plan
        for _ in range(2):
            mix.step()
        ag.synchronize()
        state = ag.regulation()
        assert (state.state, state.searched, state.reused, state.stored) == \
            ("regulated", first.searched, first.reused + 1, first.stored)
        # (measured from the simulator's clock this time, not stood in: the high tenant's
        # steps run alone first, then the stored plan is the one measured)
        assert state.checking == "alone"
        steps_while(mix, "alone")
        assert ag.regulation().plan == first.plan
        mix.step(blocks=2)                  # another shape: profiled again
        assert ag.regulation().state == "profiling"
        with profiled_as(TIMES, SHARES):
            for _ in range(2):
                mix.step(blocks=2)
            ag.synchronize()
            state = ag.regulation()
        assert (state.state, state.searched, state.stored) == \
            ("regulated", first.searched + 1, first.stored + 1)
        ag.regulate(plan="off")


def test_a_given_plan_runs_at_once_and_off_gives_the_tenants_their_own_settings():
    with ag.configure(backend="sim", sim_seed=2):
        mix = Mix("given")
        mix.step()
        plan = Plan({"low-given": {"square": 2}}, {"high-given": {"add_one": ("low-given",
                                                                              "square")}})
        ag.regulate(plan=plan)
        assert ag.regulation().state == "regulated"
        with ag.instrument(programs.Edges()) as seen:
            mix.step()
        assert [n.name for n, _ in seen.kernels] == ["square", "square", "add_one"]
        assert seen.kernels[1][1] == ["split"]
        assert "pointer" in seen.kernels[2][1]    # (the simulator is lazy: square is queued)
        ag.regulate(plan="off")
        assert ag.regulation().state == "off"
        with ag.instrument(programs.Edges()) as seen:
            mix.step()                      # own settings again (and no ValueError)
        assert [n.name for n, _ in seen.kernels] == ["square", "add_one"]
        ag.synchronize()
        assert mix.right()


def test_a_given_plan_whose_profile_takes_no_time_is_not_kept_without_a_measurement():
    """A plan edited by hand whose profiled launches take 0 s gives the check no latency alone
    to weigh the steps by: every stage scores 0, which is no gain, so the tenants' own
    settings are kept (the plan was kept, measured 0.0 against 0.0)."""
    with ag.configure(backend="sim", sim_seed=2):
        mix = Mix("timeless")
        mix.step()
        low, high = mix.names
        shape = ((low, (("square", (4, 1, 1), (32, 1, 1)),)),
                 (high, (("add_one", (1, 1, 1), (32, 1, 1)),)))
        profile = (TenantProfile(low, "normal", (op("square", 0.0, splittable=True),)),
                   TenantProfile(high, "high", (op("add_one", 0.0),)))
        ag.regulate(plan=Plan(after={low: {"square": (high, "add_one")}}, shape=shape,
                              profile=profile))
        for _ in range(2000):
            state = ag.regulation()
            if state.state == "regulated" and not state.checking:
                break
            mix.step()
            ag.synchronize()
        assert state.state == "regulated" and not state.checking
        assert state.measured and max(state.measured.values()) == 0.0
        assert state.plan.describe() == "no splits, pointers or exclusive tenants"
        assert mix.right()


@pytest.mark.parametrize("tag", ["early", "early-named"])
def test_a_plan_given_before_its_tenants_are_made_applies_to_each_as_it_is_made(tag):
    """A saved plan loaded at start-up, before any tenant ran: each tenant it names is
    regulated with it from its first step on; one it does not name is not."""
    low, high = f"low-{tag}", f"high-{tag}"
    with ag.configure(backend="sim", sim_seed=2):
        plan = Plan({low: {"square": 2}}, {high: {"add_one": (low, "square")}})
        ag.regulate(plan=plan, tenants=[low, high] if tag == "early-named" else None)
        assert (ag.regulation().state, ag.regulation().tenants) == ("regulated", ())
        mix = Mix(tag)
        with ag.instrument(programs.Edges()) as seen:
            mix.step()
        assert [n.name for n, _ in seen.kernels] == ["square", "square", "add_one"]
        assert "pointer" in seen.kernels[2][1]
        assert ag.regulation().tenants == (low, high)
        with ag.tenant(f"bystander-{tag}"):
            pass
        assert ag.regulation().tenants == (low, high)
        ag.regulate(plan="off")
        with ag.instrument(programs.Edges()) as seen:
            mix.step()
        assert [n.name for n, _ in seen.kernels] == ["square", "add_one"]
        ag.synchronize()
        assert mix.right()


@pytest.mark.parametrize("tenants, message", [
    (["no-such-tenant"], "no tenant named 'no-such-tenant'"),
    (123, "tenants must be a tenant's name or names"), ([7], "tenants must be names"),
    ([], "no tenant to regulate")])
def test_a_refused_regulate_call_leaves_the_plan_in_force_as_it_was(tenants, message):
    with ag.configure(backend="sim", sim_seed=2):
        mix = Mix("refused")
        mix.step()
        plan = Plan({"low-refused": {"square": 2}})
        ag.regulate(plan=plan)
        with pytest.raises(ValueError, match=message):
            ag.regulate(plan="search", tenants=tenants)
        assert (ag.regulation().state, ag.regulation().plan) == ("regulated", plan)
        with ag.instrument(programs.Edges()) as seen:
            mix.step()
        assert [n.name for n, _ in seen.kernels] == ["square", "square", "add_one"]
        ag.regulate(plan="off")
        ag.synchronize()
        assert mix.right()


def test_a_step_that_fails_or_launches_nothing_keeps_the_searched_plan():
    with ag.configure(backend="sim", sim_seed=2):
        mix = Mix("kept")
        regulated(mix)
        plan = ag.regulation().plan
        assert plan.shape                       # (a searched plan: a shape to compare with)
        with mix.high:
            pass                                # (a request answered from a cache)
        with pytest.raises(KeyError), mix.high:
            mix.small[1, 32](mix.u, mix.v, 64)
            raise KeyError("a bad request")
        with pytest.raises(KeyError), mix.low:
            raise KeyError("a bad request")
        mix.step()
        state = ag.regulation()
        assert (state.state, state.plan) == ("regulated", plan)
        mix.step(blocks=2)                      # (a step of another shape: profiled again)
        assert ag.regulation().state == "profiling"
        ag.regulate(plan="off")
        ag.synchronize()
        assert mix.right()


def kept_by_rule(trial, stage):
    """Whether the remedy measured in ``stage`` is one the check keeps: the score down to
    ``PLAN_GAIN`` of the plan's without it, the lead's slowest step no slower, its median at
    most ``MEDIAN_SLACK`` slower."""
    (base, before, median), (got, worst, now) = trial.scores[stage + "-base"], trial.scores[stage]
    return (got <= plan_check.PLAN_GAIN * base and worst <= before
            and now <= plan_check.MEDIAN_SLACK * median)


def steps_while(mix, stage, most=60):
    """Steps of ``mix`` (each synchronized) while the plan's measurement is at ``stage``."""
    for _ in range(most):
        if ag.regulation().checking != stage:
            return
        mix.step()
        ag.synchronize()
    raise AssertionError(f"the measurement stayed at {stage!r}")


def searched(mix):
    """Regulate ``mix`` on the simulator's own times (no stand-in profile): a step, then two
    profiled; returns where regulation stands."""
    mix.step()
    ag.regulate(plan="search", tenants=mix.names)
    for _ in range(2):
        mix.step()
    ag.synchronize()
    return ag.regulation()


def _step_noting(mix, seen):
    """One step of ``mix``; notes, as each tenant's step begins, the measurement's stage, the
    tenant exclusive then, the tenant and how many launches are in flight."""
    rt = current_runtime()
    for tenant, launch in ((mix.low, lambda: mix.big[4, 32](mix.x, mix.y, mix.n)),
                           (mix.high, lambda: mix.small[1, 32](mix.u, mix.v, 64))):
        with tenant:
            state = ag.regulation()
            seen.append((state.checking, state.plan.exclusive if state.plan else (),
                         tenant.name, rt.streams.inflight))
            launch()


def test_each_tenant_is_measured_alone_first_and_the_high_one_held_to_what_it_measured():
    with ag.configure(backend="sim", sim_seed=4):
        mix = Mix("alone")
        state = searched(mix)
        # (no stand-in profile: its steps alone are measured on the simulator's clock)
        assert state.checking == "alone"
        assert (state.plan.exclusive, state.plan.splits, state.plan.after) == \
            ((mix.high.name,), {}, {})
        seen = []
        for _ in range(80):
            if ag.regulation().checking != "alone":
                break
            _step_noting(mix, seen)
        # the high tenant alone first, then the low one: each step of the one measured
        # began once nothing ran
        for tenant, steps in ((mix.high, plan_check.ALONE_STEPS),
                              (mix.low, plan_check.OTHERS_ALONE_STEPS)):
            alone_seen = [inflight for stage, exclusive, name, inflight in seen
                          if stage == "alone" and exclusive == (tenant.name,)
                          and name == tenant.name]
            assert len(alone_seen) >= steps
            assert alone_seen == [0] * len(alone_seen)
        order = [exclusive for stage, exclusive, _, _ in seen if stage == "alone"]
        assert (mix.high.name,) not in order[order.index((mix.low.name,)):]
        low_alone = ag.regulation().alone[mix.low.name]
        assert low_alone in ag.tenants()[mix.low.name].latencies_s  # (measured, not modelled)
        for stage in ("plan", "own", "split", "guard", "exclusive", "pieces"):
            steps_while(mix, stage)
        later = []
        _step_noting(mix, later)
        _, alone = ag.regulation().checked[mix.high.name]
        assert alone in ag.tenants()[mix.high.name].latencies_s      # (measured, not modelled)
        # the same shape again: the plan and the latencies alone are all reused
        assert searched(mix).checking == "plan"
        for stage in ("plan", "own"):
            steps_while(mix, stage)
        assert ag.regulation().checked[mix.high.name][1] == alone
        assert ag.regulation().alone[mix.low.name] == low_alone
        ag.regulate(plan="off")
        _step_noting(mix, later)
        # (off: the high tenant's step begins beside the low's)
        assert later[-1] == ("", (), mix.high.name, 1)
        ag.synchronize()
        assert mix.right()


def test_a_plan_under_check_times_every_step_of_its_tenants(monkeypatch):
    """Steps 1 ms apart are timed a sample of, except while regulation checks a plan: the
    check reads each step's latency."""
    from asyncgpu.runtime import tenant_steps

    class Clock:            # (the tenants' host clock: 1 ms a read)
        now = 0.0

        def perf_counter(self):
            self.now += 1e-3
            return self.now

    with ag.configure(backend="sim", sim_seed=2):
        monkeypatch.setattr(tenant_steps, "time", Clock())
        mix = Mix("timed-check")
        for _ in range(60):
            mix.step()

        def unmeasured():
            return [ag.tenants()[name].unmeasured for name in mix.names]

        assert all(unmeasured())            # (sampled: some steps not timed)
        assert searched(mix).checking         # (a stage of the check: "alone" first)
        before, checked = unmeasured(), 0
        while ag.regulation().checking and checked < 200:
            mix.step()
            checked += 1
        assert checked >= 10 and unmeasured() == before
        ag.regulate(plan="off")
        for _ in range(60):
            mix.step()
        assert all(a > b for a, b in zip(unmeasured(), before))    # (sampled again)
        ag.synchronize()
        assert mix.right()


def test_the_high_tenants_first_step_in_each_stage_begins_after_the_work_issued_before_it(
        monkeypatch):
    """A stage measures its plan, not the queue the plan before it left: the lead's first step
    in a stage begins once the launches in flight when the stage began have completed (the
    simulator runs queued work only when waited for, so without that wait they would still
    be in flight)."""
    monkeypatch.setattr(plan_check, "CHECK_STEPS", 8)       # (shorter stages: same order)
    monkeypatch.setattr(plan_check, "ALONE_STEPS", 8)
    with ag.configure(backend="sim", sim_seed=4):
        rt = current_runtime()
        mix = Mix("backlog")
        searched(mix)

        def unfinished():
            return [n for s in rt.streams.streams for n in s.inflight if not n.finished]

        stage, backlog, checked = ag.regulation().checking, None, []
        for i in range(400):
            if i % 4 == 3 and backlog is None:
                ag.synchronize()        # (steps are measured once their events complete)
            for scope in (mix.low, mix.high):
                with scope:
                    if scope is mix.high and backlog is not None:
                        now = unfinished()
                        checked.append((stage, backlog, not any(n in now for n in backlog)))
                        backlog = None
                    if scope is mix.low:
                        mix.big[4, 32](mix.x, mix.y, mix.n)
                    else:
                        mix.small[1, 32](mix.u, mix.v, 64)
                # (a stage begins as a step ends, or when asked where regulation stands)
                now = ag.regulation().checking
                if now != stage:
                    stage, backlog = now, unfinished() if now else None
            if not stage:
                break
        assert not stage and len(checked) >= 5
        assert any(backlog for _, backlog, _ in checked)     # (there was something to wait for)
        assert all(ok for _, _, ok in checked), [(s, len(b)) for s, b, ok in checked if not ok]
        ag.regulate(plan="off")
        ag.synchronize()
        assert mix.right()


def test_tenants_on_threads_of_their_own_pass_the_measurement_alone_without_waiting_for_good():
    with ag.configure(backend="sim", sim_seed=6):
        mix = Mix("alone-threads")
        mix.step()
        ag.regulate(plan="search", tenants=mix.names)
        errors = []
        # (in rounds, as the tenants benchmark runs them: a thread held until the other's
        # next step would never get there)
        rounds = threading.Barrier(2)

        def loop(scope, launch, out, steps):
            try:
                for _ in range(steps):
                    rounds.wait(10)
                    with scope:
                        launch()
                    float(out[-1])      # (each step's result read, as a service answers)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
                rounds.abort()

        threads = [
            threading.Thread(target=loop, args=(mix.low, lambda: mix.big[4, 32](
                mix.x, mix.y, mix.n), mix.y, 140)),
            threading.Thread(target=loop, args=(mix.high, lambda: mix.small[1, 32](
                mix.u, mix.v, 64), mix.v, 140))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors and not any(t.is_alive() for t in threads)
        ag.synchronize()
        state = ag.regulation()
        assert state.checking != "alone" and mix.high.name in state.checked  # (checked after)
        assert mix.right()
        ag.regulate(plan="off")


def test_a_trace_shows_where_regulation_stood_and_each_change_as_it_came():
    with ag.configure(backend="sim", sim_seed=7):
        mix = Mix("traced")
        mix.step()
        ag.regulate(plan="search", tenants=mix.names)
        with ag.trace() as t:
            for _ in range(2):
                mix.step()
            ag.synchronize()
            steps_while(mix, "alone")
            ag.regulate(plan="off")
        mix.step()                      # (after the trace: not recorded)
        records = t.regulation
        events = [e for e in t.chrome_trace()["traceEvents"] if e.get("cat") == "regulation"]
        with ag.trace() as later:       # (regulation off: nothing to record)
            mix.step()
        assert later.regulation == []
    stages = [(r.state, r.stage) for r in records]
    # in force as the trace started, then the searched plan, each tenant alone (the high one
    # first), the plan measured, and off
    assert stages == [("profiling", ""), ("regulated", "plan"), ("regulated", "alone"),
                      ("regulated", "alone"), ("regulated", "plan"), ("off", "")]
    assert records[2].plan.startswith(f"{mix.high.name}: exclusive")
    assert records[3].plan.startswith(f"{mix.low.name}: exclusive")
    assert records[1].plan == records[4].plan != "" and records[-1].plan == ""
    assert all(a.order < b.order and a.time_s <= b.time_s for a, b in zip(records, records[1:]))
    assert [e["name"] for e in events] == [
        f"regulation: {state}" + (f", check {stage}" if stage else "") for state, stage in stages]
    assert events[-1]["args"] == {"plan": "the tenants' own settings", "stage": ""}


def test_a_wait_that_fails_before_a_step_alone_still_lets_the_others_go(monkeypatch):
    with ag.configure(backend="sim", sim_seed=4):
        rt = current_runtime()
        mix = Mix("alone-fails")
        assert searched(mix).checking == "alone"
        with mix.low:
            mix.big[4, 32](mix.x, mix.y, mix.n)      # (in flight as the high step begins)

        def broken(event):
            raise RuntimeError("wait failed")

        monkeypatch.setattr(rt.backend, "host_wait", broken)
        with pytest.raises(RuntimeError, match="wait failed"):
            with mix.high:
                pass
        monkeypatch.undo()
        done = []

        def other():
            with mix.low:
                mix.big[4, 32](mix.x, mix.y, mix.n)
            done.append(True)

        worker = threading.Thread(target=other)
        worker.start()
        worker.join(5)
        assert done == [True]           # (the failed step holds no one)
        steps_while(mix, "alone")
        ag.synchronize()
        assert mix.right()
        ag.regulate(plan="off")


@pytest.mark.parametrize("alone_s,guarded", [(1e-12, True), (1.0, False)])
def test_a_plan_is_measured_against_the_tenants_own_settings_and_a_late_high_tenant_guarded(
        alone_s, guarded, monkeypatch, caplog):
    """The high tenant's measured latency (the simulator's clock) is far over a stand-in time
    alone of 1e-12 s, and far under 1 s."""
    # (the most pieces of the split stage: 16, still more than the plan's 8, for fewer
    # simulated launches than 32)
    monkeypatch.setattr(remedy_plans, "MOST_PIECES", 16)
    monkeypatch.setattr(plan_check, "CHECK_STEPS", 10)    # (stages of ten simulated steps)
    with ag.configure(backend="sim", sim_seed=2):
        caplog.set_level("INFO", logger="asyncgpu")     # (after configure, which sets it)
        mix = Mix(f"guard-{guarded}")
        mix.step()
        ag.regulate(plan="search", tenants=mix.names)
        with profiled_as({**TIMES, "add_one": alone_s}, SHARES):
            for _ in range(2):
                mix.step()
            ag.synchronize()
            searched = ag.regulation().plan
        if guarded:             # (a high tenant late in the model: the long kernel split)
            assert searched.splits == {mix.low.name: {"square": 8}}
        assert ag.regulation().checking == "plan"
        steps_while(mix, "plan")
        kept_plan = True
        if searched.splits or searched.after:
            assert ag.regulation().checking == "own"    # (then the tenants' own settings)
            assert ag.regulation().plan.splits == {}
            steps_while(mix, "own")
            scores = ag.regulation().measured
            kept_plan = scores["plan"] <= plan_check.PLAN_GAIN * scores["own"]
        state = ag.regulation()
        base = searched if kept_plan else dataclasses.replace(
            searched, splits={}, after={}, after_outcome=searched.before)   # (no modelled gain)
        base_score = state.measured["plan" if kept_plan else "own"]
        worst, alone = state.checked[mix.high.name]
        assert alone == pytest.approx(alone_s) and worst > 0
        if not guarded:
            assert state.checking == "" and state.plan == base  # (the better measured one)
        else:
            trial = current_runtime().regulator._trial     # (each stage's measured scores)
            # first the low tenant's long launch in more pieces (its time alone over the
            # high tenant's: the most pieces), measured against the plan without them
            assert state.checking == "split"
            assert state.plan.splits == {mix.low.name: {"square": 16}}
            assert state.plan.after == base.after         # (the better measured one's)
            steps_while(mix, "split")
            state = ag.regulation()
            split_worst = state.checked[mix.high.name][0]
            if kept_by_rule(trial, "split"):
                base = dataclasses.replace(base, splits={mix.low.name: {"square": 16}})
                base_score = state.measured["split"]
            else:
                split_worst = worst
            worst = split_worst
            assert state.plan.splits == base.splits
            assert state.checking == "guard"
            assert state.plan.after[mix.low.name]["*"] == (mix.high.name, "*")
            with ag.instrument(programs.Edges()) as seen:
                with mix.high:
                    mix.small[1, 32](mix.u, mix.v, 64)
                with mix.low:
                    mix.big[4, 32](mix.x, mix.y, mix.n)     # (the first piece, or all, waits)
            first = next(r for n, r in seen.kernels if n.name == "square")
            assert "pointer" in first
            steps_while(mix, "guard")
            state = ag.regulation()
            guard_worst = state.checked[mix.high.name][0]
            # (from the log: the partition stage's plan, now in force, has no pointers)
            kept = "the guard kept" in caplog.text
            assert kept == kept_by_rule(trial, "guard")
            assert state.plan.splits == base.splits
            if kept:
                after = {name: dict(ks) for name, ks in base.after.items()}
                after.setdefault(mix.low.name, {})["*"] = (mix.high.name, "*")
                base = dataclasses.replace(base, after=after)
                base_score, worst = state.measured["guard"], guard_worst
            # then each tenant on SMs of its own: the high one as many as its launch's blocks
            # (1, in a group of 8), the low one the rest in whole groups; no pointers there
            assert state.checking == "partition"
            assert state.plan.partitions == {mix.high.name: 8, mix.low.name: 120}
            assert state.plan.after == {}
            rt = current_runtime()
            assert [t.partition for t in rt.tenants if t.name in mix.names] == [120, 8]
            steps_while(mix, "partition")
            state = ag.regulation()
            part_worst = state.checked[mix.high.name][0]
            kept = bool(state.plan.partitions)
            assert kept == kept_by_rule(trial, "partition")
            if kept:
                base = dataclasses.replace(base, partitions=state.plan.partitions, after={})
                base_score, worst = state.measured["partition"], part_worst
            else:                   # (dropped: the tenants on any SM again)
                assert [t.partition for t in rt.tenants if t.name in mix.names] == [None, None]
            # then the high tenant's steps exclusive: the gate is made for it
            assert state.checking == "exclusive"
            assert state.plan.exclusive == (mix.high.name,) and state.plan.after == base.after
            assert current_runtime().gate is not None
            steps_while(mix, "exclusive")
            state = ag.regulation()
            if state.checking == "pieces":
                # still late: last, exclusive steps with the low tenant's long launch in pieces
                assert state.plan.exclusive == (mix.high.name,)
                assert state.plan.splits[mix.low.name]["square"] == 16
                steps_while(mix, "pieces")
                state = ag.regulation()
                if state.plan.splits.get(mix.low.name) == {"square": 16}:
                    assert state.plan.exclusive == (mix.high.name,)
                    assert state.measured["pieces"] <= max(base_score, state.measured["exclusive"])
            else:
                kept = state.plan.exclusive == (mix.high.name,)
                assert kept == kept_by_rule(trial, "exclusive")
                # (no pieces stage: on target, or the low tenant's pieces were kept already)
                assert (state.checked[mix.high.name][0] <= HIGH_TARGET * alone
                        or base.splits.get(mix.low.name) == {"square": 16})
            assert state.checking == ""
            assert (current_runtime().gate is not None) == bool(state.plan.exclusive)
        ag.synchronize()
        assert mix.right()
        ag.regulate(plan="off")


def test_the_split_remedy_cuts_a_launch_no_finer_than_its_waves():
    """A late high tenant's split remedy (``_split_plan``) cuts the others' long launches in
    pieces: by rows as fine as the slice asks, by grid no finer than the launch's waves, and
    not at all where the device holds the whole grid at once (each piece would take as long
    as the launch: a blur of 528 small blocks on 132 SMs, cut in 16, ran 12x slower)."""
    from types import SimpleNamespace

    ops = (Op("rows", 8e-3, 1.0, 0.0, True, ()),
           Op("waves", 8e-3, 1.0, 0.0, True, (), grid=4.0, blocks=4096),
           Op("fits", 8e-3, 0.125, 0.0, True, (), grid=0.125, blocks=528),
           Op("whole", 8e-3, 1.0, 0.0, False, ()))
    plan = Plan({}, {}, profile=(TenantProfile("img", "normal", ops),
                                 TenantProfile("dl", "high", (op("conv", 6.0),))))
    check = SimpleNamespace(rt=SimpleNamespace(tenants=[SimpleNamespace(name="img"),
                                                        SimpleNamespace(name="dl")]))
    split = plan_check.PlanCheck._split_plan(check, plan, [0], 6e-3)
    assert split.splits == {"img": {"rows": 32, "waves": 4}}     # (slice: 0.3 ms)
    assert all(op.piece(k)[0] < op.seconds for op in ops if op.kernel in split.splits["img"]
               for k in [split.splits["img"][op.kernel]])
    only_fits = dataclasses.replace(plan, profile=(TenantProfile("img", "normal", ops[2:]),))
    assert plan_check.PlanCheck._split_plan(check, only_fits, [0], 6e-3) is None


@pytest.mark.parametrize("kwargs,match", [
    ({"plan": "fast"}, "plan must be"),
    ({"steps": 0}, "steps must be"),
    ({"budget_s": -1}, "budget_s must be"),
    ({"tenants": ["nobody"]}, "no tenant named 'nobody'"),
    # a plan made by hand, with settings asyncgpu.tenant would refuse
    ({"plan": Plan({"low-bad": {"square": 1}})},
     "'low-bad''s split must map kernel names to a number of pieces of at least 2"),
    ({"plan": Plan({"low-bad": {"square": "4"}})}, "pieces of at least 2"),
    ({"plan": Plan({}, {"high-bad": {"add_one": ("low-bad",)}})}, "'high-bad''s after must map"),
    ({"plan": Plan({"low-bad": {"square": 2}}, {"low-bad": {"square": ("high-bad", "add_one")}})},
     "kernel 'square' is both split and after"),
    ({"plan": Plan(exclusive="low-bad")}, "exclusive must be a tuple of tenant names"),
    ({"plan": Plan(partitions={"low-bad": -8})}, "partition must be a positive int"),
    ({"plan": Plan(partitions={"low-bad": 8}, shared=("high-bad",))},
     "'high-bad' is in shared but"),
])
def test_bad_regulation_is_refused_by_name_and_the_runtime_stays_usable(kwargs, match):
    with ag.configure(backend="sim", sim_seed=2):
        mix = Mix("bad")
        mix.step()
        with pytest.raises(ValueError, match=match):
            ag.regulate(**kwargs)
        assert ag.regulation().state == "off"      # (refused before anything changed)
        mix.step()
        ag.synchronize()
        assert mix.right()


def test_a_tenant_that_stopped_running_steps_is_left_out_of_the_plan():
    with ag.configure(backend="sim", sim_seed=2):
        gone = Mix("gone")
        gone.step()                         # (its tenants run no step after this)
        mix = Mix("idle")
        mix.step()
        ag.regulate(plan="search")          # every tenant that ran a step: gone's too
        assert set(ag.regulation().awaiting) >= set(gone.names + mix.names)
        with profiled_as(TIMES, SHARES):
            for _ in range(4):
                mix.step()
            ag.synchronize()
            state = ag.regulation()
        assert state.state == "regulated" and state.tenants == tuple(mix.names)
        ag.regulate(plan="off")


def test_a_tenant_whose_profiled_step_is_slow_to_end_is_not_left_out_as_idle():
    """One tenant's step stays under way (on a thread of its own) while the other runs many:
    it is slow, not idle, so it stays in the profile, and its step ends without error."""
    with ag.configure(backend="sim", sim_seed=3):
        mix = Mix("slow-step")
        mix.step()
        ag.regulate(plan="search", tenants=mix.names)
        inside, release, errors = threading.Event(), threading.Event(), []

        def slow():
            try:
                for _ in range(3):
                    with mix.low:
                        mix.big[4, 32](mix.x, mix.y, mix.n)
                        inside.set()
                        release.wait(30)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        with profiled_as(TIMES, SHARES):
            thread = threading.Thread(target=slow)
            thread.start()
            assert inside.wait(30)
            for _ in range(8):              # (twice the profile's steps and more)
                with mix.high:
                    mix.small[1, 32](mix.u, mix.v, 64)
            release.set()
            thread.join(30)
            for _ in range(3):
                mix.step()
            ag.synchronize()
            state = ag.regulation()
        assert not errors and not thread.is_alive()
        assert state.state == "regulated" and set(state.tenants) == set(mix.names)
        assert mix.right()
        ag.regulate(plan="off")


def test_regulating_before_any_tenant_ran_a_step_says_what_to_do():
    # (three virtual devices: a runtime of its own, without the other tests' tenants)
    with ag.configure(backend="sim", sim_devices=3, devices="all"), \
            pytest.raises(ValueError, match="run a step of each"):
        ag.regulate()


@pytest.mark.parametrize("strategy", ["random", "starve"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies(min_size=6))
def test_random_programs_over_regulated_tenants_equal_serial(strategy, steps):
    """Steps spread over three tenants, with a profile of their first steps (a search), then
    a given plan of a pointer chain (b after c, c after a: every program kernel is ``prog``)
    and their threads on one host core, in force from two thirds of the program to its end:
    the results equal serial."""
    init = programs.initial()
    expected = serial(ag, steps, init)
    given = Plan({}, {"b-regulated": {"prog": ("c-regulated", "prog")},
                      "c-regulated": {"prog": ("a-regulated", "prog")}},
                 one_core=("a-regulated", "b-regulated", "c-regulated"))
    # (the search needs a step of each tenant: steps 0 to 2; every program reaches both points)
    search_at, given_at = 3, max(4, 2 * len(steps) // 3)
    switched = []

    def run(ag, steps, init):
        scopes = [ag.tenant(f"{n}-regulated", priority="high" if n == "b" else "normal")
                  for n in ("a", "b", "c")]

        def scope(i):
            if i == search_at:
                ag.regulate(plan="search", steps=1)
                assert ag.regulation().state == "profiling"
            if i == given_at:
                ag.regulate(plan=given)
                state = ag.regulation()
                assert (state.state, state.plan) == ("regulated", given)
                switched.append(i)
            return scopes[i % 3]

        out = programs.run(ag, steps, init, scope)
        state = ag.regulation()
        assert (state.state, state.plan) == ("regulated", given)   # still in force at the end
        ag.regulate(plan="off")
        return out

    got = programs.run_async(ag, run, steps, init, strategy, 3)
    assert switched == [given_at]
    assert_same(got, expected)


# -- recorded steps -------------------------------------------------------------------------------
def test_a_recorded_step_is_profiled_as_one_launch_and_runs_with_the_plan():
    with ag.configure(backend="sim", sim_seed=6):
        mix = Mix("recorded")
        low_step = mix.recorded_low()

        def step():
            with mix.low:
                low_step()
            with mix.high:
                mix.small[1, 32](mix.u, mix.v, 64)

        step()
        step()                              # (recorded, then replayed)
        ag.regulate(plan="search", tenants=mix.names)
        name = low_step.__qualname__            # (a recording is named as traces name it)
        with profiled_as({name: 2e-3, "add_one": 1e-4}):
            with ag.instrument(programs.Edges()) as seen:
                for _ in range(2):
                    step()
            ag.synchronize()
            state = ag.regulation()
        assert state.state == "regulated"       # (a recorded step does not stall the profile)
        (ops,) = [p.ops for p in state.plan.profile if p.name == mix.low.name]
        # (one launch, holding what its largest kernel holds: square[4, 32])
        sms = getattr(current_runtime().backend, "sm_count", 132)
        assert [(o.kernel, o.seconds, o.share, o.splittable) for o in ops] == \
            [(name, 2e-3, occupancy_share(4, 32, sms), False)]
        assert [r.count("profile") for _, r in seen.graphs] == [0, 1]   # (low runs first)
        for _ in range(2):
            step()
        ag.synchronize()
        assert mix.right()
        ag.regulate(plan="off")


def test_pointers_hold_a_tenants_replayed_step_and_may_name_another_tenants_recording():
    with ag.configure(backend="sim", sim_seed=6):
        mix = Mix("pointed-graph")
        low_step = mix.recorded_low()
        low = ag.tenant("low-held", after={"square": ("high-after-graph", "add_one")})
        high = ag.tenant("high-after-graph",
                         after={"add_one": ("low-held", low_step.__qualname__)})
        with ag.instrument(programs.Edges()) as seen:
            for _ in range(3):
                with high:
                    mix.small[1, 32](mix.u, mix.v, 64)
                with low:
                    low_step()              # (recorded on the first call: eager launches)
        ag.synchronize()
        assert mix.right()
        # the replays wait for the high tenant's add_one (named inside the recording) ...
        assert [r.count("pointer") for _, r in seen.graphs] == [1, 1]
        # ... and the high tenant's add_one waits for the latest replay, named by the recording
        smalls = [r.count("pointer") for n, r in seen.kernels if n.name == "add_one"]
        assert smalls == [0, 0, 1]


def test_a_searched_split_reaches_inside_a_recorded_step_and_its_replays_keep_the_pieces():
    from test_recorder_splits import last_graph, piece_chains, unordered_pieces

    with ag.configure(backend="sim", sim_seed=3):
        mix = Mix("split-recorded")
        x, y = ag.array(np.arange(float(mix.n))), ag.empty(mix.n)

        @ag.graph
        def recorded_square():
            mix.big[4, 32](x, y, mix.n)

        def step():
            with mix.low:
                mix.big[4, 32](mix.x, mix.y, mix.n)     # (profiled: the search splits it)
                recorded_square()                       # (a replay: profiled whole)
            with mix.high:
                mix.small[1, 32](mix.u, mix.v, 64)

        step()
        step()
        ag.regulate(plan="search", tenants=mix.names)
        # (the runtime's plans and counts outlive a test that shares its options)
        reused = ag.regulation().reused
        states = []
        with profiled_as(TIMES, SHARES):
            for _ in range(10):
                step()
                ag.synchronize()
                states.append((ag.regulation().state, recorded_square.outcome))
        # The plan's split makes the step record anew; its first run is eager, a step of
        # another shape, so the tenants are profiled once more and the stored plan reused.
        assert ag.regulation().reused == reused + 1
        assert states[-5:] == [("regulated", "replayed")] * 5
        assert ag.regulation().plan.splits == {mix.low.name: {"square": 8}}
        chains = piece_chains(last_graph())
        assert [len(c) for c in chains] == [8] and unordered_pieces(last_graph()) == []
        assert mix.right() and y.numpy().tolist() == (np.arange(float(mix.n)) ** 2).tolist()
        ag.regulate(plan="off")


@pytest.mark.parametrize("score_s,worst_s,median_s,kept", [
    (4e-3, 4e-3, 1e-3, False),          # (the others lose more than the lead gains)
    (1.99e-3, 4e-3, 1e-3, False),       # (within the noise of two measurements)
    (1.9e-3, 4e-3, 1e-3, True),
    (1.9e-3, 4e-3, 2e-3, False),        # (the lead's typical step traded for its slowest)
    (1.9e-3, 6e-3, 1e-3, False),        # (the lead's slowest step slower)
])
def test_a_remedy_is_kept_only_where_it_helps_by_the_objective_and_slows_no_lead_step(
        score_s, worst_s, median_s, kept):
    """The plan without the guard measured a score of 2 (the largest slowdown plus the weighted
    lateness), the lead's slowest step 5 ms and its median 1 ms; with the guard, ``score_s``,
    ``worst_s`` and ``median_s``: kept only where the score fell by more than the noise and
    neither the lead's slowest nor its median step got slower."""
    from asyncgpu.runtime.plan_check import PlanCheck, Trial

    class Check(PlanCheck):
        def __init__(self):
            self.plan, self._lost, self.applied, self.stored = "guarded", set(), [], []

        def apply(self, plan, measure=True):
            self.applied.append(plan)
            self.plan = plan

        def _store(self, searched, kept):
            self.stored.append((searched, kept))

    check = Check()
    trial = Trial(1, {1: 1e-3}, "guard", {})
    trial.plans["guard-base"] = "base"
    trial.scores.update({"guard-base": (2e-3, 5e-3, 1e-3),
                         "guard": (score_s, worst_s, median_s)})
    assert check._judge(trial, "guard", "lead", worst_s) == (kept, worst_s if kept else 5e-3)
    assert check.plan == ("guarded" if kept else "base")
    assert ("guard" in check._lost) != kept
    assert check.stored == ([("base", "guarded")] if kept else [])


def _measured_check(plan, *named):
    """A plan check over a stand-in runtime whose tenants, ``named`` ((name, priority) each), are
    numbered from 1, with ``plan`` in force (and every remedy lost: only the plan and the
    tenants' own settings are measured); the check, and the tenants."""
    from asyncgpu.core.tenants import Tenant
    from asyncgpu.runtime.plan_check import PlanCheck
    from asyncgpu.runtime.regulator import _Book

    class Runtime:
        tenants = [Tenant(0, "default", "normal", 0)] + [
            Tenant(i, name, priority, -5 if priority == "high" else 0)
            for i, (name, priority) in enumerate(named, 1)]

        class backend:
            elapsed_if_done = None

        def _running(self):
            return []

    class Check(PlanCheck):
        def __init__(self):
            self.rt, self.tenants, self.plan = Runtime(), list(range(1, len(named) + 1)), plan
            self._lost, self.applied, self.stored = {"split", "guard", "exclusive"}, [], []
            self.measured, self.checked, self.paces = {}, {}, {}
            self.book, self.stood_in, self.host_core = _Book(), False, True

        def apply(self, chosen, measure=True):
            self.applied.append(chosen)
            self.plan = chosen

        def _store(self, searched, kept):
            self.stored.append((searched, kept))

    check = Check()
    check._trial = check._start(plan, "plan", None)
    return check, Runtime.tenants[1:]


def _steps(tenant, latencies):
    """``tenant`` measured ``latencies`` (after one more: a stage's first step is left out, as
    it may have begun under the plan before)."""
    latencies = [latencies[0], *latencies]
    tenant.latencies.extend(latencies)
    tenant.measured += len(latencies)



def test_a_plan_holding_short_steps_behind_long_ones_is_not_kept_for_the_long_ones_tail():
    """A tenant of 77 ms steps (high priority) beside one of 1.5 ms steps: a pointer that holds
    the short tenant's kernel behind the long one's took the long tenant's slowest steps away
    but made every short step wait for a long launch (1.7 -> 78 ms). The slowest tenant's
    median barely moved (77.5 -> 78 ms), so a score of latencies kept that plan; the score of
    slowdowns (each tenant's mean step over its latency alone) weighs the short tenant's
    46-fold loss, and the tenants' own settings stay."""
    from asyncgpu.core.plan import Op, Plan, TenantProfile

    long = TenantProfile("long", "high", (Op("conv", 77e-3, 1.0, 0.0, False, ()),))
    short = TenantProfile("short", "normal", (Op("k", 1.5e-3, 0.2, 0.0, False, ()),))
    plan = Plan(after={"short": {"k": ("long", "conv")}}, profile=(long, short))

    check, (lead, other) = _measured_check(plan, ("long", "high"), ("short", "normal"))
    n = plan_check.CHECK_STEPS
    _steps(other, [78e-3] * n)
    _steps(lead, [78e-3] * n)
    check._check()                          # the plan measured; the tenants' own settings next
    own = check.plan
    assert check._trial.stage == "own" and not own.after
    _steps(other, [1.7e-3] * n)
    _steps(lead, [77.5e-3] * (n - 1) + [178e-3])    # (one step late: the slowest, 178 ms)
    check._check()
    assert check.stored == [(plan, own)] and check.plan is own
    plan_score, own_score = check.measured["plan"], check.measured["own"]
    assert plan_score == pytest.approx(78 / 1.5)                      # the short tenant's
    assert own_score == pytest.approx(1.7 / 1.5 + 4.0 * (178 / 77 - 1.2))


def test_a_plan_that_stalls_a_tenant_now_and_then_is_scored_by_its_pace_not_its_median():
    """Under the plan, IMG's typical step is quick (4.4 ms, 1.1x its 4 ms alone) but one in
    five waits 40 ms behind the lead: its median says 1.1x, its pace (the mean, 11.5 ms) 2.9x.
    Under the tenants' own settings every step takes 6 ms (1.5x). The plan is scored by the
    pace it leaves IMG, and the tenants' own settings are kept."""
    from asyncgpu.core.plan import Op, Plan, TenantProfile

    lead = TenantProfile("lead", "high", (Op("conv", 6e-3, 1.0, 0.0, False, ()),))
    img = TenantProfile("img", "normal", (Op("blur", 4e-3, 1.0, 0.0, False, ()),))
    plan = Plan(after={"img": {"blur": ("lead", "conv")}}, profile=(lead, img))
    check, (first, other) = _measured_check(plan, ("lead", "high"), ("img", "normal"))
    n = plan_check.CHECK_STEPS
    _steps(other, [4.4e-3, 4.4e-3, 4.4e-3, 4.4e-3, 40e-3] * (n // 5))
    _steps(first, [6e-3] * n)
    check._check()
    own = check.plan
    _steps(other, [6e-3] * n)
    _steps(first, [6e-3] * n)
    check._check()
    assert check.measured["plan"] == pytest.approx((4 * 4.4 + 40) / 5 / 4)
    assert check.measured["own"] == pytest.approx(6 / 4)
    assert check.stored == [(plan, own)] and check.plan is own


def test_without_priorities_the_tenant_of_the_longest_steps_paces_the_check():
    """No tenant has priority high: a stage lasts thirty steps of the tenant whose steps alone
    are the longest (20 ms), not of the first one (1 ms a step, thirty of which may end before
    the long tenant's first measured step does); the stage goes on until they have run."""
    from asyncgpu.core.plan import Op, Plan, TenantProfile

    short = TenantProfile("short", "normal", (Op("k", 1e-3, 0.2, 0.0, False, ()),))
    long = TenantProfile("long", "normal", (Op("conv", 20e-3, 1.0, 0.0, False, ()),))
    plan = Plan(after={"short": {"k": ("long", "conv")}}, profile=(short, long))
    check, (first, second) = _measured_check(plan, ("short", "normal"), ("long", "normal"))
    assert check._trial.lead == 2
    n = plan_check.CHECK_STEPS
    _steps(first, [1.2e-3] * n)
    check._check()
    assert check._trial.stage == "plan" and not check.measured     # (the long tenant's to run)
    _steps(second, [24e-3] * n)
    check._check()
    assert check._trial.stage == "own"
    assert check.measured["plan"] == pytest.approx(1.2)


def test_a_plan_that_stalls_a_tenant_is_scored_by_the_step_it_holds_up():
    """Under the plan, the other tenant's step has been under way for 0.5 s while the lead ran
    its thirty steps, and it ended none in the stage: that step counts as at least 0.5 s (a
    slowdown over 100 against its 4 ms alone), so the plan is not kept for the lead's pace."""
    from asyncgpu.core.plan import Op, Plan, TenantProfile

    lead = TenantProfile("lead", "normal", (Op("conv", 6e-3, 1.0, 0.0, False, ()),))
    other = TenantProfile("other", "normal", (Op("blur", 4e-3, 1.0, 0.0, False, ()),))
    plan = Plan(after={"other": {"blur": ("lead", "conv")}}, profile=(lead, other))
    check, (first, second) = _measured_check(plan, ("lead", "normal"), ("other", "normal"))
    check._trial.opened[2] = time.perf_counter() - 0.5
    n = plan_check.CHECK_STEPS
    _steps(first, [6e-3] * n)
    check._check()
    assert check.measured["plan"] > 0.5 / 4e-3
    del check._trial.opened[2]
    _steps(second, [5e-3] * n)
    _steps(first, [6e-3] * n)
    check._check()
    assert check.measured["own"] == pytest.approx(5 / 4)
    assert check.plan is check.stored[0][1] and not check.plan.after


def _paced(check, tenant, every_ms, n=plan_check.CHECK_STEPS):
    """``tenant`` (by number) began ``n`` + 1 steps in the stage under way, one every
    ``every_ms`` (host clock), on a thread of its own (numbered as the tenant)."""
    check._trial.begins[tenant] = [i * every_ms * 1e-3 for i in range(n + 1)]
    check._trial.threads[tenant] = {tenant}


def _slow_pair(monkeypatch, kernel_s):
    """Two tenants, "lead" (high) and "other", whose threads begin a step every 1 ms alone (host
    clock), of which their kernels take ``kernel_s``, and began one every 2.5 ms side by side
    under the plan (0.8 of their pace one after another), on a platform that lets a thread
    choose its cores; the check (its plan stage measured, not yet judged), the plan, and the
    two tenants."""
    from asyncgpu.runtime import host_core
    monkeypatch.setattr(host_core, "supported", lambda: True)
    from asyncgpu.core.plan import Op, Plan, TenantProfile

    lead = TenantProfile("lead", "high", (Op("k", kernel_s, 0.2, 0.0, False, ()),))
    other = TenantProfile("other", "normal", (Op("j", kernel_s, 0.2, 0.0, False, ()),))
    plan = Plan(profile=(lead, other))
    check, (first, second) = _measured_check(plan, ("lead", "high"), ("other", "normal"))
    check._trial.periods = {1: 1e-3, 2: 1e-3}
    _steps(second, [2.5e-3] * plan_check.CHECK_STEPS)
    _steps(first, [2.5e-3] * plan_check.CHECK_STEPS)
    _paced(check, 1, 2.5)
    _paced(check, 2, 2.5)
    return check, plan, first, second


@pytest.mark.parametrize("on_core_ms, lead_on_core_ms, kept", [
    (1.8, 1.8, True),       # a step of each every 1.8 ms on one core (pace 1.11 against 0.80)
    (2.6, 2.6, False),      # on one core slower still (pace 0.77)
    (1.6, 2.7, False),      # faster on one core, but the high-priority lead's median step slower
])
def test_steps_slower_side_by_side_than_one_after_another_run_on_one_core_where_that_is_faster(
        on_core_ms, lead_on_core_ms, kept, monkeypatch):
    """Two tenants whose threads begin a step every 1 ms alone (host clock), of which their
    kernels take 0.2 ms, began one every 2.5 ms side by side under the plan: together 0.8 of
    their pace one after another. Their threads are run on one host core and measured so,
    kept only where the pace rose over the noise and the high-priority lead's median step is no
    slower; else the plan without it is back and one core is not tried again."""
    check, plan, first, second = _slow_pair(monkeypatch, 0.2e-3)
    n = plan_check.CHECK_STEPS
    check._check()
    assert check.paces["plan"] == pytest.approx(0.8)
    assert check._trial.stage == "core" and check.plan.one_core == ("lead", "other")
    _steps(second, [on_core_ms * 1e-3] * n)
    _steps(first, [lead_on_core_ms * 1e-3] * n)
    _paced(check, 1, lead_on_core_ms)
    _paced(check, 2, on_core_ms)
    check._check()
    assert check.paces["core"] == pytest.approx(1 / on_core_ms + 1 / lead_on_core_ms)
    if kept:
        assert check._trial is None and check.plan.one_core
        assert check.stored == [(plan, check.plan)]
    else:
        assert check.plan is plan and "core" in check._lost and not check.stored


def test_steps_slower_side_by_side_stay_on_their_cores_where_the_program_said_so(monkeypatch):
    """The same host-bound tenants at 0.8 of their pace one after another, regulated with
    ``host_core=False``: the check ends on the plan without trying one core."""
    check = _slow_pair(monkeypatch, 0.2e-3)[0]
    check.host_core = False
    check._check()
    assert check.paces["plan"] == pytest.approx(0.8)
    assert check._trial is None and not check.plan.one_core


def test_device_bound_steps_slower_side_by_side_stay_on_their_cores(monkeypatch, caplog):
    """Two tenants at 0.8 of their pace one after another whose kernels take their whole
    period alone (1 ms of 1 ms): their kernels slow each other, which one core would not
    change, so the check ends on the plan without trying it, and the log says why."""
    check = _slow_pair(monkeypatch, 1e-3)[0]
    with caplog.at_level(logging.INFO, logger="asyncgpu"):
        check._check()
    assert check.paces["plan"] == pytest.approx(0.8)
    assert check._trial is None and not check.plan.one_core
    assert any("mostly device work" in r.message for r in caplog.records)


def test_tenants_whose_steps_one_thread_issues_have_no_pace_and_stay_where_they_are(
        monkeypatch):
    """The host-bound tenants of the tests above, their steps begun by one thread that switches
    tenants: each one's period alone held the other's steps, so there is no pace to compare
    with one after another, and one core is not tried."""
    check = _slow_pair(monkeypatch, 0.2e-3)[0]
    check._trial.threads = {1: {7}, 2: {7}}
    check._check()
    assert check.paces == {} and check._trial is None and not check.plan.one_core


@pytest.mark.parametrize("periods", [{1: 1e-3, 2: 1e-3}, {1: 1e-3}])
def test_no_one_core_where_side_by_side_paid_or_the_pace_alone_was_not_measured(periods):
    """Side by side, each tenant began a step every 1.5 ms against 1 ms alone: 1.33 of their
    pace one after another, so their threads stay where they are. Without the second tenant's
    period alone, the pace is not measured, nor is one core tried, however slow the steps."""
    from asyncgpu.core.plan import Op, Plan, TenantProfile

    a = TenantProfile("a", "normal", (Op("k", 1e-3, 0.2, 0.0, False, ()),))
    b = TenantProfile("b", "normal", (Op("j", 1e-3, 0.2, 0.0, False, ()),))
    check, (first, second) = _measured_check(Plan(profile=(a, b)), ("a", "normal"),
                                             ("b", "normal"))
    check._trial.periods = periods
    n = plan_check.CHECK_STEPS
    _steps(first, [1.5e-3] * n)
    _steps(second, [1.5e-3] * n)
    _paced(check, 1, 1.5 if len(periods) == 2 else 5.0)
    _paced(check, 2, 1.5 if len(periods) == 2 else 5.0)
    check._check()
    assert check.paces == ({"plan": pytest.approx(2 / 1.5)} if len(periods) == 2 else {})
    assert check._trial is None and not check.plan.one_core


def test_a_tenants_period_alone_is_its_median_time_from_one_step_to_the_next():
    """Measured alone, the lead began its steps 1 ms apart but for one gap of 5 ms (the
    host's hiccup): its period alone is 1 ms, stored with its latencies alone."""
    from asyncgpu.core.plan import Op, Plan, TenantProfile

    lead = TenantProfile("lead", "high", (Op("k", 1e-3, 0.2, 0.0, False, ()),))
    other = TenantProfile("other", "normal", (Op("j", 1e-3, 0.2, 0.0, False, ()),))
    plan = Plan(profile=(lead, other), shape=(("lead", ()), ("other", ())))
    check, (first, _) = _measured_check(plan, ("lead", "high"), ("other", "normal"))
    check._measure_alone(check._trial)
    n = plan_check.ALONE_STEPS
    _paced(check, 1, 1.0, n)
    check._trial.begins[1][5:] = [b + 4e-3 for b in check._trial.begins[1][5:]]
    _steps(first, [0.8e-3] * n)
    check._check()
    assert check._trial.periods[1] == pytest.approx(1e-3)
    assert check.book.alone[("lead", plan.shape)] == pytest.approx((0.8e-3, 0.8e-3, 1e-3))


def test_a_tenant_whose_steps_do_not_come_while_measured_alone_keeps_its_modelled_latency():
    """The lead measured alone (30 steps), then the other tenant: it runs none while the lead
    runs three stages' worth, held as it is, over 90 of the other's modelled steps alone; the
    check goes on to the plan with the other's modelled latency alone, and the lead's
    measured one."""
    from asyncgpu.core.plan import Op, Plan, TenantProfile

    lead = TenantProfile("lead", "high", (Op("conv", 6e-3, 1.0, 0.0, False, ()),))
    other = TenantProfile("other", "normal", (Op("blur", 4e-3, 1.0, 0.0, False, ()),))
    plan = Plan(after={"other": {"blur": ("lead", "conv")}}, profile=(lead, other),
                shape=(("lead", ()), ("other", ())))
    check, (first, second) = _measured_check(plan, ("lead", "high"), ("other", "normal"))
    modelled = dict(check._trial.alones)
    check._measure_alone(check._trial)
    assert check._trial.stage == "alone" and check.plan.exclusive == ("lead",)
    _steps(first, [7e-3] * (plan_check.ALONE_STEPS - 2) + [7.5e-3, 9e-3])
    check._check()
    assert check._trial.stage == "alone" and check.plan.exclusive == ("other",)
    _steps(first, [7e-3] * (plan_check.ALONE_PATIENCE - 1))
    check._check()
    assert check._trial.stage == "alone"            # (not yet given up)
    _steps(first, [7e-3])
    check._check()
    assert check._trial.stage == "alone"            # (nor before 90 of its 4 ms have passed)
    check._trial.started -= plan_check.ALONE_PATIENCE * modelled[2]
    _steps(first, [7e-3])
    check._check()
    assert check._trial.stage == "plan" and check.plan is plan
    assert check._trial.alones == {1: 7e-3, 2: modelled[2]}
    assert check._trial.alone == 7.5e-3             # (the lead's second slowest alone)
    assert check.book.alone == {("lead", plan.shape): (7e-3, 7.5e-3, 0.0)}


def test_one_slow_step_alone_does_not_make_the_high_tenants_target_generous():
    """A high-priority lead's 30 steps alone, one of them twice as long (a hiccup of the host):
    its latency alone is their median and its second slowest, not that step, so it is still
    held to 1.2x what it takes with the device to itself."""
    from asyncgpu.core.tenants import Tenant
    from asyncgpu.runtime.plan_check import PlanCheck, Trial
    from asyncgpu.runtime.regulator import _Book

    class Runtime:
        tenants = [Tenant(0, "default", "normal", 0), Tenant(1, "lead", "high", -5)]

    class Check(PlanCheck):
        def __init__(self):
            self.rt, self.book = Runtime(), _Book()

    lead = Runtime.tenants[1]
    trial = Trial(1, {1: 5e-3}, "alone", {1: 0})
    trial.plans["plan"] = Plan(shape=("shape",))
    n = plan_check.ALONE_STEPS + 1          # (the stage's first step is left out)
    lead.latencies.extend([6e-3] * (n - 2) + [6.2e-3, 14e-3])
    lead.measured += n
    assert Check()._alone_measured(trial)
    assert trial.alones[1] == 6e-3 and trial.alone == 6.2e-3


def test_a_plans_split_of_a_kernel_that_cannot_be_split_runs_it_whole_said_once(caplog):
    """A plan never makes a working program fail: a split of a kernel declared neither
    element-wise nor with a grid offset (a plan edited by hand, or saved before the kernel's
    declaration changed) made every step raise ArgumentError. The tenant's own such split is
    still refused, naming the fix."""
    with ag.configure(backend="sim", sim_seed=2):
        plain = ag.kernel(const=["x"], out=["y"])(add_one)
        x, y = ag.array(np.arange(64.0)), ag.empty(64)
        mine = ag.tenant("unsplit")
        with mine:
            plain[2, 32](x, y, 64)
        ag.regulate(plan=Plan({"unsplit": {"add_one": 2}}))
        with caplog.at_level("WARNING", logger="asyncgpu"):
            for _ in range(3):
                with mine:
                    plain[2, 32](x, y, 64)
        assert caplog.text.count("splits kernel 'add_one' of tenant 'unsplit'") == 1
        assert ag.tenants()["unsplit"].kernels == 4
        assert y.tolist() == (np.arange(64.0) + 1).tolist()
        ag.regulate(plan="off")
        with pytest.raises(ag.ArgumentError, match="drop it from the tenant's split"):
            with ag.tenant("unsplit-own", split={"add_one": 2}):
                plain[2, 32](x, y, 64)
