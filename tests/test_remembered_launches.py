"""A launcher's call inside a recording: the launches of the previous run remembered (taken
as they are when the arguments are the same), the same errors as outside a recording, other
threads' launches issued as usual, no references leaked; launch configurations looked up,
cached, parsed or refused. (``tests/test_recorder_memo.py`` checks the memo's keys against
full keying.)"""

from __future__ import annotations

import sys
import threading
import weakref

import numpy as np
import pytest
from recorder_kernels import N, kernels

from asyncgpu.core.compiled import compiled_modules, is_compiled
from asyncgpu.core.errors import ArgumentError, ArgumentValueError
from asyncgpu.runtime.current import current_runtime


def test_launch_configurations_are_looked_up_cached_parsed_or_refused_alike(sim):
    ag = sim
    inc = kernels(ag)[2]
    y = ag.zeros(N, np.float32)

    class NoHash:
        def __hash__(self):
            raise ValueError("no hash")

    assert inc[1, N] is inc[1, N]                   # cached
    inc[[1], [N]](y, N)                             # unhashable: parsed each time, not cached
    assert inc[[1], [N]] is not inc[[1], [N]]
    with pytest.raises(ValueError, match="no hash"):
        inc[NoHash()]
    with pytest.raises(ArgumentValueError, match="launch configuration"):
        inc[1, 2, 3, 4]
    np.testing.assert_array_equal(y.numpy(), np.ones(N, np.float32))


def test_remembered_launches_replay_and_compute_the_same(sim):
    ag = sim
    scale, _, inc = kernels(ag)
    x, y = ag.ones(N, np.float32), ag.zeros(N, np.float32)
    a = np.float32(3)

    @ag.graph
    def step():
        scale[1, N](x, y, a, N)      # the very same objects at every call
        inc[1, N](y, N)

    outcomes = []
    for _ in range(4):
        step()
        outcomes.append(step.outcome)
    assert outcomes == ["recorded", "replayed", "replayed", "replayed"]
    np.testing.assert_array_equal(y.numpy(), np.full(N, 4, np.float32))


def test_a_changed_argument_is_keyed_again(sim):
    ag = sim
    scale = kernels(ag)[0]
    x, y, z = ag.ones(N, np.float32), ag.zeros(N, np.float32), ag.zeros(N, np.float32)

    @ag.graph
    def step(out, a):
        scale[1, N](x, out, a, N)

    for out, a in ((y, 2.0), (y, 2.0), (y, 2.0), (z, 2.0), (y, 5.0)):
        step(out, a)
    assert step.outcome == "recorded"       # (y, 5.0): a new key
    np.testing.assert_array_equal(y.numpy(), np.full(N, 5, np.float32))
    np.testing.assert_array_equal(z.numpy(), np.full(N, 2, np.float32))


def test_keyword_arguments_are_refused_before_anything_is_enqueued(sim):
    ag = sim
    inc = kernels(ag)[2]
    x = ag.zeros(N, np.float32)
    before = ag.statistics().kernels
    with pytest.raises(ArgumentValueError, match=r"kernel 'inc'.*positional.*\bn\b"):
        inc[1, N](x, n=N)
    assert ag.statistics().kernels == before
    inc[1, N](x, N)                          # still usable
    np.testing.assert_array_equal(x.numpy(), np.ones(N, np.float32))


def test_a_bad_argument_raises_the_same_error_inside_a_remembered_run(sim):
    ag = sim
    inc = kernels(ag)[2]
    x = ag.zeros(N, np.float32)

    @ag.graph
    def step(arg):
        inc[1, N](arg, N)

    step(x)
    step(x)
    with pytest.raises(ArgumentError, match="inc"):
        step(np.zeros(N, np.float64))       # not an asyncgpu array of float32
    step(x)                                  # the recorder and runtime stay usable
    np.testing.assert_array_equal(x.numpy(), np.full(N, 3, np.float32))


def test_another_threads_launch_during_a_remembered_run_is_issued_eagerly(sim):
    ag = sim
    inc = kernels(ag)[2]
    x = ag.zeros(N, np.float32)
    launch_from_thread = [False]

    def from_thread():
        inc[1, N](x, N)      # the very launch the recording remembers at this position

    @ag.graph
    def step():
        if launch_from_thread[0]:
            t = threading.Thread(target=from_thread)
            t.start()
            t.join()
        inc[1, N](x, N)

    step()
    step()
    launch_from_thread[0] = True
    for _ in range(2):
        step()
        assert step.outcome == "replayed"   # the thread's launch is not part of the recording
    np.testing.assert_array_equal(x.numpy(), np.full(N, 6, np.float32))


def test_remembered_launches_leak_no_references(sim):
    ag = sim
    scale = kernels(ag)[0]
    x, y = ag.ones(N, np.float32), ag.zeros(N, np.float32)
    a = np.float32(2)

    @ag.graph
    def step():
        scale[1, N](x, y, a, N)

    for _ in range(3):
        step()
    ag.synchronize()
    launch = current_runtime().graphs.memo[(step.token, 0)].launches[0]
    counts = [sys.getrefcount(o) for o in (launch, x, y, a, scale[1, N])]
    for _ in range(500):
        step()
    ag.synchronize()
    assert [sys.getrefcount(o) for o in (launch, x, y, a, scale[1, N])] == counts


@pytest.mark.skipif(not is_compiled(), reason="the launch path runs as plain Python here")
def test_the_replay_path_runs_as_c_types_where_compiled():
    """Where the launch path is compiled, what a remembered launch and a replayed segment go
    through are C types (their .pxd files were found, so their fields are C fields): a C type
    refuses a new class attribute, which a Python class would take."""
    from asyncgpu.recorder.entry import GraphFunction, Recorder
    from asyncgpu.recorder.keys import Launch, LaunchMemo, RecordingKey
    from asyncgpu.recorder.recording import Recording
    from asyncgpu.runtime.frozen import FrozenGraph

    for cls in (Recording, Launch, LaunchMemo, RecordingKey, FrozenGraph, GraphFunction,
                Recorder):
        with pytest.raises(TypeError):
            cls.probe = None
    assert "asyncgpu.recorder.finish" in compiled_modules()


def test_a_graph_function_wraps_its_body():
    """``functools.update_wrapper`` still reaches a compiled graph function (its instance
    dictionary): name, docstring and the wrapped body."""
    import asyncgpu as ag

    def body(x):
        """The body's docstring."""
        return x

    step = ag.graph(body)
    assert (step.__name__, step.__doc__, step.__wrapped__) == ("body", body.__doc__, body)
    assert step.__qualname__ == body.__qualname__ and repr(step).startswith("<asyncgpu.graph")
    assert weakref.ref(step)() is step          # (as a function can be)
