"""``static=True`` graph functions, called with arguments of every kind.

A static function's call launches the graph captured for its arguments without running the
body when its arguments are keyed (arrays, numbers, strings, None, tuples of them); anything
else (a list, say) runs the body as usual. Whatever the arguments and whatever happens between
calls (host writes that make inputs host-current, a recording around the call, graphs evicted
from the cache), the values must be those of the same calls of the plain function, and a call
either runs the body or launches a graph.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_recorder_hazards import kernels
from test_schedule_options import fresh_sim

import asyncgpu as ag

#: scalar arguments: kinds keyed as they are, NumPy scalars, tuples, and a list (not keyed:
#: the body runs every time)
SCALARS = [3, 3, True, None, "s", 2.5, -0.0, 0.0, np.float32(2.5), np.int64(3), (1, 2.5), [1]]

#: one call: (which array, which view of it, which scalar, a keyword argument?, a host write
#: of the array before the call?)
CALLS = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, len(SCALARS) - 1),
                           st.booleans(), st.booleans()), min_size=1, max_size=10)


def run_static(calls, static: bool = True, **options):
    """The calls on a fresh runtime, of the static function or (not ``static``) of its plain
    body: (the calls that ran the body, outcomes, final values)."""
    runs, outcomes = [], []
    with fresh_sim(**options):
        inc, scale = kernels()
        arrays = [ag.zeros(16, np.float32) for _ in range(2)]
        views = [lambda a: a, lambda a: a[0:8], lambda a: a[8:16]]

        def body(x, a, k=1):
            runs.append(len(outcomes))
            inc[1, 8](x, 8)
            scale[1, 8](x, 2.0 if a is None else 1.5, k)

        step = ag.graph(body, static=True) if static else body
        for which, view, scalar, keyword, write in calls:
            a = arrays[which]
            if write:
                a[0:2] = float(len(outcomes))
            x = views[view](a)
            if keyword:
                step(x, SCALARS[scalar], k=4)
            else:
                step(x, SCALARS[scalar])
            outcomes.append(getattr(step, "outcome", None))
        final = [a.numpy().tolist() for a in arrays]
    return runs, outcomes, final


def check_static(calls, **options):
    """The static calls compute what the plain calls compute; a call that did not run the body
    launched a graph; a list argument always runs the body."""
    runs, outcomes, final = run_static(calls, **options)
    assert final == run_static(calls, static=False, **options)[2]
    for i, outcome in enumerate(outcomes):
        assert i in runs or outcome == "replayed"
        if isinstance(SCALARS[calls[i][2]], list):
            assert i in runs


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=CALLS)
def test_static_calls_equal_plain_calls(calls):
    check_static(calls)


@pytest.mark.parametrize("options", [{"memory": "managed"}, {"graph_cache": 1}],
                         ids=["managed", "cache-of-one"])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=CALLS)
def test_static_calls_equal_plain_calls_under_other_options(options, calls):
    """The managed model (no host-current inputs to look up) and a cache of one graph (the
    other arguments' graphs are evicted, so a call whose graph was destroyed records again)."""
    check_static(calls, **options)


def test_repeated_calls_stop_running_the_body():
    """Once captured the body stops running; another scalar is another key, whose body runs
    once (its launches are the same, so their graph is in the cache already), then replays
    with a host write before every call."""
    calls = [(0, 1, 5, False, False)] * 4 + [(0, 1, 2, False, True)] * 4
    runs, outcomes, final = run_static(calls)
    assert runs == [0, 1, 4]
    assert outcomes[2:] == ["replayed"] * 6
    assert final == run_static(calls, static=False)[2]


def test_a_call_whose_graph_was_evicted_records_again():
    """With a cache of one graph, B's capture destroys A's: A's next call must run its body
    (recorded again), not launch the destroyed graph."""
    a, b = (0, 0, 0, False, False), (0, 1, 0, False, False)
    calls = [a] * 3 + [b] * 3 + [a] * 3
    runs, outcomes, final = run_static(calls, graph_cache=1)
    assert runs == [0, 1, 3, 4, 6, 7]
    assert outcomes[6] == "recorded"
    assert final == run_static(calls, static=False, graph_cache=1)[2]


def test_a_static_call_inside_a_recording_runs_its_body_there():
    with fresh_sim():
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
        assert len(runs) == 3 and step.outcome == "inline"
        assert x.numpy().tolist() == [4.0] * 8
