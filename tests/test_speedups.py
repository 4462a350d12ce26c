"""The compiled methods (``asyncgpu._speedups``): each class uses the ones asked for; the
launcher's compiled call against the Python one: the same launches remembered, the same errors,
other threads' launches issued, no references leaked. (``tests/test_recorder_memo.py`` runs
the memo's own tests both ways too; ``test_*_compiled.py`` compare the other twins.)"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from recorder_kernels import N, kernels

from asyncgpu.core import compiled as _compiled
from asyncgpu.core.errors import ArgumentError, ArgumentValueError
from asyncgpu.runtime.current import current_runtime

pytestmark = pytest.mark.usefixtures("compiled")


def test_the_methods_in_use_are_the_ones_asked_for(compiled):
    import asyncgpu.backends.cuda.backend  # noqa: F401  (registers the cuda backend's methods)

    python = compiled == "python"
    assert _compiled.in_use() == (not python)
    classes = set()
    for cls, reference, names in _compiled._registered:
        for name in names:
            assert (getattr(cls, name) is getattr(reference, name)) == python, (cls, name)
        classes.add(cls.__name__)
    assert classes == {"Launcher", "DependencyTracker", "Kernel", "PackedTarget", "Runtime",
                       "StreamManager", "Node", "Reuse", "Disjoint", "ExplicitMemory",
                       "CudaBackend", "PackedLaunch", "Recording", "RecordingKey",
                       "GraphFunction", "FrozenGraph"}


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


def test_asyncgpu_speedups_0_keeps_the_python_call():
    env = dict(os.environ, ASYNCGPU_SPEEDUPS="0", ASYNCGPU_BACKEND="sim")
    out = subprocess.run(
        [sys.executable, "-c", "from asyncgpu.core import compiled; print(compiled.in_use())"],
        env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    env["ASYNCGPU_SPEEDUPS"] = "maybe"
    bad = subprocess.run([sys.executable, "-c", "import asyncgpu"], env=env,
                         capture_output=True, text=True, check=False)
    assert bad.returncode != 0 and "ASYNCGPU_SPEEDUPS" in bad.stderr


def test_a_class_patched_after_launches_is_called_by_the_compiled_path(monkeypatch, sim):
    """The compiled methods remember which class resolved a method to its compiled twin (by the
    class's version tag); patching the class afterwards, as a test or a profiler would, must
    still reach the patch on the next launch, and undoing it the compiled method again."""
    import asyncgpu as ag
    from asyncgpu.core.deps import DependencyTracker
    from asyncgpu.core.streams import StreamManager

    k = ag.cuda_kernel('extern "C" __global__ void inc(float* x) { x[threadIdx.x] += 1; }',
                       "inc", sim=lambda x: x.__setitem__(slice(None), x + 1))
    x = ag.zeros(32, np.float32)
    for _ in range(3):
        k[1, 32](x)                     # (the twins' answers are cached now)
    calls = []
    for cls, name in ((StreamManager, "issued"), (DependencyTracker, "commit")):
        original = getattr(cls, name)

        def spy(self, *args, original=original, name=name):
            calls.append(name)
            return original(self, *args)

        monkeypatch.setattr(cls, name, spy)
    k[1, 32](x)
    assert calls == ["issued", "commit"]
    monkeypatch.undo()
    k[1, 32](x)
    assert calls == ["issued", "commit"] and float(x[0]) == 5.0
