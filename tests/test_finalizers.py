"""Calls into asyncgpu from finalizers the garbage collector runs in the middle of an asyncgpu
call: on a simulator thread that call waits for (a Numba kernel's), or in the thread making it
(a twin's step). A free is deferred to the next call; anything else is refused with a
``RuntimeError``; none hangs, and the runtime works on afterwards (``asyncgpu.runtime.finalizers``).
"""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from numba import cuda

import asyncgpu as ag

pytestmark = pytest.mark.timeout(120)

N = 8
SRC = 'extern "C" __global__ void f(float* y, int n) {}'


@ag.kernel
@cuda.jit
def collect_on_a_simulator_thread(y):
    i = cuda.grid(1)
    if i == 0:
        gc.collect()
    if i < y.size:
        y[i] = 1.0


def _collecting_twin(y, n):
    gc.collect()
    y[:n] = 1.0


class Owner:
    """A reference cycle whose finalizer calls ``action(self.arr)``, noting what happened."""

    def __init__(self, arr, action, seen):
        self.arr, self.action, self.seen, self.me = arr, action, seen, self

    def __del__(self):
        try:
            self.action(self.arr)
            self.seen.append((threading.current_thread().name, "done"))
        except Exception as exc:        # noqa: BLE001 - (what the finalizer met is the test's)
            self.seen.append((threading.current_thread().name, exc))


def _run_with_pending_cycle(launch, action):
    """Leave an :class:`Owner` cycle to the collector, then run ``launch(y)`` (whose kernel
    collects) and wait for it; returns the Owner's array, y and what its finalizer met."""
    seen: list = []
    arr = ag.ones(N, np.float32)
    gc.disable()
    try:
        Owner(arr, action, seen)
        y = ag.zeros(N, np.float32)
        launch(y)
        np.testing.assert_array_equal(y.numpy(), np.ones(N))
    finally:
        gc.enable()
    assert seen, "the finalizer did not run"
    return arr, y, seen


def _numba(y):
    collect_on_a_simulator_thread[1, N](y)


def _twin(y):
    ag.cuda_kernel(SRC, "f", sim=_collecting_twin)[1, 1](y, N)


def _healthy():
    x = ag.array(np.arange(N, dtype=np.float32))
    np.testing.assert_array_equal((x * 2).numpy(), np.arange(N) * 2)
    ag.synchronize()
    assert ag.statistics().inflight == 0


@pytest.mark.parametrize("launch", [_numba, _twin], ids=["simulator-thread", "same-thread"])
def test_a_finalizer_freeing_an_array_inside_a_call_frees_it_at_the_next_call(sim, launch):
    arr, _, seen = _run_with_pending_cycle(launch, lambda a: a.free())
    assert seen[0][1] == "done"
    if launch is _numba:
        assert seen[0][0] == "asyncgpu-sim-thread"
    with pytest.raises(ag.FreedArrayError):
        arr.numpy()
    sim.zeros(1)        # (the next call gives its memory back)
    assert arr._alloc.buffer is None
    _healthy()


@pytest.mark.parametrize("launch", [_numba, _twin], ids=["simulator-thread", "same-thread"])
@pytest.mark.parametrize("action", [
    lambda a: ag.synchronize(), lambda a: a.numpy(), lambda a: a.fill(2.0),
    lambda a: ag.configure(sim_tick=0.5)], ids=["synchronize", "read", "write", "configure"])
def test_a_finalizer_calling_asyncgpu_inside_a_call_is_refused_and_nothing_hangs(
        sim, launch, action):
    arr, _, seen = _run_with_pending_cycle(launch, action)
    error = seen[0][1]
    assert isinstance(error, RuntimeError)
    where = "simulator thread" if launch is _numba else "inside another asyncgpu call"
    assert "from a finalizer" in str(error) and where in str(error)
    np.testing.assert_array_equal(arr.numpy(), np.ones(N))
    assert ag.options().sim_tick != 0.5
    _healthy()


def test_a_finalizer_calling_asyncgpu_between_calls_runs_as_any_call(sim):
    seen: list = []
    arr = sim.ones(N, np.float32)
    Owner(arr, lambda a: a.fill(3.0), seen)
    gc.collect()
    assert seen == [(threading.current_thread().name, "done")]
    np.testing.assert_array_equal(arr.numpy(), np.full(N, 3.0))


@pytest.mark.parametrize("depth", [0, 1])
def test_an_interrupt_raised_as_the_simulators_lock_is_taken_leaves_it_as_it_was(monkeypatch,
                                                                               depth):
    """Ctrl-C's handler runs in the lock's Python frame right after the C acquire returned,
    before the caller's try: the lock stayed held, and every other thread waited for good."""
    from asyncgpu.runtime import finalizers

    lock = finalizers.GuardedLock()
    for _ in range(depth):              # (held already by this thread: re-entered)
        lock.acquire()
    real = finalizers._acquire

    def acquired_then_interrupted(self, blocking=True, timeout=-1):
        real(self, blocking, timeout)
        raise KeyboardInterrupt

    monkeypatch.setattr(finalizers, "_acquire", acquired_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        lock.acquire()
    with pytest.raises(KeyboardInterrupt):
        with lock:
            pass
    assert lock._recursion_count() == depth
    monkeypatch.undo()
    for _ in range(depth):
        lock.release()
    taken = threading.Event()
    other = threading.Thread(target=lambda: lock.acquire() and taken.set())
    other.start()
    other.join(10)
    assert taken.is_set()
