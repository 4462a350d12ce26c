"""The recorder's unusual cases, by what a user sees.

Whatever a user does with a recorded function (split recordings with host reads and writes
inside, the body raising, recordings nested, a library call that cannot be captured, a host
access that is refused, another thread recording, numbers and views made again at every call),
each launch runs exactly once, the outcomes say what happened, and the values are those of the
same calls without the recorder.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np
import programs
from hypothesis import HealthCheck, given, settings
from test_schedule_options import Log, fresh_sim, statistics

import asyncgpu as ag


def run_split(steps, init, recorded: bool):
    """The whole program, host steps included, as the body of ``@ag.graph(split=True)`` (or,
    not ``recorded``, a plain function), called four times with a host write between calls:
    (reads, final values, outcomes)."""
    outcomes, reads = [], []
    with fresh_sim():
        allocs = [ag.array(init[i]) for i in range(3)]
        views = programs.views(allocs)

        def body():
            for step in steps:
                if isinstance(step, programs.Launch):
                    programs.launch(ag, step, views)
                elif isinstance(step, programs.HostRead):
                    reads.append(np.asarray(views[step.operand]).tolist())
                else:
                    views[step.operand][...] = step.value

        fn = ag.graph(body, split=True) if recorded else body
        for i in range(4):
            fn()
            outcomes.append(getattr(fn, "outcome", None))
            allocs[i % 3][0:2] = float(i)
        final = [a.numpy().tolist() for a in allocs]
    return reads, final, outcomes


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_split_recordings_equal_the_same_calls_unrecorded(steps):
    init = programs.initial(4)
    reads, final, outcomes = run_split(steps, init, True)
    assert (reads, final) == run_split(steps, init, False)[:2]
    if any(isinstance(s, programs.Launch) for s in steps):
        assert "replayed" in outcomes[-1]


def kernels():
    """``inc(x, n)``: x[:n] += 1; ``scale(x, a, n)``: x[:n % 1000] *= a (the size can be made
    a large int)."""
    inc = ag.cuda_kernel(
        r'''extern "C" __global__ void inc(float* x, int n) {
            int i = threadIdx.x; if (i < n) x[i] += 1.0f; }''', "inc",
        sim=lambda x, n: x.__setitem__(slice(0, n), x[:n] + np.float32(1)))
    scale = ag.cuda_kernel(
        r'''extern "C" __global__ void scale(float* x, float a, int n) {
            int i = threadIdx.x; if (i < n % 1000) x[i] *= a; }''', "scale",
        sim=lambda x, a, n: x.__setitem__(slice(0, n % 1000), x[:n % 1000] * np.float32(a)))
    return inc, scale


def test_the_recorders_unusual_cases():
    """Nesting, the body's own exception, a refused host access, a library call that cannot be
    captured, an empty body, and a recorded call while another thread records: each says what
    it did, and every ``inc`` that was called ran exactly once."""
    seen: list = []
    log = Log()
    with fresh_sim(), ag.instrument(log):
        inc, _ = kernels()
        x = ag.zeros(8, np.float32)

        @ag.graph
        def inner():
            inc[1, 8](x, 8)

        @ag.graph
        def outer(fail):
            inc[1, 8](x, 8)
            inner()                      # nested: part of outer's recording
            if fail:
                raise KeyError("the body's own")

        @ag.graph
        def touches():
            inc[1, 8](x, 8)
            return float(x[0])           # refused: host access inside a plain recording

        import asyncgpu.cupy as acp

        @ag.graph
        def library():
            inc[1, 8](x, 8)
            acp.cumsum(x)                # not capturable: eager, with a warning

        @ag.graph
        def nothing():
            pass

        nothing()
        seen.append(("nothing", nothing.outcome))
        for fail in (False, False, False, True, False):
            try:
                outer(fail)
                seen.append(("outer", outer.outcome, inner.outcome))
            except KeyError as exc:
                seen.append(("outer raised", str(exc), outer.outcome))
        for fn in (touches, touches):
            try:
                fn()
            except ag.RecordingError as exc:
                seen.append(("refused", "host" in str(exc), fn.outcome))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                library()
                seen.append(("library", library.outcome))
        seen.append(("warned", len(caught)))

        started, release = threading.Event(), threading.Event()

        @ag.graph
        def slow():
            inc[1, 8](x, 8)
            started.set()
            release.wait(10)

        t = threading.Thread(target=slow)
        t.start()
        started.wait(10)
        try:
            outer(False)                 # while the other thread records its own function
            seen.append(("other thread", outer.outcome, inner.outcome))
        finally:
            release.set()
            t.join()
        seen.append(("slow", slow.outcome))
        values = x.numpy().tolist()
        stats = statistics()

    assert seen[0] == ("nothing", "empty")
    assert seen[1:6] == [("outer", "recorded", "inline"), ("outer", "replayed", "inline"),
                         ("outer", "replayed", "inline"),
                         # (its graph launched at its last launch, before the raise)
                         ("outer raised", "\"the body's own\"", "replayed"),
                         ("outer", "replayed", "inline")]
    assert seen[6:8] == [("refused", True, "eager")] * 2
    assert seen[8:11] == [("library", "eager")] * 3
    assert seen[11] == ("warned", 3)
    assert seen[12:] == [("other thread", "replayed", "inline"), ("slow", "recorded")]
    # outer: 6 calls of 2 incs (the failed one's issued eagerly); touches: 2 x 1 (issued
    # before the refusal); library: 3 x 1; slow: 1
    assert values == [18.0] * 8
    # outer's graph from its second call on; the failing call's too, launched at its last
    # launch (its memo was steady), before the body raised
    assert stats["graphs_replayed"] == 5 and log.nodes


def test_recording_keys_are_hashed_once_and_equal_keys_meet():
    from asyncgpu.recorder.keys import RecordingKey

    keys = [RecordingKey((1, 0), ("a", (1, 2))), RecordingKey((1, 1), ()),
            RecordingKey(("t", -1), (None,))]
    assert [hash(k) for k in keys] == [k.hash for k in keys]
    assert {keys[0]: 1}[RecordingKey((1, 0), ("a", (1, 2)))] == 1   # equal keys meet
    assert keys[0] != RecordingKey((1, 1), ("a", (1, 2))) and keys[0] != ((1, 0), ("a", (1, 2)))


def test_numbers_made_again_at_each_call_replay_when_equal():
    """A size or scale computed at every call is a new object each time: equal values replay,
    other values (or 0.0 against -0.0, or NaN) record again."""
    with fresh_sim():
        _, scale = kernels()
        x = ag.ones(8, np.float32)

        @ag.graph
        def step(m, a):
            n = m * 1000 + 8 if m else 4       # (beyond the small ints Python keeps)
            scale[1, 8](x, a * 1.0, n)          # new objects at every call

        outcomes = []
        calls = [(1, 2.0), (1, 2.0), (1, 2.0), (1, 0.5), (1, 0.5), (1, 0.5), (0, 0.5),
                 (1, 0.0), (1, -0.0), (1, float("nan"))]
        for m, a in calls:
            step(m, a)
            outcomes.append(step.outcome)
        assert outcomes == ["recorded", "replayed", "replayed", "recorded", "replayed",
                            "replayed", "recorded", "recorded", "recorded", "recorded"]
        expected = np.ones(8, np.float32)
        for m, a in calls:
            expected[: 8 if m else 4] *= np.float32(a)
        np.testing.assert_array_equal(x.numpy(), expected)


def test_views_made_again_at_each_call_replay_when_they_are_the_same_bytes():
    with fresh_sim():
        inc, _ = kernels()
        w = ag.zeros((3, 8), np.float32)

        @ag.graph
        def step(row, cols):
            inc[1, 8](w[row, :cols], cols)          # a new view object at every call

        outcomes = []
        calls = [(0, 8), (0, 8), (0, 8), (1, 8), (1, 8), (1, 4), (1, 4), (2, 8)]
        for row, cols in calls:
            step(row, cols)
            outcomes.append(step.outcome)
        assert outcomes == ["recorded", "replayed", "replayed", "recorded", "replayed",
                            "recorded", "replayed", "recorded"]
        expected = np.zeros((3, 8), np.float32)
        for row, cols in calls:
            expected[row, :cols] += 1
        np.testing.assert_array_equal(w.numpy(), expected)
