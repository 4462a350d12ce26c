"""Mixed random programs (library calls, operators, kernels, host accesses) equal serial runs.

As in ``test_properties``: the sim backend runs each program in an adversarial order and its
happens-before checker raises on any unordered conflicting pair; library calls are operations
it begins (snapshot of the inputs) and ends (publish of the outputs) like kernels, so a missing
dependency shows up as a wrong value as well.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import library_programs as lp
import programs


def serial(ag, steps, init):
    return programs.run_serial(ag, lp.run, steps, init)


def asynchronous(ag, steps, init, strategy, seed, **options):
    return programs.run_async(ag, lp.run, steps, init, strategy, seed, **options)


def assert_same(got, expected):
    reads_a, final_a = got
    reads_b, final_b = expected
    assert len(reads_a) == len(reads_b)
    for x, y in zip(reads_a + final_a, reads_b + final_b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("strategy", ["random", "starve", "reverse", "pct"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=lp.strategies())
def test_mixed_library_programs_equal_serial(strategy, steps):
    import asyncgpu as ag

    init = programs.initial()
    expected = serial(ag, steps, init)
    assert_same(asynchronous(ag, steps, init, strategy, 5), expected)


@pytest.mark.parametrize("policy", programs.POLICIES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=lp.strategies())
def test_mixed_library_programs_equal_serial_under_every_policy(policy, steps):
    import asyncgpu as ag

    init = programs.initial(1)
    expected = serial(ag, steps, init)
    assert_same(asynchronous(ag, steps, init, "random", 11, **policy), expected)


def _random_mixed(rnd):
    names = sorted(programs.OPERANDS)
    steps = []
    while len(steps) < 10:
        a, b, d = (rnd.choice(names) for _ in range(3))
        kind = rnd.randrange(5)
        if kind == 0 and lp._ok_out(d, a, b):
            steps.append(lp.Binary(rnd.choice(lp.BINARY), a, b, d))
        elif kind == 1:
            steps.append(lp.Reduce(a, b, d))
        elif kind == 2:
            steps.append(lp.Matmul(a, b, d))
        elif kind == 3:
            steps.append(programs.HostRead(a))
        elif kind == 4 and lp._ok_out(d, a):
            steps.append(lp.InPlace(a, d))
    return steps


@pytest.mark.parametrize("bug", ["drop_raw", "drop_war"])
def test_planted_bug_is_caught_in_library_programs(bug):
    """Library nodes are really checked: without RAW (or WAR) edges the suite notices."""
    import asyncgpu as ag

    init = programs.initial()
    caught = 0
    for seed in range(8):
        steps = _random_mixed(random.Random(seed))
        expected = serial(ag, steps, init)
        try:
            got = asynchronous(ag, steps, init, "starve", 3, test_bugs={bug})
            assert_same(got, expected)
        except (AssertionError, ag.AsyncGPUError):
            caught += 1
    assert caught > 0, f"the planted bug {bug!r} went unnoticed by library programs"
