"""Real SIGINT during submission on sim: the runtime stays consistent (see tests/interrupts.py)."""

from __future__ import annotations

import pytest

import asyncgpu as ag
from interrupts import interrupted_chain


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # SIGINT in a gc hook
@pytest.mark.parametrize("seed", range(6))
def test_sigint_during_submission_leaves_the_runtime_consistent(seed):
    with ag.configure(backend="sim", sim_seed=seed, sim_strategy="random", execution="async"):
        interrupted_chain(ag, seed, max_delay_s=0.05)
