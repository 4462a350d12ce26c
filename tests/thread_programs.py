"""Several host threads submitting dependent work to one runtime (reliability note F14).

Each thread owns an array and repeatedly (a) adds its increment to it, (b) adds 1 to a shared
counter, (c) copies the shared counter into a slot of its own log array with a kernel, and
(d) now and then reads both on the host. The runtime linearizes calls (one lock), so the run
must equal *some* serial interleaving that keeps each thread's program order:

* a thread's own array and host reads are exactly what its program alone gives;
* the counter ends at the total number of increments;
* each thread's log (counter values it copied) is strictly increasing, each entry is at least
  the thread's own increments so far and at most the total.

Used by tests/test_threads.py (sim) and tests/gpu/test_gpu_threads.py (cuda); and
:func:`resumed_in_another_thread`, for blocks a generator holds and another thread leaves.
"""

from __future__ import annotations

import random
import threading

import numpy as np

SRC = r'''
extern "C" __global__ void axpy(const double* x, double* y, double a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
extern "C" __global__ void copy1(const double* x, double* y, int slot) {
    if (blockIdx.x == 0 && threadIdx.x == 0) y[slot] = x[0];
}
'''
N = 32


def axpy_twin(x, y, a, n):
    y[:n] += a * x[:n]


def copy1_twin(x, y, slot):
    y[slot] = x[0]


def run_threads(ag, threads: int, rounds: int, seed: int) -> None:
    """Run the program on ``threads`` host threads and assert the linearizability conditions."""
    axpy = ag.cuda_kernel(SRC, "axpy", sim=axpy_twin)
    copy1 = ag.cuda_kernel(SRC, "copy1", sim=copy1_twin)
    ones = ag.ones(N)
    counter = ag.zeros(N)
    errors: list[BaseException] = []
    results: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    start = threading.Barrier(threads)

    def worker(t: int) -> None:
        rng = random.Random(seed * 1000 + t)
        try:
            mine = ag.zeros(N)
            log = ag.zeros(rounds)
            start.wait()
            for r in range(rounds):
                axpy[1, N](ones, mine, float(t + 1), N)
                axpy[1, N](ones, counter, 1.0, N)
                copy1[1, 1](counter, log, r)
                if rng.random() < 0.3:
                    assert mine.numpy().tolist() == [float((r + 1) * (t + 1))] * N
                if rng.random() < 0.2:
                    seen = float(counter[0])
                    assert r + 1 <= seen <= threads * rounds, (t, r, seen)
            results[t] = (mine.numpy(), log.numpy())
        except BaseException as exc:    # reported by the main thread
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(t,), name=f"submitter-{t}")
            for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join(timeout=120)
        assert not th.is_alive(), "a submitting thread hangs"
    if errors:
        raise errors[0]
    ag.synchronize()
    total = threads * rounds
    assert counter.numpy().tolist() == [float(total)] * N
    for t, (mine, log) in results.items():
        assert mine.tolist() == [float(rounds * (t + 1))] * N
        values = log.tolist()
        assert all(a < b for a, b in zip(values, values[1:])), (t, values)
        assert all(r + 1 <= v <= total for r, v in enumerate(values)), (t, values)
    # every increment precedes the last copy of all (each thread copies after incrementing)
    assert max(v for _, log in results.values() for v in log.tolist()) == total


def resumed_in_another_thread(gen) -> list[str]:
    """Resume generator ``gen`` once from another thread (a block it holds is then left
    there); the messages of the ``RuntimeError`` raised there, if any."""
    said: list[str] = []

    def resume() -> None:
        try:
            next(gen, None)
        except RuntimeError as exc:
            said.append(str(exc))

    thread = threading.Thread(target=resume)
    thread.start()
    thread.join()
    return said
