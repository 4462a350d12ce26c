"""Real SIGINT during submission on sim: the runtime stays consistent (see tests/interrupts.py)."""

from __future__ import annotations

import pytest

import asyncgpu as ag
from interrupts import ctrl_c_raises, interrupted_chain


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # SIGINT in a gc hook
@pytest.mark.parametrize("seed", range(6))
def test_sigint_during_submission_leaves_the_runtime_consistent(seed):
    with ag.configure(backend="sim", sim_seed=seed, sim_strategy="random", execution="async"):
        interrupted_chain(ag, seed, max_delay_s=0.05)


def test_ctrl_c_inside_a_simulated_kernel_waits_for_its_end():
    """The simulated device finishes a kernel as a real one would: SIGINT arriving while the
    host thread runs the kernel's twin is raised after the kernel, whose writes are whole."""
    import signal
    import threading

    import numpy as np

    def twin(y, n):
        y[:n] += 1
        # (to the main thread, as Ctrl-C reaches a program's only thread: a signal sent to the
        # process may be taken by another thread, and Python then raises in the main one at once)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        for _ in range(1000):       # bytecodes where the interrupt would land
            pass
        y[:n] += 1

    with ag.configure(backend="sim", sim_seed=0, sim_strategy="lazy", execution="async"):
        k = ag.cuda_kernel('extern "C" __global__ void k(float* y, int n) {}', "k", sim=twin)
        y = ag.zeros(8, np.float32)
        k[1, 8](y, 8)
        with ctrl_c_raises(), pytest.raises(KeyboardInterrupt):
            ag.synchronize()        # runs the kernel
        ag.synchronize()
        np.testing.assert_array_equal(y.numpy(), np.full(8, 2, np.float32))
