"""Tenants on the simulator: each issues on streams of its own, created with its priority, and
counts what it issued and its steps; work shared between tenants is ordered as any other (the
random programs, their steps spread over tenants and threads, equal the serial oracle)."""

from __future__ import annotations

import random
import statistics
import threading

import numpy as np
import programs
import pytest
from hypothesis import HealthCheck, given, settings
from numba import cuda
from test_properties import assert_same, serial
from thread_programs import resumed_in_another_thread

import asyncgpu as ag
from asyncgpu.runtime.current import current_runtime


def twice(x, y, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = 2.0 * x[i] + 1.0


def priorities(name, priority="normal", streams=None):
    """The CUDA priorities of tenant ``name``'s streams (one device), in creation order."""
    rt = current_runtime()
    return [s.handle.priority
            for s in rt.streams.tenant_streams(rt.tenant_index(name, priority, streams))]


def most_urgent():
    return current_runtime().backend.stream_priorities()[1]


@pytest.fixture
def sim():
    with ag.configure(backend="sim", sim_seed=5):
        yield ag.kernel(const=["x"], out=["y"])(twice)


def test_each_tenant_issues_on_its_own_streams_with_its_priority(sim):
    k = sim
    x = ag.array(np.ones(64))
    y, z = ag.empty_like(x), ag.empty_like(x)
    with ag.tenant("own-detector", priority="high"):
        k[2, 32](x, y, 64)
        k[2, 32](x, z, 64)                  # independent: a second stream of its own
    with ag.tenant("own-ranker"):
        k[2, 32](y, z, 64)
    ag.synchronize()
    assert z.numpy().tolist() == [7.0] * 64
    least, greatest = current_runtime().backend.stream_priorities()
    assert priorities("own-detector", "high") == [greatest, greatest]   # its own two, urgent
    assert priorities("own-ranker") == [least]


def test_a_tenant_held_to_one_stream_runs_its_independent_work_in_issue_order(sim):
    k = sim
    xs = [ag.array(np.full(32, float(i))) for i in range(4)]
    ys = [ag.empty_like(x) for x in xs]
    with ag.tenant("one-stream", streams=1):
        for x, y in zip(xs, ys):
            k[1, 32](x, y, 32)              # independent: would take 4 streams otherwise
    assert [float(y[0]) for y in ys] == [1.0, 3.0, 5.0, 7.0]
    assert len(priorities("one-stream", streams=1)) == 1


def test_statistics_count_each_tenants_work_and_time_its_steps(sim):
    k = sim
    x = ag.array(np.ones(64))
    y = ag.empty_like(x)

    default_before = ag.tenants()["default"].kernels

    @ag.tenant("stats-ranker")         # (a runtime keeps its tenants: names of this test)
    def step():
        k[2, 32](x, y, 64)
        k[2, 32](y, x, 64)

    for _ in range(3):
        step()
    with ag.tenant("stats-detector", priority="high"):
        float(y.sum())                      # a library call (and the host reads its result)
    ag.synchronize()
    stats = ag.tenants()
    ranker = stats["stats-ranker"]
    assert (ranker.kernels, ranker.steps, ranker.pending) == (6, 3, 0)
    assert (stats["stats-detector"].calls, stats["stats-detector"].priority) == (1, "high")
    assert stats["default"].kernels == default_before
    latencies = ranker.latencies_s
    assert len(latencies) == 3 and all(t > 0 for t in latencies)   # logical time on sim
    assert ranker.latency_s(0.5) == sorted(latencies)[1]
    for q in (-0.2, 1.5, float("nan"), "0.5"):
        with pytest.raises(ValueError, match=r"q must be a quantile in \[0, 1\]"):
            ranker.latency_s(q)


def test_a_tenant_block_inside_a_recorded_function_owns_its_work_from_the_first_call(sim):
    """The recording issued the launches after the block had ended: the first two calls'
    work was the default tenant's (its streams and priority), the third's the tenant's."""
    k = sim
    x = ag.array(np.ones(64))
    y = ag.empty_like(x)
    default_before = ag.tenants()["default"]
    urgent = ag.tenant("recorded-detector", priority="high")

    @ag.graph
    def step():
        with urgent:
            k[2, 32](x, y, 64)
            k[2, 32](y, x, 64)

    with ag.trace() as t:
        for _ in range(3):
            step()
    ag.synchronize()
    assert x.numpy().tolist() == [127.0] * 64          # (x -> 4x + 3, three times)
    assert {n.tenant for n in t.kernels} == {"recorded-detector"}
    assert [n.kind for n in t.kernels] == ["kernel", "kernel", "graph", "graph"]
    detector, default = ag.tenants()["recorded-detector"], ag.tenants()["default"]
    assert (detector.kernels, detector.graphs, detector.steps) == (2, 2, 3)
    assert (default.kernels, default.graphs) == (default_before.kernels, default_before.graphs)


class _Clock:
    """A host clock for the tenants' steps (``asyncgpu.runtime.tenant_steps.time``) that moves
    ``step`` seconds each time it is read."""

    def __init__(self, step):
        self.now, self.step = 0.0, step

    def perf_counter(self):
        self.now += self.step
        return self.now


def test_steps_closer_than_the_sample_gap_are_timed_a_sample_of_about_one_a_gap():
    from asyncgpu.core.tenants import SAMPLE_GAP_S, Tenant

    fast, slow = Tenant(1, "fast", "normal", 0), Tenant(2, "slow", "normal", 0)
    # (5000 steps a twentieth of the gap apart: 250 gaps)
    timed = [fast.sample(i * SAMPLE_GAP_S / 20) for i in range(5000)]
    assert all(timed[:10])                  # (a new tenant's first steps: each timed)
    assert 0.5 * 250 < sum(timed) < 2 * 250             # about one a gap
    assert fast.unmeasured == timed.count(False)
    assert all(slow.sample(i * 2 * SAMPLE_GAP_S) for i in range(200)) and slow.unmeasured == 0
    # (the sample depends only on the steps' times: a run is repeatable)
    again = Tenant(1, "fast", "normal", 0)
    assert [again.sample(i * SAMPLE_GAP_S / 20) for i in range(5000)] == timed


def test_a_tenant_of_short_steps_times_a_sample_and_counts_the_rest_unmeasured(sim,
                                                                              monkeypatch):
    from asyncgpu.runtime import tenant_steps

    k = sim
    x = ag.array(np.ones(64))
    y = ag.empty_like(x)
    monkeypatch.setattr(tenant_steps, "time", _Clock(1e-3))   # (steps 1 ms apart)
    for _ in range(300):
        with ag.tenant("short-steps"):
            k[2, 32](x, y, 64)
    ag.synchronize()
    stats = ag.tenants()["short-steps"]
    assert stats.steps == 300 and stats.pending == 0
    assert 0 < len(stats.latencies_s) < 150 and all(t > 0 for t in stats.latencies_s)
    assert len(stats.latencies_s) + stats.unmeasured == 300
    assert y.numpy().tolist() == [3.0] * 64            # (timed or not, the work is done)
    ag.configure(step_timing="every")
    for _ in range(50):
        with ag.tenant("short-steps"):
            k[2, 32](x, y, 64)
    ag.synchronize()
    every = ag.tenants()["short-steps"]
    assert (every.steps, every.unmeasured) == (350, stats.unmeasured)
    assert len(every.latencies_s) == len(stats.latencies_s) + 50


def test_a_service_that_never_asks_for_statistics_keeps_few_steps_unmeasured(sim):
    from asyncgpu.runtime.tenant_steps import SETTLE_EVERY

    k = sim
    ag.configure(step_timing="every")      # (each step timed: none left out by the sample)
    x = ag.array(np.ones(64))
    y = ag.empty_like(x)
    rt = current_runtime()
    steps = 5 * SETTLE_EVERY + 3
    for i in range(steps):
        with ag.tenant("service"):
            k[2, 32](x, y, 64)
        if i % 8 == 0:
            float(y[0])                     # (the device catches up now and then)
    tenant = rt.tenants[rt.tenant_index("service", "normal")]
    assert len(tenant.pending) <= 2 * SETTLE_EVERY     # measured as it went, events let go
    ag.synchronize()
    stats = ag.tenants()["service"]
    assert (stats.steps, stats.pending, len(stats.latencies_s)) == (steps, 0, steps)


def test_a_long_running_tenant_records_the_events_of_its_measured_steps_again(sim,
                                                                             monkeypatch):
    """Once a tenant's steps are measured, its later steps time themselves with the same
    events: a service does not make two new events per step for as long as it runs, and its
    latencies are the same as with new events each step (the simulator's clock is logical)."""
    from asyncgpu.runtime.tenant_steps import SETTLE_EVERY

    k = sim
    x = ag.array(np.ones(64))
    y = ag.empty_like(x)
    from asyncgpu.backends.sim.backend import SimBackend

    made = []                                   # (the timing events made)
    timing_event, clock_base = SimBackend.timing_event, SimBackend.clock_base
    monkeypatch.setattr(SimBackend, "timing_event",
                        lambda self, device=0: made.append(device) or timing_event(self, device))
    monkeypatch.setattr(SimBackend, "clock_base", lambda self, device=0, wait=True, event=None: (
        event is None and made.append(device)) or clock_base(self, device, wait, event))

    ag.configure(step_timing="every")      # (each step timed: none left out by the sample)

    def run(name):
        made.clear()
        for i in range(4 * SETTLE_EVERY):
            with ag.tenant(name):
                k[2, 32](x, y, 64)
            if i % 8 == 0:
                float(y[0])                     # (the device catches up now and then)
        ag.synchronize()
        return len(made), ag.tenants()[name].latencies_s

    reused, latencies = run("reusing")
    assert reused <= 2 * SETTLE_EVERY + 4       # (the steps before the first measured ones)
    from asyncgpu.core.tenants import Tenant

    # (the same steps, every event a new one)
    monkeypatch.setattr(Tenant, "spare_event", lambda self, device: None)
    fresh, reference = run("fresh")
    assert fresh >= 2 * 4 * SETTLE_EVERY
    assert len(latencies) == len(reference) == 4 * SETTLE_EVERY
    assert min(latencies) > 0
    assert statistics.median(latencies) == pytest.approx(statistics.median(reference), rel=0.25)


def test_a_long_running_tenant_keeps_the_latencies_of_its_latest_steps(sim, monkeypatch):
    from asyncgpu.core import tenants

    monkeypatch.setattr(tenants, "LATENCY_WINDOW", 16)     # (read when a tenant is made)
    k = sim
    ag.configure(step_timing="every")      # (each step timed: none left out by the sample)
    x = ag.array(np.ones(64))
    y = ag.empty_like(x)
    for _ in range(40):
        with ag.tenant("long-running"):
            k[2, 32](x, y, 64)
    ag.synchronize()
    stats = ag.tenants()["long-running"]
    assert (stats.steps, stats.pending, len(stats.latencies_s)) == (40, 0, 16)
    rt = current_runtime()
    tenant = rt.tenants[rt.tenant_index("long-running", "normal")]
    assert tenant.measured == 40
    assert tenant.latencies_after(30) == list(stats.latencies_s)[-10:]
    assert tenant.latencies_after(40) == [] and tenant.latencies_after(0) == list(
        stats.latencies_s)


def test_a_scope_left_before_one_a_generator_entered_in_it_ends_its_own_step(sim):
    """A generator's block in a tenant's scope outlives the scope it was entered in: each scope
    ends its own step, the thread issues for the scope still open in between, and once both
    are left, for the default tenant again."""
    k = sim
    x = ag.array(np.ones(64))
    y = ag.empty_like(x)
    before = ag.tenants()["default"].kernels

    def inner_steps():
        with ag.tenant("gen-inner"):
            k[2, 32](x, y, 64)
            yield

    g = inner_steps()
    with ag.tenant("gen-outer"):
        next(g)                             # the inner scope is entered inside the outer one
    k[2, 32](x, y, 64)                      # after the outer block: the inner one is open
    with pytest.raises(StopIteration):
        next(g)
    k[2, 32](x, y, 64)                      # both left: the default tenant's
    stats = ag.tenants()
    assert (stats["gen-outer"].steps, stats["gen-inner"].steps) == (1, 1)
    assert (stats["gen-outer"].kernels, stats["gen-inner"].kernels) == (0, 2)
    assert stats["default"].kernels == before + 1


def test_a_tenant_block_resumed_in_another_thread_raises_and_gives_the_entering_thread_its_tenant_back(
        sim):
    """A generator holding a tenant's block, resumed in another thread: that thread gets a
    clear RuntimeError, the step ends, and the thread that entered the block issues for the
    tenant it had before it again (here the default one)."""
    k = sim
    x = ag.array(np.ones(64))
    y = ag.empty_like(x)
    before = ag.tenants()["default"].kernels

    def held():
        with ag.tenant("resumed-elsewhere"):
            yield

    g = held()
    next(g)
    said = resumed_in_another_thread(g)
    assert said and "left in a thread that did not enter it" in said[0]
    k[2, 32](x, y, 64)                      # outside any block: the default tenant's
    stats = ag.tenants()
    assert stats["resumed-elsewhere"].steps == 1
    assert stats["resumed-elsewhere"].kernels == 0
    assert stats["default"].kernels == before + 1


def test_scopes_nest_and_restore_the_threads_tenant(sim):
    k = sim
    x = ag.array(np.ones(32))
    y = ag.empty_like(x)
    before = ag.tenants()["default"].kernels
    outer = ag.tenant("nest-outer")
    with outer:
        with ag.tenant("nest-inner"):
            k[1, 32](x, y, 32)
        k[1, 32](y, x, 32)
    k[1, 32](x, y, 32)
    stats = ag.tenants()
    assert [stats[n].kernels for n in ("nest-outer", "nest-inner")] == [1, 1]
    assert [stats[n].steps for n in ("nest-outer", "nest-inner")] == [1, 1]
    assert stats["default"].kernels == before + 1


def test_an_exception_in_a_step_ends_it_and_gives_the_thread_its_tenant_back(sim):
    k = sim
    x = ag.array(np.ones(32))
    y = ag.empty_like(x)
    before = ag.tenants()["default"].kernels
    with pytest.raises(ZeroDivisionError):
        with ag.tenant("raising"):
            k[1, 32](x, y, 32)
            1 / 0
    k[1, 32](y, x, 32)                      # the default tenant's again
    ag.synchronize()
    stats = ag.tenants()
    assert (stats["raising"].kernels, stats["raising"].steps) == (1, 1)
    assert stats["default"].kernels == before + 1
    assert x.numpy().tolist() == [7.0] * 32


def test_a_step_across_a_change_of_backend_ends_without_the_retired_runtime():
    with ag.configure(backend="sim", sim_seed=4):
        with ag.tenant("across"):
            ag.configure(backend="sim", sim_devices=2, devices="all")   # another runtime
            x = ag.array(np.ones(8))
            assert float(x.sum()) == 8.0
    assert "across" not in ag.tenants()         # the new runtime never saw it


@pytest.mark.parametrize("name,priority,match", [
    ("", "normal", "non-empty string"), ("default", "normal", "other than 'default'"),
    ("t", "urgent", "priority must be one of normal, high"), (3, "normal", "non-empty string"),
    ("shared by a, b", "normal", "not beginning with 'shared by '"),
])
def test_a_bad_tenant_is_refused_by_name(name, priority, match):
    with pytest.raises(ValueError, match=match):
        ag.tenant(name, priority)


def test_a_tenant_decorating_a_coroutine_or_generator_function_is_refused_with_the_fix():
    async def serve(request):
        return request

    def batches(n):
        yield n

    async def stream(n):
        yield n

    for fn, kind in ((serve, "coroutine"), (batches, "generator"), (stream, "coroutine")):
        with pytest.raises(TypeError, match=f"is a {kind} function, whose body runs after the "
                                            "call returns, outside the tenant; put `with "
                                            "asyncgpu.tenant"):
            ag.tenant("decorated")(fn)


@pytest.mark.parametrize("streams", [0, -1, 1.5, "2"])
def test_a_bad_stream_count_is_refused_by_name(streams):
    with pytest.raises(ValueError, match=r"asyncgpu.tenant\('t'\): streams must be a positive int"):
        ag.tenant("t", streams=streams)


def test_a_split_or_pointer_naming_no_declared_kernel_is_warned_after_the_first_step(sim,
                                                                                      caplog):
    """A misspelt name leaves a split or a pointer without effect: said once, naming it, after
    the tenant's first step; names of declared kernels and recordings are not."""
    k = sim                                 # (twice: y = 2x + 1)
    x, y = ag.array(np.arange(64.0)), ag.empty(64)

    @ag.graph
    def replayed():
        k[2, 32](x, y, 64)

    replayed()
    with caplog.at_level("WARNING", logger="asyncgpu"):
        for _ in range(2):
            with ag.tenant("typo", split={"twcie": 2},
                           after={"twice": ("other", "conv"),
                                  replayed.name: ("other", "*")}):
                k[2, 32](x, y, 64)
    said = [r.getMessage() for r in caplog.records if "declared" in r.getMessage()]
    assert len(said) == 2 and "names 'conv'" in said[0] and "names 'twcie'" in said[1]
    assert y.tolist() == (2 * np.arange(64.0) + 1).tolist()


def test_a_tenant_keeps_its_first_priority_and_the_runtime_stays_usable(sim):
    k = sim
    x = ag.array(np.ones(32))
    y = ag.empty_like(x)
    with ag.tenant("first-priority", priority="high"):
        k[1, 32](x, y, 32)
    with pytest.raises(ValueError, match="has priority 'high'"), ag.tenant("first-priority"):
        pass
    with ag.tenant("first-priority", priority="high"):
        k[1, 32](y, x, 32)
    assert x.numpy().tolist() == [7.0] * 32
    assert ag.tenants()["first-priority"].kernels == 2


def test_tenants_keep_their_streams_across_a_reconfigure(sim):
    k = sim
    x = ag.array(np.ones(32))
    y = ag.empty_like(x)
    with ag.tenant("kept", priority="high"):
        k[1, 32](x, y, 32)
    ag.configure(max_streams=2)
    with ag.tenant("kept", priority="high"):
        k[1, 32](y, x, 32)
    assert x.numpy().tolist() == [7.0] * 32
    assert set(priorities("kept", "high")) == {most_urgent()}


def test_a_step_spanning_a_configure_that_rebuilds_the_backend_is_counted_without_a_latency(sim):
    # (its start would be on the old backend's clock, its end on the new one's: the 200
    # launches before it made the old clock run ahead, and the latency came out 0.0)
    k = sim
    x = ag.array(np.ones(32))
    y = ag.empty_like(x)
    for _ in range(200):
        k[1, 32](x, y, 32)
    ag.synchronize()
    with ag.tenant("spanning"):
        k[1, 32](x, y, 32)
        ag.configure(sim_seed=6)            # a new backend, the runtime and tenants kept
        k[1, 32](y, x, 32)
    ag.synchronize()
    stats = ag.tenants()["spanning"]
    assert stats.steps == 1 and stats.latencies_s == () and stats.pending == 0
    with ag.tenant("spanning"):             # the next step is measured on the new clock
        k[1, 32](x, y, 32)
    ag.synchronize()
    stats = ag.tenants()["spanning"]
    assert stats.steps == 2 and len(stats.latencies_s) == 1 and stats.latencies_s[0] > 0
    assert x.numpy().tolist() == [7.0] * 32


def test_tenants_on_several_devices_get_a_pool_per_device():
    with ag.configure(backend="sim", sim_devices=2, devices="all", device_policy="round-robin"):
        k = ag.kernel(const=["x"], out=["y"])(twice)
        xs = [ag.array(np.ones(32)) for _ in range(4)]
        ys = [ag.empty_like(x) for x in xs]
        with ag.tenant("spread"):
            for x, y in zip(xs, ys):
                k[1, 32](x, y, 32)
        assert sum(float(y.sum()) for y in ys) == 4 * 32 * 3.0
        rt = current_runtime()
        t = rt.tenant_index("spread", "normal")
        pools = {(s.pool, s.device) for s in rt.streams.streams}
        assert {(2 * t, 0), (2 * t + 1, 1)} <= pools     # its pools: device 0, device 1


# -- shared data ---------------------------------------------------------------------------------
NAMES = ("a", "b", "c")


def _run_as_tenants(ag, steps, init, pointers=False, exclusive=False):
    """``programs.run`` with step ``i`` issued by tenant ``NAMES[i % 3]`` (b with priority
    high, and with ``exclusive`` b exclusive; with ``pointers``, b's launches wait for c's
    latest and c's for a's: every program kernel is named ``prog``)."""
    # (a tenant keeps its first settings)
    suffix = "-pointed" if pointers else "-exclusive" if exclusive else ""
    waits_for = {"b": "c", "c": "a"} if pointers else {}
    scopes = [ag.tenant(n + suffix, priority="high" if n == "b" else "normal",
                        after={"prog": (waits_for[n] + suffix, "prog")} if n in waits_for
                        else None, exclusive=exclusive and n == "b")
              for n in NAMES]
    return programs.run(ag, steps, init, lambda i: scopes[i % 3])


@pytest.mark.parametrize("strategy", ["random", "pct", "starve"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_random_programs_spread_over_tenants_equal_serial(strategy, steps):
    init = programs.initial()
    expected = serial(ag, steps, init)
    got = programs.run_async(ag, _run_as_tenants, steps, init, strategy, 3)
    assert_same(got, expected)


#: (a runtime of its own for the exclusive tenant, device 1 of two simulated: a tenant stays
#: exclusive, and the others keep one launch in flight, as long as its runtime)
VARIANTS = {"pointers": ({"pointers": True}, {}),
            "exclusive": ({"exclusive": True}, {"sim_devices": 2, "device": 1})}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("strategy", ["random", "starve"])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_random_programs_over_tenants_with_pointers_or_an_exclusive_one_equal_serial(
        variant, strategy, steps):
    tenants, options = VARIANTS[variant]
    init = programs.initial()
    expected = serial(ag, steps, init)
    got = programs.run_async(ag, lambda *a: _run_as_tenants(*a, **tenants), steps, init,
                             strategy, 3, **options)
    assert_same(got, expected)


@pytest.mark.pure
def test_a_tenant_not_waiting_for_another_tenants_writes_is_caught():
    from asyncgpu.testing.mutants import planted

    init = programs.initial()
    caught = 0
    for seed in range(10):
        steps = programs.random_program(random.Random(seed), 18)
        expected = serial(ag, steps, init)
        try:
            with planted("tenant_blind"):
                got = programs.run_async(ag, _run_as_tenants, steps, init, "random", seed)
        except ag.AsyncGPUError:
            caught += 1
            continue
        caught += [[a.tolist() for a in part] for part in got] != [
            [a.tolist() for a in part] for part in expected]
    assert caught >= 5, f"the planted bug failed {caught} of 10 programs"


def test_threads_as_tenants_sharing_a_chain_stay_ordered():
    with ag.configure(backend="sim", sim_seed=2, sim_strategy="random"):
        k = ag.kernel(const=["x"], out=["y"])(twice)
        arrays = [ag.array(np.zeros(32))] + [ag.empty(32) for _ in range(6)]
        barrier = threading.Barrier(3)
        errors = []

        def worker(t):
            try:
                with ag.tenant(f"chain{t}", priority="high" if t == 0 else "normal"):
                    barrier.wait()
                    for i in range(t, 6, 3):    # each link reads the previous thread's
                        while True:
                            with lock:
                                if done[i]:
                                    break
                        k[1, 32](arrays[i], arrays[i + 1], 32)
                        with lock:
                            done[i + 1] = True
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        lock = threading.Lock()
        done = [True] + [False] * 6
        threads = [threading.Thread(target=worker, args=(t,)) for t in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        expected = 0.0
        for _ in range(6):
            expected = 2 * expected + 1
        assert arrays[6].numpy().tolist() == [expected] * 32
        assert [ag.tenants()[f"chain{t}"].kernels for t in range(3)] == [2, 2, 2]


@pytest.mark.slow
def test_the_tenants_benchmark_checks_every_mode_on_the_simulator(fresh_runtime):
    from benchmarks import tenants

    with ag.configure(backend="sim", sim_seed=1):
        result = tenants.measure(ag, "small", rounds=1, warmup=0, mix=("vec:tiny", "hits:tiny"),
                                 block=32, num_blocks=1, check_rounds=0)  # (scales their own)
        assert [r["mode"] for r in result["rows"]] == list(tenants.MODES)
        assert "no plan" not in result["plan"]["plan"]      # (regulated reached its plan)
        # (and so did its twin whose steps one thread issues, tenant by tenant)
        assert "no plan" not in result["plan_one_thread"]["plan"]
        assert all(set(r["latency"]) == {"vec:tiny", "hits:tiny"} for r in result["rows"])
        assert result["rows"][0]["speedup"] == 1.0
        bound = result["bound"]                 # the longest workload alone, and what it allows
        assert bound["ms"] > 0 and bound["speedup"] == result["rows"][0]["ms"] / bound["ms"]
        stats = ag.tenants()
        assert (stats["vec:tiny-tenant"].priority,
                stats["hits:tiny-tenant"].priority) == ("high", "normal")
        assert stats["vec:tiny-tenant"].steps == 2          # an untimed round, then the timed one
        assert stats["vec:tiny-tenant"].kernels > 0
        assert len(priorities("vec:tiny-one-stream", streams=1)) == 1
        # one thread: HITS, which reads on the host between its launches, ran its whole step
        # when issued; VEC's launches, then its read
        assert stats["hits:tiny-one-thread"].steps == stats["vec:tiny-one-thread"].steps == 2
        assert stats["vec:tiny-regulated-one"].steps >= 2    # (profiled, then timed)


def test_the_tenants_benchmark_times_its_steps_with_the_warm_objects_frozen(monkeypatch,
                                                                           fresh_runtime):
    """A full garbage collection walks every object with the GIL held (up to 110 ms once Numba
    and CuPy are loaded), stalling every tenant's thread at once: the timed steps run with
    what the warm-up made frozen out of the collector, and the process is left as it was."""
    import gc

    from benchmarks import tenants

    frozen = {True: [], False: []}
    step = tenants._Member.step

    def spy(self, timed):
        frozen[timed].append(gc.get_freeze_count())
        step(self, timed)

    monkeypatch.setattr(tenants._Member, "step", spy)
    before = gc.get_freeze_count()
    with ag.configure(backend="sim", sim_seed=3):
        tenants.measure(ag, "tiny", rounds=1, warmup=1, mix=("vec", "bs"), block=32,
                        num_blocks=1, check_rounds=0)
    assert frozen[False][:2] == [before, before]        # each workload's warm-up step
    assert frozen[True] and min(frozen[True]) > before
    assert gc.get_freeze_count() == before


def test_the_tenants_benchmark_with_recorded_steps_checks_every_mode_and_regulates(fresh_runtime):
    from benchmarks import tenants

    with ag.configure(backend="sim", sim_seed=2):
        graphs = ag.statistics().graphs_replayed
        result = tenants.measure(ag, "tiny", rounds=1, warmup=1, mix=("vec", "bs"),
                                 block=32, num_blocks=1, recorded=True, check_rounds=0)
        assert result["recorded"] and "no plan" not in result["plan"]["plan"]
        assert ag.statistics().graphs_replayed > graphs


def test_the_tenants_benchmark_times_the_modes_in_turns(monkeypatch, fresh_runtime):
    """With turns, every mode is made ready first, then each turn runs one block of every
    mode's rounds (the larger blocks first), the order rotated each turn, so a slow spell of
    the host weighs on all."""
    from benchmarks import tenants

    calls = []
    threads, one_thread = tenants._threads, tenants._one_thread

    def spy(real):
        def run(members, rounds, scopes):
            calls.append((scopes[0].name if scopes else "threads", rounds))
            real(members, rounds, scopes)
        return run

    monkeypatch.setattr(tenants, "_threads", spy(threads))
    monkeypatch.setattr(tenants, "_one_thread", spy(one_thread))
    with ag.configure(backend="sim", sim_seed=4):
        known = ag.tenants().get("vec-tenant")      # (the runtime outlives other tests' runs)
        result = tenants.measure(ag, "tiny", rounds=4, warmup=1, mix=("vec", "bs"), block=32,
                                 num_blocks=1, check_rounds=0, turns=3)
        steps = ag.tenants()["vec-tenant"].steps - (known.steps if known else 0)
        assert steps == 1 + 4           # an untimed round, then 4 in three turns
    modes = ["vec-one-stream", "threads", "vec-tenant", "vec-one-thread", "vec-regulated",
             "vec-regulated-one"]
    timed = calls[-18:]
    # (sequential, which runs on this thread, is not seen here: it leads the first turn, ends
    # the second, and is second to last in the third, where one stream each ends)
    assert timed == ([(m, 2) for m in modes] + [(m, 1) for m in modes]
                     + [(m, 1) for m in modes[1:] + modes[:1]])
    assert all(n == 1 for _, n in calls[:-18])              # readying: untimed single rounds
    assert result["turns"] == 3
    assert all(len(row["turn_round_ms"]) == 3 for row in result["rows"])
    assert result["rows"][0]["speedup"] == 1.0


def test_a_recorded_step_replays_on_its_tenants_streams(sim):
    k = sim
    x = ag.array(np.ones(64))
    y = ag.empty_like(x)

    @ag.tenant("recorded-tenant", priority="high")
    @ag.graph
    def step():
        k[2, 32](x, y, 64)
        k[2, 32](y, x, 64)

    for _ in range(3):
        step()
    assert x.numpy().tolist() == [127.0] * 64          # x -> 4x + 3, three times from 1
    stats = ag.tenants()["recorded-tenant"]
    assert (stats.kernels, stats.graphs, stats.steps) == (2, 2, 3)   # recorded, then replayed
    assert set(priorities("recorded-tenant", "high")) == {most_urgent()}


# -- splitting ------------------------------------------------------------------------------------
def square(x, y, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] = x[i] * x[i]


@pytest.mark.parametrize("memory", ["explicit", "managed"])
@pytest.mark.parametrize("strategy", ["random", "reverse", "starve"])
def test_a_split_kernel_runs_in_pieces_in_order_and_equals_the_whole(memory, strategy):
    with ag.configure(backend="sim", memory=memory, sim_strategy=strategy, sim_seed=3):
        k = ag.kernel(const=["x"], out=["y"], elementwise="n")(square)
        other = ag.kernel(const=["x"], out=["y"])(twice)
        host = np.arange(1000, dtype=np.float64)
        x = ag.array(host)                  # host-current: the pieces' copies come first
        y = ag.empty_like(x)
        small_in = ag.array(np.ones(32))
        small_out = ag.empty_like(small_in)
        with ag.instrument(programs.Edges()) as seen:
            with ag.tenant(f"splitter-{memory}-{strategy}", split={"square": 4}):
                k[2, 32](x, y, 1000)
            with ag.tenant(f"small-{memory}-{strategy}", priority="high"):
                other[1, 32](small_in, small_out, 32)
        assert y.numpy().tolist() == (host * host).tolist()
        assert small_out.numpy().tolist() == [3.0] * 32
        pieces = [(n, reasons) for n, reasons in seen.kernels if n.name == "square"]
        assert len(pieces) == 4
        assert [r.count("split") for _, r in pieces] == [0, 1, 1, 1]    # each after the last
        assert len({n.stream.index for n, _ in pieces}) == 1             # one stream, in order
        stats = ag.tenants()[f"splitter-{memory}-{strategy}"]
        assert stats.kernels == 4


def test_splitting_a_kernel_not_declared_elementwise_is_refused_by_name(sim):
    k = sim                                 # twice: not element-wise
    x = ag.array(np.ones(32))
    y = ag.empty_like(x)
    with ag.tenant("bad-split", split={"twice": 2}):
        with pytest.raises(ag.ArgumentError, match="kernel 'twice'.*not declared element-wise"):
            k[1, 32](x, y, 32)
        k2 = ag.kernel(const=["x"], out=["y"])(square)
        k2[1, 32](x, y, 32)                 # other kernels run whole, and the runtime is fine
    assert y.numpy().tolist() == [1.0] * 32


@pytest.mark.parametrize("split", [{"k": 1}, {"k": "2"}, {3: 2}, [("k", 2)]])
def test_a_bad_split_is_refused_by_name(split):
    with pytest.raises(ValueError, match=r"split must map kernel names to a number of pieces"):
        ag.tenant("t", split=split)


def add_one(x, y, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] = x[i] + 1.0


@pytest.mark.parametrize("memory", ["explicit", "managed"])
@pytest.mark.parametrize("strategy", ["random", "reverse", "starve"])
def test_a_pointer_makes_a_tenants_kernel_wait_for_anothers_and_results_stay_right(memory,
                                                                                    strategy):
    with ag.configure(backend="sim", memory=memory, sim_strategy=strategy, sim_seed=4):
        conv = ag.kernel(const=["x"], out=["y"])(square)
        gemm = ag.kernel(const=["x"], out=["y"])(add_one)
        a_in, a_out = ag.array(np.arange(64.0)), ag.empty(64)
        b_in, b_out = ag.array(np.ones(64)), ag.empty(64)
        detector = ag.tenant(f"det-{memory}-{strategy}")
        ranker = ag.tenant(f"rank-{memory}-{strategy}",
                           after={"twice": (f"det-{memory}-{strategy}", "square")})
        other = ag.kernel(const=["x"], out=["y"])(twice)
        with ag.instrument(programs.Edges()) as seen:
            for _ in range(3):
                with detector:
                    conv[2, 32](a_in, a_out, 64)
                with ranker:
                    gemm[2, 32](b_in, b_out, 64)    # not pointed: no wait
                    other[2, 32](b_in, b_out, 64)   # waits for the latest square
        assert a_out.numpy().tolist() == (np.arange(64.0) ** 2).tolist()
        assert b_out.numpy().tolist() == [3.0] * 64
        by_name = {}
        for n, reasons in seen.kernels:
            by_name.setdefault(n.name, []).append(reasons)
        # (data the two tenants do not share: the only edge between them is the pointer)
        assert all("pointer" not in r for r in by_name["square"] + by_name["add_one"])
        pointed = [r.count("pointer") for r in by_name["twice"]]
        assert set(pointed) <= {0, 1} and len(pointed) == 3 and 1 in pointed


def test_a_pointer_waits_only_for_an_unfinished_launch_and_names_it_in_the_trace(sim):
    conv = ag.kernel(const=["x"], out=["y"])(square)
    other = ag.kernel(const=["x"], out=["y"])(twice)
    x, y, z = ag.array(np.ones(32)), ag.empty(32), ag.empty(32)
    with ag.instrument(programs.Edges()) as seen:
        with ag.tenant("pointed-det"):
            conv[1, 32](x, y, 32)
        with ag.tenant("pointed-rank", after={"twice": ("pointed-det", "square")}):
            other[1, 32](x, z, 32)          # square is in flight (the simulator is lazy)
        ag.synchronize()
        with ag.tenant("pointed-rank", after={"twice": ("pointed-det", "square")}):
            other[1, 32](x, z, 32)          # square finished: nothing to wait for
    twice_edges = [r for n, r in seen.kernels if n.name == "twice"]
    assert [r.count("pointer") for r in twice_edges] == [1, 0]


def two_devices_step(prefix):
    """A recorded step writing one array on each of two devices (one graph per device once
    replayed), and the kernel ``twice`` with arrays of its own."""
    slow = ag.kernel(const=["x"], out=["y"])(square)
    other = ag.kernel(const=["x"], out=["y"])(twice)
    xs = [ag.array(np.full(64, 2.0)) for _ in range(2)]
    ys = [ag.empty(64) for _ in range(2)]
    a, b = ag.array(np.ones(64)), ag.empty(64)

    def body():
        for d in range(2):
            with ag.device(d):
                slow[2, 32](xs[d], ys[d], 64)
    body.__qualname__ = f"{prefix}_step"
    return ag.graph(body), other, a, b, ys


@pytest.mark.parametrize("named", ["recording", "*"])
def test_on_several_devices_a_pointer_holds_behind_every_graph_of_a_replay(named):
    with ag.configure(backend="sim", sim_seed=4, sim_devices=2, devices=2):
        step, other, a, b, ys = two_devices_step(f"pointed-{named[0]}")
        target = step.__qualname__ if named == "recording" else "*"
        step_tenant = ag.tenant(f"graphs-{named}")
        waiting = ag.tenant(f"waits-{named}", after={"twice": (f"graphs-{named}", target)})
        with ag.trace() as t:
            for _ in range(3):
                with step_tenant:
                    step()
                with waiting:
                    other[2, 32](a, b, 64)
            ag.synchronize()
        assert step.outcome == "replayed"
        assert [y.numpy().tolist() for y in ys] == [[4.0] * 64] * 2
        assert b.numpy().tolist() == [3.0] * 64
        graphs = {n.name for n in t.nodes if n.kind == "graph"}
        assert graphs == {f"{step.__qualname__} on device {d}" for d in range(2)}
        by_id = {n.id: n for n in t.nodes}
        held = [[by_id[p] for p, reason, _ in n.parents if reason == "pointer"]
                for n in t.kernels if n.name == "twice"]
        # (the first run is eager: its kernels are the latest launches on their devices)
        assert [sorted(p.name for p in h) for h in held[1:]] == [sorted(graphs)] * 2
        twice = [n for n in t.kernels if n.name == "twice"]
        for n, h in zip(twice, held):
            assert all(p.end_s <= n.start_s for p in h)


def test_on_several_devices_a_replay_waits_for_its_tenants_pointer_naming_the_recording():
    with ag.configure(backend="sim", sim_seed=4, sim_devices=2, devices=2):
        step, other, a, b, _ = two_devices_step("held")
        ag.tenant("held-before")
        held = ag.tenant("held-graphs", after={step.__qualname__: ("held-before", "twice")})
        with ag.instrument(programs.Edges()) as seen:
            for _ in range(3):
                with ag.tenant("held-before"):
                    other[2, 32](a, b, 64)
                with held:
                    step()
        ag.synchronize()
        assert [r.count("pointer") for _, r in seen.graphs] == [1, 1, 1, 1]


@pytest.mark.parametrize("after", [{"k": "t"}, {"k": ("t",)}, {"k": ("", "j")}, [("k", "t")]])
def test_a_bad_pointer_is_refused_by_name(after):
    with pytest.raises(ValueError, match=r"after must map a kernel name to the \(tenant, "
                                         r"kernel\) its launches wait for"):
        ag.tenant("t", after=after)


def test_a_kernel_both_split_and_pointed_is_refused():
    with pytest.raises(ValueError, match="kernel 'k' is both split and after"):
        ag.tenant("t", split={"k": 2}, after={"k": ("u", "j")})


@pytest.mark.pure
def test_a_pointer_whose_wait_is_dropped_is_caught_where_data_is_shared():
    from asyncgpu.testing.mutants import planted

    caught = 0
    for seed in range(8):
        with ag.configure(backend="sim", sim_strategy="random", sim_seed=seed):
            conv = ag.kernel(const=["x"], out=["y"])(square)
            other = ag.kernel(const=["x"], out=["y"])(twice)
            x, shared, out = ag.array(np.full(32, 3.0)), ag.empty(32), ag.empty(32)
            try:
                with planted("pointer_blind"):
                    with ag.tenant(f"blind-det-{seed}"):
                        conv[1, 32](x, shared, 32)
                    with ag.tenant(f"blind-rank-{seed}",
                                   after={"twice": (f"blind-det-{seed}", "square")}):
                        other[1, 32](shared, out, 32)   # reads what square writes
                    got = out.numpy().tolist()
            except ag.AsyncGPUError:
                caught += 1
                continue
            caught += got != [19.0] * 32
    assert caught >= 4, f"the planted bug failed {caught} of 8 runs"


def test_a_trace_names_the_tenant_of_each_node(sim):
    k = sim
    x = ag.array(np.ones(64))
    y, z = ag.empty_like(x), ag.empty_like(x)
    with ag.trace() as t:
        with ag.tenant("traced-tenant"):
            k[2, 32](x, y, 64)
            read = float(y[0])                      # a host access of the tenant's too
        k[2, 32](x, z, 64)
        ag.synchronize()
    assert read == 3.0
    assert [n.tenant for n in t.kernels] == ["traced-tenant", "default"]
    assert {n.tenant for n in t.nodes if n.kind.startswith("host")} == {"traced-tenant"}
    events = t.chrome_trace()["traceEvents"]
    assert {e["args"]["tenant"] for e in events if e.get("ph") == "i"} == {"traced-tenant",
                                                                           "default"}


def test_a_tenants_mix_can_hold_inception_whose_steps_are_checked():
    """INCEPTION (small inception blocks: a small-batch CNN's shape) is a workload of the
    tenants benchmark: its step runs the chain and reads the output, checked against NumPy."""
    from benchmarks import tenants

    with ag.configure(backend="sim", sim_seed=2):
        member = tenants._Member(ag, "inception", "tiny", 32, 2, False)
        member.step(True)
        member.step(True)
        assert len(member.latencies) == 2
        member.check()                      # the first and the latest step's output
        member.step(False)
        member.results[-1] = member.results[-1] + 1.0
        with pytest.raises(AssertionError, match="inception gave a wrong result"):
            member.check()


def test_a_balanced_round_runs_each_workload_for_about_one_step_of_the_longest():
    from benchmarks import tenants

    assert tenants.balanced([0.024, 0.006, 0.0046]) == [1, 4, 5]
    assert tenants.balanced([0.0025, 0.006, 0.00043]) == [2, 1, 14]
    assert tenants.balanced([0.005, 0.005]) == [1, 1]
    assert tenants.balanced([0.01, 0.0]) == [1, 1]          # (a step too quick to time)


def test_the_tenants_benchmark_balanced_and_without_priorities_runs_each_round_as_told(
        monkeypatch, fresh_runtime):
    """``--balance --no-priority``: every mode runs each workload's ``repeats`` steps a round,
    the bound counts them, and no tenant has priority high (the modes that run steps each
    their own way: on one thread, a thread each, one thread issuing all)."""
    from benchmarks import tenants

    monkeypatch.setattr(tenants, "balanced", lambda medians: [2, 1])
    modes = ("sequential", "tenants", "one thread")
    monkeypatch.setattr(tenants, "MODES", modes)
    timed = []
    taken = tenants._Member.taken

    def count(self):
        latencies = taken(self)
        timed.append((self.name, len(latencies)))
        return latencies

    monkeypatch.setattr(tenants._Member, "taken", count)
    with ag.configure(backend="sim", sim_seed=5):
        result = tenants.measure(ag, "tiny", rounds=1, warmup=1, mix=("bs:tiny", "vec:tiny"),
                                 block=32, check_rounds=0, balance=True, priority=False)
        stats = ag.tenants()
    assert result["repeats"] == {"bs:tiny": 2, "vec:tiny": 1}
    assert result["high_priority"] is None
    for suffix in ("tenant", "one-thread"):
        assert stats[f"bs:tiny-{suffix}"].priority == stats[f"vec:tiny-{suffix}"].priority \
            == "normal"
    # (an untimed round to make the tenants, then the timed one)
    assert (stats["bs:tiny-tenant"].steps, stats["vec:tiny-tenant"].steps) == (2 * 2, 2)
    assert (stats["bs:tiny-one-thread"].steps, stats["vec:tiny-one-thread"].steps) == (4, 2)
    # each mode's timed round: 2 steps of B&S, 1 of VEC (alone: the rounds, one step each)
    assert [row["mode"] for row in result["rows"]] == list(modes)
    per_mode = timed[-2 * len(modes):]
    assert per_mode == [("bs:tiny", 2), ("vec:tiny", 1)] * len(modes)
    alone = result["alone"]["bs:tiny"]["p50_ms"]
    assert result["bound"]["ms"] >= 2 * alone               # (B&S's 2 steps, with resets)


def test_steps_are_measured_in_order_and_a_later_step_waits_for_an_earlier_one():
    """A tenant's steps are measured oldest first, each once all its ends completed: one
    still running holds the later ones back, so the latencies come in step order; the events
    of a measured step are kept to be recorded again."""
    from asyncgpu.core.tenants import Tenant

    done = {"s1", "e1", "s2", "s3", "e3"}       # (step 2's end has not completed)
    times = {"e1": 0.004, "e2": 0.002, "e2b": 0.003, "e3": 0.001}

    def elapsed(start, end):
        return times[end] if start in done and end in done else None

    t = Tenant(1, "service", "normal", 0)
    t.pending = [({0: "s1"}, [(0, "e1")]), ({0: "s2"}, [(0, "e2"), (0, "e2b")]),
                 ({0: "s3"}, [(0, "e3")])]
    t.settle(elapsed)
    assert (list(t.latencies), t.measured, len(t.pending)) == ([0.004], 1, 2)
    assert t.spare_event(0) == "e1" and t.spare_event(0) == "s1"
    done.update({"e2", "e2b"})
    t.settle(elapsed)                           # (its latency: the latest of its two ends)
    assert (list(t.latencies), t.measured, t.pending) == ([0.004, 0.003, 0.001], 3, [])
