"""An exception or KeyboardInterrupt at any line of entering a tenant's block leaves the runtime
consistent: the thread is back in the tenant it was in, no exclusive step is left open (another
thread's launch is not held), and later work gives the serial answer. (Leaving is not covered:
Python calls ``__exit__`` once, and an interrupt as it begins, where Python checks for one as
any function begins, leaves the block entered whatever ``__exit__`` is written to do.)

The fault points are lines of Python: the test needs the tenant modules as plain Python
(``pure``), as ``tests/test_faults.py`` does for the launch path."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import asyncgpu as ag
from asyncgpu.runtime import exclusive as exclusive_module
from asyncgpu.runtime.current import current_runtime
from asyncgpu.testing.faults import inject

SRC = r'''
extern "C" __global__ void inc(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += 1.0f;
}
'''
MODULES = ("runtime/tenancy", "runtime/tenant_steps")
#: (a runtime of each test's own: the exclusive tenants made here would otherwise stay in the
#: process's runtime and hold later tests' launches behind their gate)
pytestmark = pytest.mark.usefixtures("fresh_runtime")


def inc_twin(y, n):
    y[:n] += 1


@pytest.fixture(autouse=True)
def patient_hold(monkeypatch):
    monkeypatch.setattr(exclusive_module, "HOLD_FLOOR_S", 600.0)


def run_once(at, make, seed, exclusive, regulated=False):
    name = "exclusive" if exclusive else "shared"     # (a tenant keeps its first settings)
    with ag.configure(backend="sim", sim_seed=seed, sim_strategy="random", execution="async"):
        k = ag.cuda_kernel(SRC, "inc", sim=inc_twin)
        a, b = ag.zeros(8, np.float32), ag.zeros(8, np.float32)
        with ag.tenant(name, exclusive=exclusive):
            k[1, 8](a, 8)                   # (the tenant made, outside the traced block)
        if regulated:                       # (profiling: each step's beginning is booked)
            ag.regulate(plan="search", tenants=[name], steps=1000)
        scope = ag.tenant(name, exclusive=exclusive)
        entered = False
        with inject(at, make, MODULES) as injector:
            try:
                scope.__enter__()
                entered = True
            except (KeyboardInterrupt, RuntimeError) as exc:
                if injector.where is None or not isinstance(exc, make):
                    raise            # a real error, not the injected one
        if entered:
            k[1, 8](a, 8)
            scope.__exit__(None, None, None)
        rt = current_runtime()
        assert getattr(rt._pins, "tenant", 0) == 0, injector.where   # (back in the default)
        if regulated:           # (no step of this thread is left open in the regulator)
            assert not rt.regulator._open, (injector.where, rt.regulator._open)
            ag.regulate(plan="off")
        gate = rt.gate
        assert gate is None or (gate._open == 0 and not gate._holders), injector.where

        def other():
            k[1, 8](b, 8)

        # (a step left open would hold the launch for good: the hold's limit is 10 minutes
        # here, so the launch's end, not its time, tells, however loaded the host)
        t = threading.Thread(target=other, daemon=True)
        t.start()
        t.join(60)
        assert not t.is_alive(), injector.where
        ag.synchronize()
        assert a.tolist() == [2.0 if entered else 1.0] * 8, injector.where
        assert b.tolist() == [1.0] * 8
        with ag.tenant(name, exclusive=exclusive):
            k[1, 8](a, 8)
        assert ag.tenants()[name].steps >= 2
        return injector


class InjectedError(RuntimeError):
    pass


@pytest.mark.pure
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("exclusive", [True, False], ids=["exclusive", "shared"])
@pytest.mark.parametrize("make", [KeyboardInterrupt, InjectedError], ids=["interrupt", "error"])
def test_a_fault_at_every_line_of_entering_a_tenants_block_leaves_the_runtime_consistent(make,
                                                                                    exclusive):
    run_once(None, make, 0, exclusive)
    points = run_once(None, make, 0, exclusive).points
    assert len(points) > 10, points
    raised = 0
    for at in range(1, len(points) + 1):
        raised += run_once(at, make, at, exclusive).where is not None
    assert raised >= 0.8 * len(points)


@pytest.mark.pure
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_interrupt_at_every_line_of_entering_a_regulated_tenants_block_leaves_no_step_open():
    points = run_once(None, KeyboardInterrupt, 0, False, regulated=True).points
    for at in range(1, len(points) + 1):
        run_once(at, KeyboardInterrupt, at, False, regulated=True)


def _ctrl_c_as_the_gate_is_taken(lock, at):
    """A profile function raising KeyboardInterrupt as the ``at``-th acquire of the gate's
    ``lock`` returns, holding it: where Python delivers a Ctrl-C that arrived during the
    acquire (it checks for one after each call of C code). Returns the profile function,
    whose ``seen`` counts the acquires and ``where`` names the interrupted one."""
    def profile(frame, event, arg):
        if (event == "c_return" and getattr(arg, "__self__", None) is lock
                and arg.__name__ in ("acquire", "__enter__", "_acquire_restore")):
            profile.seen += 1
            if profile.seen == at:
                profile.where = f"{frame.f_code.co_name}:{frame.f_lineno}"
                raise KeyboardInterrupt
    profile.seen, profile.where = 0, None
    return profile


@pytest.mark.pure
def test_ctrl_c_as_the_exclusive_gate_is_taken_does_not_hang_every_later_launch():
    """A Ctrl-C landing as the exclusive tenants' gate took its lock (in ``with`` on the gate's
    condition, whose ``__enter__`` is Python code) left the lock held: every later launch
    while a tenant was exclusive, in every thread, waited for it forever. Now the hold is given
    back, and the next step and the other tenants' launches go."""
    import sys

    def step(k, a, b):
        with ag.tenant("exclusive", exclusive=True):
            k[1, 8](a, 8)
        k[1, 8](b, 8)               # (the default tenant's launch: through the gate)

    at, raised = 0, 0
    while True:
        at += 1
        with ag.configure(backend="sim", sim_seed=at, execution="async"):
            k = ag.cuda_kernel(SRC, "inc", sim=inc_twin)
            a, b = ag.zeros(8, np.float32), ag.zeros(8, np.float32)
            step(k, a, b)                       # (the tenant made; its gate in place)
            lock = current_runtime().gate._cond._lock
            profile = _ctrl_c_as_the_gate_is_taken(lock, at)
            sys.setprofile(profile)
            try:
                step(k, a, b)
            except KeyboardInterrupt:
                pass
            finally:
                sys.setprofile(None)
            if profile.where is None:
                break                           # (every acquire of a step interrupted)
            raised += 1
            t = threading.Thread(target=step, args=(k, a, b), daemon=True)
            t.start()
            t.join(60)
            hung = t.is_alive()
            if hung:        # (let it go, so that the failure ends the test rather than hang it)
                lock.release()
                t.join()
            assert not hung, f"the next step hangs (Ctrl-C at {profile.where})"
            ag.synchronize()
            assert 2 <= a.tolist()[0] <= 3 and 2 <= b.tolist()[0] <= 3, profile.where
    assert raised >= 3
