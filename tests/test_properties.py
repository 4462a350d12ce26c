"""Random programs: every asynchronous execution equals the serial one, and the checker is silent.

The sim backend runs each program lazily in an adversarial order chosen by the strategy, and its
happens-before checker raises on any unordered conflicting pair, so a passing run means both
"the values came out right" and "the ordering was provably right".
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import programs

STRATEGIES = ["random", "pct", "reverse", "starve", "lazy"]


def serial(ag, steps, init):
    return programs.run_serial(ag, programs.run, steps, init)


def asynchronous(ag, steps, init, strategy, seed, **options):
    return programs.run_async(ag, programs.run, steps, init, strategy, seed, **options)


def assert_same(a, b):
    reads_a, final_a = a
    reads_b, final_b = b
    assert len(reads_a) == len(reads_b)
    for x, y in zip(reads_a, reads_b):
        assert x.tolist() == y.tolist()
    for x, y in zip(final_a, final_b):
        assert x.tolist() == y.tolist()


@pytest.mark.parametrize("strategy", STRATEGIES)
@settings(max_examples=programs.examples(25), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_random_programs_equal_serial(strategy, steps):
    import asyncgpu as ag

    init = programs.initial()
    expected = serial(ag, steps, init)
    for seed in (0, 1):
        assert_same(asynchronous(ag, steps, init, strategy, seed), expected)


@pytest.mark.parametrize("policy", programs.POLICIES)
@settings(max_examples=programs.examples(15), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_every_policy_equals_serial(policy, steps):
    import asyncgpu as ag

    init = programs.initial(1)
    expected = serial(ag, steps, init)
    assert_same(asynchronous(ag, steps, init, "random", 7, **policy), expected)
