"""SM partitions (``asyncgpu.tenant(..., sms=N)``) on the simulator: each tenant's SMs are its
own, a request that does not fit is refused by name and leaves the runtime usable, results are
those of the unpartitioned program, and a recorded function is refused in a partitioned tenant
(its graph would run on every SM). Where the kernels run is checked on the GPU
(``tests/gpu/test_gpu_partitions.py``)."""

from __future__ import annotations

import numpy as np
import programs
import pytest
from hypothesis import HealthCheck, given, settings
from numba import cuda
from test_properties import assert_same, serial

import asyncgpu as ag
from asyncgpu.core.partitions import GRAIN, SmLedger
from asyncgpu.core.plan import Op, TenantProfile
from asyncgpu.runtime.current import current_runtime


def add_one(x, y, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] = x[i] + 1.0


pytestmark = pytest.mark.usefixtures("fresh_runtime")


def test_partitions_take_disjoint_groups_rounded_up_and_a_request_that_does_not_fit_none():
    ledger = SmLedger([GRAIN] * 16)
    assert ledger.reserve("a", 36) == [0, 1, 2, 3, 4]       # 40 SMs
    assert ledger.reserve("b", 8) == [5]
    assert ledger.reserve("a", 99) == [0, 1, 2, 3, 4]       # (made once: the same)
    with pytest.raises(ValueError, match=r"tenant\('c', sms=81\).*80 of them.*at most 80"):
        ledger.reserve("c", 81)
    assert ledger.free_sms() == 80 and "c" not in ledger.owners
    assert ledger.reserve("c", 80) == list(range(6, 16))
    assert ledger.free_sms() == 0
    ledger.release("b")
    ledger.release("b")                                     # (none: nothing)
    assert ledger.free_sms() == 8 and ledger.sms_of("b") == 0
    assert ledger.reserve("d", 8) == [5]                    # (its group, free again)


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_partitioned_tenants_give_the_unpartitioned_results(memory):
    with ag.configure(backend="sim", memory=memory, sim_strategy="random", sim_seed=11):
        k = ag.kernel(const=["x"], out=["y"])(add_one)
        x, y, z = ag.array(np.arange(256.0)), ag.empty(256), ag.empty(256)
        a = ag.tenant(f"part-a-{memory}", sms=40)
        b = ag.tenant(f"part-b-{memory}", sms=48, priority="high")
        for _ in range(3):
            with a:
                k[4, 32](x, y, 256)
            with b:
                k[4, 32](y, z, 256)     # (reads what a wrote: ordered across partitions)
        assert np.array_equal(z.numpy(), np.arange(256.0) + 2)
        assert ag.tenants()[b.name].steps == 3


@pytest.mark.parametrize("sms", [0, -8, 2.5, "40", True])
def test_an_sms_other_than_a_positive_int_is_refused_by_name(sms):
    with pytest.raises(ValueError, match=r"asyncgpu.tenant\('bad'\): sms must be a positive int"):
        ag.tenant("bad", sms=sms)


def test_more_sms_than_are_free_is_refused_by_name_and_the_runtime_stays_usable():
    with ag.configure(backend="sim"):
        k = ag.kernel(const=["x"], out=["y"])(add_one)
        x, y = ag.array(np.arange(64.0)), ag.empty(64)
        with ag.tenant("big", sms=100):
            k[2, 32](x, y, 64)
        with pytest.raises(ValueError, match=r"tenant\('more', sms=40\).*ask for at most 24"):
            with ag.tenant("more", sms=40):
                pass
        assert "more" not in ag.tenants()
        with ag.tenant("more", sms=24):     # (what is left: made now, with those settings)
            k[2, 32](y, x, 64)
        assert np.array_equal(x.numpy(), np.arange(64.0) + 2)     # (y = x + 1, then x = y + 1)


def test_a_tenant_keeps_the_partition_it_was_first_given():
    with ag.configure(backend="sim"):
        with ag.tenant("kept", sms=16):
            pass
        with pytest.raises(ValueError, match=r"sms=32\): this tenant has .*sms=16"):
            with ag.tenant("kept", sms=32):
                pass
        with pytest.raises(ValueError, match=r"sms=None\): this tenant has .*sms=16"):
            with ag.tenant("kept"):
                pass


def test_a_recorded_function_is_refused_in_a_partitioned_tenant_and_runs_outside_it():
    with ag.configure(backend="sim"):
        k = ag.kernel(const=["x"], out=["y"])(add_one)
        x, y = ag.array(np.arange(64.0)), ag.empty(64)

        @ag.graph
        def step():
            k[2, 32](x, y, 64)

        with pytest.raises(ag.RecordingError, match=r"recorded function '.*step' called in "
                                                    r"tenant 'walled', which runs on SMs"):
            with ag.tenant("walled", sms=16):
                step()
        for _ in range(3):          # (outside the tenant: recorded, replayed)
            step()
        assert np.array_equal(y.numpy(), np.arange(64.0) + 1)
        stat = ag.statistics()
        assert stat.graphs_replayed >= 1


def test_a_partitioned_tenant_entered_inside_a_recorded_function_is_refused():
    with ag.configure(backend="sim"):
        k = ag.kernel(const=["x"], out=["y"])(add_one)
        x, y = ag.array(np.arange(64.0)), ag.empty(64)
        with ag.tenant("walled", sms=16):
            k[2, 32](x, y, 64)

        @ag.graph
        def step():
            with ag.tenant("walled", sms=16):
                k[2, 32](y, x, 64)

        for _ in range(3):      # (every call: recording it or replaying it would leave the SMs)
            with pytest.raises(ag.RecordingError, match=r"tenant\('walled'\) entered inside a "
                                                        r"recording: .*sms=16"):
                step()
        assert ag.tenants()["walled"].graphs == 0
        assert np.array_equal(x.numpy(), np.arange(64.0))   # (nothing of the body ran)
        with ag.tenant("walled", sms=16):                   # (outside: the tenant still runs)
            k[2, 32](y, x, 64)
        assert np.array_equal(x.numpy(), np.arange(64.0) + 2)


def test_a_recorded_function_in_a_tenant_a_plan_partitioned_runs_unrecorded(caplog):
    """A regulation plan never makes a working program fail: in a tenant the plan runs on SMs
    of its own, a recorded function (whose graph would run on every SM) runs its body
    unrecorded, said once; it raised RecordingError. Once the plan is off it records again."""
    with ag.configure(backend="sim"):
        k = ag.kernel(const=["x"], out=["y"])(add_one)
        x, y = ag.array(np.arange(64.0)), ag.empty(64)
        planned = ag.tenant("planned")

        @ag.graph
        def step():
            k[2, 32](x, y, 64)

        with planned:
            step()
        ag.regulate(plan=ag.Plan(partitions={"planned": 16}))
        with caplog.at_level("WARNING", logger="asyncgpu"):
            for _ in range(3):
                with planned:
                    step()
        assert caplog.text.count("runs unrecorded in tenant 'planned'") == 1
        assert step.outcome == "inline" and ag.tenants()["planned"].kernels == 1 + 3
        ag.regulate(plan="off")
        for _ in range(2):
            with planned:
                step()
        assert step.outcome == "replayed"
        assert np.array_equal(y.numpy(), np.arange(64.0) + 1)


def test_partitions_on_every_virtual_device():
    with ag.configure(backend="sim", sim_devices=2):
        with ag.tenant("everywhere", sms=64):
            pass
        ledgers = current_runtime().backend._sms
        assert len(ledgers) == 2 and all(ledger.free_sms() == 64 for ledger in ledgers)


def test_a_reconfigured_runtime_keeps_its_tenants_partitions():
    with ag.configure(backend="sim", memory="explicit"):
        k = ag.kernel(const=["x"], out=["y"])(add_one)
        x, y = ag.array(np.arange(64.0)), ag.empty(64)
        with ag.tenant("lasting", sms=64):
            k[2, 32](x, y, 64)
        with ag.configure(memory="managed"):            # (a new backend: partitions again)
            with ag.tenant("lasting", sms=64):
                k[2, 32](y, x, 64)
            with pytest.raises(ValueError, match="ask for at most 64"):
                with ag.tenant("newcomer", sms=72):
                    pass
        assert np.array_equal(x.numpy(), np.arange(64.0) + 2)


def test_the_tenants_benchmark_runs_the_workloads_partitioned_and_checks_them():
    from benchmarks import tenants

    with ag.configure(backend="sim", sim_seed=5):
        result = tenants.measure(ag, "tiny", rounds=1, warmup=0, mix=("vec", "bs"), block=32,
                                 num_blocks=1, check_rounds=0, partitions=True)
        assert [r["mode"] for r in result["rows"]] == [*tenants.MODES, "partitioned"]
        ledger = current_runtime().backend._sms[0]
        assert {name: ledger.sms_of(name) for name in ledger.owners} == {
            "vec-partitioned": 64, "bs-partitioned": 64}       # (132 SMs: 64 each)
        assert ag.tenants()["vec-partitioned"].priority == "high"
        with pytest.raises(ValueError, match="eager steps only"):
            tenants.measure(ag, "tiny", rounds=1, mix=("vec", "bs"), recorded=True,
                            partitions=True)


def test_a_tenant_moved_into_a_partition_and_back_keeps_its_order_and_results():
    with ag.configure(backend="sim", sim_strategy="random", sim_seed=9):
        k = ag.kernel(const=["x"], out=["y"])(add_one)
        x, y = ag.array(np.arange(64.0)), ag.empty(64)
        moved = ag.tenant("moved")
        with moved:
            k[2, 32](x, y, 64)              # (its streams made, on any SM)
        rt = current_runtime()
        index = rt.tenant_index("moved", "normal")
        streams = rt.streams.tenant_streams(index)
        with rt._lock:                      # (as a regulation plan moves it)
            rt.partition_tenant(index, 16)
        assert rt.tenants[index].partition == 16 and "moved" in rt.backend._sms[0].owners
        assert rt.streams.tenant_streams(index) == streams     # (the same streams, new handles)
        with moved:
            k[2, 32](y, x, 64)
            ag.graph(lambda: k[2, 32](x, y, 64))()      # (a plan's partition: unrecorded)
        with rt._lock:
            rt.partition_tenant(index, None)
        with moved:
            k[2, 32](x, y, 64)
        assert np.array_equal(y.numpy(), np.arange(64.0) + 3)


def test_a_partition_a_tenant_leaves_is_free_for_others_and_it_can_come_back_resized():
    with ag.configure(backend="sim", sim_strategy="random", sim_seed=3):
        k = ag.kernel(const=["x"], out=["y"])(add_one)
        x, y = ag.array(np.arange(64.0)), ag.empty(64)
        rt = current_runtime()
        index = rt.tenant_index("leaving", "normal")
        with rt._lock:
            rt.partition_tenant(index, 96)
        with ag.tenant("leaving"):
            k[2, 32](x, y, 64)
        ledger = rt.backend._sms[0]
        assert ledger.free_sms() == 32
        with pytest.raises(ValueError, match="ask for at most 32"):
            with ag.tenant("newcomer", sms=40):
                pass
        with rt._lock:
            rt.partition_tenant(index, None)        # (the plan dropped it)
        assert ledger.free_sms() == 128 and rt.tenants[index].partition is None
        with ag.tenant("newcomer", sms=40):         # (its SMs are free again)
            k[2, 32](y, x, 64)
        with rt._lock:
            rt.partition_tenant(index, 16)          # (back, on what is left: another size)
        assert ledger.sms_of("leaving") == 16 and ledger.free_sms() == 72
        with ag.tenant("leaving"):
            k[2, 32](x, y, 64)
        with rt._lock:
            with pytest.raises(ValueError, match="ask for at most 88"):
                rt.partition_tenant(index, 96)      # (does not fit: it runs on any SM)
        assert rt.tenants[index].partition is None and ledger.free_sms() == 88
        with ag.tenant("leaving"):
            k[2, 32](y, x, 64)
        assert np.array_equal(x.numpy(), np.arange(64.0) + 4)


def test_tenants_a_plan_puts_in_one_partition_share_it_until_the_last_one_leaves():
    """A plan's ``shared`` tenants run in one partition of the SMs it names for them, beside
    the high tenant's own; moved out one by one (as a plan that drops it moves them), the
    partition is given back only once none of them is left in it."""
    with ag.configure(backend="sim", sim_strategy="random", sim_seed=4):
        k = ag.kernel(const=["x"], out=["y"])(add_one)
        x, y, z, w = ag.array(np.arange(64.0)), ag.empty(64), ag.empty(64), ag.empty(64)
        hi, a, b = ag.tenant("sh-hi", priority="high"), ag.tenant("sh-a"), ag.tenant("sh-b")
        for scope in (hi, a, b):
            with scope:                     # (each tenant exists once entered)
                pass
        plan = ag.Plan(partitions={"sh-hi": 8, "sh-a": 64, "sh-b": 64}, shared=("sh-a", "sh-b"))
        assert plan.describe() == "sh-hi: on 8 SMs of its own; sh-a, sh-b: on 64 SMs they share"
        ag.regulate(plan=plan)              # (the tenants the plan names)
        rt = current_runtime()
        ledger = rt.backend._sms[0]
        shared = plan.partition("sh-a")[0]
        assert shared == plan.partition("sh-b")[0] != "sh-a"
        assert {n: ledger.sms_of(n) for n in ledger.owners} == {"sh-hi": 8, shared: 64}
        tenants = {t.name: t for t in rt.tenants}
        assert [tenants[n].partition_name for n in ("sh-hi", "sh-a", "sh-b")] == [
            "sh-hi", shared, shared]
        for _ in range(2):
            with a:
                k[2, 32](x, y, 64)
            with b:
                k[2, 32](y, z, 64)          # (reads what a wrote: ordered in the partition)
            with hi:
                k[2, 32](z, w, 64)          # (and across partitions)
        assert np.array_equal(w.numpy(), np.arange(64.0) + 3)
        with rt._lock:
            rt.partition_tenant(tenants["sh-a"].index, None)
        assert ledger.sms_of(shared) == 64 and tenants["sh-b"].partition == 64
        with b:
            k[2, 32](x, z, 64)              # (b still runs in it)
        ag.regulate(plan="off")             # (b, the last one, leaves: given back)
        assert ledger.owners == {} and ledger.free_sms() == 128
        assert all(tenants[n].partition is None for n in ("sh-hi", "sh-a", "sh-b"))
        assert np.array_equal(z.numpy(), np.arange(64.0) + 1)


def test_a_late_lead_gets_sms_for_its_largest_launch_and_the_others_share_the_rest():
    """The regulation's partition remedy: the lead as many SMs as its largest launch has
    blocks (whole groups), the other tenants one partition of the rest, without pointers; none
    for a lead whose launches fill more than half the device."""
    with ag.configure(backend="sim"):
        for name in ("rem-hi", "rem-a", "rem-b"):
            with ag.tenant(name, priority="high" if name == "rem-hi" else "normal"):
                pass
        ag.regulate(plan=ag.Plan(), tenants=["rem-hi", "rem-a", "rem-b"])
        rt = current_runtime()
        lead, a, b = (rt.tenant_index(n, "high" if n == "rem-hi" else "normal")
                      for n in ("rem-hi", "rem-a", "rem-b"))

        def kept(lead_blocks):
            def ops(*blocks):
                return tuple(Op(f"k{i}", 1e-3, 0.5, 0.1, False, (), 0.5, n)
                             for i, n in enumerate(blocks))
            return ag.Plan(after={"rem-a": {"k0": ("rem-hi", "k0")}}, profile=(
                TenantProfile("rem-hi", "high", ops(4, lead_blocks)),
                TenantProfile("rem-a", "normal", ops(500)),
                TenantProfile("rem-b", "normal", ops(300, 20))))

        plan = rt.regulator._partition_plan(kept(33), lead, [a, b])
        assert plan.partitions == {"rem-hi": 40, "rem-a": 88, "rem-b": 88}
        assert plan.shared == ("rem-a", "rem-b") and plan.after == {}
        assert rt.regulator._partition_plan(kept(67), lead, [a, b]) is None
        ag.regulate(plan="off")


@pytest.mark.parametrize("strategy", ["random", "starve"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_random_programs_over_tenants_moved_in_and_out_of_partitions_equal_serial(strategy,
                                                                                   steps):
    """Steps spread over three tenants, one of them moved into a partition or out of it every
    other step (as a regulation plan moves them), with the others' work in flight: results
    equal the serial run's, and the checker sees no unordered pair."""
    init = programs.initial()
    expected = serial(ag, steps, init)

    def run(ag, steps, init):
        rt = current_runtime()
        names = [f"{n}-moving" for n in "abc"]
        scopes = [ag.tenant(name) for name in names]

        def scope(i):
            if i % 2 == 1:
                index = rt.tenant_index(names[i % 3], "normal")
                with rt._lock:
                    rt.partition_tenant(index, None if rt.tenants[index].partition else 16)
            return scopes[i % 3]

        return programs.run(ag, steps, init, scope)

    got = programs.run_async(ag, run, steps, init, strategy, 5)
    assert_same(got, expected)


def test_a_tenants_work_in_flight_is_done_before_its_streams_move():
    """The stream manager orders a tenant's launches on one stream by the stream itself (no
    event wait): a stream that gets a new handle must have nothing left in flight on the old
    one, or a launch after the move runs unordered with one before it."""
    with ag.configure(backend="sim", sim_strategy="lazy", sim_seed=3):
        k = ag.kernel(const=["x"], out=["y"])(add_one)
        x, y, z = ag.array(np.arange(64.0)), ag.empty(64), ag.empty(64)
        mover = ag.tenant("mover", streams=1)
        with mover:
            k[2, 32](x, y, 64)              # (lazy: still in flight)
        rt = current_runtime()
        index = rt.tenant_index("mover", "normal", 1)
        assert rt.streams.inflight >= 1
        with rt._lock:
            rt.partition_tenant(index, 16)
        with mover:
            k[2, 32](y, z, 64)              # (same stream, new handle: after the one before)
        assert np.array_equal(z.numpy(), np.arange(64.0) + 2)
