"""Mutation tests: a runtime with a planted ordering bug must fail the checks.

Each switch of ``Options.test_bugs`` removes one piece of the ordering machinery. Over a fixed
set of seeded random programs the suite must notice, by a wrong value or a ``RaceError`` from
the happens-before checker: a switch that survives means a missing test.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import programs
from test_properties import asynchronous, serial

PROGRAMS = [programs.random_program(random.Random(seed), 14) for seed in range(12)]


def outcome(ag, steps, init, strategy, **options):
    try:
        reads, final = asynchronous(ag, steps, init, strategy, 3, **options)
    except ag.AsyncGPUError as exc:
        return type(exc).__name__
    return [r.tolist() for r in reads], [f.tolist() for f in final]


def expected_outcome(ag, steps, init):
    reads, final = serial(ag, steps, init)
    return [r.tolist() for r in reads], [f.tolist() for f in final]


@pytest.mark.parametrize("bug", ["drop_raw", "drop_war", "alias_blind", "host_no_wait"])
def test_planted_ordering_bug_is_caught(bug):
    import asyncgpu as ag

    init = programs.initial()
    caught = wrong_values = 0
    for steps in PROGRAMS:
        expected = expected_outcome(ag, steps, init)
        for strategy in ("random", "starve"):
            got = outcome(ag, steps, init, strategy, test_bugs={bug})
            if got != expected:
                caught += 1
                wrong_values += not isinstance(got, str)
    assert caught > 0, f"the planted bug {bug!r} went unnoticed"


def test_correct_runtime_passes_the_same_programs():
    import asyncgpu as ag

    init = programs.initial()
    for steps in PROGRAMS:
        expected = expected_outcome(ag, steps, init)
        for strategy in ("random", "starve"):
            assert outcome(ag, steps, init, strategy) == expected


def _drop_while_in_flight(ag):
    k = programs.kernel_for(ag, ("r", "w"))
    out = ag.zeros(programs.N, np.float64)
    tmp = ag.array(np.arange(programs.N, dtype=np.float64))
    k[1, programs.N](tmp, out, programs.N, 1.0)
    del tmp                                   # the kernel may not have run yet
    other = ag.array(np.full(programs.N, 1e6))  # may reuse the freed block
    result = out.numpy()
    del other
    return result


@pytest.mark.parametrize("seed", range(4))
def test_memory_is_kept_until_the_kernels_using_it_finished(seed):
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=seed, sim_strategy="lazy"):
        got = _drop_while_in_flight(ag)
    expected = np.full(programs.N, np.arange(programs.N).sum() * 0.01 + 1.0)
    assert got.tolist() == expected.tolist()


def test_planted_eager_free_is_caught():
    import asyncgpu as ag

    expected = np.full(programs.N, np.arange(programs.N).sum() * 0.01 + 1.0).tolist()
    caught = 0
    for seed in range(4):
        with ag.configure(backend="sim", sim_seed=seed, sim_strategy="lazy",
                          test_bugs={"eager_free"}):
            try:
                caught += _drop_while_in_flight(ag).tolist() != expected
            except ag.RaceError:
                caught += 1
    assert caught > 0
