"""The compiled recorder against the Python one.

``GraphFunction.__call__`` (its plain case), ``Recording.__init__``, ``Recording.end_segment``
with ``replay_remembered`` and ``RecordingKey``'s hash have compiled twins
(``asyncgpu/csrc/recording.c``). Whatever a user does with a recorded function (split
recordings with host reads and writes inside, the body raising, recordings nested, a library
call that cannot be captured, a host access that is refused, another thread recording), the
outcomes, the values, the exceptions, the nodes and the statistics must be the same whichever
twins run. The serial run of the same program is the oracle for the values.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np
import programs
import pytest
from hypothesis import HealthCheck, given, settings
from test_scheduler_compiled import Log, fresh_sim, statistics

import asyncgpu as ag
from asyncgpu.core import compiled as _compiled

pytestmark = pytest.mark.skipif(_compiled.speedups is None,
                                reason="asyncgpu._speedups is not built")


def run_split(steps, init, compiled: bool):
    """The whole program, host steps included, as the body of ``@ag.graph(split=True)``, called
    four times with a host write between calls: (reads, final values, nodes, statistics,
    outcomes)."""
    log, outcomes, reads = Log(), [], []
    with fresh_sim(compiled):
        allocs = [ag.array(init[i]) for i in range(3)]
        views = programs.views(allocs)

        @ag.graph(split=True)
        def body():
            for step in steps:
                if isinstance(step, programs.Launch):
                    programs.launch(ag, step, views)
                elif isinstance(step, programs.HostRead):
                    reads.append(np.asarray(views[step.operand]).tolist())
                else:
                    views[step.operand][...] = step.value

        with ag.instrument(log):
            for i in range(4):
                body()
                outcomes.append(body.outcome)
                allocs[i % 3][0:2] = float(i)
        final = [a.numpy().tolist() for a in allocs]
        stats = statistics()
    return reads, final, log.nodes, stats, outcomes


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_split_recordings_go_the_same_way_compiled_and_in_python(steps):
    init = programs.initial(4)
    compiled = run_split(steps, init, True)
    python = run_split(steps, init, False)
    assert compiled == python
    if any(isinstance(s, programs.Launch) for s in steps):
        assert "replayed" in compiled[4][-1]


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


def hazards(compiled: bool):
    """A sequence of the recorder's unusual cases; what each did, as plain values."""
    seen: list = []
    with fresh_sim(compiled):
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
            outer(False)
        except ag.RecordingError as exc:
            seen.append(("other thread", "thread" in str(exc)))
        finally:
            release.set()
            t.join()
        seen.append(("slow", slow.outcome))
        seen.append(("x", x.numpy().tolist()))
        seen.append(("stats", statistics()))
    return seen


def test_the_recorders_unusual_cases_go_the_same_way_compiled_and_in_python():
    compiled = hazards(True)
    python = hazards(False)
    assert compiled == python
    outcomes = [s for s in compiled if s[0] == "outer"]
    assert outcomes[0][1:] == ("recorded", "inline") and outcomes[2][1:] == ("replayed",
                                                                             "inline")
    assert ("outer raised", "\"the body's own\"", "eager") in compiled
    assert ("other thread", True) in compiled
    assert ("library", "eager") in compiled
    assert ("nothing", "empty") in compiled


def test_a_patched_finish_is_the_one_called(monkeypatch):
    from asyncgpu.recorder import recording as _recorder

    calls = []
    real = _recorder.finish

    def finish(*args):
        calls.append(args[1])
        return real(*args)

    monkeypatch.setattr(_recorder, "finish", finish)
    with fresh_sim(True):
        inc, _ = kernels()
        x = ag.zeros(8, np.float32)

        @ag.graph
        def step():
            inc[1, 8](x, 8)

        for _ in range(3):
            step()
        assert len(calls) >= 2 and step.outcome == "replayed"
        np.testing.assert_array_equal(x.numpy(), np.full(8, 3, np.float32))


def test_recording_keys_hash_alike_compiled_and_in_python():
    from asyncgpu.recorder.keys import RecordingKey

    keys = [RecordingKey((1, 0), ("a", (1, 2))), RecordingKey((1, 1), ()),
            RecordingKey(("t", -1), (None,))]
    compiled = [hash(k) for k in keys]
    _compiled.use(False)
    try:
        python = [hash(k) for k in keys]
    finally:
        _compiled.use(True)
    assert compiled == python == [k.hash for k in keys]
    assert {keys[0]: 1}[RecordingKey((1, 0), ("a", (1, 2)))] == 1   # equal keys meet


@pytest.mark.parametrize("compiled_", [True, False], ids=["compiled", "python"])
def test_numbers_made_again_at_each_call_replay_when_equal(compiled_):
    """A size or scale computed at every call is a new object each time: equal values replay,
    other values (or 0.0 against -0.0, or NaN) record again."""
    with fresh_sim(compiled_):
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


@pytest.mark.parametrize("compiled_", [True, False], ids=["compiled", "python"])
def test_views_made_again_at_each_call_replay_when_they_are_the_same_bytes(compiled_):
    with fresh_sim(compiled_):
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
