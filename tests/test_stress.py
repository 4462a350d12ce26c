"""Stress mode (``ASYNCGPU_STRESS=1``): random stream assignment (and on the GPU random delay
kernels) keeps every result equal to serial, and exposes planted ordering bugs."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings

import asyncgpu as ag
import programs
from asyncgpu.testing.mutants import planted
from test_properties import assert_same, asynchronous, serial


def test_stress_option_from_the_environment():
    from asyncgpu.core.config import options_from_env

    o = options_from_env({"ASYNCGPU_STRESS": "1", "ASYNCGPU_STRESS_SEED": "9"})
    assert o.stress and o.stress_seed == 9
    assert not options_from_env({}).stress


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_random_programs_under_stress_equal_serial(steps):
    init = programs.initial()
    expected = serial(ag, steps, init)
    for seed in (0, 1):
        assert_same(asynchronous(ag, steps, init, "random", seed, stress=True,
                                 stress_seed=seed), expected)


def test_stress_spreads_dependent_work_over_streams():
    steps = programs.random_program(random.Random(5), 40)
    init = programs.initial()
    with ag.configure(backend="sim", sim_seed=1, stress=True, stress_seed=1, max_streams=8):
        programs.run(ag, steps, init)
        stats = ag.statistics()
    assert stats.streams_used >= 4
    assert stats.event_waits > 0


@pytest.mark.pure
@pytest.mark.parametrize("bug", ["drop_raw", "drop_war"])
def test_stress_exposes_planted_bugs(bug):
    caught = 0
    init = programs.initial()
    for seed in range(6):
        steps = programs.random_program(random.Random(seed), 24)
        expected = serial(ag, steps, init)
        try:
            with planted(bug):
                got = asynchronous(ag, steps, init, "random", seed, stress=True,
                                   stress_seed=seed)
            assert_same(got, expected)
        except (AssertionError, ag.RaceError):
            caught += 1
    assert caught > 0
