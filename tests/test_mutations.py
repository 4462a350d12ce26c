"""Mutation tests: a runtime with a planted ordering bug must fail the checks.

Each mutant of ``asyncgpu.testing.mutants`` removes one piece of the ordering machinery. Over
a fixed set of seeded random programs the suite must notice, by a wrong value or a ``RaceError``
from the happens-before checker, in most runs: a mutant that survives means a missing test. With
the checker silenced, the same bugs must also show as wrong values (the simulator's schedules
expose them, not only the checker). A tracker blind to small overlaps is planted the same way,
by wrapping the tracker's ``conflicts`` in the test.

The mutants replace methods of the runtime's classes: the tests that plant them need the launch
path as plain Python (``pure``).
"""

from __future__ import annotations

import contextlib
import random

import numpy as np
import pytest

import programs
from asyncgpu.testing.mutants import planted
from test_properties import asynchronous, serial

PROGRAMS = [programs.random_program(random.Random(seed), 14) for seed in range(12)]
CHECKED = ("random", "starve")
#: ``reverse`` ends a later writer before an earlier reader begins: the schedule that turns a
#: missing write-after-read edge into a wrong value
UNCHECKED = ("reverse",)

#: Share of the checked runs (12 programs x 2 strategies) each bug must fail. Measured: 24,
#: 22, 24 and 24 runs of 24.
MIN_CAUGHT = 0.75
#: Share of the unchecked runs (12 programs, ``reverse``) that must give wrong values.
#: Measured: 12, 6, 12 and 12 of 12 (a reader's snapshot is taken when it begins, so a dropped
#: write-after-read edge shows only where the writer ends before the reader begins).
MIN_WRONG = {"drop_raw": 0.75, "drop_war": 0.25, "alias_blind": 0.75, "host_no_wait": 0.75}


def outcome(ag, steps, init, strategy, **options):
    try:
        reads, final = asynchronous(ag, steps, init, strategy, 3, **options)
    except ag.AsyncGPUError as exc:
        return type(exc).__name__
    return [r.tolist() for r in reads], [f.tolist() for f in final]


def expected_outcome(ag, steps, init):
    reads, final = serial(ag, steps, init)
    return [r.tolist() for r in reads], [f.tolist() for f in final]


def failures(ag, strategies, bugs=(), **options):
    """(runs, runs that differ from serial, runs that gave wrong values, not an error), with
    the mutants ``bugs`` planted in the asynchronous runs (not in the serial oracle)."""
    init = programs.initial()
    runs = differ = wrong = 0
    for steps in PROGRAMS:
        expected = expected_outcome(ag, steps, init)
        for strategy in strategies:
            with planted(*bugs):
                got = outcome(ag, steps, init, strategy, **options)
            runs += 1
            if got != expected:
                differ += 1
                wrong += not isinstance(got, str)
    return runs, differ, wrong


@contextlib.contextmanager
def checker_silenced(monkeypatch):
    """The happens-before checker finds no race: only the values can tell."""
    from asyncgpu.core import hb as _hb

    with monkeypatch.context() as m:
        m.setattr(_hb.HappensBeforeChecker, "_check", lambda self, *args: None)
        yield


@pytest.mark.pure
@pytest.mark.parametrize("bug", sorted(MIN_WRONG))
def test_planted_ordering_bug_is_caught(bug, monkeypatch):
    import asyncgpu as ag

    runs, caught, _ = failures(ag, CHECKED, bugs=[bug])
    assert caught >= MIN_CAUGHT * runs, f"the planted bug {bug!r} failed {caught} of {runs} runs"
    with checker_silenced(monkeypatch):
        runs, _, wrong = failures(ag, UNCHECKED, bugs=[bug])
    assert wrong >= MIN_WRONG[bug] * runs, \
        f"the planted bug {bug!r} gave wrong values in {wrong} of {runs} runs"


def test_silenced_checker_leaves_the_correct_runtime_right(monkeypatch):
    import asyncgpu as ag

    with checker_silenced(monkeypatch):
        assert failures(ag, UNCHECKED) == (len(PROGRAMS), 0, 0)


@contextlib.contextmanager
def tracker_blind_to_small_overlaps(monkeypatch, blind_bytes=8):
    """The tracker with a planted bug: two accesses whose byte ranges share at most
    ``blind_bytes`` bytes do not conflict (the real answer, less such parents)."""
    from asyncgpu.core import deps as _deps

    real = _deps.DependencyTracker.conflicts

    def wide(a, b):
        return (a.key == b.key and (a.write or b.write)
                and min(a.hi, b.hi) - max(a.lo, b.lo) > blind_bytes)

    def conflicts(self, accesses):
        accesses = list(accesses)
        found = real(self, accesses)
        return {node: reasons for node, reasons in found.items()
                if any(wide(a, b) for a in accesses for b in node.accesses)}

    with monkeypatch.context() as m:
        m.setattr(_deps.DependencyTracker, "conflicts", conflicts)
        yield


@pytest.mark.pure
def test_tracker_blind_to_one_element_overlaps_is_caught(monkeypatch):
    """The programs overlap by single elements (8 bytes), so a tracker that misses overlaps of
    up to 8 bytes fails them. Measured: 22 runs of 24 (none with operands that overlap only by
    half their length, 32 bytes)."""
    import asyncgpu as ag

    with tracker_blind_to_small_overlaps(monkeypatch):
        runs, caught, _ = failures(ag, CHECKED)
    assert caught >= MIN_CAUGHT * runs, f"the blind tracker failed {caught} of {runs} runs"


def test_correct_runtime_passes_the_same_programs():
    import asyncgpu as ag

    init = programs.initial()
    for steps in PROGRAMS:
        expected = expected_outcome(ag, steps, init)
        for strategy in CHECKED:
            assert outcome(ag, steps, init, strategy) == expected


def _drop_while_in_flight(ag):
    k = programs.kernel_for(ag, ("r", "w"))
    out = ag.zeros(programs.N, np.float64)
    tmp = ag.array(np.arange(programs.N, dtype=np.float64))
    k[2, programs.N // 2](tmp, programs.N, out, programs.N, 1.0)
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


@pytest.mark.pure
def test_planted_eager_free_is_caught():
    import asyncgpu as ag

    expected = np.full(programs.N, np.arange(programs.N).sum() * 0.01 + 1.0).tolist()
    caught = 0
    for seed in range(4):
        with ag.configure(backend="sim", sim_seed=seed, sim_strategy="lazy"), \
                planted("eager_free"):
            try:
                caught += _drop_while_in_flight(ag).tolist() != expected
            except ag.RaceError:
                caught += 1
    assert caught >= 3, f"the eager free failed {caught} of 4 runs"     # measured: 4 of 4


# -- the planting itself ------------------------------------------------------------------------
@pytest.mark.pure
def test_planting_puts_back_exactly_what_was_there():
    from asyncgpu.testing import mutants

    patched = {(cls, attr) for make in mutants.MUTANTS.values() for cls, attr, _ in make()}
    before = {key: key[0].__dict__.get(key[1]) for key in patched}
    with planted(*mutants.MUTANTS), planted("drop_raw"):       # several at once, nested
        assert all(key[0].__dict__.get(key[1]) is not before[key] for key in patched)
    assert {key: key[0].__dict__.get(key[1]) for key in patched} == before


def test_planting_is_refused_where_the_launch_path_is_compiled(monkeypatch):
    from asyncgpu.core.deps import DependencyTracker
    from asyncgpu.testing import mutants

    conflicts = DependencyTracker.__dict__["conflicts"]
    monkeypatch.setattr(mutants, "is_compiled", lambda: True)
    with pytest.raises(RuntimeError, match="compiled"), planted("drop_raw"):
        pass
    assert DependencyTracker.__dict__["conflicts"] is conflicts
    with pytest.raises(ValueError, match="unknown mutant"):
        planted("drop_everything")
