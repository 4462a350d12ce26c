"""Real SIGINT while a chain of dependent launches is being submitted (reliability note F13).

A timer thread sends SIGINT to the main thread at a random moment; Python raises
KeyboardInterrupt between two bytecodes of whatever the main thread runs, usually inside
asyncgpu's launch path. Afterwards the interrupted launch has either happened or not: the
accumulator equals the serial value for the completed launches or one more, ``synchronize``
returns, and more dependent work gives the serial answer. Used by tests/test_interrupts.py (sim)
and tests/gpu/test_gpu_faults.py (cuda).
"""

from __future__ import annotations

import contextlib
import random
import signal
import threading
import time
from collections.abc import Iterator

import numpy as np

SRC = r'''
extern "C" __global__ void add1(const double* x, double* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}
'''
N = 64


def add1_twin(x, y, n):
    y[:n] += x[:n]


def interrupted_chain(ag, seed: int, max_delay_s: float, launches: int = 20000) -> int:
    """Submit ``y += x`` on alternating views until SIGINT arrives; check; return the count."""
    with ctrl_c_raises():
        return _interrupted_chain(ag, seed, max_delay_s, launches)


@contextlib.contextmanager
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt`` in the main thread for the block, as in a program
    started from a terminal: a shell without job control starts a background command with
    SIGINT ignored (``pytest &`` in a script), and the tests' loops would then wait for it
    forever. A SIGINT blocked in the main thread fails at once: nothing in asyncgpu may leave
    it blocked (the simulator holds it back only while a step of its device runs). The handler
    before the block is put back after it."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, ())
    assert signal.SIGINT not in blocked, f"SIGINT is blocked in the main thread: {blocked}"
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupted_chain(ag, seed: int, max_delay_s: float, launches: int) -> int:
    rng = random.Random(seed)
    k = ag.cuda_kernel(SRC, "add1", sim=add1_twin)
    x = ag.ones(N)
    y = ag.zeros(N)
    other = ag.zeros(N)
    done = 0
    main = threading.main_thread().ident
    caught = threading.Event()

    def interrupter() -> None:
        time.sleep(rng.uniform(0.0, max_delay_s))
        # again until it lands in our code (one can be swallowed by a finalizer or gc callback)
        while not caught.is_set():
            signal.pthread_kill(main, signal.SIGINT)
            caught.wait(0.01)

    thread = threading.Thread(target=interrupter, daemon=True)
    thread.start()
    try:
        for _ in range(launches):
            k[1, N](x, y, N)
            done += 1
            k[1, N](y, other, N)       # a reader of y on another stream: WAR edges
            done += 1
        while True:                    # the signal comes after the loop: wait for it
            time.sleep(0.001)
    except KeyboardInterrupt:
        pass
    while True:
        # (a late second SIGINT may land here; once SIGINT is ignored, one the interrupter sent
        # just before it stopped is dropped rather than raised in the checks below)
        try:
            caught.set()
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            thread.join()
            break
        except KeyboardInterrupt:
            pass
    ag.synchronize()
    got_y = y.numpy()[0]
    adds_y = (done + 1) // 2
    assert got_y in (adds_y, adds_y + 1), (done, got_y)
    # more dependent work gives the serial answer from where the interrupted run stopped
    base_other = other.numpy().copy()
    k[1, N](x, y, N)
    k[1, N](y, other, N)
    np.testing.assert_array_equal(y.numpy(), np.full(N, got_y + 1))
    np.testing.assert_array_equal(other.numpy(), base_other + got_y + 1)
    return done
