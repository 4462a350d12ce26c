"""Stress mode on the GPU: random spin kernels before nodes and random stream assignment, with
the happens-before checker on the cuda backend's log; random programs must equal serial, and a
planted missing dependency must show up."""

from __future__ import annotations

import random

import pytest

import programs

pytestmark = pytest.mark.gpu


def run(ag, steps, init, **options):
    with ag.configure(backend="cuda", **options):
        return programs.run(ag, steps, init)


def same(a, b):
    return ([r.tolist() for r in a[0]] == [r.tolist() for r in b[0]]
            and [f.tolist() for f in a[1]] == [f.tolist() for f in b[1]])


@pytest.mark.parametrize("stress_seed", range(3))
def test_random_programs_under_stress_equal_serial_on_gpu(stress_seed):
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    init = programs.initial()
    delays = 0
    for seed in range(25):
        steps = programs.random_program(random.Random(1000 * stress_seed + seed), 20)
        expected = run(ag, steps, init, execution="sync")
        with ag.configure(backend="cuda", execution="async", stress=True,
                          stress_seed=stress_seed * 100 + seed, debug_hb=True):
            got = programs.run(ag, steps, init)
            delays += current_runtime().backend.delays
        assert same(got, expected), (stress_seed, seed)
    assert delays > 0


@pytest.mark.pure
def test_stress_makes_a_planted_missing_dependency_visible_on_gpu():
    import asyncgpu as ag
    from asyncgpu.testing.mutants import planted

    init = programs.initial()
    wrong = 0
    for seed in range(20):
        steps = programs.random_program(random.Random(seed), 24)
        expected = run(ag, steps, init, execution="sync")
        with planted("drop_raw"):
            got = run(ag, steps, init, execution="async", stress=True, stress_seed=seed)
        wrong += not same(got, expected)
    assert wrong > 0
