"""One host core for regulated tenants' threads (``asyncgpu.runtime.host_core``): a plan's
``one_core`` moves its tenants' threads onto one core until the plan is set aside, on the
simulator."""

from __future__ import annotations

import logging
import os
import threading

import numpy as np
import pytest
from numba import cuda

import asyncgpu as ag
from asyncgpu.core.plan import Plan
from asyncgpu.runtime import host_core
from asyncgpu.runtime.current import current_runtime

pytestmark = pytest.mark.skipif(not host_core.supported(),
                                reason="the platform does not let a thread choose its cores")


@pytest.fixture(autouse=True)
def _cores_back():
    """Whatever a test did, the thread running the tests gets its cores back after it."""
    mine = os.sched_getaffinity(0)
    yield
    os.sched_setaffinity(0, mine)


def scale(x, y, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] = 2.0 * x[i]


class Tenants:
    """``count`` tenants, each step a launch and a read of its result; each step notes the
    cores its thread may use while it is open."""

    def __init__(self, tag: str, count: int = 3, n: int = 256) -> None:
        self.kernel = ag.kernel(const=["x"], out=["y"])(scale)
        self.n = n
        self.scopes = [ag.tenant(f"{tag}-{i}") for i in range(count)]
        self.names = tuple(t.name for t in self.scopes)
        self.xs = [ag.array(np.arange(float(n)) + i) for i in range(count)]
        self.ys = [ag.empty(n) for _ in range(count)]
        self.cores: list[set[int]] = []
        self.wrong: list[int] = []

    def step(self, i: int) -> None:
        with self.scopes[i]:
            self.cores.append(os.sched_getaffinity(0))
            self.kernel[2, 128](self.xs[i], self.ys[i], self.n)
            if self.ys[i].numpy().tolist() != (2.0 * (np.arange(float(self.n)) + i)).tolist():
                self.wrong.append(i)

    def regulate(self, names: tuple[str, ...], **options) -> None:
        for i in range(len(self.scopes)):       # (the tenants exist once they ran a step)
            self.step(i)
        self.cores.clear()
        ag.regulate(plan=Plan(one_core=names), tenants=list(self.names), **options)


def test_the_plans_tenants_threads_run_on_one_core_until_the_plan_is_set_aside():
    with ag.configure(backend="sim", sim_seed=1):
        mine = os.sched_getaffinity(0)
        tenants = Tenants("core")
        tenants.regulate(tenants.names[:2])
        core = current_runtime().one_core
        done = threading.Event()
        after: dict[int, set[int]] = {}

        def work(i: int) -> None:
            for _ in range(3):
                tenants.step(i)
            after[i] = os.sched_getaffinity(0)
            done.wait(30)
            after[10 + i] = os.sched_getaffinity(0)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for _ in range(30000):                  # (at most 30 s: a thread that failed ends)
            if len(after) == 3 or not all(t.is_alive() for t in threads):
                break
            threading.Event().wait(0.001)
        assert not tenants.wrong and len(tenants.cores) == 9 and core.cpu in mine
        # (the third tenant is not the plan's: its thread runs where it was)
        assert sorted(map(sorted, tenants.cores)) == sorted([[core.cpu]] * 6 + [sorted(mine)] * 3)
        assert after == {0: {core.cpu}, 1: {core.cpu}, 2: mine}
        assert "threads on one host core" in ag.regulation().plan.describe()
        ag.regulate(plan="off")             # (the threads moved get their cores back)
        assert current_runtime().one_core is None
        done.set()
        for t in threads:
            t.join()
        assert after[10] == after[11] == after[12] == mine


def test_a_step_that_raises_moves_its_thread_too_and_the_plans_end_moves_it_back():
    with ag.configure(backend="sim", sim_seed=2):
        mine = os.sched_getaffinity(0)
        tenants = Tenants("raises", count=2)
        tenants.regulate(tenants.names)
        with pytest.raises(ZeroDivisionError):
            with tenants.scopes[0]:
                1 / 0
        cpu = current_runtime().one_core.cpu
        assert os.sched_getaffinity(0) == {cpu}
        with tenants.scopes[0]:
            tenants.step(1)
        assert os.sched_getaffinity(0) == {cpu} and not tenants.wrong
        assert len(current_runtime().one_core.moved) == 1      # (one thread, moved once)
        ag.regulate(plan="off")
        assert os.sched_getaffinity(0) == mine


def test_a_step_that_found_the_plans_core_as_the_plan_was_set_aside_leaves_its_thread_put():
    mine = os.sched_getaffinity(0)
    if len(mine) < 2:
        pytest.skip("needs two cores to tell a moved thread from one left where it was")
    core = host_core.OneCore(frozenset({1}))
    core.release()          # (between a step's reading the runtime's core and its enter)
    core.enter()
    assert os.sched_getaffinity(0) == mine and not core.moved


def test_a_core_the_system_refuses_leaves_the_threads_where_they_are_and_says_so(monkeypatch,
                                                                                caplog):
    def refuse(pid, cpus):
        raise OSError(22, "Invalid argument")

    with ag.configure(backend="sim", sim_seed=3):
        mine = os.sched_getaffinity(0)
        tenants = Tenants("refused", count=2)
        tenants.regulate(tenants.names)
        monkeypatch.setattr(os, "sched_setaffinity", refuse)
        with caplog.at_level(logging.INFO, logger="asyncgpu"):
            for _ in range(2):
                tenants.step(0)
                tenants.step(1)
        assert not tenants.wrong and all(cores == mine for cores in tenants.cores)
        assert current_runtime().one_core.refused
        assert sum("could not be moved onto core" in r.message for r in caplog.records) == 1
        ag.regulate(plan="off")


def test_a_runtime_set_aside_for_another_device_gives_its_tenants_threads_their_cores_back():
    with ag.configure(backend="sim", sim_seed=4, sim_devices=4):
        mine = os.sched_getaffinity(0)
        tenants = Tenants("retired", count=2)
        tenants.regulate(tenants.names)
        tenants.step(0)
        assert os.sched_getaffinity(0) == {current_runtime().one_core.cpu}
        rt = current_runtime()
        with ag.configure(device=3):            # (the runtime above is retired)
            assert os.sched_getaffinity(0) == mine
            assert rt.regulator.state == "off" and rt.one_core is None


def test_a_thread_the_program_keeps_off_that_core_is_left_where_it_is():
    with ag.configure(backend="sim", sim_seed=5):
        mine = os.sched_getaffinity(0)
        if len(mine) < 2:
            pytest.skip("needs two cores")
        tenants = Tenants("kept-off", count=2)
        tenants.regulate(tenants.names)
        tenants.step(0)                         # (this thread chose the core)
        cpu = current_runtime().one_core.cpu
        elsewhere = mine - {cpu}
        seen = []

        def work():
            os.sched_setaffinity(0, elsewhere)  # (the program's own choice)
            tenants.step(1)
            seen.append(os.sched_getaffinity(0))
            ag.regulate(plan="off")             # (nothing to give back to this thread)
            seen.append(os.sched_getaffinity(0))

        t = threading.Thread(target=work)
        t.start()
        t.join()
        assert seen == [elsewhere, elsewhere] and not tenants.wrong
        assert os.sched_getaffinity(0) == mine


def test_a_program_that_keeps_its_threads_where_they_are_gets_no_thread_moved(caplog):
    with ag.configure(backend="sim", sim_seed=6):
        mine = os.sched_getaffinity(0)
        tenants = Tenants("stay", count=2)
        with caplog.at_level(logging.INFO, logger="asyncgpu"):
            tenants.regulate(tenants.names, host_core=False)
        for _ in range(2):
            tenants.step(0)
            tenants.step(1)
        assert not tenants.wrong and all(cores == mine for cores in tenants.cores)
        assert current_runtime().one_core is None
        assert any("host_core=False" in r.message for r in caplog.records)
        with pytest.raises(ValueError, match="host_core must be True or False"):
            ag.regulate(host_core="no")
        assert ag.regulation().state == "regulated"     # (the bad call changed nothing)
        ag.regulate(plan="off")
