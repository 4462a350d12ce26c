"""The warp-function kernels of tests/warp_kernels.py on the GPU: the answers the simulator's
tests (tests/test_warps.py) check it against."""

from __future__ import annotations

import numpy as np
import pytest

import warp_kernels

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("seed", [0, 1])
def test_warp_shuffles_votes_and_matches_on_the_gpu_give_the_simulators_answers(seed):
    import asyncgpu as ag

    with ag.configure(backend="cuda", execution="async"):
        for name, (got, want) in warp_kernels.run(seed).items():
            np.testing.assert_array_equal(got, want, err_msg=name)
