"""Turns: a regulation plan with ``turns`` runs the regulated tenants' steps one at a time, first
come, first served; a step that waits for another tenant's step gives turns up instead of
hanging; and ``asyncgpu.regulate`` measures turns where steps ran side by side on several
threads, keeping them only where they scored better."""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np
import pytest
from test_regulation import SHARES, TIMES, Mix

import asyncgpu as ag
from asyncgpu.core.plan import Plan
from asyncgpu.runtime import plan_check, turns
from asyncgpu.runtime.turns import Turns
from asyncgpu.testing.regulation import profiled_as


def in_threads(*bodies):
    """Run each body on a thread of its own, started together; re-raise the first error."""
    errors, start = [], threading.Barrier(len(bodies))

    def run(body):
        try:
            start.wait()
            body()
        except BaseException as exc:  # noqa: BLE001 - raised on the main thread below
            errors.append(exc)
    threads = [threading.Thread(target=run, args=(b,)) for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a thread never finished"
    if errors:
        raise errors[0]


# -- the turns themselves ---------------------------------------------------------------------------
def test_the_turn_passes_to_waiting_threads_in_the_order_they_came():
    t = Turns()
    assert t.take(1.0)
    order = []

    def waiter(name):
        assert t.take(5.0)
        order.append(name)
        t.give()
    threads = []
    for name in "abc":
        threads.append(threading.Thread(target=waiter, args=(name,)))
        threads[-1].start()
        while t.waiting < len(threads):
            time.sleep(0.001)
    t.give()
    for th in threads:
        th.join(5)
    assert order == ["a", "b", "c"]
    assert t.take(0.0)          # (free again)
    t.give()


def test_a_high_priority_step_goes_ahead_of_the_waiting_normal_ones():
    t = Turns()
    assert t.take(1.0)
    order = []

    def waiter(name, urgent):
        assert t.take(5.0, urgent)
        order.append(name)
        t.give()
    threads = []
    for name, urgent in (("a", False), ("b", False), ("high1", True), ("high2", True)):
        threads.append(threading.Thread(target=waiter, args=(name, urgent)))
        threads[-1].start()
        while t.waiting < len(threads):
            time.sleep(0.001)
    t.give()
    for th in threads:
        th.join(5)
    assert order == ["high1", "high2", "a", "b"]


def test_a_thread_holding_the_turn_opens_more_steps_without_waiting():
    t = Turns()
    assert t.take(0.0) and t.take(0.0)
    got = []
    other = threading.Thread(target=lambda: got.append(t.take(5.0)))
    other.start()
    while not t.waiting:
        time.sleep(0.001)
    t.give()                    # (the inner step: the turn stays)
    time.sleep(0.05)
    assert t.waiting == 1 and not got
    t.give()
    other.join(5)
    assert got == [True]


def test_a_wait_ends_without_the_turn_after_its_timeout_or_when_turns_are_given_up():
    t = Turns()
    assert t.take(0.0)
    got = []
    other = threading.Thread(target=lambda: got.append(t.take(0.05)))
    other.start()
    other.join(5)
    assert got == [False] and t.waiting == 0
    other = threading.Thread(target=lambda: got.append(t.take(30.0)))
    other.start()
    while not t.waiting:
        time.sleep(0.001)
    t.open()
    other.join(5)
    assert got == [False, False]
    t.give()


# -- a plan with turns -----------------------------------------------------------------------------
def test_steps_of_a_plan_with_turns_never_overlap_and_give_the_same_results():
    with ag.configure(backend="sim", sim_seed=3):
        mix = Mix("turns")
        mix.step()
        ag.regulate(plan=Plan(turns=True), tenants=mix.names)
        inside, most = [0], [0]
        lock = threading.Lock()

        def steps(scope, launch):
            for _ in range(20):
                with scope:
                    with lock:
                        inside[0] += 1
                        most[0] = max(most[0], inside[0])
                    launch()
                    time.sleep(0.001)       # (host work: the other thread would come in)
                    with lock:
                        inside[0] -= 1
        in_threads(lambda: steps(mix.low, lambda: mix.big[4, 32](mix.x, mix.y, mix.n)),
                   lambda: steps(mix.high, lambda: mix.small[1, 32](mix.u, mix.v, 64)))
        ag.synchronize()
        assert most == [1]
        assert "steps take turns" in ag.regulation().plan.describe()
        assert mix.right()
        assert ag.tenants()[mix.low.name].steps == 21
        ag.regulate(plan="off")


def test_a_step_waiting_for_another_tenants_step_gives_turns_up_and_both_finish(
        monkeypatch, caplog):
    monkeypatch.setattr(turns, "WAIT_S", 0.2)
    import asyncgpu.runtime.tenancy as tenancy
    monkeypatch.setattr(tenancy, "WAIT_S", 0.2)
    with ag.configure(backend="sim", sim_seed=3):
        mix = Mix("handoff")
        mix.step()
        ag.regulate(plan=Plan(turns=True), tenants=mix.names)
        produced = threading.Event()
        entered = threading.Event()

        def consumer():
            with mix.low:
                entered.set()
                assert produced.wait(10)        # (the other tenant's step must run meanwhile)
                mix.big[4, 32](mix.x, mix.y, mix.n)

        def producer():
            assert entered.wait(10)
            with mix.high:
                mix.small[1, 32](mix.u, mix.v, 64)
                produced.set()
        with caplog.at_level("WARNING", logger="asyncgpu"):
            in_threads(consumer, producer)
        assert "no longer take turns" in caplog.text
        assert not ag.regulation().plan.turns
        ag.synchronize()
        assert mix.right()
        mix.step()                              # (usable, without turns)
        ag.regulate(plan="off")


def test_a_plan_saved_with_turns_is_loaded_with_them(tmp_path):
    path = str(tmp_path / "plan.json")
    Plan({"a": {"k": 2}}, turns=True).save(path)
    assert Plan.load(path) == Plan({"a": {"k": 2}}, turns=True)
    assert Plan.from_json(Plan().to_json()).turns is False


# -- measured by asyncgpu.regulate ------------------------------------------------------------------
def threaded_round(mix):
    """One step of each tenant of ``mix``, each on a thread of its own, started together."""
    in_threads(lambda: _step(mix.low, lambda: mix.big[4, 32](mix.x, mix.y, mix.n)),
               lambda: _step(mix.high, lambda: mix.small[1, 32](mix.u, mix.v, 64)))
    ag.synchronize()


def until(step, stages, most=200):
    """Run ``step`` until the plan's measurement is at one of ``stages`` ("": none)."""
    for _ in range(most):
        if ag.regulation().checking in stages:
            return
        step()
    raise AssertionError(f"the measurement stayed at {ag.regulation().checking!r}")


def _step(scope, launch):
    with scope:
        launch()
        time.sleep(0.002)


@pytest.mark.parametrize("gain", [1e6, 1e-6])
def test_turns_are_measured_where_steps_ran_on_several_threads_and_kept_only_if_better(
        gain, monkeypatch):
    """``PLAN_GAIN`` stands in for the measurement's verdict: turns are kept when they score
    below ``PLAN_GAIN`` times the plan without them (always with 1e6, never with 1e-6)."""
    with ag.configure(backend="sim", sim_seed=4):
        mix = Mix(f"measured-{gain}")
        mix.step()
        ag.regulate(plan="search", tenants=mix.names)
        with profiled_as({**TIMES, "add_one": 1.0}, SHARES):     # (the high one on time)
            for _ in range(2):
                threaded_round(mix)
            assert ag.regulation().state == "regulated"
        until(lambda: threaded_round(mix), ("turns", ""))    # (plan, own, remedies)
        state = ag.regulation()
        assert state.checking == "turns" and state.plan.turns
        before = dataclasses.replace(state.plan, turns=False)
        monkeypatch.setattr(plan_check, "PLAN_GAIN", gain)
        until(lambda: threaded_round(mix), ("",))
        state = ag.regulation()
        assert state.checking == ""
        assert state.plan.turns == (gain > 1)
        assert dataclasses.replace(state.plan, turns=False) == before
        assert "turns" in state.measured
        ag.synchronize()
        assert mix.right()
        ag.regulate(plan="off")


def test_steps_from_one_thread_are_never_given_turns():
    with ag.configure(backend="sim", sim_seed=4):
        mix = Mix("one-thread")
        mix.step()
        ag.regulate(plan="search", tenants=mix.names)
        with profiled_as({**TIMES, "add_one": 1.0}, SHARES):
            for _ in range(2):
                mix.step()
            ag.synchronize()
        until(lambda: (mix.step(), ag.synchronize()), ("",))
        state = ag.regulation()
        assert not state.plan.turns and "turns" not in state.measured
        assert np.isfinite(state.measured["plan"])
        ag.regulate(plan="off")
