"""Several host threads submitting to one runtime on sim: the result equals a serial
interleaving consistent with each thread's program order, and the happens-before checker (which
raises RaceError at the offending call) stays silent. See tests/thread_programs.py."""

from __future__ import annotations

import os

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


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")   # (fork with threads: Python's)
def test_a_fork_while_another_thread_is_inside_a_call_gives_a_child_that_works():
    """The fork waits for the other thread's call to end: the child began with the runtime's
    lock held by a thread it does not have, and its first call waited for good."""
    import faulthandler
    import threading
    import time

    import numpy as np

    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=1):
        x = ag.array(np.arange(16.0))
        stop = threading.Event()

        def busy():
            y = ag.zeros(16)
            while not stop.is_set():
                y += 1
                y.numpy()

        worker = threading.Thread(target=busy, daemon=True)
        worker.start()
        time.sleep(0.1)
        try:
            pid = os.fork()
            if pid == 0:        # (the child: exit 3 if its call hangs, 0 if it answers right)
                faulthandler.dump_traceback_later(20, exit=True)
                os._exit(0 if float((x + 1).sum()) == 136.0 else 2)
            _, status = os.waitpid(pid, 0)
        finally:
            stop.set()
            worker.join(10)
        assert os.waitstatus_to_exitcode(status) == 0
