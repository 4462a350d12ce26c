"""Explicit memory and the recorder: a replayed graph copies back what the host reads after it.

When the host fetches all of an array a replayed graph wrote, that graph learns it: from its
next replay on it issues the copy to the host itself, right behind the graph, and the host's
read waits for that copy instead of fetching (one wait per replay, not one round trip per
array read). These tests run on ``sim`` with randomized execution and the happens-before
checker, so a read of the mirror that does not wait for the copy back reads stale or poisoned
bytes and fails; and they cover what may come between a replay and the read: another replay
with no host access between, another graph writing the array, an eager kernel writing it, a
host write, a free, the option turned off.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recorder_kernels import N, kernels


def _copies_to_host(ag):
    return ag.statistics().copies_to_host


def _step(ag, x, ys):
    """A recorded function: each y_i = (i + 2) x (one graph, one kernel per output)."""
    scale, _, _ = kernels(ag)

    @ag.graph
    def step():
        for i, y in enumerate(ys):
            scale[1, N](x, y, np.float32(i + 2), N)
    return step


def test_outputs_the_host_reads_are_copied_back_behind_the_replay(explicit):
    ag = explicit
    x0 = np.arange(N, dtype=np.float32)
    x = ag.empty(N, np.float32)
    ys = [ag.empty(N, np.float32) for _ in range(3)]
    step = _step(ag, x, ys)
    for it in range(8):
        x[...] = x0 + it
        before = _copies_to_host(ag)
        step()
        issued = _copies_to_host(ag) - before
        got = [float(y[5]) for y in ys] + [float(y[N - 1]) for y in ys]
        assert got == [(i + 2) * (5.0 + it) for i in range(3)] + \
            [(i + 2) * (N - 1.0 + it) for i in range(3)]
        if it >= 3:     # recorded, captured, then learnt: the replay copies all three back
            assert step.outcome == "replayed"
            assert issued == 3
            assert _copies_to_host(ag) - before == 3        # the reads fetched nothing
    assert ag.statistics().graphs_recorded == 1


def test_only_what_the_host_reads_is_copied_back(explicit):
    ag = explicit
    x = ag.empty(N, np.float32)
    ys = [ag.empty(N, np.float32) for _ in range(3)]
    step = _step(ag, x, ys)
    for it in range(6):
        x[...] = it
        before = _copies_to_host(ag)
        step()
        if it >= 3:
            assert _copies_to_host(ag) - before == 1
        np.testing.assert_array_equal(ys[1].numpy(), np.full(N, 3.0 * it, np.float32))
        if it >= 3:
            assert _copies_to_host(ag) - before == 1


def test_an_output_the_host_stops_reading_is_dropped(explicit):
    ag = explicit
    x = ag.empty(N, np.float32)
    ys = [ag.empty(N, np.float32)]
    step = _step(ag, x, ys)
    for it in range(4):
        x[...] = it
        step()
        ys[0].numpy()
    x[...] = 10
    before = _copies_to_host(ag)
    step()                      # copies y back once more (the host read it last time) ...
    step()                      # ... which nobody read: dropped
    step()
    assert _copies_to_host(ag) - before == 1
    np.testing.assert_array_equal(ys[0].numpy(), np.full(N, 20, np.float32))


def test_replays_with_no_host_access_between_leave_the_host_copy_stale(explicit):
    """The second replay must book y DEVICE again although nothing touched the host since
    the first (the graph's bookkeeping shortcut for an unchanged host)."""
    ag = explicit
    scale, _, inc = kernels(ag)
    y = ag.zeros(N, np.float32)

    @ag.graph
    def bump():
        inc[1, N](y, N)

    for it in range(1, 5):
        bump()
        assert float(y[0]) == it
    bump()
    bump()
    assert float(y[0]) == 6
    np.testing.assert_array_equal(y.numpy(), np.full(N, 6, np.float32))


def _two_writers(ag, bump: bool):
    """``(y, first, second)``: two recorded functions writing y (first: y = 2; second: y = 3,
    or 4 with ``bump``, which also increments it in a second launch)."""
    scale, _, inc = kernels(ag)
    x, z, y = (ag.empty(N, np.float32) for _ in range(3))
    x[...] = 1
    z[...] = 1

    @ag.graph
    def first():
        scale[1, N](x, y, np.float32(2), N)

    @ag.graph
    def second():
        scale[1, N](z, y, np.float32(3), N)
        if bump:
            inc[1, N](y, N)
    return y, first, second


def test_another_graph_writing_the_array_after_the_copy_back_wins(explicit):
    y, first, second = _two_writers(explicit, bump=False)
    for _ in range(4):          # second settles first, then first learns y
        second()
        first()
        assert float(y[0]) == 2
    first()                     # copies y back behind it
    second()                    # writes y again, at the same host epoch as its last launch?
    assert float(y[0]) == 3
    first()
    second()
    second()
    np.testing.assert_array_equal(y.numpy(), np.full(N, 3, np.float32))


def _learnt(ag, value: float):
    """``(y, step)``: y = 2 x with x = ``value``, recorded, captured and read whole after each
    call until the graph copies y back itself."""
    x, y = ag.empty(N, np.float32), ag.empty(N, np.float32)
    step = _step(ag, x, [y])
    x[...] = value
    for _ in range(4):
        step()
        np.testing.assert_array_equal(y.numpy(), np.full(N, 2 * value, np.float32))
    return y, step


def test_an_eager_kernel_or_a_host_write_after_the_replay_wins(explicit):
    ag = explicit
    _, _, inc = kernels(ag)
    y, step = _learnt(ag, 1)
    step()
    inc[1, N](y, N)                     # waits for the copy back (it reads y), then writes y
    assert float(y[0]) == 3
    step()
    y[3] = 7                            # a partial host write waits for the copy back
    got = y.numpy()
    assert got[3] == 7 and got[0] == 2
    step()
    y[...] = 5
    np.testing.assert_array_equal(y.numpy(), np.full(N, 5, np.float32))


def test_a_partial_read_that_fetches_after_another_writer_waits_for_the_copy_back(explicit):
    """The copy back and a later fetch both write the host's copy: a part of the array written
    by an eager kernel after the replay makes the read of the other part fetch, which must not
    race the copy back still under way."""
    ag = explicit
    _, _, inc = kernels(ag)
    y, step = _learnt(ag, 1)
    half = N // 2
    step()                              # copies y back behind it
    inc[1, half](y[half:], half)        # another writer of y: the read below fetches
    np.testing.assert_array_equal(y[:half].numpy(), np.full(half, 2, np.float32))
    np.testing.assert_array_equal(y.numpy()[half:], np.full(N - half, 3, np.float32))


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("access", ["element", "slice", "write"])
def test_an_access_of_bytes_the_graph_does_not_touch_waits_for_the_copy_back(explicit, static,
                                                                           access):
    """The copy back writes the whole host copy, the graph only a part of the array: two
    replays in a row (the second drops the copy back the host never consumed, still under
    way) and then a host access of bytes no launch touches must not race that copy (it was
    a race the checker reported: the access fetched into the mirror meanwhile)."""
    ag = explicit
    _, _, inc = kernels(ag)
    part = 16

    @ag.graph(static=static)
    def step(a):
        inc[1, part](a, part)

    base = ag.zeros(4 * part, np.float32)
    model = np.zeros(4 * part, np.float32)
    for rounds in range(3):
        step(base[:part])
        step(base[:part])
        model[:part] += 2
        np.testing.assert_array_equal(base.numpy(), model)  # learnt: copied back from now on
        step(base[:part])
        step(base[:part])
        model[:part] += 2
        if access == "element":
            assert float(base[3 * part + 10]) == model[3 * part + 10]
        elif access == "slice":
            np.testing.assert_array_equal(base[2 * part:3 * part].numpy(),
                                          model[2 * part:3 * part])
        else:
            base[3 * part:] = np.float32(rounds + 7)
            model[3 * part:] = rounds + 7
    np.testing.assert_array_equal(base.numpy(), model)


def test_freeing_an_array_its_copy_back_still_reads_is_safe(explicit):
    ag = explicit
    y, step = _learnt(ag, 2)
    step()                      # copies y back; nobody reads it
    y.free()
    ag.synchronize()
    w = ag.array(np.ones(N, np.float32))
    np.testing.assert_array_equal(w.numpy(), np.ones(N, np.float32))


def test_the_option_off_copies_nothing_back(explicit):
    ag = explicit
    with ag.configure(graph_read_back=False):
        x = ag.empty(N, np.float32)
        ys = [ag.empty(N, np.float32)]
        step = _step(ag, x, ys)
        for it in range(5):
            x[...] = it
            before = _copies_to_host(ag)
            step()
            assert _copies_to_host(ag) == before
            assert float(ys[0][1]) == 2 * it


OPS = st.lists(st.sampled_from(["first", "second", "inc", "read", "read_one", "write_one",
                                "write_all"]), min_size=1, max_size=40)


@settings(max_examples=40, deadline=None)
@given(ops=OPS, seed=st.integers(0, 3))
def test_any_interleaving_reads_what_a_serial_program_reads(ops, seed):
    """Replays of two graphs writing y, eager kernels, host reads and writes in any order:
    every host read equals the serial model's value."""
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=seed, sim_strategy="random", memory="explicit"):
        _, _, inc = kernels(ag)
        y, first, second = _two_writers(ag, bump=True)
        model = np.zeros(N, np.float32)
        y[...] = 0
        for op in ["first", "read"] * 3 + ["second", "read"] * 3 + ops:
            if op == "first":
                first()
                model[:] = 2
            elif op == "second":
                second()
                model[:] = 4
            elif op == "inc":
                inc[1, N](y, N)
                model += 1
            elif op == "read":
                np.testing.assert_array_equal(y.numpy(), model)
            elif op == "read_one":
                assert float(y[N // 2]) == model[N // 2]
            elif op == "write_one":
                y[1] = 9
                model[1] = 9
            else:
                y[...] = -1
                model[:] = -1
        np.testing.assert_array_equal(y.numpy(), model)
        ag.synchronize()


def test_a_read_of_what_an_eager_kernel_wrote_after_the_replay_teaches_nothing(explicit):
    """The host reads y after an eager kernel rewrote it: that is not the graph's result, so
    the graph does not start copying y back."""
    ag = explicit
    _, _, inc = kernels(ag)
    x = ag.empty(N, np.float32)
    ys = [ag.empty(N, np.float32)]
    step = _step(ag, x, ys)
    x[...] = 1
    for it in range(6):
        before = _copies_to_host(ag)
        step()
        inc[1, N](ys[0], N)
        np.testing.assert_array_equal(ys[0].numpy(), np.full(N, 3, np.float32))
        assert _copies_to_host(ag) - before == 1        # the fetch; no copy back
