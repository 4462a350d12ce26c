"""Several threads recording at once: each thread's recorded function records, then replays, as
if it were alone, while the others record or replay theirs; results equal the serial ones."""

from __future__ import annotations

import threading

import numpy as np
from test_recorder_hazards import kernels
from test_schedule_options import fresh_sim

import asyncgpu as ag

THREADS = 4
ROUNDS = 12


def _run_threads(shared_input: bool) -> tuple[list[list[str]], list[np.ndarray], np.ndarray]:
    inc, scale = kernels()
    xs = [ag.zeros(8, np.float32) for _ in range(THREADS)]
    base = ag.ones(8, np.float32)
    together = threading.Barrier(THREADS)
    outcomes: list[list[str]] = [[] for _ in range(THREADS)]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        first = [True]

        @ag.graph
        def step(x):
            inc[1, 8](x, 8)
            if first[0]:                 # every thread inside its first recording at once
                first[0] = False
                together.wait(10)
            scale[1, 8](x, np.float32(i + 2), 8)
            if shared_input:
                inc[1, 8](base, 0)       # reads (n = 0: writes nothing) the array all share

        try:
            for _ in range(ROUNDS):
                step(xs[i])
                outcomes[i].append(step.outcome)
                if ROUNDS // 2 == len(outcomes[i]):
                    float(xs[i][0])      # a host read between calls, from every thread
        except BaseException as exc:     # (reported by the test, not lost in the thread)
            errors.append(exc)
            together.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return outcomes, [x.numpy() for x in xs], base.numpy()


def _serial(i: int) -> np.ndarray:
    x = np.zeros(8, np.float32)
    for _ in range(ROUNDS):
        x = (x + np.float32(1)) * np.float32(i + 2)
    return x


def test_threads_record_their_own_functions_at_once_and_replay_them():
    with fresh_sim():
        outcomes, results, _ = _run_threads(shared_input=False)
    for i in range(THREADS):
        assert outcomes[i][0] == "recorded"
        assert outcomes[i][1:] == ["replayed"] * (ROUNDS - 1)
        np.testing.assert_array_equal(results[i], _serial(i))


def test_recordings_of_several_threads_that_share_an_array_stay_ordered():
    with fresh_sim(debug_hb=True):
        outcomes, results, base = _run_threads(shared_input=True)
    for i in range(THREADS):
        assert outcomes[i][0] == "recorded"
        np.testing.assert_array_equal(results[i], _serial(i))
    np.testing.assert_array_equal(base, np.ones(8, np.float32))
