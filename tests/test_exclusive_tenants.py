"""Exclusive tenants on the simulator: while an exclusive tenant's step is open (and until its
work completes), other threads' launches wait on the host; the other tenants keep one launch in
flight; results stay those of the serial program, and nothing is held for the exclusive
tenant itself."""

from __future__ import annotations

import contextlib
import threading
import time

import numpy as np
import pytest
from numba import cuda
from thread_programs import resumed_in_another_thread

import asyncgpu as ag
from asyncgpu.runtime import exclusive
from asyncgpu.runtime.current import current_runtime


def twice(x, y, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = 2.0 * x[i] + 1.0


@contextlib.contextmanager
def one_in_flight(kinds):
    """Check at each launch of a node of ``kinds`` by a tenant other than the default one
    that every earlier such node has completed; yields the nodes seen."""
    rt = current_runtime()
    seen = []
    launch = rt.backend.launch

    def spy(node, stream):
        if node.tenant and node.kind in kinds:
            seen.append(node)
            assert all(p.finished for p in seen[:-1])
        return launch(node, stream)

    rt.backend.launch = spy
    try:
        yield seen
    finally:
        del rt.backend.launch


@contextlib.contextmanager
def launch_elsewhere(tenant, launch):
    """A thread that runs ``launch()`` in tenant ``tenant`` once the block sets the yielded
    ``opened``, then sets the yielded ``launched``; joined as the block ends (outside any
    exclusive step: the thread may be waiting for it)."""
    opened, launched = threading.Event(), threading.Event()

    def other() -> None:
        opened.wait()
        with ag.tenant(tenant):
            launch()
        launched.set()

    worker = threading.Thread(target=other)
    worker.start()
    try:
        yield opened, launched
    finally:
        opened.set()
        worker.join(5)


@pytest.fixture
def k(monkeypatch):
    # (a runtime of its own, device 1 of two simulated ones: a tenant stays exclusive as long
    # as its runtime, and the next test's configure retires this one; an exclusive tenant
    # stays active for the whole test, however slow the host, unless the test says otherwise)
    monkeypatch.setattr(exclusive, "IDLE_FLOOR_S", 600.0)
    monkeypatch.setattr(exclusive, "HOLD_FLOOR_S", 600.0)
    with ag.configure(backend="sim", sim_seed=3, sim_devices=2, device=1):
        yield ag.kernel(const=["x"], out=["y"])(twice)


def test_an_exclusive_step_holds_other_tenants_launches_until_it_ends(k):
    x = ag.array(np.ones(64))
    y, z = ag.empty_like(x), ag.empty_like(x)
    with launch_elsewhere("excl-ranker", lambda: k[2, 32](x, z, 64)) as (opened, launched):
        with ag.tenant("excl-detector", priority="high", exclusive=True):
            k[2, 32](x, y, 64)
            opened.set()
            time.sleep(0.3)
            assert not launched.is_set()            # held on the host, nothing enqueued
            assert ag.tenants()["excl-ranker"].kernels == 0
            k[2, 32](y, y, 64)                      # the exclusive tenant itself: not held
    assert launched.is_set()
    ag.synchronize()
    stats = ag.tenants()
    assert stats["excl-ranker"].kernels == 1 and stats["excl-ranker"].held == 1
    assert stats["excl-detector"].held == 0
    assert y.numpy().tolist() == [7.0] * 64 and z.numpy().tolist() == [3.0] * 64


def test_an_exclusive_step_waiting_for_another_tenants_thread_lets_its_launch_go_and_says_so(
        k, monkeypatch, caplog):
    """A service's step that waits for a request which another tenant's thread queues after its
    own launch: the launch held by the open step goes after the hold's limit, with a warning,
    where the two threads would otherwise wait for each other for good."""
    import queue

    monkeypatch.setattr(exclusive, "HOLD_FLOOR_S", 0.2)
    x = ag.array(np.ones(64))
    y, z = ag.empty_like(x), ag.empty_like(x)
    requests: queue.Queue[int] = queue.Queue()

    def producer() -> None:
        with ag.tenant("hold-ranker"):
            k[2, 32](x, z, 64)              # held: the service's step is open
        requests.put(1)

    with ag.tenant("hold-service", priority="high", exclusive=True):
        worker = threading.Thread(target=producer)
        worker.start()
        with caplog.at_level("WARNING", logger="asyncgpu"):
            assert requests.get(timeout=30) == 1
        k[2, 32](x, y, 64)
    worker.join(30)
    assert not worker.is_alive()
    assert "waited 0.20 s for the exclusive step of 'hold-service'" in caplog.text
    assert ag.tenants()["hold-ranker"].held == 1
    assert y.numpy().tolist() == [3.0] * 64 and z.numpy().tolist() == [3.0] * 64


def test_a_slow_exclusive_step_that_keeps_issuing_holds_the_others_until_it_ends_unwarned(
        k, monkeypatch, caplog):
    """A step open longer than the hold's limit that issues work meanwhile is slow (a long
    service step, or any step on the simulator, whose kernels run at its host waits), not
    waiting for the held launch: the launch waits for the step's end, and nothing is said."""
    monkeypatch.setattr(exclusive, "HOLD_FLOOR_S", 0.2)
    x = ag.array(np.ones(64))
    y, z = ag.empty_like(x), ag.empty_like(x)
    with caplog.at_level("WARNING", logger="asyncgpu"):
        with launch_elsewhere("slow-ranker", lambda: k[2, 32](x, z, 64)) as (opened, launched):
            with ag.tenant("slow-service", priority="high", exclusive=True):
                opened.set()
                for _ in range(8):              # (1 s open: five times the limit)
                    k[2, 32](x, y, 64)
                    float(y[0])
                    time.sleep(0.125)
                assert not launched.is_set()    # held all that time
            assert launched.wait(5)
    assert "waited" not in caplog.text
    assert ag.tenants()["slow-ranker"].held == 1
    assert z.numpy().tolist() == [3.0] * 64


def test_steps_that_wait_for_another_tenants_launches_do_not_wait_longer_each_time(
        k, monkeypatch):
    """Each such step waits once for the hold's limit, then the others' launches go at once
    until it closes; its length, that wait included, is no step length: the limit grew twenty
    times a step (1 s, 44 s, then about half an hour)."""
    import queue

    monkeypatch.setattr(exclusive, "HOLD_FLOOR_S", 0.2)
    x = ag.array(np.ones(64))
    ys = [ag.empty_like(x) for _ in range(3)]
    zs = [ag.empty_like(x) for _ in range(3)]
    requests: queue.Queue[int] = queue.Queue()
    answers: queue.Queue[float] = queue.Queue()

    def server() -> None:
        with ag.tenant("grow-server"):
            for _ in range(3):
                i = requests.get(timeout=30)
                k[2, 32](x, ys[i], 64)      # two launches and a read, held by the open step
                k[2, 32](x, zs[i], 64)
                answers.put(float(ys[i].sum() + zs[i].sum()))

    worker = threading.Thread(target=server)
    worker.start()
    took = []
    for i in range(3):
        with ag.tenant("grow-client", priority="high", exclusive=True):
            start = time.perf_counter()
            requests.put(i)
            assert answers.get(timeout=30) == 2 * 64 * 3.0
            took.append(time.perf_counter() - start)
    worker.join(30)
    assert not worker.is_alive()
    assert max(took) < 5.0, took            # (each about 0.2 s: one wait for the floor)


def test_an_exclusive_step_of_a_thread_that_ended_inside_it_holds_no_one_afterwards(
        k, monkeypatch, caplog):
    monkeypatch.setattr(exclusive, "HOLD_FLOOR_S", 0.5)

    def dies_inside() -> None:
        scope = ag.tenant("dead-detector", priority="high", exclusive=True)
        scope.__enter__()                   # (never left: the thread ends inside the block)

    thread = threading.Thread(target=dies_inside)
    thread.start()
    thread.join()
    x = ag.array(np.ones(64))
    y = ag.empty_like(x)
    with caplog.at_level("WARNING", logger="asyncgpu"):
        start = time.perf_counter()
        with ag.tenant("dead-ranker"):
            for _ in range(4):
                k[2, 32](x, y, 64)
        took = time.perf_counter() - start
    assert "a thread ended inside the exclusive block of tenant 'dead-detector'" in caplog.text
    assert took < 0.4, took                 # (not held: the dead thread's step is closed first)
    assert y.numpy().tolist() == [3.0] * 64


def test_an_exclusive_block_resumed_in_another_thread_closes_its_step_and_holds_no_one(
        k, monkeypatch):
    monkeypatch.setattr(exclusive, "HOLD_FLOOR_S", 0.5)

    def held():
        with ag.tenant("resumed-detector", priority="high", exclusive=True):
            yield

    g = held()
    next(g)                                 # entered in this thread
    said = resumed_in_another_thread(g)
    assert said and "left in a thread that did not enter it" in said[0]
    x = ag.array(np.ones(64))
    y = ag.empty_like(x)
    with launch_elsewhere("resumed-ranker", lambda: k[2, 32](x, y, 64)) as (opened, launched):
        start = time.perf_counter()
        opened.set()
        assert launched.wait(5)
        took = time.perf_counter() - start
    assert took < 0.4, took                 # (not held: the step closed with the block)
    assert ag.tenants()["resumed-ranker"].held == 0
    assert y.numpy().tolist() == [3.0] * 64


def test_other_tenants_keep_one_launch_in_flight_beside_an_exclusive_one(k):
    with ag.tenant("one-detector", exclusive=True):
        pass
    xs = [ag.array(np.full(64, float(i))) for i in range(6)]
    ys = [ag.empty_like(x) for x in xs]
    # (kernels, not the copies in of their inputs)
    with one_in_flight(("kernel",)) as seen, ag.tenant("one-ranker"):
        for x, y in zip(xs, ys):                # independent: would run side by side
            k[2, 32](x, y, 64)
    ag.synchronize()
    assert len(seen) == 6
    assert ag.tenants()["one-ranker"].held >= 1
    for i, y in enumerate(ys):
        assert y.numpy().tolist() == [2.0 * i + 1.0] * 64


def test_an_exclusive_tenant_that_stopped_running_steps_holds_no_one(k, monkeypatch):
    """Held to one launch in flight while the exclusive tenant runs steps; free once it has
    begun none for four of its periods (and the floor, lowered here to 0.05 s once the held
    launches are done: the fixture's floor keeps it active however slow the host)."""
    xs = [ag.array(np.full(64, float(i))) for i in range(6)]
    ys = [ag.empty_like(x) for x in xs]
    rt = current_runtime()
    begun = []
    for _ in range(3):
        begun.append(time.perf_counter())
        with ag.tenant("idle-detector", exclusive=True):
            k[2, 32](xs[0], ys[0], 64)
    with one_in_flight(("kernel",)), ag.tenant("idle-ranker"):
        for x, y in zip(xs, ys):
            k[2, 32](x, y, 64)
    ag.synchronize()
    held = ag.tenants()["idle-ranker"].held
    assert held >= 1
    monkeypatch.setattr(exclusive, "IDLE_FLOOR_S", 0.05)
    period = max(b - a for a, b in zip(begun, begun[1:]))
    time.sleep(4 * period + 0.3)                # (idle now)
    overlapped = []
    launch = rt.backend.launch

    def spy(node, stream):
        if node.tenant and node.kind == "kernel":
            overlapped.append(rt.streams.inflight)
        return launch(node, stream)

    rt.backend.launch = spy
    try:
        with ag.tenant("idle-ranker"):
            for x, y in zip(xs, ys):
                k[2, 32](y, x, 64)
    finally:
        del rt.backend.launch
    ag.synchronize()
    assert ag.tenants()["idle-ranker"].held == held and max(overlapped) > 1
    assert rt.gate is not None                  # (still exclusive: it holds when it runs again)
    for i, x in enumerate(xs):
        assert x.numpy().tolist() == [2.0 * (2.0 * i + 1.0) + 1.0] * 64


def test_without_an_exclusive_tenant_nothing_is_held(k):
    xs = [ag.array(np.full(64, float(i))) for i in range(4)]
    ys = [ag.empty_like(x) for x in xs]
    with ag.tenant("free-detector", priority="high"):
        for x, y in zip(xs, ys):
            k[2, 32](x, y, 64)
    ag.synchronize()
    assert current_runtime().gate is None
    assert ag.tenants()["free-detector"].held == 0


def test_a_launch_waiting_for_its_previous_one_is_held_by_a_step_that_opens_meanwhile(k):
    rt = current_runtime()
    with ag.tenant("race-detector", exclusive=True):
        pass
    x = ag.array(np.ones(64))
    y, z = ag.empty_like(x), ag.empty_like(x)
    waiting, opened = threading.Event(), threading.Event()

    def wait_quietly(event):
        # (the ranker's wait for its previous launch, made without the runtime's lock as on
        # CUDA; the step below opens meanwhile; later waits are the simulator's own)
        del rt.backend.wait_quietly
        waiting.set()
        opened.wait(5)

    def two_launches():
        k[2, 32](x, z, 64)
        k[2, 32](z, z, 64)          # waits for the first (one in flight beside an exclusive)

    rt.backend.wait_quietly = wait_quietly
    with launch_elsewhere("race-ranker", two_launches) as (go, launched):
        go.set()
        assert waiting.wait(5)
        with ag.tenant("race-detector", exclusive=True):
            opened.set()
            time.sleep(0.3)
            assert not launched.is_set()            # not beside the step
            assert ag.tenants()["race-ranker"].kernels == 1
            k[2, 32](x, y, 64)
    assert launched.is_set()
    assert y.numpy().tolist() == [3.0] * 64 and z.numpy().tolist() == [7.0] * 64


def test_a_fault_reported_while_a_launch_waits_at_the_gate_leaves_the_runtime_usable(k):
    rt = current_runtime()
    with ag.tenant("fault-detector", exclusive=True):
        pass
    x = ag.array(np.ones(64))
    y = ag.empty_like(x)
    with ag.tenant("fault-ranker"):
        k[2, 32](x, y, 64)

        def broken(event):
            raise RuntimeError("device lost")

        rt.backend.event_done = broken      # (the gate asks whether the first launch is done)
        try:
            with pytest.raises(RuntimeError, match="device lost"):
                k[2, 32](y, y, 64)
        finally:
            del rt.backend.event_done
        assert not rt._lock._is_owned()     # (the lock the gate took is given back)
        k[2, 32](y, y, 64)
    assert y.numpy().tolist() == [7.0] * 64


def test_a_thread_inside_an_exclusive_step_is_not_held_by_it(k):
    x = ag.array(np.ones(64))
    y = ag.empty_like(x)
    with ag.tenant("nest-detector", exclusive=True):
        with ag.tenant("nest-ranker"):          # nested on the same thread: would deadlock
            k[2, 32](x, y, 64)
    assert y.numpy().tolist() == [3.0] * 64


def test_exclusive_must_be_a_bool_and_a_tenant_keeps_it(k):
    with pytest.raises(ValueError, match="exclusive must be True or False"):
        ag.tenant("bad", exclusive="yes")
    with ag.tenant("keeps", exclusive=True):
        pass
    with pytest.raises(ValueError, match="exclusive=True"):
        with ag.tenant("keeps"):
            pass



def test_others_wait_for_the_work_an_exclusive_step_left_running(k):
    rt = current_runtime()
    x = ag.array(np.ones(64))
    y, z = ag.empty_like(x), ag.empty_like(x)
    with ag.tenant("tail-detector", exclusive=True):
        k[2, 32](x, y, 64)          # left running as the block ends: no read waits for it
    left = rt.tenants[rt.tenant_index("tail-detector", "normal", exclusive=True)].last["*"]
    launch = rt.backend.launch
    finished_first = []

    def spy(node, stream):
        if node.kind == "kernel" and node is not left:
            finished_first.append(left.finished)
        return launch(node, stream)

    rt.backend.launch = spy
    try:
        with ag.tenant("tail-ranker"):
            k[2, 32](x, z, 64)
    finally:
        del rt.backend.launch
    assert finished_first == [True]         # the ranker's kernel came after the detector's
    assert z.numpy().tolist() == [3.0] * 64


def test_the_served_tenants_benchmark_checks_every_mode_and_holds_the_others_when_exclusive(
        monkeypatch):
    from benchmarks import tenants

    # (regulation's profile, search and first stage; its whole check takes the simulator long)
    monkeypatch.setattr(tenants, "SERVED_CHECK_RUNS", 3)
    monkeypatch.setattr(tenants, "CHECK_RUN", 10)
    # (a runtime of its own, as above: the benchmark's exclusive tenant outlives it)
    with ag.configure(backend="sim", sim_seed=2, sim_devices=2, device=1):
        result = tenants.measure_served(ag, "tiny", steps=2, warmup=1, mix=("vec", "bs"),
                                        block=32, num_blocks=1)
        stats = ag.tenants()
    assert list(result["rows"]) == list(tenants.SERVED_MODES)
    assert set(result["alone"]) == {"alone", "alone, exclusive"}
    for row in result["rows"].values():
        assert row["service"]["p99_ms"] >= row["service"]["p50_ms"] > 0
        assert set(row["others"]) == {"bs"}
    assert stats["vec-served-exclusive"].steps == 1 + 2 + 2      # readied, served, alone
    assert stats["bs-served-tenants"].held == 0
    assert stats["bs-served-exclusive"].held > 0
    assert "vec-served-regulated" in result["rows"]["regulated"]["plan"]["profile"]


def test_an_exclusive_step_whose_end_fails_still_lets_the_others_go(k, monkeypatch):
    rt = current_runtime()
    x = ag.array(np.ones(64))
    y, z = ag.empty_like(x), ag.empty_like(x)

    def broken(event, stream):
        raise RuntimeError("record failed")

    with pytest.raises(RuntimeError, match="record failed"):
        with ag.tenant("fail-detector", exclusive=True):
            k[2, 32](x, y, 64)
            monkeypatch.setattr(rt.backend, "record", broken)
    monkeypatch.undo()
    done = []
    worker = threading.Thread(target=lambda: (k[2, 32](x, z, 64), done.append(True)))
    worker.start()
    worker.join(5)
    assert done == [True]
    assert z.numpy().tolist() == [3.0] * 64


def test_a_recorded_function_of_another_tenant_waits_for_an_exclusive_step(k):
    x = ag.array(np.ones(64))
    y, z = ag.empty_like(x), ag.empty_like(x)

    @ag.graph
    def rank(a, out):
        k[2, 32](a, out, 64)

    rank(x, z)                                  # recorded once, outside the step
    opened, launched = threading.Event(), threading.Event()

    def other() -> None:
        opened.wait()
        with ag.tenant("graph-ranker"):
            rank(x, z)
        launched.set()

    worker = threading.Thread(target=other)
    worker.start()
    with ag.tenant("graph-detector", exclusive=True):
        k[2, 32](x, y, 64)
        opened.set()
        time.sleep(0.3)
        assert not launched.is_set()
    worker.join(5)
    assert launched.is_set() and ag.tenants()["graph-ranker"].held == 1
    assert z.numpy().tolist() == [3.0] * 64


def test_library_calls_of_other_tenants_keep_one_in_flight_too(k):
    import asyncgpu.cupy as acp

    with ag.tenant("calls-detector", exclusive=True):
        pass
    xs = [ag.array(np.full(64, float(i))) for i in range(5)]
    with one_in_flight(("kernel", "call")) as seen, ag.tenant("calls-ranker"):
        outs = [acp.multiply(x, 2.0) for x in xs]         # independent library calls
    assert len(seen) == 5
    for i, out in enumerate(outs):
        assert out.numpy().tolist() == [2.0 * i] * 64


def test_on_two_devices_a_launch_pinned_where_no_exclusive_step_runs_is_not_held():
    with ag.configure(backend="sim", sim_seed=3, sim_devices=2, devices="all"):
        k = ag.kernel(const=["x"], out=["y"])(twice)
        with ag.device(0):
            x = ag.array(np.ones(64))
            y = ag.empty_like(x)
        with ag.device(1):
            x1 = ag.array(np.ones(64))
            z1 = ag.empty_like(x1)
        with ag.tenant("dev-detector", exclusive=True), ag.device(0):
            k[2, 32](x, y, 64)          # its steps run on device 0

        def launched_during_a_step(device: int, a, out) -> bool:
            """Whether another thread's launch pinned to ``device`` ran while a step of the
            detector was open (it runs in the end either way)."""
            def launch() -> None:
                with ag.device(device):
                    k[2, 32](a, out, 64)

            with launch_elsewhere(f"dev-ranker-{device}", launch) as (opened, launched):
                with ag.tenant("dev-detector", exclusive=True), ag.device(0):
                    k[2, 32](x, y, 64)
                    opened.set()
                    during = launched.wait(0.5)
            assert launched.is_set()
            return during

        assert launched_during_a_step(1, x1, z1)        # device 1: not held
        z0 = ag.empty_like(x)
        assert not launched_during_a_step(0, x, z0)     # device 0: held until the step ends
        stats = ag.tenants()
        assert stats["dev-ranker-1"].held == 0 and stats["dev-ranker-0"].held == 1
        assert z1.numpy().tolist() == [3.0] * 64 and z0.numpy().tolist() == [3.0] * 64


def test_a_launch_pinned_where_the_open_exclusive_step_launched_is_held_and_elsewhere_not(
        monkeypatch):
    # (a held launch never goes past the step however slow the host: see the fixture k)
    monkeypatch.setattr(exclusive, "HOLD_FLOOR_S", 600.0)
    with ag.configure(backend="sim", sim_seed=3, sim_devices=3, devices="all"):
        k = ag.kernel(const=["x"], out=["y"])(twice)
        xs, outs = [], []
        for d in range(3):
            with ag.device(d):
                xs.append(ag.array(np.ones(64)))
                outs.append(ag.empty(64))
        y = ag.empty(64)
        with ag.tenant("now-detector", exclusive=True), ag.device(0):
            k[2, 32](xs[0], y, 64)      # its first step: device 0 only

        def launched_during_a_step(device: int) -> bool:
            """Whether another thread's launch pinned to ``device`` ran while a step of the
            detector that launched on device 1 (and nowhere else yet) was open."""
            def launch() -> None:
                with ag.device(device):
                    k[2, 32](xs[device], outs[device], 64)

            with launch_elsewhere(f"now-ranker-{device}", launch) as (opened, launched):
                with ag.tenant("now-detector", exclusive=True), ag.device(1):
                    k[2, 32](xs[1], y, 64)
                    opened.set()
                    during = launched.wait(0.5)
            assert launched.is_set()
            return during

        assert not launched_during_a_step(1)    # where the open step runs: held
        assert launched_during_a_step(2)        # no step of the detector used device 2
        assert not launched_during_a_step(0)    # an earlier step's device: held
        stats = ag.tenants()
        assert [stats[f"now-ranker-{d}"].held for d in (1, 2, 0)] == [1, 0, 1]
        assert [o.numpy().tolist() for o in outs] == [[3.0] * 64] * 3


def test_a_plan_makes_a_tenant_exclusive_until_regulation_is_off(k):
    """A regulation plan's exclusive tenant holds the others' launches as its own setting
    would; with regulation off, nothing is held and the tenant keeps the settings it was
    given (entering it with them again is no conflict)."""
    from asyncgpu.core.plan import Plan

    x = ag.array(np.ones(64))
    y, z = ag.empty_like(x), ag.empty_like(x)
    for name in ("planned-detector", "planned-ranker"):
        with ag.tenant(name, priority="high" if name == "planned-detector" else "normal"):
            pass
    ag.regulate(plan=Plan(exclusive=("planned-detector",)),
                tenants=["planned-detector", "planned-ranker"])
    assert ag.regulation().plan.describe().startswith("planned-detector: exclusive")
    with launch_elsewhere("planned-ranker", lambda: k[2, 32](x, z, 64)) as (opened, launched):
        with ag.tenant("planned-detector", priority="high"):
            k[2, 32](x, y, 64)
            opened.set()
            time.sleep(0.3)
            assert not launched.is_set()            # held on the host by the plan's setting
    assert launched.is_set() and ag.tenants()["planned-ranker"].held == 1
    ag.regulate(plan="off")
    assert current_runtime().gate is None
    xs = [ag.array(np.full(64, float(i))) for i in range(4)]
    ys = [ag.empty_like(a) for a in xs]
    with ag.tenant("planned-detector", priority="high"), ag.tenant("planned-ranker"):
        for a, b in zip(xs, ys):
            k[2, 32](a, b, 64)
    ag.synchronize()
    assert ag.tenants()["planned-ranker"].held == 1         # none more
    assert y.numpy().tolist() == [3.0] * 64 and z.numpy().tolist() == [3.0] * 64
    for i, b in enumerate(ys):
        assert b.numpy().tolist() == [2.0 * i + 1.0] * 64


def _served(k, svc, batch, begun_ago, period, length, times, here=False):
    """A step of exclusive tenant ``svc`` (``k`` writing ``y`` from ``x``) and an empty one of
    tenant ``batch``; then the gate made to see ``svc`` served: its steps began ``begun_ago``
    seconds ago (oldest first), every ``period`` seconds, each open ``length``, on another
    thread (``here``: on this one); ``times``: ``batch``'s launches' times alone by kernel
    name, as a plan gives them. Returns the gate, ``batch``'s number and ``x, y, z``."""
    x = ag.array(np.ones(64))
    y, z = ag.empty_like(x), ag.empty_like(x)
    with ag.tenant(svc, exclusive=True):
        k[2, 32](x, y, 64)
    with ag.tenant(batch):
        pass
    rt = current_runtime()
    numbers = {t.name: t.index for t in rt.tenants}
    gate = rt.exclusive_steps
    now = time.perf_counter()
    begun = gate._begun[numbers[svc]]
    gate._thread[numbers[svc]] = threading.get_ident() if here else -1
    begun.clear()
    begun.extend(now - ago for ago in begun_ago)
    gate._period[numbers[svc]], gate._length[numbers[svc]] = period, length
    gate.launch_times = {(numbers[batch], name): s for name, s in times.items()}
    return gate, numbers[batch], (x, y, z)


def test_a_launch_that_would_run_into_the_next_served_step_is_held_for_it_one_that_fits_goes(k):
    """A service (exclusive) of 6 ms steps every 12 ms, its latest begun 10 ms ago: with the
    plan's times alone, another tenant's 4 ms launch, which fits a gap but not the 2 ms left
    of this one, waits for the next step (at most a period, then looks again); a 1 ms launch
    goes, and so do an 8 ms one, longer than any gap (held, it would be held for good), and
    one whose time is not known."""
    gate, batch, _ = _served(k, "ahead-svc", "ahead-batch", (0.022, 0.010), 0.012, 0.006,
                             {"blur": 4e-3, "tiny": 1e-3, "long": 8e-3})
    assert gate._due(threading.get_ident(), batch, "blur") == 0.012
    assert gate._due(threading.get_ident(), batch, "tiny") is None
    assert gate._due(threading.get_ident(), batch, "long") is None
    assert gate._due(threading.get_ident(), batch, "sobel") is None


def test_a_launch_looked_ahead_waits_until_the_step_due_has_begun_and_ended(k):
    # (the service's next step is due now, a gap of 490 ms between its steps: a 200 ms
    # launch would run into it)
    _, _, (x, y, z) = _served(k, "due-svc", "due-batch", (1.0, 0.5), 0.5, 0.01,
                              {"twice": 0.2})
    with launch_elsewhere("due-batch", lambda: k[2, 32](x, z, 64)) as (opened, launched):
        opened.set()
        time.sleep(0.3)
        assert not launched.is_set()                # held, though no step is open
        with ag.tenant("due-svc", exclusive=True):
            k[2, 32](y, y, 64)
            time.sleep(0.2)
            assert not launched.is_set()            # and while the step due runs
        assert launched.wait(5)                     # then it goes: it fits the gap after it
    ag.synchronize()
    assert ag.tenants()["due-batch"].held == 1
    assert y.numpy().tolist() == [7.0] * 64 and z.numpy().tolist() == [3.0] * 64


def test_a_plan_gives_the_gate_its_launches_times_alone_and_off_takes_them_back(k):
    from asyncgpu.core.plan import Op, Plan, TenantProfile

    for name in ("timed-svc", "timed-batch"):
        with ag.tenant(name):
            pass
    ag.regulate(plan=Plan(exclusive=("timed-svc",)), tenants=["timed-svc", "timed-batch"])
    rt = current_runtime()
    assert rt.exclusive_steps.launch_times == {}            # (no profile: nothing to look with)
    ops = (Op("blur", 2e-3, 1.0, 0.0, False, ()), Op("blur", 5e-3, 1.0, 0.0, False, ()),
           Op("sobel", 1e-3, 1.0, 0.0, False, ()))
    plan = Plan(exclusive=("timed-svc",),
                profile=(TenantProfile("timed-batch", "normal", ops),
                         TenantProfile("timed-svc", "normal", (Op("conv", 6e-3, 1.0, 0.0,
                                                                  False, ()),))))
    rt.regulator.apply(plan, measure=False)
    numbers = {t.name: t.index for t in rt.tenants}
    batch, svc = numbers["timed-batch"], numbers["timed-svc"]
    assert rt.exclusive_steps.launch_times == {(batch, "blur"): 5e-3, (batch, "sobel"): 1e-3,
                                               (svc, "conv"): 6e-3}
    ag.regulate(plan="off")
    assert rt.exclusive_steps.launch_times == {}


def test_a_plan_that_cuts_a_launch_in_pieces_gives_the_gate_one_pieces_time():
    from asyncgpu.core.plan import Op, Plan, TenantProfile

    ops = (Op("blur", 8e-3, 1.0, 0.0, True, (), grid=4.0),     # 4 waves: by its grid
           Op("sobel", 2e-3, 1.0, 0.0, True, (), grid=0.5),    # fits at once: by its grid
           Op("scale", 3e-3, 1.0, 0.0, True, ()),              # by its rows
           Op("reduce", 1e-3, 1.0, 0.0, False, ()))            # not splittable
    profile = (TenantProfile("batch", "normal", ops),)
    whole = Plan(profile=profile).launch_times()
    assert whole == {("batch", "blur"): 8e-3, ("batch", "sobel"): 2e-3,
                     ("batch", "scale"): 3e-3, ("batch", "reduce"): 1e-3}
    cut = Plan(profile=profile, splits={"batch": {"blur": 4, "sobel": 2, "scale": 3,
                                                  "reduce": 2}}).launch_times()
    assert cut == pytest.approx({("batch", "blur"): 2e-3, ("batch", "sobel"): 2e-3,
                                 ("batch", "scale"): 1e-3, ("batch", "reduce"): 1e-3})


def test_a_thread_that_serves_the_exclusive_tenant_itself_is_not_held_for_its_next_step(k):
    """One thread runs the service's steps and, between them, another tenant's launch: looked
    ahead, that launch would wait for a step only this thread can begin; it goes."""
    _, _, (x, _, z) = _served(k, "self-svc", "self-batch", (1.0, 0.5), 0.5, 0.01,
                              {"twice": 0.2}, here=True)
    t0 = time.perf_counter()
    with ag.tenant("self-batch"):
        k[2, 32](x, z, 64)
    assert time.perf_counter() - t0 < 0.25              # (not held for a period, 0.5 s)
    ag.synchronize()
    assert z.numpy().tolist() == [3.0] * 64
