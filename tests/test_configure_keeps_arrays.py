"""``asyncgpu.configure`` keeps arrays usable: a change of memory model converts their memory,
every other option but the backend and the device leaves them as they are; pending work and its
faults are never lost at a switch; recorded graphs are recorded again, never replayed stale.
Only a change of backend or device retires arrays, with a message that names the switch."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from numba import cuda

import asyncgpu as ag
import asyncgpu.cupy as acp
import stand_in
from asyncgpu.core.compiled import is_compiled
from asyncgpu.runtime.current import current_runtime


@ag.kernel
@cuda.jit
def scale_add(x, a, b, n):
    i = cuda.grid(1)
    if i < n:
        x[i] = x[i] * a + b


@ag.kernel
@cuda.jit
def out_of_bounds(x, n):
    i = cuda.grid(1)
    if i < n:
        x[i + 1000] = 1.0


N = 64
START = np.arange(N, dtype=np.float64)


def step(x, a, b):
    scale_add[1, N](x, a, b, N)


def split_memory(x):
    """Whether ``x`` lives in the explicit model's memory (sim: separate host and device
    bytes) rather than managed memory (one array for both)."""
    buffer = x._alloc.buffer
    return buffer.host is not buffer.dev


@pytest.mark.parametrize("outer,inner", [("explicit", "managed"), ("managed", "explicit")])
def test_an_array_is_used_inside_and_after_a_block_of_the_other_memory_model(outer, inner):
    with ag.configure(backend="sim", sim_seed=3, sim_strategy="random", memory=outer):
        x = ag.array(START)
        expect = START.copy()
        step(x, 2.0, 1.0)
        expect = expect * 2 + 1
        with ag.configure(memory=inner):
            assert split_memory(x) == (inner == "explicit")      # converted, not just relabelled
            step(x, 3.0, -1.0)
            expect = expect * 3 - 1
            x[5] = 100.0                                         # host write inside
            expect[5] = 100.0
            step(x, 0.5, 0.0)
            expect = expect * 0.5
            np.testing.assert_array_equal(x.numpy(), expect)
            step(x, 1.0, 2.0)                                    # pending when the block ends
            expect = expect + 2
        assert split_memory(x) == (outer == "explicit")
        np.testing.assert_array_equal((x * 2).numpy(), expect * 2)
        step(x, 1.0, 1.0)
        np.testing.assert_array_equal(x.numpy(), expect + 1)


@pytest.mark.parametrize("outer,inner", [("explicit", "managed"), ("managed", "explicit")])
def test_an_array_made_inside_a_block_is_used_after_it(outer, inner):
    with ag.configure(backend="sim", sim_seed=4, memory=outer):
        with ag.configure(memory=inner):
            y = ag.array(START)
            empty = ag.empty(N)         # never written: nothing to carry, still usable
            step(y, 2.0, 0.0)
        step(y, 1.0, 1.0)
        empty[...] = 7.0
        step(empty, 1.0, 0.0)
        np.testing.assert_array_equal(y.numpy(), START * 2 + 1)
        np.testing.assert_array_equal(empty.numpy(), np.full(N, 7.0))


@pytest.mark.skipif(not is_compiled(), reason="uncompiled, the walk over the collector's objects "
                    "is Python, and another thread may run in its middle")
def test_a_switch_leaves_alone_the_tuples_other_threads_are_building():
    # A thread building a tuple from a generator (rich's live display does, for one) has an
    # unfinished tuple that CPython may only grow while nothing else refers to it; the walk
    # over the collector's objects at a change of memory model must not hold it while that
    # thread runs (it raised SystemError: bad argument to internal function there).
    import sys
    import threading

    done = threading.Event()
    errors: list[BaseException] = []

    def endless():
        while not done.is_set():
            yield 0

    def build():
        try:
            tuple(endless())
        except BaseException as exc:        # (a SystemError, on a thread: collected here)
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)             # threads take turns often, mid-walk included
    try:
        with ag.configure(backend="sim", sim_seed=3, memory="explicit"):
            arrays = [ag.array(START) for _ in range(2000)]  # (objects to walk)
            builder = threading.Thread(target=build)
            builder.start()
            for memory in ("managed", "explicit") * 3:
                with ag.configure(memory=memory):
                    pass
            done.set()
            builder.join()
            assert float(arrays[-1][3]) == 3.0
    finally:
        done.set()
        sys.setswitchinterval(interval)
    assert errors == []


@pytest.mark.parametrize("inner", ["managed", "explicit"])
def test_writes_pending_at_the_switch_are_not_lost(inner):
    # the lazy strategy takes no step at API calls: every launch is still queued at the switch
    outer = "explicit" if inner == "managed" else "managed"
    with ag.configure(backend="sim", sim_seed=5, sim_strategy="lazy", memory=outer):
        xs = [ag.array(START + i) for i in range(4)]
        expect = [START + i for i in range(4)]
        for round_ in range(3):
            for i, x in enumerate(xs):
                step(x, 2.0, float(round_))
                expect[i] = expect[i] * 2 + round_
        xs[1][3:7] = -1.0                  # a partial host write behind pending kernels
        expect[1][3:7] = -1.0
        with ag.configure(memory=inner):
            for x, e in zip(xs, expect):
                np.testing.assert_array_equal(x.numpy(), e)
            for x in xs:
                step(x, 1.0, 1.0)
        for x, e in zip(xs, expect):
            np.testing.assert_array_equal(x.numpy(), e + 1)


def test_a_fault_pending_at_the_switch_is_raised_by_configure_and_nothing_changes():
    with ag.configure(backend="sim", sim_seed=6, sim_strategy="lazy", memory="explicit"):
        x = ag.array(START)
        step(x, 2.0, 0.0)
        out_of_bounds[1, 8](x, 8)          # faults when it runs: not before the switch
        with pytest.raises(ag.KernelFault, match="out_of_bounds"):
            ag.configure(memory="managed")
        assert ag.options().memory == "explicit"     # nothing changed
        assert split_memory(x)
        with pytest.raises(ag.KernelFault, match="were to be written by work that faulted"):
            x.numpy()                       # (what the faulted kernel was to write)
        with ag.configure(memory="managed"):         # and the runtime is usable
            x[:] = START * 2                # (written again: readable; a read-write kernel
            step(x, 1.0, 1.0)               # over the faulted bytes would not make them so)
            np.testing.assert_array_equal(x.numpy(), START * 2 + 1)


@pytest.mark.parametrize("part,memory,change", [
    ("StreamManager", "explicit", {"memory": "managed"}),
    ("StreamManager", "managed", {"memory": "explicit"}),
    ("StreamManager", "explicit", {"max_streams": 4}),
    ("ExplicitMemory", "managed", {"memory": "explicit"}),
    ("ExplicitMemory", "explicit", {"poll_threshold": 4}),
], ids=lambda p: p if isinstance(p, str) else "+".join(p))
def test_a_configure_that_fails_to_build_the_new_runtime_changes_nothing(monkeypatch, part, memory,
                                                                        change):
    """A part of the new configuration that fails to build (here a constructor made to raise;
    max_streams=2**70 did it in the compiled build, as a bare OverflowError) left the arrays
    converted to the new memory model and the runtime's options set while configure's were
    not: a host write and a launch after it deadlocked."""
    from asyncgpu.runtime import context

    with ag.configure(backend="sim", sim_seed=9, sim_strategy="random", memory=memory):
        x = ag.array(START)
        step(x, 2.0, 1.0)
        rt = current_runtime()
        before = (rt.options, rt.backend, rt.memory, rt.streams, rt.deps, rt.stats)

        def refuse(*args, **kwargs):
            raise RuntimeError(f"injected: {part} cannot be built")

        monkeypatch.setattr(context, part, refuse)
        with pytest.raises(RuntimeError, match="injected"):
            ag.configure(**change)
        monkeypatch.undo()
        assert current_runtime() is rt
        assert ag.options() == rt.options
        after = (rt.options, rt.backend, rt.memory, rt.streams, rt.deps, rt.stats)
        assert all(a is b for a, b in zip(after, before))
        assert split_memory(x) == (memory == "explicit")     # (not converted)
        x[3] = 100.0                        # and the runtime is usable, then switches
        step(x, 1.0, 1.0)
        expect = START * 2 + 1
        expect[3] = 100.0
        np.testing.assert_array_equal((x + 1).numpy(), expect + 2)
        with ag.configure(**change):
            step(x, 1.0, 1.0)
            np.testing.assert_array_equal(x.numpy(), expect + 2)


def test_a_fault_pending_when_a_block_ends_is_raised_there_and_the_options_are_restored():
    with ag.configure(backend="sim", sim_seed=7, sim_strategy="lazy", memory="explicit"):
        x = ag.array(START)
        with pytest.raises(ag.KernelFault, match="out_of_bounds"):
            with ag.configure(memory="managed"):
                step(x, 2.0, 0.0)
                out_of_bounds[1, 8](x, 8)
        assert ag.options().memory == "explicit"
        assert split_memory(x)
        ag.synchronize()                    # the fault was reported once, not kept
        with pytest.raises(ag.KernelFault, match="were to be written by work that faulted"):
            x.numpy()                       # (out_of_bounds was to write it: not its bytes)



@pytest.mark.parametrize("change", [{"memory": "managed"}, {"sim_tick": 0.9}],
                         ids=["rebuild", "policy"])
def test_an_exception_leaving_a_block_goes_on_and_a_pending_fault_waits_for_the_next_wait(
        change):
    with ag.configure(backend="sim", sim_seed=7, sim_strategy="lazy", memory="explicit"):
        x = ag.array(START)
        with pytest.raises(ValueError, match="the program's own"):
            with ag.configure(**change):
                out_of_bounds[1, 8](x, 8)
                raise ValueError("the program's own error")
        assert ag.options().memory == "explicit" and ag.options().sim_tick != 0.9
        with pytest.raises(ag.KernelFault, match="out_of_bounds"):
            ag.synchronize()
        ag.synchronize()                    # (reported once)


# (policies such as execution, dependency or streams reconfigured the runtime in place before)
@pytest.mark.parametrize("change", [
    {"sim_strategy": "reverse"}, {"sim_seed": 11}, {"sim_tick": 1.0}, {"stress": True},
    {"packed_launch": False}, {"sim_seed": 11, "execution": "sync"},
], ids=lambda c: "+".join(c))
@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_other_switches_keep_arrays_and_their_values(change, memory):
    with ag.configure(backend="sim", sim_seed=8, sim_strategy="random", memory=memory):
        x = ag.array(START)
        g = acp.random.default_rng(1)
        step(x, 2.0, 1.0)
        with ag.configure(**change):
            step(x, 3.0, 0.0)
            y = x + 1
            u = g.random(4)
        np.testing.assert_array_equal(y.numpy(), (START * 2 + 1) * 3 + 1)
        step(x, 1.0, -1.0)
        np.testing.assert_array_equal(x.numpy(), (START * 2 + 1) * 3 - 1)
        assert u.shape == (4,) and g.random(2).shape == (2,)


def test_a_generator_survives_a_change_of_memory_model():
    with ag.configure(backend="sim", sim_seed=9, memory="explicit"):
        g = acp.random.default_rng(5)
        first = g.random(8).numpy()
        with ag.configure(memory="managed"):
            second = g.random(8).numpy()
        reference = np.random.default_rng(5)
        np.testing.assert_array_equal(first, reference.random(8))
        np.testing.assert_array_equal(second, reference.random(8))


def test_a_change_of_memory_model_ignores_dead_weak_proxies_elsewhere_in_the_program():
    # Numba's CUDA simulator (and other libraries) leave weakref.proxy objects whose referent
    # is gone; the switch's walk over live objects must not trip on them
    import weakref

    class Owner:
        pass

    owner = Owner()
    dead = weakref.proxy(owner)
    del owner
    with ag.configure(backend="sim", sim_seed=4, memory="explicit"):
        x = ag.array(START)
        with ag.configure(memory="managed"):
            step(x, 2.0, 1.0)
        np.testing.assert_array_equal(x.numpy(), START * 2 + 1)
    with pytest.raises(ReferenceError):     # (the proxy was alive, and dead, all along)
        dead.value


def test_an_array_of_a_retired_runtime_is_refused_naming_where_the_runtime_is_now():
    with ag.configure(backend="sim", sim_seed=10, sim_devices=3, devices="all"):
        x = ag.array(START)
        with ag.configure(devices=2):
            pass
        with pytest.raises(ag.ArgumentValueError,
                           match=r"created on devices all of 3 before asyncgpu\.configure "
                                 r"switched away and back \(a new runtime\); create it again"):
            x + 1
        with ag.configure(devices=2):
            with pytest.raises(ag.ArgumentValueError,
                               match=r"created on devices all of 3; asyncgpu\.configure "
                                     r"switched to devices 2 of 3; create it again"):
                x + 1


def test_a_device_switch_retires_arrays_and_generators_naming_the_switch():
    with ag.configure(backend="sim", sim_seed=10, sim_devices=2):
        x = ag.array(START)
        g = acp.random.default_rng(1)
        with ag.configure(device=1):
            with pytest.raises(ag.ArgumentValueError,
                               match=r"argument 0 'x': array float64\[64\] was created on "
                                     r"device 0; asyncgpu\.configure switched to device 1; "
                                     r"create it again"):
                step(x, 1.0, 1.0)
            with pytest.raises(ag.ArgumentValueError, match="switched to device 1"):
                x + 1
            with pytest.raises(ag.ArgumentError, match="this generator was created on device 0"):
                g.random(4)
            z = ag.array(START)             # the new selection works
            step(z, 1.0, 1.0)
            np.testing.assert_array_equal(z.numpy(), START + 1)
        np.testing.assert_array_equal(x.numpy(), START)      # host reads still work


BACKEND_SWITCH = textwrap.dedent(r"""
    import numpy as np
    import asyncgpu as ag
    import asyncgpu.cupy as acp
    from benchmarks import replay

    inc = ag.cuda_kernel(replay.INC, "inc")
    with ag.configure(backend="sim"):
        x = ag.zeros(32, np.float32)
        g = acp.random.default_rng(1)
    with ag.configure(backend="cuda"):
        for attempt in (lambda: inc[1, 32](x, 32), lambda: x * 2, lambda: g.random(4)):
            try:
                attempt()
            except (ag.ArgumentValueError, ag.ArgumentError) as exc:
                print(exc)
            else:
                print("accepted")
""")


def test_a_backend_switch_refuses_old_arrays_naming_the_switch():
    """sim -> cuda, the real ``cuda`` backend over the stand-in CuPy in another interpreter."""
    lines = stand_in.run(BACKEND_SWITCH).strip().splitlines()
    assert len(lines) == 3, lines
    for line in lines:
        assert "was created on backend 'sim'; asyncgpu.configure switched to 'cuda'; " \
               "create it again" in line, line
    assert lines[0].startswith("kernel 'inc'") and "argument 0" in lines[0]
    assert lines[1].startswith("call ")
    assert lines[2].startswith("random.Generator.random: this generator")


def test_a_graph_function_records_again_after_a_change_of_memory_model():
    with ag.configure(backend="sim", sim_seed=12, memory="explicit"):
        x = ag.array(START)
        expect = START.copy()

        @ag.graph
        def body(x):
            step(x, 2.0, 1.0)
            step(x, 0.5, 0.0)

        for _ in range(3):
            body(x)
            expect = (expect * 2 + 1) * 0.5
        assert body.outcome == "replayed"
        with ag.configure(memory="managed"):
            outcomes = []
            for _ in range(3):
                body(x)
                expect = (expect * 2 + 1) * 0.5
                outcomes.append(body.outcome)
            np.testing.assert_array_equal(x.numpy(), expect)
        assert outcomes[0] != "replayed" and outcomes[-1] == "replayed"
        body(x)
        expect = (expect * 2 + 1) * 0.5
        assert body.outcome != "replayed"          # the managed block's graphs are gone too
        np.testing.assert_array_equal(x.numpy(), expect)


@pytest.mark.parametrize("change", [{"memory": "managed"}, {"sim_seed": 99}])
def test_a_static_graph_function_never_replays_a_graph_of_a_replaced_backend(change):
    with ag.configure(backend="sim", sim_seed=13, memory="explicit"):
        x = ag.array(START)

        @ag.graph(static=True)
        def body(x):
            step(x, 1.0, 1.0)

        for _ in range(3):
            body(x)
        assert body.outcome == "replayed"
        with ag.configure(**change):
            body(x)                      # the body runs: its graph went with the old backend
            assert body.outcome != "replayed"
            np.testing.assert_array_equal(x.numpy(), START + 4)


def test_a_switch_that_rebuilds_the_backend_is_refused_during_a_trace():
    with ag.configure(backend="sim", sim_seed=15, memory="explicit"):
        x = ag.array(START)
        with ag.trace() as t:
            step(x, 2.0, 0.0)
            with pytest.raises(RuntimeError, match=r"memory='managed'.*trace"):
                ag.configure(memory="managed")
            assert ag.options().memory == "explicit"
            with ag.configure(execution="sync"):       # policies may change inside a trace
                step(x, 1.0, 1.0)
        assert len(t.nodes) >= 2
        np.testing.assert_array_equal(x.numpy(), START * 2 + 1)


def test_statistics_go_on_across_policies_and_start_again_with_a_new_backend():
    with ag.configure(backend="sim", sim_seed=16, memory="explicit"):
        x = ag.array(START)
        step(x, 1.0, 1.0)
        before = ag.statistics().kernels
        with ag.configure(execution="sync"):
            step(x, 1.0, 1.0)
            assert ag.statistics().kernels == before + 1
        with ag.configure(memory="managed"):
            assert ag.statistics().kernels == 0
            step(x, 1.0, 1.0)
            assert ag.statistics().kernels == 1
        np.testing.assert_array_equal(x.numpy(), START + 3)


def test_the_same_runtime_object_serves_every_option_but_backend_and_device():
    with ag.configure(backend="sim", sim_seed=17, sim_devices=3):
        rt = current_runtime()
        with ag.configure(memory="managed", sim_seed=1, execution="sync", debug_hb=True):
            assert current_runtime() is rt
        assert current_runtime() is rt
        with ag.configure(device=2):
            assert current_runtime() is not rt
            assert rt.retired == ("device 0", "device 2")


def test_an_array_made_while_another_thread_switches_the_memory_model_keeps_its_contents(
        monkeypatch):
    """The switch converts every allocation it finds: one whose buffer was made but not yet
    its Allocation (the gap widened here) would keep the old model's buffer, and lose what
    kernels write to it."""
    import threading
    import time

    import asyncgpu.runtime.array as array_module

    made = array_module.Allocation
    gap = threading.Event()

    def slow(*args):
        if gap.is_set():
            gap.clear()
            time.sleep(0.2)             # (the switch in the other thread runs meanwhile)
        return made(*args)

    with ag.configure(backend="sim", sim_seed=3, memory="explicit", debug_hb=True):
        k = ag.kernel(cuda.jit(_add_one))
        monkeypatch.setattr(array_module, "Allocation", slow)
        gap.set()
        switch = threading.Thread(target=lambda: (time.sleep(0.05),
                                                  ag.configure(memory="managed")))
        switch.start()
        a = ag.array(np.arange(8.0))
        switch.join()
        monkeypatch.setattr(array_module, "Allocation", made)
        k[1, 8](a, 8)
        np.testing.assert_array_equal(a.numpy(), np.arange(8.0) + 1)
        np.testing.assert_array_equal((a * 2).numpy(), (np.arange(8.0) + 1) * 2)
        ag.configure(memory="explicit")


def _add_one(y, n):
    i = cuda.grid(1)
    if i < n:
        y[i] += 1.0


@pytest.mark.parametrize("change", [{"memory": "managed"}, {"sim_seed": 5}],
                         ids=["memory", "sim_seed"])
def test_a_read_of_what_faulted_work_was_to_write_still_raises_on_a_new_backend(change):
    with ag.configure(backend="sim", sim_seed=1, memory="explicit"):
        boom = ag.kernel(cuda.jit(_write_past_the_end))
        x = ag.ones(64)
        boom[1, 1](x, 64)
        with pytest.raises(ag.KernelFault):
            ag.synchronize()
        with ag.configure(**change):
            with pytest.raises(ag.KernelFault, match="were to be written by work that faulted"):
                x.numpy()
            x[...] = 2.0                    # (written whole again: read as written)
            assert x.numpy().tolist() == [2.0] * 64


def _write_past_the_end(x, n):
    x[100] = 1.0
