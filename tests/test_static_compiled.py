"""A ``static=True`` graph function's call, compiled against Python.

The compiled ``GraphFunction.__call__`` (``asyncgpu/csrc/graph_call.c``) launches a static
function's graph itself when its arguments are arrays, ints, bools, floats, strings or None:
it builds their key as ``_recording_keys.argument_key`` does and replays as
``GraphFunction._replay_static`` does; anything else goes to the Python call. Whatever the
arguments and whatever happens between calls (host writes that make inputs host-current, a
recording around the call, graphs evicted from the cache, a patched method), the body must
run on the same calls, and the values, outcomes, nodes and statistics must be the same either
way.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_recorder_compiled import kernels
from test_scheduler_compiled import Log, fresh_sim, statistics

import asyncgpu as ag
from asyncgpu.core import compiled as _compiled

pytestmark = pytest.mark.skipif(_compiled.speedups is None,
                                reason="asyncgpu._speedups is not built")

#: scalar arguments: the C key's kinds, and kinds only the Python key has (NumPy scalars,
#: tuples) or none at all (a list: the body runs every time)
SCALARS = [3, 3, True, None, "s", 2.5, -0.0, 0.0, np.float32(2.5), np.int64(3), (1, 2.5), [1]]

#: one call: (which array, which view of it, which scalar, a keyword argument?, a host write
#: of the array before the call?)
CALLS = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, len(SCALARS) - 1),
                           st.booleans(), st.booleans()), min_size=1, max_size=10)


def static_inc():
    """``inc`` (x[:n] += 1), an 8-element ``x`` and ``step(y)``: one ``inc`` of y, static."""
    inc, _ = kernels()
    x = ag.zeros(8, np.float32)

    @ag.graph(static=True)
    def step(y):
        inc[1, 8](y, 8)

    return inc, x, step


def run_static(calls, compiled: bool, **options):
    """The calls on a fresh runtime: (body runs, outcomes, final values, nodes, statistics)."""
    log, runs, outcomes = Log(), [], []
    with fresh_sim(compiled, **options):
        inc, scale = kernels()
        arrays = [ag.zeros(16, np.float32) for _ in range(2)]
        views = [lambda a: a, lambda a: a[0:8], lambda a: a[8:16]]

        @ag.graph(static=True)
        def step(x, a, k=1):
            runs.append(len(outcomes))
            inc[1, 8](x, 8)
            scale[1, 8](x, 2.0 if a is None else 1.5, k)

        with ag.instrument(log):
            for which, view, scalar, keyword, write in calls:
                a = arrays[which]
                if write:
                    a[0:2] = float(len(outcomes))
                x = views[view](a)
                if keyword:
                    step(x, SCALARS[scalar], k=4)
                else:
                    step(x, SCALARS[scalar])
                outcomes.append(step.outcome)
        final = [a.numpy().tolist() for a in arrays]
        stats = statistics()
    return runs, outcomes, final, log.nodes, stats


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=CALLS)
def test_static_calls_go_the_same_way_compiled_and_in_python(calls):
    assert run_static(calls, True) == run_static(calls, False)


@pytest.mark.parametrize("options", [{"memory": "managed"}, {"graph_cache": 1}],
                         ids=["managed", "cache-of-one"])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=CALLS)
def test_static_calls_go_the_same_way_under_other_options(options, calls):
    """The managed model (no host-current inputs to look up) and a cache of one graph (the
    other arguments' graphs are evicted, so a call whose graph was destroyed records again)."""
    assert run_static(calls, True, **options) == run_static(calls, False, **options)


def test_repeated_calls_stop_running_the_body():
    """Once captured the body stops running; another scalar is another key, whose body runs
    once (its launches are the same, so their graph is in the cache already), then replays
    with a host write before every call."""
    for compiled in (True, False):
        runs, outcomes, _, _, _ = run_static([(0, 1, 5, False, False)] * 4
                                                 + [(0, 1, 2, False, True)] * 4, compiled)
        assert runs == [0, 1, 4]
        assert outcomes[2:] == ["replayed"] * 6


def test_a_call_whose_graph_was_evicted_records_again():
    """With a cache of one graph, B's capture destroys A's: A's next call must run its body
    (recorded again), not launch the destroyed graph."""
    a, b = (0, 0, 0, False, False), (0, 1, 0, False, False)
    seen = [run_static([a] * 3 + [b] * 3 + [a] * 3, compiled, graph_cache=1)
            for compiled in (True, False)]
    assert seen[0] == seen[1]
    runs, outcomes = seen[0][:2]
    assert runs == [0, 1, 3, 4, 6, 7]
    assert outcomes[6] == "recorded"


def test_a_static_call_inside_a_recording_runs_its_body_there():
    seen = []
    for compiled in (True, False):
        with fresh_sim(compiled):
            inc, _ = kernels()
            x = ag.zeros(8, np.float32)
            runs = []

            @ag.graph(static=True)
            def step(y):
                runs.append(1)
                inc[1, 8](y, 8)

            for _ in range(3):
                step(x)
            with ag.record():
                step(x)         # nested: the launches join the recording around it
            seen.append((len(runs), step.outcome, x.numpy().tolist()))
    assert seen[0] == seen[1]
    assert seen[0][0] == 3


@pytest.mark.parametrize("patched", ["_replay_static", "host_current"])
def test_a_patched_method_is_the_one_called(monkeypatch, patched):
    from asyncgpu.runtime.frozen import FrozenGraph
    from asyncgpu.recorder.entry import GraphFunction

    calls = []
    cls = GraphFunction if patched == "_replay_static" else FrozenGraph
    real = getattr(cls, patched)

    def wrapper(self, *args):
        calls.append(1)
        return real(self, *args)

    with fresh_sim(True), monkeypatch.context() as m:
        # (patched after fresh_sim puts the compiled twins in place, which would remove a
        # patch of a twin's name; undone before it puts them back)
        m.setattr(cls, patched, wrapper)
        _, x, step = static_inc()

        for _ in range(4):
            step(x)
        assert step.outcome == "replayed"
        np.testing.assert_array_equal(x.numpy(), np.full(8, 4, np.float32))
    assert len(calls) >= 2


def test_a_replaced_runtime_lock_is_the_one_taken():
    """The compiled calls take the runtime's lock through its type's methods, looked up once
    per type: a lock of another type (here a Python wrapper, which has an instance dict) is
    the one taken, and the usual lock again after it."""
    import threading

    from asyncgpu.runtime.current import current_runtime

    class CountingLock:
        def __init__(self):
            self.inner, self.taken = threading.RLock(), 0

        def acquire(self, *args):
            self.taken += 1
            return self.inner.acquire(*args)

        def release(self):
            self.inner.release()

        __enter__ = acquire

        def __exit__(self, *exc):
            self.release()

    with fresh_sim(True):
        inc, x, step = static_inc()

        rt = current_runtime()
        usual = rt._lock
        for lock in (CountingLock(), usual):
            rt._lock = lock
            for _ in range(3):
                step(x)
                inc[1, 8](x, 8)
        assert usual.acquire(blocking=False)      # not left held
        usual.release()
        assert rt._lock is usual and step.outcome == "replayed"
        np.testing.assert_array_equal(x.numpy(), np.full(8, 12, np.float32))
        counted = CountingLock()
        rt._lock = counted
        step(x)
        inc[1, 8](x, 8)
        rt._lock = usual
        assert counted.taken >= 2
