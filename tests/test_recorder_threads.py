"""Several threads recording at once: each thread's recorded function records, then replays, as
if it were alone, while the others record or replay theirs; results equal the serial ones."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from test_recorder_hazards import kernels
from test_schedule_options import fresh_sim
from thread_programs import resumed_in_another_thread

import asyncgpu as ag

THREADS = 4
ROUNDS = 12


def _run_threads(shared_input: bool) -> tuple[list[list[str]], list[np.ndarray], np.ndarray]:
    inc, scale = kernels()
    xs = [ag.zeros(8, np.float32) for _ in range(THREADS)]
    base = ag.ones(8, np.float32)
    together = threading.Barrier(THREADS)
    outcomes: list[list[str]] = [[] for _ in range(THREADS)]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        first = [True]

        @ag.graph
        def step(x):
            inc[1, 8](x, 8)
            if first[0]:                 # every thread inside its first recording at once
                first[0] = False
                together.wait(10)
            scale[1, 8](x, np.float32(i + 2), 8)
            if shared_input:
                inc[1, 8](base, 0)       # reads (n = 0: writes nothing) the array all share

        try:
            for _ in range(ROUNDS):
                step(xs[i])
                outcomes[i].append(step.outcome)
                if ROUNDS // 2 == len(outcomes[i]):
                    float(xs[i][0])      # a host read between calls, from every thread
        except BaseException as exc:     # (reported by the test, not lost in the thread)
            errors.append(exc)
            together.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return outcomes, [x.numpy() for x in xs], base.numpy()


def _serial(i: int) -> np.ndarray:
    x = np.zeros(8, np.float32)
    for _ in range(ROUNDS):
        x = (x + np.float32(1)) * np.float32(i + 2)
    return x


def test_threads_record_their_own_functions_at_once_and_replay_them():
    with fresh_sim():
        outcomes, results, _ = _run_threads(shared_input=False)
    for i in range(THREADS):
        assert outcomes[i][0] == "recorded"
        assert outcomes[i][1:] == ["replayed"] * (ROUNDS - 1)
        np.testing.assert_array_equal(results[i], _serial(i))


def test_recordings_of_several_threads_that_share_an_array_stay_ordered():
    with fresh_sim(debug_hb=True):
        outcomes, results, base = _run_threads(shared_input=True)
    for i in range(THREADS):
        assert outcomes[i][0] == "recorded"
        np.testing.assert_array_equal(results[i], _serial(i))
    np.testing.assert_array_equal(base, np.ones(8, np.float32))


def test_one_record_object_in_two_threads_keeps_each_threads_recording():
    """Thread A enters a shared ``record()`` block, then B enters it too, then A leaves before
    B does: each leaves its own recording, so both read their results after their blocks."""
    inc, _ = kernels()
    results: dict[str, np.ndarray] = {}
    errors: list[BaseException] = []
    with fresh_sim():
        r = ag.record("shared")
        a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

        def a() -> None:
            try:
                y = ag.zeros(8, np.float32)
                with r:
                    inc[1, 8](y, 8)
                    a_in.set()
                    b_in.wait(10)
                a_out.set()
                results["a"] = y.numpy()
            except BaseException as exc:  # noqa: BLE001 - checked below
                errors.append(exc)
                a_out.set()

        def b() -> None:
            try:
                y = ag.zeros(8, np.float32)
                a_in.wait(10)
                with r:
                    b_in.set()
                    a_out.wait(10)
                    inc[1, 8](y, 8)
                    inc[1, 8](y, 8)
                results["b"] = y.numpy()
            except BaseException as exc:  # noqa: BLE001 - checked below
                errors.append(exc)

        threads = [threading.Thread(target=a), threading.Thread(target=b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        np.testing.assert_array_equal(results["a"], np.ones(8, np.float32))
        np.testing.assert_array_equal(results["b"], np.full(8, 2, np.float32))
        left = []

        def leave() -> None:
            try:
                r.__exit__(None, None, None)
            except RuntimeError as exc:
                left.append(str(exc))
        r.__enter__()       # (left below by another thread, which ends it)
        t = threading.Thread(target=leave)
        t.start()
        t.join()
        assert "left in a thread that did not enter it" in left[0]


def test_a_record_block_left_open_by_a_finished_thread_is_not_inherited_by_a_new_thread():
    """A thread ends inside ``record()`` (a generator holding the block, never closed): its
    recording ends with it, the launches it deferred issued once, so a later thread (which may
    get the same ``threading.get_ident``) records nothing and reads its results."""
    inc, _ = kernels()
    with fresh_sim():
        from asyncgpu.runtime.current import current_runtime

        x = ag.zeros(8, np.float32)
        kept = []

        def held():
            with ag.record("left open"):
                inc[1, 8](x, 8)
                yield

        def worker():
            g = held()
            next(g)
            kept.append(g)          # the thread ends with the block open

        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert current_runtime().recording is None
        read = []

        def fresh():
            y = ag.zeros(8, np.float32)
            inc[1, 8](y, 8)
            read.append(float(y[0]))

        t = threading.Thread(target=fresh)
        t.start()
        t.join()
        assert read == [1.0]
        np.testing.assert_array_equal(x.numpy(), np.ones(8, np.float32))
        with pytest.raises(RuntimeError, match="left in a thread that did not enter it"):
            kept.pop().close()
        np.testing.assert_array_equal(x.numpy(), np.ones(8, np.float32))   # (run once)


def test_a_record_block_resumed_in_another_thread_raises_and_ends_the_recording():
    """A generator holding ``record()`` resumed in another thread: that thread gets a clear
    RuntimeError, and the recording ends there, its deferred launches issued eagerly once, so
    the thread that entered it reads and synchronizes as before."""
    inc, _ = kernels()
    with fresh_sim():
        from asyncgpu.runtime.current import current_runtime

        x = ag.zeros(8, np.float32)

        def held():
            with ag.record("resumed elsewhere"):
                inc[1, 8](x, 8)
                yield
                inc[1, 8](x, 8)

        g = held()
        next(g)
        said = resumed_in_another_thread(g)
        assert said and "left in a thread that did not enter it" in said[0]
        assert "the recording ended" in said[0]
        assert current_runtime().recording is None
        np.testing.assert_array_equal(x.numpy(), np.full(8, 2, np.float32))
        ag.synchronize()


@pytest.mark.parametrize("strategy", ["random", "reverse", "starve"])
def test_split_nested_and_eager_threads_beside_each_other_equal_serial(strategy):
    """One thread records with ``split=True`` (a host read ends each segment), one records a
    function that calls another recorded one (inlined), one launches eagerly on the array the
    others read: while they run at once, every segment's end and start hands the runtime's
    recordings over, and every result equals the serial one."""
    rounds = 8
    with fresh_sim(sim_strategy=strategy, debug_hb=True):
        inc, scale = kernels()
        shared = ag.ones(8, np.float32)
        a, b, c = (ag.zeros(8, np.float32) for _ in range(3))
        together = threading.Barrier(3)
        inside = threading.Barrier(2)     # both recordings in progress at once, every round
        seen: dict[str, list] = {"split": [], "nested": [], "eager": []}
        errors: list[BaseException] = []

        @ag.graph(split=True)
        def split_step():
            inc[1, 8](a, 8)
            seen["split"].append(float(a[0]))     # ends a segment
            inside.wait(10)
            scale[1, 8](a, np.float32(2), 8)

        @ag.graph
        def inner():
            inc[1, 8](b, 8)

        @ag.graph
        def nested_step():
            inner()
            inside.wait(10)
            scale[1, 8](b, np.float32(3), 8)

        def run(name, body):
            try:
                together.wait(10)
                for _ in range(rounds):
                    body()
                    seen[name].append(None)
            except BaseException as exc:  # (reported by the test)
                errors.append(exc)
                together.abort()
                inside.abort()

        def eager():
            inc[1, 8](c, 8)
            inc[1, 8](shared, 0)                  # reads the array all share

        threads = [threading.Thread(target=run, args=args) for args in
                   (("split", split_step), ("nested", nested_step), ("eager", eager))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        results = [x.numpy() for x in (a, b, c)]
    want_a, want_b, reads = np.float32(0), np.float32(0), []
    for _ in range(rounds):
        want_a += 1
        reads.append(float(want_a))
        want_a *= 2
        want_b = (want_b + 1) * 3
    assert [v for v in seen["split"] if v is not None] == reads
    np.testing.assert_array_equal(results[0], np.full(8, want_a, np.float32))
    np.testing.assert_array_equal(results[1], np.full(8, want_b, np.float32))
    np.testing.assert_array_equal(results[2], np.full(8, rounds, np.float32))


def test_freeing_an_array_another_threads_recording_has_deferred_launches_on_is_refused():
    """Thread B frees an array while thread A's recorded function has a launch on it deferred:
    the free raises RecordingError (the array stays), and A's launches all run, once."""
    inc, _ = kernels()
    with fresh_sim():
        x = ag.zeros(8, np.float32)
        inside, freed = threading.Event(), threading.Event()
        errors: list[BaseException] = []

        @ag.graph
        def body(x):
            inc[1, 8](x, 8)
            inside.set()
            freed.wait(10)
            inc[1, 8](x, 8)

        def a() -> None:
            try:
                body(x)
            except BaseException as exc:  # noqa: BLE001 - checked below
                errors.append(exc)
                inside.set()

        t = threading.Thread(target=a)
        t.start()
        inside.wait(10)
        try:
            with pytest.raises(ag.RecordingError, match="in another thread has deferred"):
                x.free()
        finally:
            freed.set()
            t.join()
        assert not errors, errors
        np.testing.assert_array_equal(x.numpy(), np.full(8, 2, np.float32))
        x.free()                    # (once the recording has ended)
