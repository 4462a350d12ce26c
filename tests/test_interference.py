"""The interference rule: heavy launches measured slower side by side run one after the other,
results unchanged; others keep running side by side; small ones are never measured."""

from __future__ import annotations

import numpy as np
import programs
import pytest
from hypothesis import HealthCheck, given, settings
from numba import cuda
from test_properties import assert_same, serial

import asyncgpu as ag
from asyncgpu.core.interference import MIN_BYTES, InterferenceRule, launch_key, moved_bytes
from asyncgpu.runtime.current import current_runtime
from asyncgpu.testing.interference import slower_together


def scale(x, y, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] = 3.0 * x[i]


def _two_independent(n=256):
    xs = [ag.array(np.arange(n, dtype=np.float64) + i) for i in range(2)]
    ys = [ag.empty(n) for _ in range(2)]
    return xs, ys


def _iterations(k, xs, ys, count):
    for _ in range(count):
        k[2, 32](xs[0], ys[0], 256)
        k[2, 32](xs[1], ys[1], 256)         # no data shared with the first


@pytest.mark.parametrize("memory", ["explicit", "managed"])
@pytest.mark.parametrize("strategy", ["random", "reverse", "lazy"])
def test_launches_slower_side_by_side_run_one_after_the_other_with_the_same_results(memory,
                                                                                    strategy):
    with ag.configure(backend="sim", memory=memory, sim_strategy=strategy, sim_seed=2):
        k = ag.kernel(const=["x"], out=["y"])(scale)
        xs, ys = _two_independent()
        rule = current_runtime().interference
        with slower_together() as tried:
            _iterations(k, xs, ys, 2)       # the trial: side by side, then in sequence
            ag.synchronize()                # (its launches complete)
            with ag.instrument(programs.Edges(from_kernels=True)) as seen:
                _iterations(k, xs, ys, 2)
            assert set(rule.verdicts.values()) == {True}
        assert len(tried) == 1                              # one pair, tried once
        # after the trial every launch waits for the one running beside it
        assert [r for _, r in seen.kernels] == [[], ["interference"], ["interference"],
                                                ["interference"]]
        for i in range(2):
            assert ys[i].numpy().tolist() == (3.0 * (np.arange(256.0) + i)).tolist()


def test_launches_no_slower_side_by_side_stay_side_by_side(sim):
    k = ag.kernel(const=["x"], out=["y"])(scale)
    xs, ys = _two_independent()
    rule = current_runtime().interference
    with slower_together(apart=False) as tried:
        _iterations(k, xs, ys, 2)
        ag.synchronize()
        with ag.instrument(programs.Edges(from_kernels=True)) as seen:
            _iterations(k, xs, ys, 2)
        assert set(rule.verdicts.values()) == {False}
    assert len(tried) == 1
    assert len(seen.kernels) == 4 and all("interference" not in r for _, r in seen.kernels)


def test_a_pair_kept_apart_stays_apart_through_a_configure_block(sim):
    # (a change of options that keeps the backend, as a ``with configure(...)`` block around
    # each step, must not try the pair again: its trial would run it side by side once more)
    k = ag.kernel(const=["x"], out=["y"])(scale)
    xs, ys = _two_independent()
    rule = current_runtime().interference
    with slower_together() as tried:
        _iterations(k, xs, ys, 2)
        ag.synchronize()
        _iterations(k, xs, ys, 1)           # the verdict: apart
        assert set(rule.verdicts.values()) == {True}
        with ag.configure(execution="sync"):        # (no rule while serial)
            assert current_runtime().interference is None
            _iterations(k, xs, ys, 1)
        with ag.configure(max_streams=16):
            assert current_runtime().interference is rule
            with ag.instrument(programs.Edges(from_kernels=True)) as seen:
                _iterations(k, xs, ys, 2)
    assert len(tried) == 1
    assert [r for _, r in seen.kernels] == [[], ["interference"], ["interference"],
                                            ["interference"]]
    for i in range(2):
        assert ys[i].numpy().tolist() == (3.0 * (np.arange(256.0) + i)).tolist()


def test_a_new_backend_tries_its_pairs_afresh(sim):
    rule = current_runtime().interference
    with ag.configure(sim_seed=7):          # (rebuilds the simulator's backend)
        assert current_runtime().interference is not rule
        assert current_runtime().interference.verdicts == {}


class _Named:
    def __init__(self, name):
        self.name = name


class _Clock:
    """Timing events of a stand-in backend: each reached at the time the test sets."""

    def __init__(self):
        self.events = []

    def timing_event(self, device=0):
        event = {"t": None}
        self.events.append(event)
        return event

    def event_done(self, event):
        return event["t"] is not None

    def elapsed_s(self, start, end):
        return end["t"] - start["t"]


class _CudaClock(_Clock):
    """As CUDA's events: one never recorded has completed, and timing it is an error."""

    def event_done(self, event):
        return True

    def elapsed_s(self, start, end):
        if start["t"] is None or end["t"] is None:
            raise RuntimeError("invalid resource handle")
        return end["t"] - start["t"]


def test_a_launch_still_being_issued_is_not_judged_beside_a_second_stream():
    """A launch that meets suspects on two streams joins its pair's trial beside the first
    (here: the run in sequence) and meets the same pair beside the second before its own
    timing events are recorded; the verdict waits for them."""
    from asyncgpu.core.interference import Sample

    clock = _CudaClock()
    rule = InterferenceRule(clock, device_threads=1 << 20, min_bytes=0)
    key_a, key_b = (_Named("a"),), (_Named("b"),)

    def sample(key, start=None, end=None):
        return Sample(key, {"t": start}, {"t": end})

    assert rule._trial(sample(key_a, 0.0, 1.7), sample(key_b, 0.05, 1.69)) is False
    issuing = sample(key_b)
    assert rule._trial(sample(key_a, 10.0, 10.7), issuing) is True
    assert rule._trial(sample(key_a, 10.0, 10.6), issuing) is False    # (no timing yet)
    issuing.start["t"], issuing.end["t"] = 10.7, 11.4
    assert rule._trial(sample(key_a, 20.0, 20.7), sample(key_b, 20.7, 21.4)) is True
    assert rule.verdicts[(key_a, key_b)] is True


@pytest.mark.parametrize("together, apart", [(1.7, True), (1.42, False), (0.9, False)])
def test_a_pair_is_kept_apart_when_side_by_side_took_longer_than_in_sequence(together, apart):
    """The trial's verdict, on a stand-in clock: two launches of 0.7 s each, in sequence 1.4 s
    from the first start to the last end; side by side ``together``."""
    from asyncgpu.core.interference import Sample

    clock = _Clock()
    rule = InterferenceRule(clock, device_threads=1 << 20, min_bytes=0)
    key_a, key_b = (_Named("a"),), (_Named("b"),)

    def sample(key):
        return Sample(key, clock.timing_event(), clock.timing_event())

    side = (sample(key_a), sample(key_b))
    assert rule._trial(*side) is False                  # first meeting: side by side
    seq = (sample(key_a), sample(key_b))
    assert rule._trial(*seq) is True                    # second: in sequence
    assert rule._trial(sample(key_a), sample(key_b)) is False   # not complete: side by side
    assert rule.verdicts == {}
    times = [(0.0, together), (0.05, together - 0.01), (10.0, 10.7), (10.7, 11.4)]
    for one, (start, end) in zip(side + seq, times):
        one.start["t"], one.end["t"] = start, end
    assert rule._trial(sample(key_b), sample(key_a)) is apart    # decided (either order)
    assert rule.verdicts[(key_a, key_b)] is apart and rule.verdicts[(key_b, key_a)] is apart


@pytest.mark.parametrize("times, apart", [
    # side by side, the second issued 5 s after the first ended: they never shared the device
    ([(0.0, 0.7), (5.7, 6.4), (10.0, 10.7), (10.7, 11.4)], False),
    # in sequence, the host issued the second 5 s late: the sequence is 1.4 s, not 6.4
    ([(0.0, 1.7), (0.05, 1.69), (10.0, 10.7), (15.7, 16.4)], True),
])
def test_time_the_host_took_between_a_trials_launches_is_not_counted(times, apart):
    """A trial's launches issued late by the host (the program's own host work between them)
    neither make a pair that never overlapped look slow side by side nor make a sequence look
    long: on a stand-in clock, launches of 0.7 s each alone."""
    from asyncgpu.core.interference import Sample

    clock = _Clock()
    rule = InterferenceRule(clock, device_threads=1 << 20, min_bytes=0)
    key_a, key_b = (_Named("a"),), (_Named("b"),)

    def sample(key):
        return Sample(key, clock.timing_event(), clock.timing_event())

    rule.tries = 1      # (a side-by-side run that did not overlap is judged as it ran)
    side, seq = (sample(key_a), sample(key_b)), (sample(key_a), sample(key_b))
    rule._trial(*side)
    rule._trial(*seq)
    for one, (start, end) in zip(side + seq, times):
        one.start["t"], one.end["t"] = start, end
    assert rule._trial(sample(key_a), sample(key_b)) is apart
    assert rule.verdicts[(key_a, key_b)] is apart


@pytest.mark.parametrize("runs, apart", [
    # the first run did not overlap (the second launch waited for other work); the second
    # did, and took 1.7 s for two launches of 0.7 s: apart
    ([(0.0, 0.7, 0.7, 1.4), (20.0, 21.7, 20.05, 21.69)], True),
    # no side-by-side run overlapped: the last one is judged as it ran (as its sequence)
    ([(0.0, 0.7, 0.7, 1.4), (20.0, 20.7, 20.7, 21.4), (30.0, 30.7, 30.7, 31.4)], False),
])
def test_a_side_by_side_run_that_did_not_overlap_is_run_again(runs, apart):
    """A trial whose side-by-side launches ran one after the other (the second waited for
    other work) measured nothing: the pair runs side by side again at its next timed meeting,
    up to ``tries`` runs."""
    from asyncgpu.core.interference import TRIES, Sample

    clock = _Clock()
    rule = InterferenceRule(clock, device_threads=1 << 20, min_bytes=0)
    assert rule.tries == TRIES == 3
    key_a, key_b = (_Named("a"),), (_Named("b"),)

    def sample(key):
        return Sample(key, clock.timing_event(), clock.timing_event())

    def reached(pair, a_start, a_end, b_start, b_end):
        pair[0].start["t"], pair[0].end["t"] = a_start, a_end
        pair[1].start["t"], pair[1].end["t"] = b_start, b_end

    side = (sample(key_a), sample(key_b))
    assert rule._trial(*side) is False
    seq = (sample(key_a), sample(key_b))
    assert rule._trial(*seq) is True
    reached(seq, 10.0, 10.7, 10.7, 11.4)
    reached(side, *runs[0])
    for run in runs[1:]:
        side = (sample(key_a), sample(key_b))
        assert rule._trial(*side) is False      # run again side by side, no verdict yet
        assert rule.verdicts == {}
        reached(side, *run)
    assert rule._trial(sample(key_a), sample(key_b)) is apart
    assert rule.verdicts[(key_a, key_b)] is apart


def test_small_launches_are_never_tried(sim):
    k = ag.kernel(const=["x"], out=["y"])(scale)
    xs, ys = _two_independent()
    rule = current_runtime().interference
    assert rule.min_bytes == MIN_BYTES
    _iterations(k, xs, ys, 3)
    assert rule.verdicts == {} and rule._trials == {}


@pytest.mark.parametrize("options", [{"interference": False}, {"execution": "sync"},
                                     {"max_streams": 1}, {"sim_devices": 2, "devices": 2}])
def test_no_rule_where_launches_never_run_side_by_side_or_it_is_turned_off(options):
    with ag.configure(backend="sim", **options):
        assert current_runtime().interference is None


def test_the_environment_turns_the_rule_off(monkeypatch):
    from asyncgpu.core.config import options_from_env

    monkeypatch.setenv("ASYNCGPU_INTERFERENCE", "0")
    assert options_from_env().interference is False


def test_tenants_of_one_priority_wait_for_each_other_by_the_rule(sim):
    k = ag.kernel(const=["x"], out=["y"])(scale)
    xs, ys = _two_independent()
    with slower_together() as tried:
        for _ in range(2):                          # the trial
            with ag.tenant("interference-a"):
                k[2, 32](xs[0], ys[0], 256)
            with ag.tenant("interference-b"):
                k[2, 32](xs[1], ys[1], 256)
        ag.synchronize()
        with ag.instrument(programs.Edges(from_kernels=True)) as seen:
            for _ in range(2):
                with ag.tenant("interference-a"):
                    k[2, 32](xs[0], ys[0], 256)
                with ag.tenant("interference-b"):
                    k[2, 32](xs[1], ys[1], 256)
    assert len(tried) == 1
    assert [r for _, r in seen.kernels] == [[], ["interference"], ["interference"],
                                            ["interference"]]
    assert [ys[i].numpy()[255] for i in range(2)] == [3.0 * 255, 3.0 * 256]


def test_a_high_priority_tenant_never_waits_for_a_normal_one_by_the_rule(sim):
    k = ag.kernel(const=["x"], out=["y"])(scale)
    xs, ys = _two_independent()
    with slower_together() as tried:
        for _ in range(3):                          # the trial (from the second round on)
            with ag.tenant("interference-normal"):
                k[2, 32](xs[0], ys[0], 256)
            with ag.tenant("interference-high", priority="high"):
                k[2, 32](xs[1], ys[1], 256)
        ag.synchronize()
        with ag.instrument(programs.Edges(from_kernels=True)) as seen:
            for _ in range(2):
                with ag.tenant("interference-normal"):
                    k[2, 32](xs[0], ys[0], 256)     # waits for the high one's launch ...
                with ag.tenant("interference-high", priority="high"):
                    k[2, 32](xs[1], ys[1], 256)     # ... never the other way
    assert len(tried) == 1
    assert ["interference" in r for _, r in seen.kernels] == [False, False, True, False]
    assert [ys[i].numpy()[255] for i in range(2)] == [3.0 * 255, 3.0 * 256]


def test_a_launch_key_counts_bytes_each_way_and_tells_shapes_apart(sim):
    k = ag.kernel(const=["x"], out=["y"])(scale)
    x, y = ag.array(np.ones(64)), ag.empty(64)
    rt = current_runtime()
    arrays, _ = k.kernel.bind(rt, (x, y, 64), None) if hasattr(k, "kernel") else \
        k[1, 32].kernel.bind(rt, (x, y, 64), None)
    assert moved_bytes(arrays) == 64 * 8 * 2        # x read, y written
    one = launch_key(k[1, 32], moved_bytes(arrays))
    assert launch_key(k[2, 32], moved_bytes(arrays)) != one
    rule = InterferenceRule(_Clock(), device_threads=1 << 20, min_bytes=0)
    assert rule.suspect(one)                # 1024 bytes over 32 threads: memory-bound


@pytest.mark.parametrize("strategy", ["random", "starve"])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_random_programs_with_every_pair_kept_apart_equal_serial(strategy, steps):
    init = programs.initial()
    expected = serial(ag, steps, init)

    def run(ag, steps, init):
        with slower_together():
            return programs.run(ag, steps, init)

    got = programs.run_async(ag, run, steps, init, strategy, 5)
    assert_same(got, expected)
