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
from hypothesis import strategies as st

import library_programs as lp
import programs
from asyncgpu.testing.mutants import planted


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


LIBRARY_PROGRAMS = [_random_mixed(random.Random(seed)) for seed in range(8)]
#: Library programs (of 8, ``starve``) in which each planted bug must be caught, by a
#: ``RaceError`` or a value unlike serial. Measured: drop_raw 8 of 8, drop_war 5 of 8 (all by
#: the checker's RaceError); a checker blind to library calls catches fewer.
MIN_LIBRARY_CAUGHT = {"drop_raw": 6, "drop_war": 3}


def library_outcome(ag, steps, init, bugs=()):
    """``"race"`` (the checker's RaceError), ``"wrong"`` (a read or final array unlike the
    serial run's) or ``"same"``, with the mutants ``bugs`` planted in the asynchronous run; any
    other error propagates (a runtime's internal assert is no catch)."""
    expected = serial(ag, steps, init)
    try:
        with planted(*bugs):
            reads, final = asynchronous(ag, steps, init, "starve", 3)
    except ag.RaceError:
        return "race"
    want_reads, want_final = expected
    same = len(reads) == len(want_reads) and all(
        np.array_equal(x, y) for x, y in zip(reads + final, want_reads + want_final))
    return "same" if same else "wrong"


@pytest.mark.pure
def test_library_programs_equal_serial_without_a_planted_bug():
    """The control of the test below: the same programs, no mutant, nothing to catch."""
    import asyncgpu as ag

    init = programs.initial()
    assert [library_outcome(ag, steps, init) for steps in LIBRARY_PROGRAMS] == ["same"] * 8


@pytest.mark.pure
@pytest.mark.parametrize("bug", ["drop_raw", "drop_war"])
def test_planted_bug_is_caught_in_library_programs(bug):
    """Library nodes are really checked: without RAW (or WAR) edges most programs fail."""
    import asyncgpu as ag

    init = programs.initial()
    outcomes = [library_outcome(ag, steps, init, (bug,)) for steps in LIBRARY_PROGRAMS]
    caught = sum(o != "same" for o in outcomes)
    assert caught >= MIN_LIBRARY_CAUGHT[bug], \
        f"the planted bug {bug!r} was caught in {caught} of 8 library programs: {outcomes}"


# -- outputs passed positionally ----------------------------------------------------------------
_NAMES = ("x", "y", "z")
_POSITIONAL = st.tuples(
    st.sampled_from(["add", "multiply", "subtract", "hypot", "clip", "sum", "take"]),
    st.sampled_from(_NAMES), st.sampled_from(_NAMES), st.sampled_from(_NAMES))


def _positional_step(xp, arrays, step):
    """One call whose output (the last name) is passed positionally, as NumPy/CuPy allow."""
    name, a, b, out = step
    a, b, o = arrays[a], arrays[b], arrays[out]
    if name == "clip":
        xp.clip(a, 0.5, 2.0, o)
    elif name == "sum":
        xp.sum(a, 0, None, o[0])            # a row of ``out``: a view written in place
    elif name == "take":
        xp.take(a[0], xp.asarray(np.array([3, 1, 0, 2])) if xp is not np
                else np.array([3, 1, 0, 2]), 0, o[1])
    else:
        getattr(xp, name)(a, b, o)


@pytest.mark.parametrize("strategy", ["random", "reverse"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_POSITIONAL, min_size=1, max_size=8))
def test_programs_with_positional_outputs_equal_serial(strategy, steps):
    """Reads between the calls see every earlier write; the final arrays are NumPy's."""
    import asyncgpu as ag
    import asyncgpu.cupy as acp

    rng = np.random.default_rng(4)
    init = {n: rng.uniform(0.5, 1.5, (2, 4)) for n in _NAMES}
    want = {n: a.copy() for n, a in init.items()}
    expected_sums = []
    for step in steps:
        _positional_step(np, want, step)
        expected_sums.append(want[step[3]].sum())
    with ag.configure(backend="sim", sim_seed=3, sim_strategy=strategy, execution="async"):
        got = {n: ag.array(a) for n, a in init.items()}
        sums = []
        for step in steps:
            _positional_step(acp, got, step)
            sums.append(got[step[3]].sum())        # lazy: a read ordered after the write
        np.testing.assert_allclose([float(s) for s in sums], expected_sums, rtol=1e-12)
        for n in _NAMES:
            np.testing.assert_array_equal(got[n].numpy(), want[n])
