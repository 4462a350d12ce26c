"""Several host threads submitting to one runtime on the GPU (reliability note F14): the same
linearizability checks as tests/test_threads.py, on real streams, with and without the
happens-before checker attached to the cuda backend's log."""

from __future__ import annotations

import pytest

from thread_programs import run_threads

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("debug_hb", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_threads_submitting_dependent_work_linearize_on_gpu(seed, debug_hb):
    import asyncgpu as ag

    with ag.configure(backend="cuda", execution="async", debug_hb=debug_hb):
        run_threads(ag, threads=4, rounds=50, seed=seed)
        ag.synchronize()
