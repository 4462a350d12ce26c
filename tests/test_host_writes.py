"""Large host writes copy into the host memory without the runtime's lock (explicit memory,
several threads): the other threads go on launching and reading meanwhile, and whatever needs
the array being written (a copy of it, a host access of it, a replayed graph) waits for the
copy, so results equal a serial order of the threads' operations."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import recorder_kernels

import asyncgpu as ag
from asyncgpu.runtime.host_access import UNLOCKED_WRITE_BYTES, HostAccess

BIG = UNLOCKED_WRITE_BYTES // 4         # float32 elements: one large write


@pytest.fixture
def held(monkeypatch):
    """The next large write's copy (from :func:`_writer`) waits, once started, until the test
    lets it go."""
    started, go, copied = threading.Event(), threading.Event(), threading.Event()
    real = HostAccess._copy_unlocked

    def held_copy(self, array, key, value):
        if threading.current_thread().name == "held writer" and not started.is_set():
            started.set()
            assert go.wait(10)
            real(self, array, key, value)
            copied.set()
        else:
            real(self, array, key, value)

    monkeypatch.setattr(HostAccess, "_copy_unlocked", held_copy)
    return started, go, copied


def _writer(x, value):
    errors = []

    def write():
        try:
            x[...] = value
        except BaseException as exc:    # noqa: BLE001 - re-raised by the test
            errors.append(exc)

    t = threading.Thread(target=write, name="held writer")
    t.start()
    return t, errors


@pytest.mark.pure       # (holds a method of the compiled host-access class)
def test_other_threads_launch_and_read_while_a_large_write_copies(held):
    started, go, copied = held
    with ag.configure(backend="sim", sim_seed=1, memory="explicit"):
        scale, _, _ = recorder_kernels.kernels(ag)
        x = ag.zeros(BIG, np.float32)
        u, v = ag.array(np.arange(64, dtype=np.float32)), ag.empty(64, np.float32)
        t, errors = _writer(x, np.full(BIG, 3, np.float32))
        assert started.wait(10)
        # the lock is free: this thread launches and reads other arrays meanwhile
        scale[1, 64](u, v, 2.0, 64)
        assert float(v[5]) == 10.0
        assert not copied.is_set()
        go.set()
        t.join(10)
        assert not errors
        assert float(x[BIG - 1]) == 3.0


@pytest.mark.pure
@pytest.mark.parametrize("use", ["kernel", "host read", "host write"])
def test_a_thread_using_the_array_being_written_waits_for_the_copy(held, use):
    started, go, _ = held
    with ag.configure(backend="sim", sim_seed=2, memory="explicit"):
        scale, _, _ = recorder_kernels.kernels(ag)
        x = ag.array(np.ones(BIG, np.float32))      # current on the host: a kernel copies it
        y = ag.empty(BIG, np.float32)
        t, errors = _writer(x, np.full(BIG, 5, np.float32))
        assert started.wait(10)
        seen = []

        def user():
            if use == "kernel":
                scale[1, 64](x, y, 2.0, BIG)
                seen.append(float(y[BIG - 1]))
            elif use == "host read":
                seen.append(float(x[BIG - 1]))
            else:
                x[0] = 7.0
                seen.append(float(x[0]))

        other = threading.Thread(target=user)
        other.start()
        other.join(0.2)
        assert other.is_alive() and not seen       # waits for the copy
        go.set()
        t.join(10)
        other.join(10)
        assert not errors
        assert seen == [{"kernel": 10.0, "host read": 5.0, "host write": 7.0}[use]]
        assert float(x[1]) == 5.0
        ag.synchronize()


@pytest.mark.pure
@pytest.mark.parametrize("devices", [1, 2])
@pytest.mark.parametrize("use", ["kernel reading it", "fill", "free and reuse"])
def test_work_issued_while_a_large_write_copies_comes_after_the_write(held, use, devices):
    # (x current on the device: no copy in would make the kernel wait, nothing but the
    # order of the threads' operations says the host write comes first)
    started, go, _ = held
    with ag.configure(backend="sim", sim_seed=5, memory="explicit", sim_devices=devices,
                      devices=devices):
        scale, _, _ = recorder_kernels.kernels(ag)
        x, y = ag.empty(BIG, np.float32), ag.empty(BIG, np.float32)
        scale[1, 64](ag.array(np.ones(BIG, np.float32)), x, 1.0, BIG)
        ag.synchronize()
        t, errors = _writer(x, np.full(BIG, 5, np.float32))
        assert started.wait(10)
        seen = []

        def user():
            if use == "kernel reading it":
                scale[1, 64](x, y, 2.0, BIG)
                seen.append(float(y[BIG - 1]))
            elif use == "fill":
                x[...] = 7
                seen.append(float(x[BIG - 1]))
            else:
                x.free()
                z = ag.array(np.full(BIG, 2, np.float32))   # (may reuse x's memory)
                seen.append(sorted(set(z.numpy().tolist())))

        other = threading.Thread(target=user)
        other.start()
        other.join(0.2)
        go.set()
        t.join(10)
        other.join(10)
        assert not errors
        assert seen == [{"kernel reading it": 10.0, "fill": 7.0, "free and reuse": [2.0]}[use]]
        if use != "free and reuse":
            assert float(x[0]) == {"kernel reading it": 5.0, "fill": 7.0}[use]


@pytest.mark.pure       # (line-level fault injection)
def test_a_large_write_interrupted_at_any_line_leaves_the_array_usable():
    # (an interrupt anywhere in the write, between booking it busy and its copy included: no
    # later access of the array may wait for a copy that will never come)
    from asyncgpu.testing.faults import inject

    idle = threading.Event()
    keep = threading.Thread(target=idle.wait)      # (another thread: the unlocked path)
    keep.start()
    modules = ("runtime/host_access", "runtime/memory")
    try:
        with ag.configure(backend="sim", sim_seed=6, memory="explicit"):
            x = ag.array(np.full(BIG, 2, np.float32))
            new = np.full(BIG, 3, np.float32)
            with inject(None, modules=modules) as probe:
                x[...] = new
            assert probe.count > 10, probe.points
            for at in range(1, probe.count + 1):
                x[...] = np.full(BIG, 2, np.float32)
                with inject(at, modules=modules) as injector:
                    try:
                        x[...] = new
                    except KeyboardInterrupt:
                        assert injector.where is not None
                last = float(x[BIG - 1])
                assert last in (2.0, 3.0), injector.where
                assert float(x[0]) == last, injector.where          # all of it, or none
    finally:
        idle.set()
        keep.join()


@pytest.mark.pure
def test_a_recorded_step_replayed_while_its_input_is_written_sees_the_new_values(held):
    started, go, _ = held
    with ag.configure(backend="sim", sim_seed=3, memory="explicit"):
        scale, _, _ = recorder_kernels.kernels(ag)
        x, y = ag.array(np.ones(BIG, np.float32)), ag.empty(BIG, np.float32)
        step = ag.graph(lambda: scale[1, 64](x, y, 2.0, BIG))
        for _ in range(3):
            x[...] = np.ones(BIG, np.float32)       # (one thread: copied under the lock)
            step()
        assert step.outcome == "replayed"
        t, errors = _writer(x, np.full(BIG, 4, np.float32))
        assert started.wait(10)
        done = []
        other = threading.Thread(target=lambda: (step(), done.append(float(y[BIG - 1]))))
        other.start()
        other.join(0.2)
        assert other.is_alive()
        go.set()
        t.join(10)
        other.join(10)
        assert not errors and done == [8.0]


def test_a_large_write_that_fails_leaves_the_array_and_the_runtime_as_they_were():
    idle = threading.Event()
    keep = threading.Thread(target=idle.wait)      # (another thread: the unlocked path)
    keep.start()
    try:
        with ag.configure(backend="sim", sim_seed=4, memory="explicit"):
            scale, _, _ = recorder_kernels.kernels(ag)
            x, y = ag.array(np.full(BIG, 2, np.float32)), ag.empty(BIG, np.float32)
            with pytest.raises(ValueError):
                x[...] = np.ones(BIG + 1, np.float32)
            x[...] = np.full(BIG, 6, np.float32)
            scale[1, 64](x, y, 0.5, BIG)
            assert float(y[BIG - 1]) == 3.0 and float(x[0]) == 6.0
    finally:
        idle.set()
        keep.join()


@pytest.mark.parametrize("seed", range(3))
def test_threads_writing_large_inputs_and_launching_equal_their_serial_results(seed):
    # each thread rewrites its input whole (unlocked) and launches on it, the threads
    # sharing one runtime; every step's result is its own input's
    with ag.configure(backend="sim", sim_seed=seed, sim_strategy="random", memory="explicit"):
        scale, _, _ = recorder_kernels.kernels(ag)
        pairs = [(ag.zeros(BIG, np.float32), ag.empty(BIG, np.float32)) for _ in range(3)]
        results: list[list[float]] = [[] for _ in pairs]

        def work(i):
            x, y = pairs[i]
            for step in range(4):
                x[...] = np.full(BIG, 10 * i + step, np.float32)
                scale[1, 64](x, y, 2.0, BIG)
                results[i].append(float(y[BIG // 2]))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(pairs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert results == [[2.0 * (10 * i + step) for step in range(4)]
                           for i in range(len(pairs))]


# -- a large array set to one number: a fill on the device ---------------------------------------
def test_a_large_array_set_to_one_number_is_filled_on_the_device_without_waiting():
    with ag.configure(backend="sim", memory="explicit"):
        x = ag.array(np.arange(BIG, dtype=np.float32))
        y = x * 2                               # a node reading x, unfinished on sim
        before = ag.statistics()
        x[...] = 0
        after = ag.statistics()
        assert after.calls == before.calls + 1              # the fill is a node ...
        assert after.host_accesses == before.host_accesses  # ... no host write
        assert after.host_syncs == before.host_syncs        # ... and nothing waited for
        x[:] = np.float64(1.5)
        assert float(x[BIG - 1]) == 1.5 and float(y[BIG - 1]) == 2.0 * (BIG - 1)


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_a_large_fill_copies_nothing_to_the_device_first(memory):
    with ag.configure(backend="sim", memory=memory):
        x = ag.array(np.arange(BIG, dtype=np.float32))      # current on the host only
        before = ag.statistics()
        x[...] = 0                                          # every byte: none read
        z = ag.zeros(2 * BIG, np.float32)                   # (the same fill)
        assert ag.statistics().copies_to_device == before.copies_to_device
        assert float(x.sum()) == 0.0 and float(z.sum()) == 0.0
        y = ag.array(np.arange(2 * BIG, dtype=np.float32))  # host only again
        half = y[::2]                                       # every other element: a fill of
        half[...] = -1                                      # a view, the others' bytes kept
        assert y.numpy()[:4].tolist() == [-1.0, 1.0, -1.0, 3.0]


def test_a_large_fill_converts_as_numpy_and_refuses_what_numpy_refuses():
    with ag.configure(backend="sim", memory="explicit"):
        x = ag.array(np.full(4 * BIG, 7, np.int8))
        x[...] = 2.9                                # truncated, as NumPy does
        assert int(x[5]) == 2
        with pytest.raises(OverflowError):
            x[...] = 300                            # out of int8's range: NumPy's error ...
        assert x.numpy().tolist() == [2] * (4 * BIG)   # ... before anything was enqueued
        x[...] = True
        assert int(x.sum()) == 4 * BIG
        wide = ag.zeros(BIG, np.int32)
        for when in (np.datetime64(1, "D"), np.timedelta64(3, "s")):
            with pytest.raises(TypeError):          # (a large write: refused as NumPy does)
                wide[...] = when
        assert wide.numpy().tolist() == [0] * BIG


def test_a_large_array_set_to_one_number_inside_a_recording_is_refused_as_a_host_write():
    from asyncgpu import RecordingError

    with ag.configure(backend="sim", memory="explicit"):
        x = ag.array(np.ones(BIG, np.float32))

        @ag.graph
        def step():
            x[...] = 0

        with pytest.raises(RecordingError, match="host write"):
            step()
        x[...] = 2                                  # outside: a fill, the runtime usable
        assert float(x[BIG - 1]) == 2.0


def test_a_small_array_set_to_one_number_stays_a_host_write():
    with ag.configure(backend="sim", memory="explicit"):
        x = ag.array(np.ones(64, np.float32))
        before = ag.statistics()
        x[...] = 3
        assert ag.statistics().calls == before.calls
        assert x.numpy().tolist() == [3.0] * 64


@pytest.mark.parametrize("memory", ["explicit", "managed"])
@pytest.mark.parametrize("read_first", [False, True])
def test_a_host_write_whose_value_cannot_be_converted_changes_nothing(memory, read_first):
    # (NumPy writes a list item by item and stops at the bad one; CuPy converts it first)
    with ag.configure(backend="sim", memory=memory):
        a = ag.full(8, 5.0, np.float32)
        b = a + 0                               # (pending: a's copy is the device's)
        if read_first:
            a.numpy()
        with pytest.raises(ValueError):
            a[0:3] = [1, 2, "x"]
        assert (a + 0).tolist() == [5.0] * 8 and a.tolist() == [5.0] * 8
        assert b.tolist() == [5.0] * 8


@pytest.mark.pure       # (holds a method of the compiled host-access class)
def test_a_large_write_whose_memory_model_changes_before_its_lock_copies_under_the_lock(held):
    """A configure in another thread switching to managed memory between the write's choice of
    the unlocked copy and its lock: managed memory's launches do not wait for such a copy, so
    a kernel could read the array half written. The choice is made again under the lock."""
    started, go, copied = held

    class SwitchingValue:               # (converted without the lock: another thread switches)
        def __array__(self, dtype=None, copy=None):
            switch = threading.Thread(target=lambda: ag.configure(memory="managed"))
            switch.start()
            switch.join()
            return np.full(BIG, 5.0, np.float32)

    with ag.configure(backend="sim", memory="explicit"):
        x = ag.zeros(BIG, np.float32)
        writer, errors = _writer(x, SwitchingValue())
        writer.join(30)
        go.set()
        assert not errors and not writer.is_alive()
        assert ag.options().memory == "managed"
        assert not started.is_set()         # (written under the lock, not copied without it)
        assert float(x.sum()) == 5.0 * BIG
