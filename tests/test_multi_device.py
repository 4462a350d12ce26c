"""Several devices in one runtime, on the simulator's virtual devices.

Each virtual device has a memory of its own (a copy the runtime forgot reads poisoned or old
bytes) and the happens-before checker sees every device's copy as a buffer of its own, so the
random programs of ``programs.py`` equal to the serial oracle under every device policy and
schedule strategy mean both "the right bytes were where each node ran" and "every copy was
ordered". Planted bugs (a peer copy skipped, a stale location kept) must be caught.
"""

from __future__ import annotations

import random

import numpy as np
import programs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import cuda
from test_properties import assert_same, serial
from test_recorder import _launches, _run_rounds

from asyncgpu.core.placement import HOST_BIT, Placement, default_bandwidth, device_bit
from asyncgpu.testing.mutants import planted

POLICIES = ("round-robin", "stream-aware", "min-transfer-size", "min-min", "min-max")


def several(n, policy="round-robin", **options):
    return dict(sim_devices=n, devices="all", device_policy=policy, **options)


@pytest.fixture
def four():
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=11, **several(4)):
        yield ag


def twice(x, y, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = 2.0 * x[i] + 1.0


# -- what a user writes ----------------------------------------------------------------------
def test_chunks_spread_over_every_device_and_sum_to_the_serial_answer(four):
    ag = four
    kernel = ag.kernel(const=["x"], out=["y"])(twice)
    host_x = np.arange(4000, dtype=np.float64)
    parts = [ag.array(chunk) for chunk in np.array_split(host_x, 8)]
    outs = [ag.empty_like(p) for p in parts]
    for p, o in zip(parts, outs):
        kernel[16, 64](p, o, p.shape[0])
    total = sum(float(o.sum()) for o in outs)
    assert total == float((2.0 * host_x + 1.0).sum())
    stats = ag.statistics()
    # 8 kernels round-robin, each sum where its chunk is: 4 nodes per device
    assert dict(stats.placed) == {0: 4, 1: 4, 2: 4, 3: 4}
    assert stats.copies_peer == 0           # every chunk stayed where it was made


def test_the_last_of_the_most_devices_one_runtime_takes_keeps_its_writes():
    import asyncgpu as ag
    from asyncgpu.core.config import MAX_DEVICES

    with ag.configure(backend="sim", sim_seed=3, **several(MAX_DEVICES)):
        kernel = ag.kernel(twice)
        x, y = ag.array(np.arange(4.0)), ag.zeros(4)
        with ag.device(MAX_DEVICES - 1):
            kernel[1, 4](x, y, 4)
        assert y.numpy().tolist() == [1.0, 3.0, 5.0, 7.0]
    for too_many in (dict(sim_devices=MAX_DEVICES + 1),
                     dict(sim_devices=4, devices=MAX_DEVICES + 1),
                     dict(sim_devices=4, devices=list(range(MAX_DEVICES + 1)))):
        with pytest.raises(ValueError, match=f"(from 1 to|more than) {MAX_DEVICES}"):
            ag.configure(backend="sim", **too_many)


def test_device_numbers_may_be_numpys_integers_or_a_range():
    import asyncgpu as ag

    for devices in ([np.int64(1), np.int64(2)], range(1, 3), (1, 2)):
        with ag.configure(backend="sim", sim_devices=4, devices=devices):
            assert ag.options().devices == (1, 2)
            assert all(type(d) is int for d in ag.options().devices)


def _placed_on(ag):
    a = ag.zeros(4)
    ag.kernel(twice)[1, 4](a, a, 4)
    return a.device.id


def _held_on_device_1(ag):
    """A generator suspended inside ``with ag.device(1):``."""
    def pinned_generator():
        with ag.device(1):
            yield

    held = pinned_generator()
    next(held)
    return held


def test_a_device_block_left_out_of_order_by_a_generator_leaves_the_later_one_in_force(four):
    ag = four
    held = _held_on_device_1(ag)
    with ag.device(2):
        held.close()                            # leaves device(1)'s block inside device(2)'s
        assert [_placed_on(ag) for _ in range(3)] == [2, 2, 2]
    assert len({_placed_on(ag) for _ in range(4)}) == 4     # no pin left: round robin
    with ag.configure(devices=2):               # (no block of this thread is open)
        pass


def test_a_device_block_left_in_another_thread_is_refused_and_pins_nothing_more(four):
    import threading

    ag = four
    held = _held_on_device_1(ag)
    said = []

    def close():
        try:
            held.close()
        except RuntimeError as exc:
            said.append(str(exc))

    closer = threading.Thread(target=close)
    closer.start()
    closer.join()
    assert said and "left in a thread that did not enter it" in said[0]
    assert len({_placed_on(ag) for _ in range(4)}) == 4     # unpinned at once: round robin
    with ag.device(2):
        assert _placed_on(ag) == 2
    assert len({_placed_on(ag) for _ in range(4)}) == 4
    with ag.configure(devices=2):               # (no block is open anywhere)
        pass


def test_a_device_block_closed_from_another_thread_puts_its_thread_back_on_its_earlier_pin(four):
    import threading

    ag = four
    with ag.device(3):
        held = _held_on_device_1(ag)            # device(1)'s block inside device(3)'s
        assert _placed_on(ag) == 1
        closer = threading.Thread(target=lambda: pytest.raises(RuntimeError, held.close))
        closer.start()
        closer.join()
        assert [_placed_on(ag) for _ in range(3)] == [3, 3, 3]
        with pytest.raises(ag.DeviceError, match=r"inside asyncgpu.device\(3\)"):
            ag.configure(devices=2)             # (this thread is still inside device(3))
    assert len({_placed_on(ag) for _ in range(4)}) == 4


def test_a_device_object_can_be_entered_again_and_decorates_a_function(four):
    ag = four
    three = ag.device(3)
    with three:
        with three:
            assert _placed_on(ag) == 3
        assert _placed_on(ag) == 3
    with three:
        assert _placed_on(ag) == 3

    @ag.device(2)
    def step():
        return _placed_on(ag)

    assert step() == step() == 2
    with pytest.raises(ag.DeviceError, match=r"device\(-1\): a device number is >= 0"):
        with ag.device(-1):
            pass


def test_a_pinned_block_runs_on_its_device_and_copies_its_inputs_there(four):
    ag = four
    kernel = ag.kernel(const=["x"], out=["y"])(twice)
    x = ag.array(np.arange(64, dtype=np.float64))
    y = ag.empty_like(x)
    z = ag.empty_like(x)
    with ag.device(2):
        kernel[1, 64](x, y, 64)
    with ag.device(3):
        kernel[1, 64](y, z, 64)             # y is current on device 2 only: a peer copy
    assert z.numpy().tolist() == (4.0 * np.arange(64) + 3.0).tolist()
    stats = ag.statistics()
    assert dict(stats.placed) == {2: 1, 3: 1}
    assert (stats.copies_peer, stats.bytes_peer) == (1, 64 * 8)
    assert stats.copies_to_device == 2      # x from the host to device 2, y from 2 to 3


def test_a_write_makes_the_writers_copy_the_only_current_one(four):
    ag = four
    kernel = ag.kernel(const=["x"], out=["y"])(twice)
    add = ag.kernel(twice)                  # read-write y: needs y's current bytes
    x = ag.array(np.ones(32))
    y = ag.array(np.zeros(32))
    with ag.device(0):
        add[1, 32](x, y, 32)                # y read and written on device 0
    with ag.device(1):
        add[1, 32](y, x, 32)                # reads y (copied from 0), writes x on device 1
        kernel[1, 32](x, y, 32)             # writes y on device 1: device 0's copy is old
    with ag.device(0):
        add[1, 32](y, x, 32)                # needs y from device 1, not its own stale copy
    expected_y = 2.0 * (2.0 * 3.0 + 1.0) + 1.0
    assert y.numpy().tolist() == [expected_y] * 32
    assert x.numpy().tolist() == [2.0 * expected_y + 1.0] * 32


def test_a_host_read_fetches_from_the_device_holding_the_bytes(four):
    ag = four
    kernel = ag.kernel(const=["x"], out=["y"])(twice)
    x = ag.array(np.arange(16, dtype=np.float64))
    y = ag.empty_like(x)
    with ag.device(3):
        kernel[1, 16](x, y, 16)
    assert y[5] == 11.0
    y[0:4] = -1.0                           # a partial host write of a device-only array
    with ag.device(1):
        kernel[1, 16](y, x, 16)
    assert x.numpy().tolist() == [-1.0] * 4 + [2.0 * (2.0 * i + 1.0) + 1.0
                                              for i in range(4, 16)]


def test_library_calls_run_where_their_data_is(four):
    ag = four
    kernel = ag.kernel(const=["x"], out=["y"])(twice)
    x = ag.array(np.arange(100, dtype=np.float64))
    y = ag.empty_like(x)
    with ag.device(2):
        kernel[1, 128](x, y, 100)
    before = dict(ag.statistics().placed)
    total = float(y.sum())
    assert total == float((2.0 * np.arange(100) + 1.0).sum())
    after = dict(ag.statistics().placed)
    assert after[2] == before[2] + 1 and sum(after.values()) == sum(before.values()) + 1
    assert ag.statistics().copies_peer == 0


def test_a_recorded_function_is_replayed_as_one_graph_per_device_and_stays_right(four):
    ag = four
    outcomes = recorded_spread(ag, 4, 64, 64)
    # first run placed launch by launch, then 4 graphs side by side and one after them
    assert outcomes == [("recorded", 0)] + [("replayed", 5)] * 3
    assert dict(ag.statistics().placed) == {0: 8, 1: 4, 2: 4, 3: 4}


def recorded_spread(ag, count, n, block):
    """A recorded step on a runtime of ``count`` devices (round-robin): ``twice`` on ``count``
    arrays of ``n`` elements, one per device, then the first's and the last's results added on
    the first device; called 4 times, the sum checked each time. Returns (outcome, graphs
    launched) of each call."""
    kernel = ag.kernel(const=["x"], out=["y"])(twice)
    add = ag.kernel(const=["x", "y"], out=["out"])(_add)
    host = [np.arange(n, dtype=np.float64) + k for k in range(count)]
    xs = [ag.array(h) for h in host]
    ys = [ag.empty_like(x) for x in xs]
    total = ag.empty_like(xs[0])
    grid = (n + block - 1) // block

    @ag.graph
    def step():
        for x, y in zip(xs, ys):
            kernel[grid, block](x, y, n)            # one per device
        add[grid, block](ys[0], ys[-1], total, n)   # needs the last device's result on the first

    outcomes = []
    for _ in range(4):
        before = ag.statistics().graphs_replayed
        step()
        outcomes.append((step.outcome, ag.statistics().graphs_replayed - before))
        assert total.numpy().tolist() == (2 * host[0] + 1 + 2 * host[-1] + 1).tolist()
    return outcomes


def _add(x, y, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] + y[i]


def test_a_launch_pinned_inside_a_recording_keeps_its_device_when_replayed(four):
    ag = four
    kernel = ag.kernel(const=["x"], out=["y"])(twice)
    x = ag.array(np.ones(32))
    y = ag.empty_like(x)

    @ag.graph
    def step():
        with ag.device(2):
            kernel[1, 32](x, y, 32)

    for _ in range(3):
        step()
        assert y.numpy().tolist() == [3.0] * 32
    assert step.outcome == "replayed"
    assert dict(ag.statistics().placed) == {2: 3}


def test_launches_reading_imported_memory_keep_their_pinned_devices_when_replayed(four):
    """The imported array, first among the arguments, stays where its producer put it: each
    launch's device is that of the pin, at the first run and at every replay."""
    from test_interop_import import CpuProducer

    ag = four
    kernel = ag.kernel(const=["x"], out=["y"])(twice)
    imported = ag.asarray(CpuProducer(np.arange(16.0)))
    ys = []
    for d in range(4):
        with ag.device(d):
            ys.append(ag.zeros(16))

    @ag.graph
    def step():
        for d in range(4):
            with ag.device(d):
                kernel[1, 32](imported, ys[d], 16)

    for _ in range(3):
        before = dict(ag.statistics().placed)
        step()
        after = ag.statistics().placed
        assert {d: after.get(d, 0) - before.get(d, 0) for d in range(4)} == \
            {0: 1, 1: 1, 2: 1, 3: 1}
    assert step.outcome == "replayed"
    for y in ys:
        assert y.numpy().tolist() == (2.0 * np.arange(16.0) + 1.0).tolist()


@pytest.mark.parametrize("kind", ["graph", "static", "split"])
def test_recorded_library_calls_and_host_steps_stay_right_on_several_devices(four, kind):
    ag = four
    import asyncgpu.cupy as acp

    kernel = ag.kernel(const=["x"], out=["y"])(twice)
    xs = [ag.array(np.arange(32, dtype=np.float64) + k) for k in range(4)]
    ys = [ag.empty_like(x) for x in xs]

    def body():
        for x, y in zip(xs, ys):
            kernel[1, 32](x, y, 32)          # spread over the devices
        total = acp.add(ys[0], ys[3])        # a captured library call, where its data is
        if kind == "split":
            float(total[0])                  # a host step: ends a segment
        return acp.multiply(total, 2.0)

    step = {"graph": ag.graph, "static": ag.graph(static=True),
            "split": ag.graph(split=True)}[kind](body)
    expected = 2 * ((2 * np.arange(32) + 1) + (2 * (np.arange(32) + 3) + 1))
    for _ in range(4):
        out = step()
        assert out.numpy().tolist() == expected.tolist()
    assert "replayed" in step.outcome


def test_device_groups_put_each_launch_after_what_it_needs():
    from asyncgpu.recorder.devices import device_groups

    # k1(a) on 0; k2(b) on 1; k3(a, b) on 0: two graphs side by side, then one
    assert device_groups([[], [], [0, 1]], [0, 1, 0]) == [(0, [0]), (1, [1]), (0, [2])]
    # a chain on one device stays one graph
    assert device_groups([[], [0], [1]], [1, 1, 1]) == [(1, [0, 1, 2])]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_device_groups_respect_every_dependency(data):
    from asyncgpu.recorder.devices import device_groups

    n = data.draw(st.integers(1, 12))
    preds = [sorted(data.draw(st.sets(st.integers(0, i - 1), max_size=3)) if i else [])
             for i in range(n)]
    slots = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    groups = device_groups(preds, slots)
    position = {i: g for g, (_, members) in enumerate(groups) for i in members}
    assert sorted(position) == list(range(n))
    for g, (slot, members) in enumerate(groups):
        assert all(slots[i] == slot for i in members) and members == sorted(members)
        for i in members:
            for p in preds[i]:
                # in an earlier graph, or earlier in the same one (captured in order)
                assert position[p] < g or (position[p] == g and p < i)


@pytest.mark.pure
def test_a_graph_launched_before_a_graph_it_needs_is_caught():
    import asyncgpu as ag

    init = programs.initial()
    caught = 0
    for seed in range(8):
        body = [programs.random_program(random.Random(seed), 8)]
        body = [s for s in body[0] if isinstance(s, programs.Launch)]
        with ag.configure(backend="sim", execution="sync", sim_strategy="eager"):
            expected = _run_rounds(ag, body, [], init, 3, recorded=False)
        try:
            with planted("one_phase"), ag.configure(backend="sim", sim_seed=seed,
                                                    **several(4)):
                got = _run_rounds(ag, body, [], init, 3, recorded=True)
        except ag.AsyncGPUError:
            caught += 1
            continue
        caught += [a.tolist() for a in got[0] + got[1]] != [
            a.tolist() for a in expected[0] + expected[1]]
    assert caught >= 4, f"the planted bug failed {caught} of 8 programs"


@pytest.mark.parametrize("devices,policy,strategy", [
    (2, "round-robin", "random"), (4, "round-robin", "pct"), (4, "min-transfer-size", "reverse"),
    (2, "stream-aware", "starve"), (4, "min-max", "random"),
])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.lists(_launches(), min_size=1, max_size=8),
       writes=st.lists(st.builds(programs.HostWrite, st.sampled_from(sorted(programs.OPERANDS)),
                                 st.integers(-50, 50).map(float)), max_size=2))
def test_recorded_random_programs_on_several_devices_equal_serial(devices, policy, strategy,
                                                                  body, writes):
    import asyncgpu as ag

    init = programs.initial()
    with ag.configure(backend="sim", execution="sync", sim_seed=0, sim_strategy="eager"):
        reads0, final0, _ = _run_rounds(ag, body, writes, init, 4, recorded=False)
    with ag.configure(backend="sim", sim_seed=3, sim_strategy=strategy,
                      **several(devices, policy)):
        reads, final, outcomes = _run_rounds(ag, body, writes, init, 4, recorded=True)
    assert outcomes == ["recorded", "replayed", "replayed", "replayed"]
    for a, b in zip(reads + final, reads0 + final0):
        assert a.tolist() == b.tolist()


def test_one_device_is_todays_runtime():
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_devices=4, devices=1):
        kernel = ag.kernel(const=["x"], out=["y"])(twice)
        x = ag.array(np.ones(8))
        y = ag.empty_like(x)
        kernel[1, 8](x, y, 8)
        assert y.numpy().tolist() == [3.0] * 8
        assert dict(ag.statistics().placed) == {}


# -- random programs -------------------------------------------------------------------------
def on_devices(ag, steps, init, strategy, seed, **options):
    return programs.run_async(ag, programs.run, steps, init, strategy, seed, **options)


@pytest.mark.parametrize("devices", [2, 4])
@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_random_programs_equal_serial_under_every_device_policy(devices, policy, steps):
    import asyncgpu as ag

    init = programs.initial()
    expected = serial(ag, steps, init)
    assert_same(on_devices(ag, steps, init, "random", 5, **several(devices, policy)), expected)


@pytest.mark.parametrize("strategy", ["pct", "reverse", "starve", "lazy"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_random_programs_on_two_devices_equal_serial_under_every_schedule(strategy, steps):
    import asyncgpu as ag

    init = programs.initial(2)
    expected = serial(ag, steps, init)
    for seed in (0, 1):
        assert_same(on_devices(ag, steps, init, strategy, seed, **several(2)), expected)


# -- planted bugs ----------------------------------------------------------------------------
MUTANT_PROGRAMS = [programs.random_program(random.Random(seed), 16) for seed in range(12)]


def _caught(ag, bug, policy):
    init = programs.initial()
    caught = 0
    for steps in MUTANT_PROGRAMS:
        expected = serial(ag, steps, init)
        try:
            with planted(bug):
                got = on_devices(ag, steps, init, "random", 3, **several(2, policy))
        except ag.AsyncGPUError:
            caught += 1
            continue
        reads, final = got
        caught += ([r.tolist() for r in reads], [f.tolist() for f in final]) != (
            [r.tolist() for r in expected[0]], [f.tolist() for f in expected[1]])
    return caught


@pytest.mark.pure
@pytest.mark.parametrize("bug", ["no_peer_copy", "stale_location"])
def test_a_missing_peer_copy_or_a_stale_location_is_caught(bug):
    import asyncgpu as ag

    caught = _caught(ag, bug, "round-robin")
    assert caught >= 6, f"the planted bug {bug!r} failed {caught} of 12 programs"


def test_the_same_programs_pass_without_the_bugs():
    import asyncgpu as ag

    init = programs.initial()
    for steps in MUTANT_PROGRAMS:
        expected = serial(ag, steps, init)
        assert_same(on_devices(ag, steps, init, "random", 3, **several(2)), expected)


# -- errors ----------------------------------------------------------------------------------
def test_a_device_the_host_lacks_is_refused_at_configure_and_nothing_changes():
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_devices=2):
        x = ag.array(np.ones(4))
        with pytest.raises(ag.DeviceError, match=r"device 5.*2 virtual devices"):
            ag.configure(devices=[0, 5])
        assert ag.options().devices == 1
        assert (x.numpy() == 1).all()       # the runtime is the one before, and usable
        kernel = ag.kernel(const=["x"], out=["y"])(twice)
        y = ag.empty_like(x)
        kernel[1, 4](x, y, 4)               # (its arrays too: a launch takes them)
        assert (y.numpy() == 3).all() and ((x * 2).numpy() == 2).all()
    with ag.configure(backend="sim", sim_devices=4, devices="all"):
        x = ag.array(np.ones(4))
        with pytest.raises(ag.DeviceError, match=r"device 4.*4 virtual devices"):
            ag.configure(devices=5)
        assert ((x * 2).numpy() == 2).all()


def test_pinning_a_device_outside_the_runtime_is_refused(four):
    ag = four
    with pytest.raises(ag.DeviceError, match=r"asyncgpu.device\(7\).*0, 1, 2, 3"), ag.device(7):
        pass
    for number, kind in (("1", "str"), (2.0, "float"), (True, "bool")):
        with pytest.raises(ag.DeviceError, match=f"a device number is an int; got a {kind}"):
            with ag.device(number):
                pass
    kernel = ag.kernel(const=["x"], out=["y"])(twice)
    x = ag.array(np.ones(4))
    y = ag.empty_like(x)
    kernel[1, 4](x, y, 4)                   # not pinned: the refusal left nothing behind
    assert y.numpy().tolist() == [3.0] * 4


class Producer:
    """Another library's array: a CPU DLPack producer, as NumPy arrays are."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def bump(x, n):
    i = cuda.grid(1)
    if i < n:
        x[i] += 1.0


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_another_librarys_array_is_read_on_every_device_and_written_in_its_own_memory(memory):
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_strategy="random", sim_seed=3, memory=memory,
                      **several(4)):
        data = np.ones(64)
        a = ag.asarray(Producer(data))          # imported without a copy
        read = ag.kernel(const=["x"], out=["y"])(twice)
        write = ag.kernel()(bump)
        outs = []
        for d in range(4):
            with ag.device(d):                  # read where the program wants it
                outs.append(ag.empty(64, np.float64))
                read[2, 32](a, outs[d], 64)
        write[2, 32](a, 64)                     # a write runs in the producer's memory
        ag.synchronize()
        assert [float(o[5]) for o in outs] == [3.0] * 4
        assert data.tolist() == [2.0] * 64      # the producer sees the write
        assert float(a[7]) == 2.0


def test_a_write_of_another_librarys_array_pinned_elsewhere_is_refused_by_name(four):
    ag = four
    a = ag.asarray(Producer(np.ones(64)))
    write = ag.kernel()(bump)
    with ag.device(2):
        with pytest.raises(ag.DeviceError, match="kernel 'bump' writes argument 'x', another "
                           "library's memory on GPU 0, and must also run on GPU 2"):
            write[2, 32](a, 64)
    write[2, 32](a, 64)                         # unpinned: on its memory's device
    assert float(a[0]) == 2.0


@pytest.mark.parametrize("devices", [2, 4])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_random_programs_with_managed_memory_on_several_devices_equal_serial(devices, steps):
    import asyncgpu as ag

    init = programs.initial(3)
    expected = serial(ag, steps, init)
    got = on_devices(ag, steps, init, "random", 9,
                     **several(devices, "round-robin", memory="managed"))
    assert_same(got, expected)


def test_managed_memory_on_several_devices_prefetches_to_each_kernels_device():
    import asyncgpu as ag

    with ag.configure(backend="sim", memory="managed", **several(2)):
        kernel = ag.kernel(const=["x"], out=["y"])(twice)
        x = ag.array(np.arange(8, dtype=np.float64))
        y = ag.empty_like(x)
        with ag.device(0):
            kernel[1, 8](x, y, 8)           # x host-written: prefetched to device 0
        with ag.device(1):
            kernel[1, 8](y, x, 8)           # y and x last on device 0: both to device 1
        assert x.numpy().tolist() == (4.0 * np.arange(8) + 3.0).tolist()
        stats = ag.statistics()
        assert stats.prefetches == 3 and stats.copies_peer == 0


@pytest.mark.parametrize("bad", [0, -1, (), (0, 0), (0, -2), "most", True])
def test_a_bad_devices_value_names_the_option(bad):
    import asyncgpu as ag

    with pytest.raises(ValueError, match="option devices"):
        ag.Options(devices=bad)


def test_the_environment_selects_devices_and_policy():
    from asyncgpu.core.config import options_from_env

    opts = options_from_env({"ASYNCGPU_DEVICES": "0,2", "ASYNCGPU_DEVICE_POLICY": "min-min",
                             "ASYNCGPU_SIM_DEVICES": "3"})
    assert (opts.devices, opts.device_policy, opts.sim_devices) == ((0, 2), "min-min", 3)
    assert options_from_env({"ASYNCGPU_DEVICES": "all"}).devices == "all"
    assert options_from_env({"ASYNCGPU_DEVICES": "2"}).devices == 2
    with pytest.raises(ValueError, match="ASYNCGPU_DEVICE_POLICY='fastest' is not valid: "
                       "option device_policy"):
        options_from_env({"ASYNCGPU_DEVICE_POLICY": "fastest"})


@pytest.mark.parametrize("pin", [None, 1])
def test_a_chunked_launch_runs_with_its_copies_on_one_device(chunk_always, pin):
    # element-wise launches of host-current inputs are cut in chunks behind chunked copies:
    # every chunk and copy of one launch on the device the policy (or the pin) chose
    import contextlib

    import asyncgpu as ag
    with ag.configure(backend="sim", sim_seed=6, sim_strategy="random", memory="explicit",
                      copy_chunks=4, **several(2)):
        kernel = ag.kernel(const=["x"], out=["y"], elementwise="n")(twice)
        parts = [ag.array(np.arange(64, dtype=np.float64) + c) for c in range(4)]
        outs = [ag.empty_like(p) for p in parts]
        pinned = ag.device(pin) if pin is not None else contextlib.nullcontext()
        with pinned, ag.trace() as t:
            for p, o in zip(parts, outs):
                kernel[2, 32](p, o, 64)
        for c, o in enumerate(outs):
            np.testing.assert_array_equal(o.numpy(), 2.0 * (np.arange(64) + c) + 1.0)
        stats = ag.statistics()
        assert stats.kernels == 16 and stats.copies_to_device == 16
        assert dict(stats.placed) == ({0: 8, 1: 8} if pin is None else {1: 16})
        # each launch's copies go to one device, in launch order: 4 copies a launch
        copies = [("device 1" in n.name) for n in t.copies if "to device" in n.name]
        per_launch = [set(copies[i:i + 4]) for i in range(0, 16, 4)]
        assert all(len(d) == 1 for d in per_launch)


def test_a_tenants_split_runs_its_pieces_on_one_device():
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=7, sim_strategy="random", **several(2)):
        kernel = ag.kernel(const=["x"], out=["y"], elementwise="n")(twice)
        parts = [ag.array(np.arange(64, dtype=np.float64) * c) for c in range(2)]
        outs = [ag.empty_like(p) for p in parts]
        with ag.tenant("pieces", split={"twice": 3}):
            for p, o in zip(parts, outs):
                kernel[2, 32](p, o, 64)
        for c, o in enumerate(outs):
            np.testing.assert_array_equal(o.numpy(), 2.0 * np.arange(64) * c + 1.0)
        assert dict(ag.statistics().placed) == {0: 3, 1: 3}


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_a_trace_times_every_node_on_every_device(memory):
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=2, memory=memory, **several(2)):
        kernel = ag.kernel(const=["x"], out=["y"])(twice)
        parts = [ag.array(np.full(64, c, np.float64)) for c in range(4)]
        outs = [ag.empty_like(p) for p in parts]
        with ag.trace() as t:
            for p, o in zip(parts, outs):
                kernel[2, 32](p, o, 64)
            got = [float(o[0]) for o in outs]
        assert got == [2.0 * c + 1.0 for c in range(4)]
        assert dict(ag.statistics().placed) == {0: 2, 1: 2}
        nodes = t.device_nodes
        assert len([n for n in nodes if n.kind == "kernel"]) == 4
        assert all(0 <= n.start_s <= n.end_s for n in nodes)
        assert len(t.prefetches) == (4 if memory == "managed" else 0)
        assert all(0 <= p.start_s <= p.end_s for p in t.prefetches)


def test_a_peer_copy_of_a_kernels_result_is_a_raw_edge_in_the_trace_dot_hooks_and_stats():
    # (the copy is booked as a write of the array; what it waits for is the bytes it reads)
    import asyncgpu as ag

    class Edges:
        def __init__(self):
            self.seen = []

        def edge_added(self, parent, child, reason, array):
            self.seen.append((child.name, reason))

    with ag.configure(backend="sim", sim_seed=3, memory="explicit", **several(2)):
        kernel = ag.kernel(const=["x"], out=["y"])(twice)
        a, b, c = ag.array(np.arange(8.0)), ag.zeros(8), ag.zeros(8)
        ag.synchronize()
        before = ag.statistics()
        hooks = Edges()
        with ag.trace() as t, ag.instrument(hooks):
            with ag.device(0):
                kernel[1, 8](a, b, 8)                   # writes b on device 0
            with ag.device(1):
                kernel[1, 8](b, c, 8)                   # reads it on device 1: a peer copy
        np.testing.assert_array_equal(c.numpy(), 2.0 * (2.0 * np.arange(8) + 1.0) + 1.0)
        peer = [n for n in t.copies if "from device 0" in n.name]
        assert len(peer) == 1
        writer = t.kernels[0]
        assert peer[0].parents == [(writer.id, "RAW", "x")]
        assert f'n{writer.id} -> n{peer[0].id} [label="RAW x"]' in t.to_dot()
        assert (peer[0].name, "RAW") in hooks.seen and not any(r == "WAW" for _, r in hooks.seen)
        flows = [e["name"] for e in t.chrome_trace()["traceEvents"] if e.get("ph") == "s"]
        assert flows and not any("WAW" in name for name in flows)
        assert (ag.statistics() - before).edges.get("WAW", 0) == 0


def test_the_simulator_refuses_an_event_recorded_on_another_devices_stream():
    from asyncgpu.backends.sim.backend import SimBackend

    sim = SimBackend(0, "random", 0.0, split=True, devices=2)
    event = sim.create_event(0)
    with pytest.raises(ValueError, match="records an event only on a stream of its own"):
        sim.record(event, sim.create_stream(1))
    with pytest.raises(ValueError, match="no virtual device 2"):
        sim.create_stream(2)


# -- the placement policies ------------------------------------------------------------------
def test_round_robin_takes_every_device_in_turn():
    p = Placement("round-robin", 3)
    assert [p.choose([], [0, 0, 0]) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_stream_aware_takes_the_least_busy_device():
    p = Placement("stream-aware", 3)
    assert p.choose([], [2, 0, 1]) == 1
    assert p.choose([], [0, 3, 0]) == 2     # a tie: round-robin order from after the last


def test_min_transfer_size_follows_the_data_above_its_threshold():
    p = Placement("min-transfer-size", 4, threshold=0.25)
    big, small = 1000, 100
    # device 2 holds 1000 of 1100 needed bytes
    assert p.choose([(device_bit(2), big, True, -1), (HOST_BIT, small, True, -1)], [0] * 4) == 2
    # device 3 holds 100 of 1100 (9%): below the threshold, round-robin from after 2
    assert p.choose([(device_bit(3), small, True, -1), (HOST_BIT, big, True, -1)], [0] * 4) == 3
    assert p.choose([(HOST_BIT, big, True, -1)], [0] * 4) == 0
    # what a node only writes does not count
    assert p.choose([(device_bit(3), big, False, -1), (HOST_BIT, small, True, -1)], [0] * 4) == 1


def test_min_transfer_size_falls_back_to_where_the_arguments_were_used_last():
    p = Placement("min-transfer-size", 4)
    # the host rewrote both inputs: no device holds them, device 3 used them last
    assert p.choose([(HOST_BIT, 100, True, 3), (HOST_BIT, 100, True, 3)], [0] * 4) == 3
    assert p.choose([(HOST_BIT, 100, True, 1), (0, 300, False, 2)], [0] * 4) == 2
    assert p.choose([(HOST_BIT, 100, True, -1)], [0] * 4) == 3   # no home: the next in turn


def test_arrays_made_under_a_pinned_device_draw_their_kernels_there(four):
    ag = four
    ag.configure(device_policy="min-transfer-size")      # (restored with the fixture's block)
    kernel = ag.kernel(const=["x"], out=["y"])(twice)
    data = np.arange(32, dtype=np.float64)
    with ag.device(3):
        x = ag.array(data)
        y = ag.empty_like(x)
    for _ in range(3):
        kernel[1, 32](x, y, 32)                 # min-transfer-size: at home on device 3
        x[...] = data                           # the host rewrites x: no device holds it
    assert y.numpy().tolist() == (2.0 * data + 1.0).tolist()
    assert dict(ag.statistics().placed) == {3: 3}
    assert ag.statistics().copies_peer == 0


def test_a_library_calls_result_is_at_home_where_the_call_ran(four):
    """Its allocation is made after the call is placed: it had no home, so Array.device said 0
    and, once the host rewrote it, min-transfer-size sent its kernels round-robin."""
    import asyncgpu.cupy as acp

    ag = four
    ag.configure(device_policy="min-transfer-size")      # (restored with the fixture's block)
    kernel = ag.kernel(const=["x"], out=["y"])(twice)
    with ag.device(2):
        x = ag.array(np.arange(8.0))
    results = [x * 2.0, x.copy(), acp.sqrt(x), x.sum(keepdims=True)]
    before = dict(ag.statistics().placed)
    for z in results:
        assert z.device.id == 2
        z[...] = np.ones(z.shape)                       # (no device holds it now)
        kernel[1, 32](z, ag.empty_like(z), z.size)
    after = dict(ag.statistics().placed)
    assert after[2] - before.get(2, 0) == len(results)  # (each kernel at its home)


def test_min_min_and_min_max_take_the_best_and_the_worst_link():
    bw = default_bandwidth(2, host=1.0, peer=8.0)
    needs = [(HOST_BIT | device_bit(0), 800, True, -1), (device_bit(1), 100, True, -1)]
    best = Placement("min-min", 2, bandwidth=bw)
    # device 0 misses 100 bytes over a peer link (12.5); device 1 misses 800 over one (100)
    assert best.transfer_times(needs, worst=False) == [12.5, 100.0]
    assert best.choose(needs, [0, 0]) == 0
    # the worst link from a holder: device 1 would take the 800 bytes from the host
    assert Placement("min-max", 2, bandwidth=bw).transfer_times(needs, worst=True) == [
        12.5, 800.0]


def test_library_calls_are_placed_by_data_whatever_the_policy():
    p = Placement("round-robin", 3)
    assert p.choose([(device_bit(2), 8, True, -1)], [0, 0, 0], data_first=True) == 2
    assert p.choose([(device_bit(2), 8, True, -1)], [0, 0, 0], data_first=True) == 2
    assert p.choose([(HOST_BIT, 8, True, -1)], [0, 0, 0], data_first=True) == 0


def test_an_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="device policy must be one of"):
        Placement("fastest", 2)


def test_a_streams_device_is_the_nodes_device(four):
    ag = four
    kernel = ag.kernel(const=["x"], out=["y"])(twice)
    xs = [ag.array(np.ones(8)) for _ in range(8)]
    ys = [ag.empty_like(x) for x in xs]
    seen = []

    class Watch:
        def node_issued(self, node):
            seen.append((node.device, node.stream.device))

    with ag.instrument(Watch()):
        for x, y in zip(xs, ys):
            kernel[1, 8](x, y, 8)
    ag.synchronize()
    assert seen and all(d == s for d, s in seen)
    assert {d for d, _ in seen if True} == {0, 1, 2, 3}


# -- configure, pinning and freeing on several devices ---------------------------------------
def test_a_change_of_memory_model_keeps_the_arrays_on_several_devices():
    import asyncgpu as ag

    with ag.configure(backend="sim", **several(2)):
        kernel = ag.kernel(const=["x"], out=["y"])(twice)
        x = ag.array(np.arange(16, dtype=np.float64))
        y = ag.empty_like(x)
        with ag.device(1):
            kernel[1, 16](x, y, 16)             # y current on device 1 only
        with ag.configure(memory="managed"):    # the same runtime, a rebuilt backend
            assert y.numpy().tolist() == (2.0 * np.arange(16) + 1.0).tolist()
            kernel[1, 16](y, x, 16)
        assert x.numpy().tolist() == (4.0 * np.arange(16) + 3.0).tolist()


@pytest.mark.parametrize("seed", range(6))
def test_random_pinning_equals_serial(seed):
    """Each launch of a random program pinned to a random device: whatever the placement, the
    copies between devices keep every value the serial run has."""
    import asyncgpu as ag

    rnd = random.Random(seed)
    steps = programs.random_program(rnd, 16)
    pins = [rnd.randrange(4) for _ in steps]
    init = programs.initial(seed)
    expected = serial(ag, steps, init)

    def pinned_run(ag, steps, init):
        allocs = [ag.array(init[i]) for i in range(3)]
        views = programs.views(allocs)
        reads = []
        for step, pin in zip(steps, pins):
            if isinstance(step, programs.Launch):
                with ag.device(pin):
                    programs.launch(ag, step, views)
            elif isinstance(step, programs.HostRead):
                reads.append(np.asarray(views[step.operand]))
            else:
                views[step.operand][...] = step.value
        return reads, [a.numpy() for a in allocs]

    got = programs.run_async(ag, pinned_run, steps, init, "random", seed, **several(4))
    assert_same(got, expected)


def test_freeing_an_array_used_on_several_devices_waits_for_every_device(four):
    ag = four
    kernel = ag.kernel(const=["x"], out=["y"])(twice)
    x = ag.array(np.ones(64))
    ys = [ag.empty_like(x) for _ in range(4)]
    for d, y in enumerate(ys):
        with ag.device(d):
            kernel[1, 64](x, y, 64)             # x copied to every device
    x.free()                                    # the checker: every device's reader ordered
    assert all(y.numpy().tolist() == [3.0] * 64 for y in ys)
    with pytest.raises(ag.FreedArrayError):
        kernel[1, 64](x, ys[0], 64)


def test_threads_pinning_their_own_devices_each_get_theirs(four):
    """One host thread per device, as multi-GPU programs are often written: the pins are per
    thread, and every thread's chain is right."""
    import threading

    ag = four
    kernel = ag.kernel(twice)
    results, errors = {}, []

    def worker(d):
        try:
            with ag.device(d):
                a = ag.array(np.full(32, float(d)))
                b = ag.zeros(32)
                for _ in range(5):
                    kernel[1, 32](a, b, 32)
                    kernel[1, 32](b, a, 32)
            results[d] = a.numpy()
        except BaseException as exc:        # (reported by the main thread)
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(d,)) for d in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for d in range(4):
        value = float(d)
        for _ in range(10):
            value = 2.0 * value + 1.0
        assert results[d].tolist() == [value] * 32
    assert dict(ag.statistics().placed) == {d: 10 for d in range(4)}
    assert ag.statistics().copies_peer == 0


def test_device_groups_keep_a_split_launchs_pieces_in_one_graph():
    from asyncgpu.recorder.devices import device_groups

    # launch 0 on slot 1; launches 1 and 2 are the pieces of one launch on slot 0, and only
    # the second needs launch 0: both wait for it, in one graph that orders them
    preds, slots = [[], [], [0, 1]], [1, 0, 0]
    assert device_groups(preds, slots) == [(0, [1]), (1, [0]), (0, [2])]
    assert device_groups(preds, slots, [0, 1, 1]) == [(1, [0]), (0, [1, 2])]
