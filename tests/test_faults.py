"""An exception or KeyboardInterrupt at any point of an asyncgpu call leaves the runtime
consistent (reliability note F11/F13): exhaustive fault injection on the sim backend.

For each target call (a kernel launch with cross-stream parents, a library call, a host read,
a host write, an explicit free, an allocation) the test first counts the call's points (the
lines it executes in the runtime's core modules), then, for every point, runs the program again
on a fresh runtime, raises there, and checks: the stream bookkeeping is intact, the call either
happened or did not (no third outcome), ``synchronize`` returns, and a follow-up program gives
the serial answer with the happens-before checker silent (a missing edge raises RaceError).

A second test leaves arrays in reference cycles and collects garbage often, so that faults land
inside ``Allocation.__del__`` run by the collector in the middle of runtime work (and inside the
collections that CPython's own trace calls trigger: the case that once crashed the interpreter,
see ``asyncgpu.testing.faults``).

The fault points are lines of Python: the tests that inject by line need the launch path as
plain Python (``pure``); a compiled module has no lines to trace.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from numba import cuda

import asyncgpu as ag
import asyncgpu.cupy  # noqa: F401  (imported here, not inside the first traced call)
from asyncgpu.testing.faults import inject
from asyncgpu.runtime.current import current_runtime

SRC = r'''
extern "C" __global__ void axpy(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
'''
X = np.arange(1, 9, dtype=np.float32)


def axpy_twin(x, y, a, n):
    y[:n] += a * x[:n]


def prologue(garbage=False):
    """y = x and z = x on (likely) different streams, left pending by the lazy strategy."""
    k = ag.cuda_kernel(SRC, "axpy", sim=axpy_twin)
    x = ag.array(X)
    y = ag.zeros(8, np.float32)
    z = ag.zeros(8, np.float32)
    k[1, 8](x, y, 1.0, 8)
    k[1, 8](x, z, 1.0, 8)
    for _ in range(20 if garbage else 0):     # garbage only the cycle collector frees
        cycle = [ag.zeros(4, np.float32)]
        cycle.append(cycle)
    return {"k": k, "x": x, "y": y, "z": z}


# target name -> (the call, the possible values of z afterwards as multiples of X)
def _launch(env):
    env["k"][1, 8](env["y"], env["z"], 2.0, 8)        # z += 2y: RAW on y, WAW on z


def _host_read(env):
    env["seen"] = env["z"].numpy()


def _host_write(env):
    env["z"][0:8] = 2 * X                             # overwrites z (WAW, WAR on the pending)


def _free(env):
    env["y"].free()


def _alloc(env):
    env["w"] = ag.ones(8, np.float32)


def _library(env):
    from asyncgpu import cupy as agcp
    env["z2"] = agcp.multiply(env["z"], 3.0)


TARGETS = {
    "launch": (_launch, {1.0, 3.0}),
    "host-read": (_host_read, {1.0}),
    "host-write": (_host_write, {1.0, 2.0}),
    "free": (_free, {1.0}),
    "alloc": (_alloc, {1.0}),
    "library-call": (_library, {1.0}),
}


def check_bookkeeping(rt):
    streams = rt.streams
    assert streams.inflight == sum(len(s.inflight) for s in streams.streams)
    assert set(streams._by_use) == set(streams.streams)
    assert all(e is not None for pool in streams._events for e in pool)
    for s in streams.streams:
        for node in s.inflight:
            assert not node.finished and node.event is not None and node.stream is s


def follow_up(env, z_factor):
    """More dependent work across streams; every value must be the serial one."""
    k, x, z = env["k"], env["x"], env["z"]
    v = ag.zeros(8, np.float32)
    k[1, 8](z, v, 1.0, 8)             # v = z
    k[1, 8](x, z, 1.0, 8)             # z += x   (WAR against the read above)
    k[1, 8](v, z, 1.0, 8)             # z += v
    k[1, 8](z, x, 0.5, 8)             # x += z / 2
    expect_z = (2 * z_factor + 1) * X
    np.testing.assert_array_equal(z.numpy(), expect_z)
    np.testing.assert_array_equal(x.numpy(), X + expect_z / 2)
    np.testing.assert_array_equal(v.numpy(), z_factor * X)


def run_once(target, at, make, seed, garbage=False):
    call, outcomes = TARGETS[target]
    with ag.configure(backend="sim", sim_seed=seed, sim_strategy="lazy", execution="async"):
        env = prologue(garbage)
        with inject(at, make) as injector:
            try:
                call(env)
            except (KeyboardInterrupt, RuntimeError) as exc:
                if injector.where is None or not isinstance(exc, make):
                    raise            # a real error, not the injected one
        rt = current_runtime()
        check_bookkeeping(rt)
        ag.synchronize()
        check_bookkeeping(rt)
        assert rt.streams.inflight == 0
        z = env["z"].numpy()
        factors = {f for f in outcomes if np.array_equal(z, f * X)}
        assert factors, f"z = {z} after a fault at {injector.where}"
        np.testing.assert_array_equal(env["x"].numpy(), X)
        if target != "free":
            np.testing.assert_array_equal(env["y"].numpy(), X)
        follow_up(env, factors.pop())
        return injector


def count_points(target):
    run_once(target, None, KeyboardInterrupt, 0)     # warm: first-use imports and caches
    return run_once(target, None, KeyboardInterrupt, 0)


class InjectedError(RuntimeError):
    pass


@pytest.fixture
def frequent_gc():
    before = gc.get_threshold()
    gc.set_threshold(10)
    try:
        yield
    finally:
        gc.set_threshold(*before)


# (a fault may land in the finalizer of an earlier test's garbage: Python reports and drops it)
@pytest.mark.pure
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("make", [KeyboardInterrupt, InjectedError], ids=["interrupt", "error"])
@pytest.mark.parametrize("target", list(TARGETS))
def test_fault_at_every_point_leaves_the_runtime_consistent(target, make):
    points = count_points(target).points
    assert len(points) > 3, points          # the probe really traces the runtime
    raised = 0
    for at in range(1, len(points) + 1):
        injector = run_once(target, at, make, seed=at)
        raised += injector.where is not None
    # (runs differ a little with the seed: the last few points may not be reached)
    assert raised >= 0.8 * len(points)


@pytest.mark.pure
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # __del__'s
@pytest.mark.parametrize("target", ["library-call", "launch"])
def test_fault_inside_a_finalizer_run_by_the_collector(target, frequent_gc):
    # (the points now include finalizer lines, which the collector runs at different moments
    # in each run: no count to compare against, only consistency after every fault)
    points = count_points(target).points
    for at in range(1, len(points) + 1):
        run_once(target, at, KeyboardInterrupt, seed=at, garbage=True)


def test_counting_costs_nothing_outside_the_block(sim):
    import sys
    with inject(None):
        pass
    assert sys.gettrace() is None or "FaultInjector" not in repr(sys.gettrace())


@pytest.mark.pure
@pytest.mark.parametrize("target", ["launch", "host-read", "host-write", "library-call"])
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # __del__'s
def test_fault_at_every_point_in_the_explicit_memory_model(target, monkeypatch):
    """The same, with copy nodes and location bookkeeping on the path (one fault kind: the
    points are the same for both)."""
    real = ag.configure

    class explicit(real):
        def __init__(self, **options):
            options.setdefault("memory", "explicit")
            super().__init__(**options)

    monkeypatch.setattr(ag, "configure", explicit)
    points = count_points(target).points
    assert any("memory.py" in str(p) for p in points), points[:5]   # it is on the path
    raised = 0
    for at in range(1, len(points) + 1, 2):
        raised += run_once(target, at, InjectedError, seed=at).where is not None
    assert raised >= 0.8 * len(range(1, len(points) + 1, 2))


def test_configure_takes_back_a_lock_an_interrupt_left_held():
    """Python cannot release a ``with`` block's lock when an exception lands between the
    block's last line and its exit (the fault points above reach that spot): the lock stays
    held by the interrupted thread, and every other thread would wait for it forever.
    ``configure``, which runs between calls, gives it back."""
    import threading

    with ag.configure(backend="sim", sim_seed=0):
        rt = current_runtime()
        rt._lock.acquire()                   # what the interrupted call left behind
        rt._lock.acquire()
        with ag.configure(sim_seed=1):
            done = []
            worker = threading.Thread(target=lambda: done.append(ag.zeros(4, np.float32)),
                                      daemon=True)
            worker.start()
            worker.join(20)
            assert not worker.is_alive() and len(done) == 1
        assert not rt._lock._is_owned()


def _twin_raising(exc):
    def twin(x, y, a, n):
        y[:n] = 7.0
        raise exc
    return ag.cuda_kernel(SRC, "axpy", sim=twin)


#: what :func:`_raising_axpy` raises
_RAISED: list = [None]


@ag.kernel(const=["x"])
@cuda.jit
def _raising_axpy(x, y, a, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = 7.0
    if i == 0:
        raise _RAISED[0]


def _numba_raising(exc):
    _RAISED[0] = exc
    return _raising_axpy


@pytest.mark.parametrize("make", [_twin_raising, _numba_raising], ids=["twin", "numba"])
def test_a_kernel_raising_keyboard_interrupt_stops_the_wait_and_leaves_its_outputs_faulted(
        sim, make):
    k = make(KeyboardInterrupt)
    x, y = sim.array(X), sim.zeros(8, np.float32)
    with pytest.raises(KeyboardInterrupt):
        k[1, 8](x, y, 1.0, 8)
        sim.synchronize()
    with pytest.raises(ag.KernelFault, match="raised KeyboardInterrupt"):
        sim.synchronize()
    with pytest.raises(ag.KernelFault, match="work that faulted"):
        y.numpy()
    y[...] = 1.0                    # (written again: the program's once more)
    np.testing.assert_array_equal(y.numpy(), np.ones(8))
    sim.synchronize()


@pytest.mark.parametrize("make", [_twin_raising, _numba_raising], ids=["twin", "numba"])
def test_a_kernel_raising_system_exit_is_a_fault_not_an_exit(sim, make):
    k = make(SystemExit(3))
    x, y = sim.array(X), sim.zeros(8, np.float32)
    k[1, 8](x, y, 1.0, 8)
    with pytest.raises(ag.KernelFault, match="SystemExit"):
        sim.synchronize()
    with pytest.raises(ag.KernelFault, match="work that faulted"):
        y.numpy()
    sim.synchronize()
