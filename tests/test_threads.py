"""Several host threads submitting to one runtime on sim: the result equals a serial
interleaving consistent with each thread's program order, and the happens-before checker (which
raises RaceError at the offending call) stays silent. See tests/thread_programs.py."""

from __future__ import annotations

import sys

import pytest

import asyncgpu as ag
from thread_programs import run_threads


@pytest.fixture
def fast_switching():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)       # switch threads often: more interleavings
    yield
    sys.setswitchinterval(old)


@pytest.mark.parametrize("strategy", ["random", "lazy", "starve", "pct"])
@pytest.mark.parametrize("seed", range(2))
def test_threads_submitting_dependent_work_linearize(fast_switching, strategy, seed):
    with ag.configure(backend="sim", sim_seed=seed, sim_strategy=strategy, execution="async"):
        run_threads(ag, threads=4, rounds=12, seed=seed)
        ag.synchronize()


def test_threads_under_the_serial_policy(fast_switching):
    with ag.configure(backend="sim", sim_seed=3, execution="sync"):
        run_threads(ag, threads=3, rounds=8, seed=3)
